// The MoE load-balancing losses (megatron.md §6.3): hand-computed values, finite differences of every backward,
// the shares over ranks and over layers adding up to the loss of all rows, seq-aux on equal-length sequences against
// Megatron's reshape formula, padding rows left out, and Hugging Face's load_balancing_loss_func written out in loops.
#include "model/moe_aux_loss.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "core/element_access.h"
#include "core/philox.h"
#include "support/test_support.h"

namespace rf::model {
namespace {

using rf::testing::fd_coordinate;

Tensor matrix_of(const std::vector<std::vector<double>>& rows) {
  const int64_t T = int64_t(rows.size()), E = int64_t(rows[0].size());
  Tensor m({T, E}, DType::f64);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t e = 0; e < E; ++e) m.data<double>()[t * E + e] = rows[size_t(t)][size_t(e)];
  return m;
}

// Logits ~ 4 U(-0.5, 0.5) plus a per-expert offset, so the top-k has clear margins.
Tensor random_logits(int64_t T, int64_t E, uint64_t seed) {
  const Philox rng(seed, 7);
  Tensor logits({T, E}, DType::f64);
  for (int64_t i = 0; i < T * E; ++i)
    logits.data<double>()[i] = 4.0 * (rng.uniform(uint64_t(i)) - 0.5) + 0.29 * double(i % E);
  return logits;
}

Tensor scores_of(RouterScore score, const Tensor& logits) {
  Tensor scores({logits.size(0), logits.size(1)}, DType::f64);
  aux_loss_scores(score, logits, scores);
  return scores;
}

Tensor counts_of(const Tensor& scores, int64_t top_k, const Tensor& valid = Tensor()) {
  Tensor counts({scores.size(1)}, DType::i64);
  std::fill_n(counts.data<int64_t>(), scores.size(1), 0);
  add_aux_topk_counts(scores, top_k, valid, counts);
  return counts;
}

Tensor rows_of(const Tensor& x, int64_t begin, int64_t end) {
  return clone(x.view().slice(0, begin, end - begin), x.dtype());
}

Tensor mask_of(const std::vector<int>& valid) {
  Tensor m({int64_t(valid.size())}, DType::u8);
  for (size_t t = 0; t < valid.size(); ++t) m.data<uint8_t>()[t] = uint8_t(valid[t]);
  return m;
}

// Checks backward(dlogits) against finite differences of loss(logits) (the 5-point stencil): the accumulated
// gradient equals the starting values plus scale * dL/dlogits.
void check_gradient(const Tensor& logits, const std::function<double(const Tensor&)>& loss,
                    const std::function<void(const Tensor&, Tensor&)>& backward, double scale) {
  const int64_t n = logits.numel();
  Tensor dlogits({logits.size(0), logits.size(1)}, DType::f64);
  for (int64_t i = 0; i < n; ++i) dlogits.data<double>()[i] = 0.01 * double(i % 5);
  backward(logits, dlogits);
  Tensor x = clone(logits, DType::f64);
  for (int64_t i = 0; i < n; ++i) {
    const double fd = scale * fd_coordinate([&] { return loss(x); }, x, i);
    EXPECT_NEAR(dlogits.data<double>()[i] - 0.01 * double(i % 5), fd, 1e-8 * std::max(1.0, std::abs(fd)))
        << "logit " << i;
  }
}

TEST(MoeAuxLoss, HandComputedSwitchLoss) {
  // Softmax rows (1/2, 1/2) and (3/4, 1/4); both choose expert 0 (the first by the tie). f = (2, 0), T = 2:
  // L = 0.1 * 2 / (1 * 4) * (2 * (1/2 + 3/4)) = 0.125.
  const Tensor logits = matrix_of({{0, 0}, {std::log(3.0), 0}});
  const Tensor scores = scores_of(RouterScore::softmax, logits);
  EXPECT_NEAR(scores.data<double>()[2], 0.75, 1e-15);
  const Tensor counts = counts_of(scores, 1);
  EXPECT_EQ(counts.data<int64_t>()[0], 2);
  EXPECT_EQ(counts.data<int64_t>()[1], 0);
  EXPECT_NEAR(aux_loss_forward({.coeff = 0.1, .top_k = 1}, scores, Tensor(), counts), 0.125, 1e-15);
  // Per token (HF) the fraction is f / T, not f / (k T): with k = 2 every token counts both experts, f = (2, 2),
  // T = 2, L = 2 / 4 * (2 * 1.25 + 2 * 0.75) = 2, and Megatron's divides that by k.
  const Tensor both = counts_of(scores, 2);
  EXPECT_NEAR(aux_loss_forward({.coeff = 1, .top_k = 2, .fraction = LoadFraction::of_tokens}, scores, Tensor(), both),
              2.0, 1e-15);
  EXPECT_NEAR(aux_loss_forward({.coeff = 1, .top_k = 2}, scores, Tensor(), both), 1.0, 1e-15);
}

TEST(MoeAuxLoss, SigmoidScoresAreNormalisedToSumOne) {
  // sigmoid(log 3) = 3/4 and sigmoid(0) = 1/2: normalised 0.6 and 0.4.
  const Tensor scores = scores_of(RouterScore::sigmoid, matrix_of({{std::log(3.0), 0}}));
  EXPECT_NEAR(scores.data<double>()[0], 0.6, 1e-15);
  EXPECT_NEAR(scores.data<double>()[1], 0.4, 1e-15);
}

TEST(MoeAuxLoss, BackwardMatchesFiniteDifferences) {
  const Tensor logits = random_logits(7, 5, 3);
  for (RouterScore kind : {RouterScore::softmax, RouterScore::sigmoid}) {
    for (LoadFraction fraction : {LoadFraction::of_choices, LoadFraction::of_tokens}) {
      const AuxLossParams p{.coeff = 0.3, .top_k = 2, .fraction = fraction};
      const Tensor counts = counts_of(scores_of(kind, logits), 2);  // fixed: no gradient through f
      check_gradient(
          logits, [&](const Tensor& x) { return aux_loss_forward(p, scores_of(kind, x), Tensor(), counts); },
          [&](const Tensor& x, Tensor& dx) { aux_loss_backward(p, kind, x, Tensor(), counts, 0.25, dx); }, 0.25);
    }
  }
}

TEST(MoeAuxLoss, SeqAuxBackwardMatchesFiniteDifferences) {
  const Tensor logits = random_logits(9, 4, 5);
  const std::vector<int64_t> offsets{0, 2, 7, 9};
  const Tensor valid = mask_of({1, 1, 1, 0, 1, 1, 1, 1, 0});
  for (RouterScore kind : {RouterScore::softmax, RouterScore::sigmoid}) {
    const AuxLossParams p{.coeff = 0.7, .top_k = 2};
    Tensor counts({3, 4}, DType::f64);
    std::fill_n(counts.data<double>(), 12, 0.0);
    add_aux_topk_counts_per_sequence(scores_of(kind, logits), 2, offsets, valid, counts);
    check_gradient(
        logits, [&](const Tensor& x) { return seq_aux_loss_forward(p, scores_of(kind, x), offsets, valid, counts); },
        [&](const Tensor& x, Tensor& dx) { seq_aux_loss_backward(p, kind, x, offsets, valid, counts, 2.0, dx); }, 2.0);
  }
}

TEST(MoeAuxLoss, ZLossValueAndGradient) {
  // logsumexp (0, 0) = log 2, logsumexp (log 3, 0) = log 4; the invalid row's huge logit must not count.
  const Tensor logits = matrix_of({{0, 0}, {std::log(3.0), 0}, {50, 0}});
  const Tensor valid = mask_of({1, 1, 0});
  const ZLossParams p{.coeff = 0.01, .divisor = 2};
  const double l2 = std::log(2.0), l4 = std::log(4.0);
  EXPECT_NEAR(z_loss_forward(p, logits, valid), 0.01 / 2 * (l2 * l2 + l4 * l4) / 2, 1e-16);
  EXPECT_EQ(z_loss_forward(p, logits, mask_of({0, 0, 0})), 0.0);
  check_gradient(
      random_logits(6, 5, 9), [&](const Tensor& x) { return z_loss_forward(p, x, Tensor()); },
      [&](const Tensor& x, Tensor& dx) { z_loss_backward(p, x, Tensor(), 0.5, dx); }, 0.5);
  check_gradient(
      logits, [&](const Tensor& x) { return z_loss_forward(p, x, valid); },
      [&](const Tensor& x, Tensor& dx) { z_loss_backward(p, x, valid, 1.0, dx); }, 1.0);
}

// Megatron's identity: split the rows over ranks, all-reduce the counts, and the ranks' shares add up to the loss
// (and their gradients stack up to the gradient) of one rank holding every row.
TEST(MoeAuxLoss, SharesOverRanksAddUpToTheSingleRankLoss) {
  const Tensor logits = random_logits(11, 6, 17);
  const AuxLossParams p{.coeff = 0.05, .top_k = 3};
  const RouterScore kind = RouterScore::sigmoid;
  const Tensor whole = scores_of(kind, logits);
  const Tensor all_counts = counts_of(whole, 3);
  Tensor dwhole({11, 6}, DType::f64);
  std::fill_n(dwhole.data<double>(), 66, 0.0);
  aux_loss_backward(p, kind, logits, Tensor(), all_counts, 1.0, dwhole);
  const std::vector<int64_t> cuts{0, 4, 5, 11};
  Tensor summed({6}, DType::i64);
  std::fill_n(summed.data<int64_t>(), 6, 0);
  for (size_t r = 0; r + 1 < cuts.size(); ++r) {  // the all-reduce
    const Tensor local = counts_of(rows_of(whole, cuts[r], cuts[r + 1]), 3);
    for (int64_t e = 0; e < 6; ++e) summed.data<int64_t>()[e] += local.data<int64_t>()[e];
  }
  double total = 0;
  for (size_t r = 0; r + 1 < cuts.size(); ++r) {
    const Tensor local_logits = rows_of(logits, cuts[r], cuts[r + 1]);
    total += aux_loss_forward(p, scores_of(kind, local_logits), Tensor(), summed);
    Tensor dlocal({local_logits.size(0), 6}, DType::f64);
    std::fill_n(dlocal.data<double>(), dlocal.numel(), 0.0);
    aux_loss_backward(p, kind, local_logits, Tensor(), summed, 1.0, dlocal);
    for (int64_t i = 0; i < dlocal.numel(); ++i)
      EXPECT_NEAR(dlocal.data<double>()[i], dwhole.data<double>()[cuts[r] * 6 + i], 1e-17);
  }
  EXPECT_NEAR(total, aux_loss_forward(p, whole, Tensor(), all_counts), 1e-15);
}

// HF pools the router logits of all layers into one [L*N, E]; per layer, each call with the pooled counts gives that
// layer's share, and the shares add up to the loss of the concatenation.
TEST(MoeAuxLoss, PooledOverLayersEqualsOneCallOnTheConcatenatedRows) {
  constexpr int64_t L = 3, N = 5, E = 6, k = 2;
  const Tensor logits = random_logits(L * N, E, 23);
  const AuxLossParams p{.coeff = 1, .top_k = k, .fraction = LoadFraction::of_tokens};
  const Tensor all_scores = scores_of(RouterScore::softmax, logits);
  Tensor pooled({E}, DType::f64);
  std::fill_n(pooled.data<double>(), E, 0.0);
  for (int64_t l = 0; l < L; ++l) add_aux_topk_counts(rows_of(all_scores, l * N, (l + 1) * N), k, Tensor(), pooled);
  double sum = 0;
  for (int64_t l = 0; l < L; ++l) sum += aux_loss_forward(p, rows_of(all_scores, l * N, (l + 1) * N), Tensor(), pooled);
  EXPECT_NEAR(sum, aux_loss_forward(p, all_scores, Tensor(), counts_of(all_scores, k)), 1e-14);
}

// transformers' load_balancing_loss_func, written out: the logits of all layers concatenated, p = softmax, the
// top-k of p per row, tokens_per_expert[j][e] = mean over the real rows of [e is the j-th choice],
// router_prob[e] = mean over the real rows of p[e], loss = E * sum_j sum_e tokens_per_expert[j][e] * router_prob[e].
double hf_load_balancing_loss(const std::vector<std::vector<double>>& logits, int64_t top_k,
                              const std::vector<int>& attention_mask) {
  const size_t E = logits[0].size();
  std::vector<std::vector<double>> tokens_per_expert(size_t(top_k), std::vector<double>(E, 0.0));
  std::vector<double> router_prob(E, 0.0);
  double num_real = 0;
  for (size_t r = 0; r < logits.size(); ++r) {
    if (!attention_mask[r]) continue;
    num_real += 1;
    double z = 0;
    for (double v : logits[r]) z += std::exp(v);
    std::vector<double> prob(E);
    for (size_t e = 0; e < E; ++e) router_prob[e] += (prob[e] = std::exp(logits[r][e]) / z);
    std::vector<bool> taken(E, false);
    for (int64_t j = 0; j < top_k; ++j) {
      size_t best = E;
      for (size_t e = 0; e < E; ++e)
        if (!taken[e] && (best == E || prob[e] > prob[best])) best = e;
      taken[best] = true;
      tokens_per_expert[size_t(j)][best] += 1;
    }
  }
  double loss = 0;
  for (int64_t j = 0; j < top_k; ++j)
    for (size_t e = 0; e < E; ++e) loss += (tokens_per_expert[size_t(j)][e] / num_real) * (router_prob[e] / num_real);
  return double(E) * loss;
}

TEST(MoeAuxLoss, MatchesHuggingFaceLoadBalancingLoss) {
  // 2 layers of 4 tokens, 5 experts, top 2; the last token of the batch is padding.
  constexpr int64_t L = 2, N = 4, E = 5, k = 2;
  const Tensor logits = random_logits(L * N, E, 31);
  std::vector<std::vector<double>> rows(size_t(L * N), std::vector<double>(size_t(E)));
  for (int64_t i = 0; i < L * N * E; ++i) rows[size_t(i / E)][size_t(i % E)] = logits.data<double>()[i];
  const std::vector<int> attention_mask{1, 1, 1, 0};
  const Tensor valid = mask_of(attention_mask);
  std::vector<int> pooled_mask;
  for (int64_t l = 0; l < L; ++l) pooled_mask.insert(pooled_mask.end(), attention_mask.begin(), attention_mask.end());
  const AuxLossParams p{.coeff = 1, .top_k = k, .fraction = LoadFraction::of_tokens};
  Tensor pooled({E}, DType::i64);
  std::fill_n(pooled.data<int64_t>(), E, 0);
  for (int64_t l = 0; l < L; ++l)
    add_aux_topk_counts(scores_of(RouterScore::softmax, rows_of(logits, l * N, (l + 1) * N)), k, valid, pooled);
  double ours = 0;
  for (int64_t l = 0; l < L; ++l)
    ours += aux_loss_forward(p, scores_of(RouterScore::softmax, rows_of(logits, l * N, (l + 1) * N)), valid, pooled);
  EXPECT_NEAR(ours, hf_load_balancing_loss(rows, k, pooled_mask), 1e-14);
}

// Megatron lays b sequences of length s out as [s, b, E] (row i * b + j is token i of sequence j) and computes
// seq_aux_loss as DeepSeek-V2 does: cost[j][e] = f_je / (s k / E), loss = coeff * mean_j sum_e cost[j][e] *
// mean_i scores[i, j, e]. rlforge's rows are sequence after sequence; the value must be the same.
TEST(MoeAuxLoss, SeqAuxOnEqualLengthSequencesEqualsMegatronsReshape) {
  constexpr int64_t s = 4, b = 3, E = 4, k = 2;
  const double coeff = 0.2;
  const Tensor megatron_rows = random_logits(s * b, E, 41);  // row i * b + j
  const Tensor scores_sb = scores_of(RouterScore::softmax, megatron_rows);
  double expected = 0;
  for (int64_t j = 0; j < b; ++j) {
    std::vector<double> f(size_t(E), 0.0), mean_score(size_t(E), 0.0);
    for (int64_t i = 0; i < s; ++i) {
      const Tensor one = rows_of(scores_sb, i * b + j, i * b + j + 1);
      const Tensor chosen = counts_of(one, k);
      for (int64_t e = 0; e < E; ++e) {
        f[size_t(e)] += double(chosen.data<int64_t>()[e]);
        mean_score[size_t(e)] += one.data<double>()[e] / double(s);
      }
    }
    for (int64_t e = 0; e < E; ++e) expected += f[size_t(e)] / (double(s * k) / double(E)) * mean_score[size_t(e)];
  }
  expected = coeff * expected / double(b);
  Tensor packed({s * b, E}, DType::f64);  // sequence j is rows [j s, (j + 1) s)
  for (int64_t j = 0; j < b; ++j)
    for (int64_t i = 0; i < s; ++i)
      for (int64_t e = 0; e < E; ++e)
        packed.data<double>()[(j * s + i) * E + e] = megatron_rows.data<double>()[(i * b + j) * E + e];
  const std::vector<int64_t> offsets{0, s, 2 * s, 3 * s};
  const Tensor scores = scores_of(RouterScore::softmax, packed);
  Tensor counts({b, E}, DType::i64);
  std::fill_n(counts.data<int64_t>(), b * E, 0);
  add_aux_topk_counts_per_sequence(scores, k, offsets, Tensor(), counts);
  const AuxLossParams p{.coeff = coeff, .top_k = k};
  EXPECT_NEAR(seq_aux_loss_forward(p, scores, offsets, Tensor(), counts), expected, 1e-15);

  // Context parallel: two ranks each hold half of every sequence; the summed counts make the shares add up.
  double shares = 0;
  for (int64_t rank = 0; rank < 2; ++rank) {
    Tensor local({b * s / 2, E}, DType::f64);
    for (int64_t j = 0; j < b; ++j)
      for (int64_t i = 0; i < s / 2; ++i)
        for (int64_t e = 0; e < E; ++e)
          local.data<double>()[(j * s / 2 + i) * E + e] = scores.data<double>()[(j * s + rank * s / 2 + i) * E + e];
    shares += seq_aux_loss_forward(p, local, std::vector<int64_t>{0, s / 2, s, 3 * s / 2}, Tensor(), counts);
  }
  EXPECT_NEAR(shares, expected, 1e-15);
}

// Packed sequences of unequal lengths: each is its own micro-batch-level loss, and the result is their mean.
TEST(MoeAuxLoss, SeqAuxOnPackedSequencesIsTheMeanOfTheirOwnLosses) {
  const Tensor logits = random_logits(10, 5, 47);
  const Tensor scores = scores_of(RouterScore::sigmoid, logits);
  const AuxLossParams p{.coeff = 0.1, .top_k = 2};
  const std::vector<int64_t> offsets{0, 3, 10};
  Tensor counts({2, 5}, DType::f64);
  std::fill_n(counts.data<double>(), 10, 0.0);
  add_aux_topk_counts_per_sequence(scores, 2, offsets, Tensor(), counts);
  double mean = 0;
  for (size_t s = 0; s + 1 < offsets.size(); ++s) {
    const Tensor own = rows_of(scores, offsets[s], offsets[s + 1]);
    mean += aux_loss_forward(p, own, Tensor(), counts_of(own, 2)) / 2;
  }
  EXPECT_NEAR(seq_aux_loss_forward(p, scores, offsets, Tensor(), counts), mean, 1e-15);
}

TEST(MoeAuxLoss, PaddingRowsAreLeftOut) {
  const Tensor logits = random_logits(6, 4, 53);
  const Tensor valid = mask_of({1, 0, 1, 1, 0, 1});
  Tensor real({4, 4}, DType::f64);
  int64_t row = 0;
  for (int64_t t = 0; t < 6; ++t)
    if (valid.data<uint8_t>()[t]) std::copy_n(logits.data<double>() + t * 4, 4, real.data<double>() + 4 * row++);
  const AuxLossParams p{.coeff = 1, .top_k = 2};
  const Tensor scores = scores_of(RouterScore::softmax, logits), real_scores = scores_of(RouterScore::softmax, real);
  const Tensor counts = counts_of(scores, 2, valid), real_counts = counts_of(real_scores, 2);
  for (int64_t e = 0; e < 4; ++e) EXPECT_EQ(counts.data<int64_t>()[e], real_counts.data<int64_t>()[e]);
  EXPECT_NEAR(aux_loss_forward(p, scores, valid, counts), aux_loss_forward(p, real_scores, Tensor(), real_counts),
              1e-15);
  Tensor dlogits({6, 4}, DType::f64);
  std::fill_n(dlogits.data<double>(), 24, 0.0);
  aux_loss_backward(p, RouterScore::softmax, logits, valid, counts, 1.0, dlogits);
  for (int64_t e = 0; e < 4; ++e) EXPECT_EQ(dlogits.data<double>()[4 + e], 0.0);
}

TEST(MoeAuxLoss, FloatLogitsGetFloatGradients) {
  const Tensor logits = random_logits(5, 4, 59);
  const Tensor logits_f32 = clone(logits, DType::f32);
  const AuxLossParams p{.coeff = 1, .top_k = 1};
  const Tensor counts = counts_of(scores_of(RouterScore::softmax, logits_f32), 1);
  Tensor d64({5, 4}, DType::f64), d32({5, 4}, DType::f32);
  std::fill_n(d64.data<double>(), 20, 0.0);
  std::fill_n(d32.data<float>(), 20, 0.0f);
  aux_loss_backward(p, RouterScore::softmax, clone(logits_f32, DType::f64), Tensor(), counts, 1.0, d64);
  aux_loss_backward(p, RouterScore::softmax, logits_f32, Tensor(), counts, 1.0, d32);
  for (int64_t i = 0; i < 20; ++i) EXPECT_EQ(d32.data<float>()[i], float(d64.data<double>()[i]));
  EXPECT_THROW(aux_loss_backward(p, RouterScore::softmax, logits_f32, Tensor(), counts, 1.0, d64), Error);
}

}  // namespace
}  // namespace rf::model

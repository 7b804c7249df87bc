#include "model/moe_aux_loss.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <vector>

#include "core/element_access.h"
#include "core/error.h"

namespace rf::model {
namespace {

constexpr double kSigmoidNormEpsilon = 1e-20;  // Megatron's guard of the sigmoid scores' normalising sum

// Offset of element (row, col) of a [rows, E] view, or of an [E] view read as one row.
int64_t offset_2d(const TensorView& x, int64_t row, int64_t col) {
  return (x.rank() == 1 ? 0 : row * x.stride(0)) + col * x.stride(-1);
}
double load_2d(const TensorView& x, int64_t row, int64_t col) { return load_f64(x, offset_2d(x, row, col)); }
void add_2d(const TensorView& x, int64_t row, int64_t col, double value) {
  store_f64(x, offset_2d(x, row, col), load_2d(x, row, col) + value);
}

bool is_valid(const TensorView& valid_T, int64_t t) {
  return valid_T.empty() || load_f64(valid_T, t * valid_T.stride(0)) != 0;
}

void check_rows(TensorView x_TE, TensorView valid_T, const char* what) {
  RF_CHECK(x_TE.rank() == 2, "moe aux loss: {} must be [T, E], got {}", what, x_TE.describe());
  RF_CHECK(valid_T.empty() || (valid_T.rank() == 1 && valid_T.size(0) == x_TE.size(0)),
           "moe aux loss: valid_T must be empty or [{}], got {}", x_TE.size(0), valid_T.describe());
}

void check_sequences(std::span<const int64_t> row_offsets, int64_t T, TensorView counts, int64_t E) {
  RF_CHECK(row_offsets.size() >= 2 && row_offsets.front() >= 0 && row_offsets.back() <= T &&
               std::is_sorted(row_offsets.begin(), row_offsets.end()),
           "moe aux loss: row_offsets must rise from >= 0 to <= {} with at least one sequence", T);
  const int64_t S = int64_t(row_offsets.size()) - 1;
  const bool one_row = counts.rank() == 1 && S == 1 && counts.size(0) == E;
  RF_CHECK(one_row || (counts.rank() == 2 && counts.size(0) == S && counts.size(1) == E),
           "moe aux loss: counts must be [{}, {}], got {}", S, E, counts.describe());
}

// logsumexp of row t, and the row's softmax into `softmax`.
double row_logsumexp(const TensorView& logits_TE, int64_t t, std::vector<double>& softmax) {
  for (size_t e = 0; e < softmax.size(); ++e) softmax[e] = load_2d(logits_TE, t, int64_t(e));
  const double max = *std::max_element(softmax.begin(), softmax.end());
  double sum = 0;
  for (double& v : softmax) sum += (v = std::exp(v - max));
  for (double& v : softmax) v /= sum;
  return max + std::log(sum);
}

// The aux losses' scores of row t: softmax over all E, or the sigmoids normalised by their sum. Returns that sum
// (+ eps) for sigmoid, which backward needs with the raw sigmoids kept in `sigmoid`; 1 for softmax.
double row_scores(RouterScore kind, const TensorView& logits_TE, int64_t t, std::vector<double>& sigmoid,
                  std::vector<double>& score) {
  const size_t E = score.size();
  if (kind == RouterScore::sigmoid) {
    double sum = 0;
    for (size_t e = 0; e < E; ++e) sum += (sigmoid[e] = 1.0 / (1.0 + std::exp(-load_2d(logits_TE, t, int64_t(e)))));
    sum += kSigmoidNormEpsilon;  // after the sum, as Megatron's sum(s) + 1e-20
    for (size_t e = 0; e < E; ++e) score[e] = sigmoid[e] / sum;
    return sum;
  }
  row_logsumexp(logits_TE, t, score);
  return 1.0;
}

// dL/dlogits of one row from g = dL/dscores. Softmax: s (g - s.g). Sigmoid normalised, n = sigma / D with
// D = sum sigma + eps: dL/dsigma_j = (g_j - n.g) / D, times sigma_j (1 - sigma_j).
void row_scores_backward(RouterScore kind, const std::vector<double>& sigmoid, const std::vector<double>& score,
                         double denominator, const std::vector<double>& g, std::vector<double>& dlogits) {
  const double dot = std::inner_product(score.begin(), score.end(), g.begin(), 0.0);
  for (size_t e = 0; e < score.size(); ++e)
    dlogits[e] = kind == RouterScore::sigmoid ? (g[e] - dot) / denominator * sigmoid[e] * (1.0 - sigmoid[e])
                                              : score[e] * (g[e] - dot);
}

// dL/dscores[x, e], the same for every row x of sequence s: coeff * E / (k T_s^2 S) * f_se (no k for
// LoadFraction::of_tokens), with T_s = sum_e f_se / k. All zeros when the sequence counted no token.
std::vector<double> score_gradient(const AuxLossParams& p, const TensorView& counts, int64_t s, int64_t num_sequences,
                                   int64_t E) {
  std::vector<double> g(static_cast<size_t>(E));
  for (int64_t e = 0; e < E; ++e) g[size_t(e)] = load_2d(counts, s, e);
  const double tokens = std::accumulate(g.begin(), g.end(), 0.0) / double(p.top_k);
  if (tokens == 0) return std::vector<double>(static_cast<size_t>(E), 0.0);
  const double divisor = p.fraction == LoadFraction::of_choices ? double(p.top_k) : 1.0;
  const double factor = p.coeff * double(E) / (divisor * tokens * tokens * double(num_sequences));
  for (double& v : g) v *= factor;
  return g;
}

double balance_loss_forward(const AuxLossParams& p, TensorView scores_TE, std::span<const int64_t> row_offsets,
                            TensorView valid_T, TensorView counts) {
  check_rows(scores_TE, valid_T, "scores_TE");
  const int64_t E = scores_TE.size(1), S = int64_t(row_offsets.size()) - 1;
  check_sequences(row_offsets, scores_TE.size(0), counts, E);
  RF_CHECK(p.top_k >= 1 && p.top_k <= E, "moe aux loss: top_k {} with {} experts", p.top_k, E);
  double loss = 0;
  for (int64_t s = 0; s < S; ++s) {
    const std::vector<double> g = score_gradient(p, counts, s, S, E);
    for (int64_t t = row_offsets[size_t(s)]; t < row_offsets[size_t(s) + 1]; ++t)
      if (is_valid(valid_T, t))
        for (int64_t e = 0; e < E; ++e) loss += g[size_t(e)] * load_2d(scores_TE, t, e);
  }
  return loss;
}

void balance_loss_backward(const AuxLossParams& p, RouterScore kind, TensorView logits_TE,
                           std::span<const int64_t> row_offsets, TensorView valid_T, TensorView counts, double scale,
                           TensorView dlogits_TE) {
  check_rows(logits_TE, valid_T, "logits_TE");
  const int64_t E = logits_TE.size(1), S = int64_t(row_offsets.size()) - 1;
  check_sequences(row_offsets, logits_TE.size(0), counts, E);
  check_shape(dlogits_TE, logits_TE.shape(), "dlogits_TE");
  check_dtype(dlogits_TE, logits_TE.dtype(), "dlogits_TE");
  RF_CHECK(p.top_k >= 1 && p.top_k <= E, "moe aux loss: top_k {} with {} experts", p.top_k, E);
  std::vector<double> sigmoid(static_cast<size_t>(E)), score(static_cast<size_t>(E)), dl(static_cast<size_t>(E));
  for (int64_t s = 0; s < S; ++s) {
    std::vector<double> g = score_gradient(p, counts, s, S, E);
    for (double& v : g) v *= scale;
    for (int64_t t = row_offsets[size_t(s)]; t < row_offsets[size_t(s) + 1]; ++t) {
      if (!is_valid(valid_T, t)) continue;
      const double denominator = row_scores(kind, logits_TE, t, sigmoid, score);
      row_scores_backward(kind, sigmoid, score, denominator, g, dl);
      for (int64_t e = 0; e < E; ++e) add_2d(dlogits_TE, t, e, dl[size_t(e)]);
    }
  }
}

// The whole batch as one sequence, for the micro-batch-level loss.
std::array<int64_t, 2> all_rows(const TensorView& x_TE) { return {0, x_TE.size(0)}; }

int64_t count_valid(const TensorView& valid_T, int64_t T) {
  int64_t n = 0;
  for (int64_t t = 0; t < T; ++t) n += is_valid(valid_T, t);
  return n;
}

}  // namespace

void aux_loss_scores(RouterScore kind, TensorView logits_TE, TensorView scores_TE) {
  check_rows(logits_TE, TensorView(), "logits_TE");
  check_shape(scores_TE, logits_TE.shape(), "scores_TE");
  check_dtype(scores_TE, DType::f64, "scores_TE");
  const int64_t T = logits_TE.size(0), E = logits_TE.size(1);
  std::vector<double> sigmoid(static_cast<size_t>(E)), score(static_cast<size_t>(E));
  for (int64_t t = 0; t < T; ++t) {
    row_scores(kind, logits_TE, t, sigmoid, score);
    for (int64_t e = 0; e < E; ++e) store_f64(scores_TE, offset_2d(scores_TE, t, e), score[size_t(e)]);
  }
}

void add_aux_topk_counts_per_sequence(TensorView scores_TE, int64_t top_k, std::span<const int64_t> row_offsets,
                                      TensorView valid_T, TensorView counts_SE) {
  check_rows(scores_TE, valid_T, "scores_TE");
  const int64_t E = scores_TE.size(1);
  check_sequences(row_offsets, scores_TE.size(0), counts_SE, E);
  RF_CHECK(top_k >= 1 && top_k <= E, "moe aux loss: top_k {} with {} experts", top_k, E);
  std::vector<int64_t> order(static_cast<size_t>(E));
  std::vector<double> score(static_cast<size_t>(E));
  for (size_t s = 0; s + 1 < row_offsets.size(); ++s) {
    for (int64_t t = row_offsets[s]; t < row_offsets[s + 1]; ++t) {
      if (!is_valid(valid_T, t)) continue;
      // map_aux: the top k of the row's scores, ties to the lower expert (torch.topk on the CPU).
      for (int64_t e = 0; e < E; ++e) score[size_t(e)] = load_2d(scores_TE, t, e);
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + top_k, order.end(), [&](int64_t a, int64_t b) {
        return score[size_t(a)] > score[size_t(b)] || (score[size_t(a)] == score[size_t(b)] && a < b);
      });
      for (int64_t i = 0; i < top_k; ++i) add_2d(counts_SE, int64_t(s), order[size_t(i)], 1.0);
    }
  }
}

void add_aux_topk_counts(TensorView scores_TE, int64_t top_k, TensorView valid_T, TensorView counts_E) {
  add_aux_topk_counts_per_sequence(scores_TE, top_k, all_rows(scores_TE), valid_T, counts_E);
}

double aux_loss_forward(const AuxLossParams& params, TensorView scores_TE, TensorView valid_T, TensorView counts_E) {
  return balance_loss_forward(params, scores_TE, all_rows(scores_TE), valid_T, counts_E);
}

void aux_loss_backward(const AuxLossParams& params, RouterScore score, TensorView logits_TE, TensorView valid_T,
                       TensorView counts_E, double scale, TensorView dlogits_TE) {
  balance_loss_backward(params, score, logits_TE, all_rows(logits_TE), valid_T, counts_E, scale, dlogits_TE);
}

double seq_aux_loss_forward(const AuxLossParams& params, TensorView scores_TE, std::span<const int64_t> row_offsets,
                            TensorView valid_T, TensorView counts_SE) {
  return balance_loss_forward(params, scores_TE, row_offsets, valid_T, counts_SE);
}

void seq_aux_loss_backward(const AuxLossParams& params, RouterScore score, TensorView logits_TE,
                           std::span<const int64_t> row_offsets, TensorView valid_T, TensorView counts_SE, double scale,
                           TensorView dlogits_TE) {
  balance_loss_backward(params, score, logits_TE, row_offsets, valid_T, counts_SE, scale, dlogits_TE);
}

double z_loss_forward(const ZLossParams& params, TensorView logits_TE, TensorView valid_T) {
  check_rows(logits_TE, valid_T, "logits_TE");
  const int64_t T = logits_TE.size(0), num_valid = count_valid(valid_T, T);
  if (num_valid == 0) return 0.0;
  std::vector<double> softmax(static_cast<size_t>(logits_TE.size(1)));
  double sum = 0;
  for (int64_t t = 0; t < T; ++t) {
    if (!is_valid(valid_T, t)) continue;
    const double lse = row_logsumexp(logits_TE, t, softmax);
    sum += lse * lse;
  }
  return params.coeff / params.divisor * sum / double(num_valid);
}

void z_loss_backward(const ZLossParams& params, TensorView logits_TE, TensorView valid_T, double scale,
                     TensorView dlogits_TE) {
  check_rows(logits_TE, valid_T, "logits_TE");
  check_shape(dlogits_TE, logits_TE.shape(), "dlogits_TE");
  check_dtype(dlogits_TE, logits_TE.dtype(), "dlogits_TE");
  const int64_t T = logits_TE.size(0), E = logits_TE.size(1), num_valid = count_valid(valid_T, T);
  if (num_valid == 0) return;
  const double factor = scale * params.coeff / params.divisor * 2.0 / double(num_valid);
  std::vector<double> softmax(static_cast<size_t>(E));
  for (int64_t t = 0; t < T; ++t) {
    if (!is_valid(valid_T, t)) continue;
    const double lse = row_logsumexp(logits_TE, t, softmax);
    for (int64_t e = 0; e < E; ++e) add_2d(dlogits_TE, t, e, factor * lse * softmax[size_t(e)]);
  }
}

}  // namespace rf::model

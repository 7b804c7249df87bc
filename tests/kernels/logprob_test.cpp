// Softmax cross-entropy (log-prob, entropy) tests: every cpu variant against the ref (f32 and bf16
// logits, awkward shapes, temperatures, strided views with sentinels, ignored targets, with and
// without the entropy term, large logits), the ref and cpu against verl's own outputs
// (logprobs_from_logits, entropy_from_logits), finite differences of the f64 ref backward, the
// vocab-parallel path (shard statistics of 1-4 shards with padding, combined, and the shard backward)
// against the whole-vocabulary kernels, and argument errors.
// Legend: N tokens, V vocab, B batch, R response length.
#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>

#include "core/element_access.h"
#include "kernels/fast_variants.h"
#include "kernels/logprob_shards.h"
#include "kernels/ref/ref_kernels.h"
#include "support/test_support.h"

namespace rf::kernels {
namespace {

using testing::expect_close;
using testing::guarded_copy;
using testing::GuardedTensor;
using testing::Layout;
using testing::random_tensor;

constexpr int64_t kIgnoreIndex = -100;

struct Tolerance {
  double rtol, atol;
};

// Random targets in [0, V) with every fourth token (from the second) set to ignore_index.
Tensor make_targets(int64_t N, int64_t V, DType dtype, uint64_t seed) {
  Tensor targets = testing::random_ids({N}, dtype, seed, V);
  for (int64_t n = 1; n < N; n += 4) store_f64(targets, n, double(kIgnoreIndex));
  return targets;
}

struct LogprobCase {
  int64_t N, V;
  double temperature;
  DType dtype;
  DType target_dtype;
  bool with_entropy;
  double logit_low, logit_high;
};

void check_against_ref(const LogprobCase& k) {
  const std::string name = fmt::format("N={} V={} T={} {} targets {} {} logits in [{}, {})", k.N, k.V,
                                       k.temperature, dtype_name(k.dtype), dtype_name(k.target_dtype),
                                       k.with_entropy ? "with entropy" : "no entropy", k.logit_low, k.logit_high);
  const LogprobParams params{.temperature = k.temperature};
  const Tensor logits = random_tensor({k.N, k.V}, k.dtype, 11, k.logit_low, k.logit_high);
  const Tensor targets = make_targets(k.N, k.V, k.target_dtype, 12);
  const Tensor dlogp = random_tensor({k.N}, DType::f32, 13);
  const Tensor dentropy = random_tensor({k.N}, DType::f32, 14);

  const Tensor logp_ref({k.N}, DType::f32), entropy_ref({k.N}, DType::f32), lse_ref({k.N}, DType::f32);
  ref::logprob_forward(params, logits, targets, logp_ref, k.with_entropy ? entropy_ref.view() : TensorView{},
                       lse_ref);
  const Tensor dlogits_ref({k.N, k.V}, k.dtype);
  ref::logprob_backward(params, logits, targets, lse_ref, k.with_entropy ? entropy_ref.view() : TensorView{}, dlogp,
                        k.with_entropy ? dentropy.view() : TensorView{}, dlogits_ref);
  for (int64_t n = 1; n < k.N; n += 4) EXPECT_EQ(logp_ref.data<float>()[n], 0.0f) << name << " ignored token " << n;

  // The forward outputs are f32 sums over the same (bf16 or f32) inputs in both kernels: f32
  // rounding of sums of V terms. |z| up to ~150 (large logits) costs ~1e-5 absolute in lse alone.
  const double z_scale = std::max(std::abs(k.logit_low), std::abs(k.logit_high)) / k.temperature;
  const Tolerance fwd_tol{1e-5, 1e-6 + 1e-7 * z_scale};
  // dlogits: f32 values (p_v times O(1) factors); near the target 1 - p cancels, hence the atol.
  // bf16 dlogits carry 8 significant bits: ref and cpu may round to neighbouring values (2^-7).
  const Tolerance bwd_tol = k.dtype == DType::bf16 ? Tolerance{1e-2, 1e-6} : Tolerance{1e-5, 1e-6};

  for (const KernelTable* table : fast_tables()) {
    const std::string what = fmt::format("{} {}", kernel_variant_name(table->variant), name);
    const GuardedTensor logits_g = guarded_copy(logits, Layout::strided);
    const GuardedTensor logp_g({k.N}, DType::f32, Layout::contiguous);
    const GuardedTensor entropy_g({k.N}, DType::f32, Layout::contiguous);
    const GuardedTensor lse_g({k.N}, DType::f32, Layout::contiguous);
    table->logprob_forward(params, logits_g, targets, logp_g, k.with_entropy ? entropy_g.view() : TensorView{},
                           lse_g);
    expect_close(logp_g, logp_ref, fwd_tol.rtol, fwd_tol.atol, what + " logp");
    expect_close(lse_g, lse_ref, fwd_tol.rtol, fwd_tol.atol, what + " lse");
    if (k.with_entropy) expect_close(entropy_g, entropy_ref, fwd_tol.rtol, fwd_tol.atol, what + " entropy");
    logp_g.expect_sentinels_intact(what + " logp");
    entropy_g.expect_sentinels_intact(what + " entropy");
    lse_g.expect_sentinels_intact(what + " lse");

    // Backward reads the ref's lse and entropy so that only the backward arithmetic is compared.
    const GuardedTensor dlogits_g({k.N, k.V}, k.dtype, Layout::strided);
    table->logprob_backward(params, logits_g, targets, lse_ref, k.with_entropy ? entropy_ref.view() : TensorView{},
                            dlogp, k.with_entropy ? dentropy.view() : TensorView{}, dlogits_g);
    expect_close(dlogits_g, dlogits_ref, bwd_tol.rtol, bwd_tol.atol, what + " dlogits");
    dlogits_g.expect_sentinels_intact(what + " dlogits");
  }
}

TEST(LogprobCpu, MatchesRef) {
  for (DType dtype : {DType::f32, DType::bf16})
    for (auto [N, V] : {std::pair<int64_t, int64_t>{1, 3}, {5, 37}, {13, 1000}, {3, 7}})
      for (double temperature : {1.0, 0.7})
        for (bool with_entropy : {true, false})
          check_against_ref({N, V, temperature, dtype, (N + V) % 2 ? DType::i32 : DType::i64, with_entropy, -4, 4});
}

TEST(LogprobCpu, LongRowsMatchRef) {
  // Several f32 partial-sum chunks per row, a vocabulary that is no multiple of any width, and
  // enough rows for the threaded path.
  check_against_ref({40, 4099, 0.7, DType::f32, DType::i64, true, -6, 6});
  check_against_ref({40, 4099, 1.0, DType::bf16, DType::i32, false, -6, 6});
}

TEST(LogprobCpu, LargeLogitsAreStable) {
  for (double temperature : {1.0, 0.7}) {
    check_against_ref({6, 257, temperature, DType::f32, DType::i64, true, 50, 100});
    check_against_ref({6, 257, temperature, DType::f32, DType::i64, true, -100, 100});
    check_against_ref({6, 257, temperature, DType::bf16, DType::i64, true, -100, 100});
  }
}

TEST(LogprobRef, LargeLogitsGiveFiniteConsistentValues) {
  // Peaked rows: z up to ~143 would overflow a naive exp in f32 (and nearly in f64).
  const Tensor logits = random_tensor({4, 50}, DType::f32, 21, -100, 100);
  const Tensor targets = testing::random_ids({4}, DType::i64, 22, 50);
  const Tensor logp({4}, DType::f32), entropy({4}, DType::f32), lse({4}, DType::f32);
  ref::logprob_forward({.temperature = 0.7}, logits, targets, logp, entropy, lse);
  for (int64_t n = 0; n < 4; ++n) {
    double z_max = -INFINITY;
    for (int64_t v = 0; v < 50; ++v) z_max = std::max(z_max, double(logits.at<float>({n, v})) / 0.7);
    EXPECT_TRUE(std::isfinite(lse.data<float>()[n]));
    EXPECT_GE(lse.data<float>()[n], float(z_max));
    EXPECT_LE(lse.data<float>()[n], float(z_max + std::log(50.0)));
    EXPECT_LE(logp.data<float>()[n], 0.0f);
    EXPECT_GE(entropy.data<float>()[n], 0.0f);
    EXPECT_LE(entropy.data<float>()[n], std::log(50.0f));
  }
}

// verl's logprobs_from_logits (log_softmax gathered at the labels) and entropy_from_logits, run
// by verl itself on f32 logits of shape (B, R, V); the kernels see them as (B*R, V), T = 1.
TEST(LogprobKernels, MatchVerlReferenceVectors) {
  std::ifstream file(testing::reference_dir() + "/verl_algos.json");
  ASSERT_TRUE(file) << "cannot open " << testing::reference_dir() << "/verl_algos.json";
  const nlohmann::json reference = nlohmann::json::parse(file);
  std::vector<const KernelTable*> tables = fast_tables();
  tables.insert(tables.begin(), &ref::table());
  int num_logprob_cases = 0, num_entropy_cases = 0;
  for (const nlohmann::json& c : reference.at("cases")) {
    const std::string op = c.at("op");
    if (op != "logprobs_from_logits" && op != "entropy_from_logits") continue;
    const nlohmann::json& logits_BRV = c.at("inputs").at("logits");
    const int64_t B = int64_t(logits_BRV.size()), R = int64_t(logits_BRV[0].size());
    const int64_t V = int64_t(logits_BRV[0][0].size()), N = B * R;
    const Tensor logits({N, V}, DType::f32);
    const Tensor targets({N}, DType::i64);
    const Tensor expected({N}, DType::f32);
    const bool logprobs = op == "logprobs_from_logits";
    const nlohmann::json& outputs = c.at("outputs").at(logprobs ? "logprobs" : "entropy");
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t r = 0; r < R; ++r) {
        const int64_t n = b * R + r;
        for (int64_t v = 0; v < V; ++v) logits.at<float>({n, v}) = logits_BRV[b][r][v].get<float>();
        targets.data<int64_t>()[n] = logprobs ? c.at("inputs").at("labels")[b][r].get<int64_t>() : kIgnoreIndex;
        expected.data<float>()[n] = outputs[b][r].get<float>();
      }
    }
    const double rtol = c.at("tolerance").at("rtol"), atol = c.at("tolerance").at("atol");
    for (const KernelTable* table : tables) {
      const Tensor logp({N}, DType::f32), entropy({N}, DType::f32), lse({N}, DType::f32);
      table->logprob_forward({}, logits, targets, logp, entropy, lse);
      const std::string what = fmt::format("{} {}", kernel_variant_name(table->variant), c.at("id").get<std::string>());
      expect_close(logprobs ? logp : entropy, expected, rtol, atol, what);
    }
    ++(logprobs ? num_logprob_cases : num_entropy_cases);
  }
  EXPECT_EQ(num_logprob_cases, 8);
  EXPECT_EQ(num_entropy_cases, 8);
}

// loss = sum_n dlogp_n logp_n + dentropy_n entropy_n, differentiated by the ref backward and by
// finite differences, at every coordinate; T != 1, one ignored token.
TEST(LogprobRef, BackwardMatchesFiniteDifferences) {
  constexpr int64_t N = 3, V = 5;
  const LogprobParams params{.temperature = 0.7};
  const Tensor logits = random_tensor({N, V}, DType::f64, 31, -2, 2);
  const Tensor targets({N}, DType::i64);
  targets.data<int64_t>()[0] = 2;
  targets.data<int64_t>()[1] = kIgnoreIndex;
  targets.data<int64_t>()[2] = 4;
  const Tensor dlogp = random_tensor({N}, DType::f64, 32);
  const Tensor dentropy = random_tensor({N}, DType::f64, 33);
  const Tensor logp({N}, DType::f64), entropy({N}, DType::f64), lse({N}, DType::f64);
  auto loss = [&] {
    ref::logprob_forward(params, logits, targets, logp, entropy, lse);
    double sum = 0;
    for (int64_t n = 0; n < N; ++n)
      sum += dlogp.data<double>()[n] * logp.data<double>()[n] + dentropy.data<double>()[n] * entropy.data<double>()[n];
    return sum;
  };
  loss();
  const Tensor dlogits({N, V}, DType::f64);
  ref::logprob_backward(params, logits, targets, lse, entropy, dlogp, dentropy, dlogits);
  testing::expect_gradient_matches_fd(loss, logits, dlogits, "ref logprob dlogits");

  // Without the entropy term the gradient is the one of dentropy = 0, and entropy is not read.
  const Tensor zeros({N}, DType::f64), garbage = random_tensor({N}, DType::f64, 34, 1e3, 1e4);
  const Tensor dlogits_zero({N, V}, DType::f64), dlogits_none({N, V}, DType::f64);
  ref::logprob_backward(params, logits, targets, lse, entropy, dlogp, zeros, dlogits_zero);
  ref::logprob_backward(params, logits, targets, lse, garbage, dlogp, {}, dlogits_none);
  expect_close(dlogits_none, dlogits_zero, 0, 0, "ref dlogits without the entropy term");
}

// The vocab-parallel path: a vocabulary of V ids padded to R shards of Vs columns (the padding
// filled with large junk logits, which must be masked), each shard's statistics from one kernel,
// combined in rank order, against the whole-vocabulary one-pass forward of the same variant; and the
// shards' backward, concatenated, against the whole-vocabulary backward (padding gets zeros).
void check_shards_against_whole(const KernelTable& table, DType dtype, int64_t N, int64_t V, int64_t R,
                                double temperature, double rtol) {
  const std::string what = fmt::format("{} {} N={} V={} R={} T={}", kernel_variant_name(table.variant),
                                       dtype_name(dtype), N, V, R, temperature);
  const int64_t Vs = (V + R - 1) / R, padded = Vs * R;
  const DType stat = dtype == DType::f64 ? DType::f64 : DType::f32;
  const Tensor logits = random_tensor({N, padded}, dtype, 51, -4.0, 4.0);
  copy_convert(random_tensor({N, padded - V}, dtype, 52, 50.0, 60.0), logits.view().slice(1, V, padded - V));
  const TensorView real_logits = logits.view().slice(1, 0, V);
  const Tensor targets = make_targets(N, V, DType::i64, 53);
  const Tensor dlogp = random_tensor({N}, stat, 54), dentropy = random_tensor({N}, stat, 55);

  const Tensor logp({N}, stat), entropy({N}, stat), lse({N}, stat);
  table.logprob_forward({.temperature = temperature}, clone(real_logits, dtype), targets, logp, entropy, lse);
  const Tensor dlogits({N, V}, dtype);
  table.logprob_backward({.temperature = temperature}, clone(real_logits, dtype), targets, lse, entropy, dlogp,
                         dentropy, dlogits);

  const Tensor stats({R, N, kNumShardStats}, stat);
  const Tensor dlogits_shards({N, padded}, dtype);
  for (int64_t r = 0; r < R; ++r) {
    const LogprobParams shard{.temperature = temperature, .vocab_start = r * Vs, .vocab_size = V};
    table.logprob_shard_stats(shard, logits.view().slice(1, r * Vs, Vs), targets, stats.view().select(0, r));
  }
  const Tensor logp_sh({N}, stat), entropy_sh({N}, stat), lse_sh({N}, stat);
  combine_logprob_shards(stats, targets, logp_sh, entropy_sh, lse_sh);
  const double atol = dtype == DType::f64 ? 1e-12 : 1e-5;
  expect_close(logp_sh, logp, rtol, atol, what + " logp");
  expect_close(entropy_sh, entropy, rtol, atol, what + " entropy");
  expect_close(lse_sh, lse, rtol, atol, what + " lse");
  for (int64_t r = 0; r < R; ++r) {
    const LogprobParams shard{.temperature = temperature, .vocab_start = r * Vs, .vocab_size = V};
    table.logprob_backward(shard, logits.view().slice(1, r * Vs, Vs), targets, lse_sh, entropy_sh, dlogp, dentropy,
                           dlogits_shards.view().slice(1, r * Vs, Vs));
  }
  expect_close(dlogits_shards.view().slice(1, 0, V), dlogits, rtol, atol, what + " dlogits");
  expect_close(dlogits_shards.view().slice(1, V, padded - V), Tensor({N, padded - V}, dtype), 0, 0,
               what + " padding gets no gradient");
}

TEST(LogprobKernels, VocabShardsCombineToTheWholeVocabulary) {
  for (int64_t R : {1, 2, 3, 4}) {
    for (int64_t V : {7, 130, 1000}) {
      check_shards_against_whole(ref::table(), DType::f64, 9, V, R, 0.8, 1e-12);
      for (const KernelTable* table : fast_tables()) {
        check_shards_against_whole(*table, DType::f32, 9, V, R, 1.0, 1e-5);
        check_shards_against_whole(*table, DType::bf16, 9, V, R, 0.7, 1e-2);
      }
    }
  }
}

// A shard made only of padding (R ranks, a vocabulary shorter than R - 1 shards) contributes nothing.
TEST(LogprobKernels, AShardOfPaddingOnlyContributesNothing) {
  for (const KernelTable* table : fast_tables()) check_shards_against_whole(*table, DType::f32, 5, 3, 4, 1.0, 1e-5);
  check_shards_against_whole(ref::table(), DType::f64, 5, 3, 4, 1.0, 1e-12);
}

TEST(LogprobKernels, RejectBadArguments) {
  std::vector<const KernelTable*> tables = fast_tables();
  tables.insert(tables.begin(), &ref::table());
  const Tensor logits = random_tensor({2, 5}, DType::f32, 41);
  const Tensor logp({2}, DType::f32), lse({2}, DType::f32);
  const Tensor out_of_range({2}, DType::i32);
  out_of_range.data<int32_t>()[1] = 5;
  const Tensor good({2}, DType::i32);
  for (const KernelTable* table : tables) {
    const std::string what(kernel_variant_name(table->variant));
    try {
      table->logprob_forward({}, logits, out_of_range, logp, {}, lse);
      ADD_FAILURE() << what << ": expected an error for target 5 with V = 5";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("target id 5 outside the vocabulary of 5"), std::string::npos)
          << what << ": " << e.what();
    }
    EXPECT_THROW(table->logprob_forward({.temperature = 0.0}, logits, good, logp, {}, lse), Error) << what;
    EXPECT_THROW(table->logprob_forward({.vocab_start = 5}, logits, good, logp, {}, lse), Error) << what;
    // A shard of a larger vocabulary goes through the shard statistics, not the one-pass forward.
    EXPECT_THROW(table->logprob_forward({.vocab_size = 4}, logits, good, logp, {}, lse), Error) << what;
    const Tensor stats({2, kNumShardStats}, DType::f32);
    EXPECT_THROW(table->logprob_shard_stats({.vocab_start = -1, .vocab_size = 8}, logits, good, stats), Error) << what;
    EXPECT_THROW(table->logprob_shard_stats({.vocab_start = 5, .vocab_size = 5}, logits, out_of_range, stats), Error)
        << what;  // target 5 outside a vocabulary of 5
    EXPECT_THROW(table->logprob_shard_stats({.vocab_start = 0, .vocab_size = 5}, logits, good, lse), Error) << what;
    EXPECT_THROW(table->logprob_forward({}, logits, good, lse.view().slice(0, 0, 1), {}, lse), Error) << what;
    const Tensor dlogits_wrong_dtype({2, 5}, DType::bf16);
    EXPECT_THROW(table->logprob_backward({}, logits, good, lse, {}, logp, {}, dlogits_wrong_dtype), Error) << what;
  }
}

}  // namespace
}  // namespace rf::kernels

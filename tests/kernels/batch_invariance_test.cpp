// Batch invariance of every op on the inference path (issue #7, acceptance 1): a row computed alone,
// in a batch of 7 and in a batch of 64 comes out bitwise the same, for f32 and bf16, on the tables a
// batch-invariant registry (KernelConfig::batch_invariant, the rollout's) serves: every cpu variant this
// machine runs, and ref (optimization level 0). Batches take the rows in shuffled order into fresh
// buffers, so a row sits at other positions, other addresses and alignments (C = 200: a bf16 row is 400
// bytes) and next to other rows than alone. Ops: embedding, rmsnorm, the linear layers of a Llama/Qwen
// block (q/k/v with bias, o and down with the residual add, gate/up, the lm_head logits), rope, swiglu,
// logprob (log-prob, entropy, lse), and paged attention: each sequence alone, in batches of 7 and 64
// mixing decode steps and prefill chunks, and a sequence's rows from one whole prefill, from chunks and
// token by token; also across block sizes, block placements and thread counts.
// The f32 linear ops are asked for on OpenBLAS: the batch-invariant registry must run them on the ordered
// GEMM anyway, since OpenBLAS's sgemm is not row-invariant (its small-matrix path takes M*N*K <= 1e6), nor
// is oneDNN's AVX2 kernel. The linear layers must also give the same bits on every variant (the ordered
// GEMM's reduction order does not depend on the ISA).
// Legend: N rows, C hidden, I in-features, O out-features, F FFN width, V vocab, H heads, K kv heads,
// D head dim, T positions, Z tokens per cache block.
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "kernels/kernel_registry.h"
#include "kernels/paged_batch.h"
#include "support/test_support.h"

namespace rf::kernels {
namespace {

using rf::testing::random_ids;
using rf::testing::random_tensor;

constexpr int64_t kNumRows = 64;
constexpr int64_t kBatchSizes[] = {7, 64};  // against 1
constexpr DType kDTypes[] = {DType::f32, DType::bf16};

// The batch-invariant registries: every cpu variant this CPU runs (f32 GEMMs asked for on OpenBLAS) and
// level 0 (ref).
std::vector<KernelRegistry> invariant_registries() {
  std::vector<KernelRegistry> registries;
  registries.emplace_back(KernelConfig{.optimization_level = 0, .batch_invariant = true});
  const KernelRegistry probe;
  for (KernelVariant v : {KernelVariant::cpu_generic, KernelVariant::cpu_avx2, KernelVariant::cpu_avx512})
    if (probe.can_run(v))
      registries.emplace_back(
          KernelConfig{.force_variant = v, .f32_gemm = GemmLibrary::openblas, .batch_invariant = true});
  return registries;
}

std::string name_of(const KernelRegistry& registry, DType dtype) {
  return fmt::format("{} {}", kernel_variant_name(registry.variant(KernelOp::rmsnorm, dtype)), dtype_name(dtype));
}

// Rows `rows` of x (along dim 0) copied into a new contiguous tensor.
Tensor gather_rows(TensorView x, const std::vector<int64_t>& rows) {
  Shape shape = x.shape();
  shape[0] = int64_t(rows.size());
  Tensor out(shape, x.dtype());
  for (size_t j = 0; j < rows.size(); ++j) copy_convert(x.slice(0, rows[j], 1), out.view().slice(0, int64_t(j), 1));
  return out;
}

// The first element where a and b (contiguous, same shape and dtype) differ bitwise, along dim 0, or -1.
int64_t first_differing_row(TensorView a, TensorView b) {
  const size_t row_bytes = size_t(a.numel() / std::max<int64_t>(1, a.size(0))) * a.element_size();
  for (int64_t r = 0; r < a.size(0); ++r)
    if (std::memcmp(static_cast<const char*>(a.raw()) + size_t(r) * row_bytes,
                    static_cast<const char*>(b.raw()) + size_t(r) * row_bytes, row_bytes) != 0)
      return r;
  return -1;
}

// Per-row input tensors, moved into a vector (a Tensor is move-only).
template <class... Ts>
std::vector<Tensor> tensors(Ts&&... ts) {
  std::vector<Tensor> v;
  (v.push_back(std::forward<Ts>(ts)), ...);
  return v;
}

// An op on a batch of rows: per-row inputs (dim 0 = the rows) in, per-row outputs out.
using RowOp = std::function<std::vector<Tensor>(const std::vector<Tensor>& inputs)>;

// Runs `op` on each row of the pool alone, then on shuffled batches of 7 and of 64 rows, and expects
// every output row of the batches to equal the row's output alone, bit for bit.
void expect_rows_batch_invariant(const std::string& what, const std::vector<Tensor>& pool, const RowOp& op) {
  SCOPED_TRACE(what);
  std::vector<int64_t> order(kNumRows);
  std::iota(order.begin(), order.end(), 0);
  auto run_rows = [&](const std::vector<int64_t>& rows) {
    std::vector<Tensor> inputs;
    for (const Tensor& x : pool) inputs.push_back(gather_rows(x, rows));
    return op(inputs);
  };
  // alone[o]: output o of every row, each computed in a batch of one.
  std::vector<Tensor> alone;
  for (int64_t r = 0; r < kNumRows; ++r) {
    const std::vector<Tensor> out = run_rows({r});
    if (alone.empty())
      for (const Tensor& o : out) {
        Shape shape = o.shape();
        shape[0] = kNumRows;
        alone.emplace_back(shape, o.dtype());
      }
    for (size_t o = 0; o < out.size(); ++o) copy_convert(out[o], alone[o].view().slice(0, r, 1));
  }
  std::shuffle(order.begin(), order.end(), std::mt19937_64(17));
  for (int64_t batch_size : kBatchSizes) {
    for (int64_t start = 0; start < kNumRows; start += batch_size) {
      const std::vector<int64_t> rows(order.begin() + start, order.begin() + std::min(kNumRows, start + batch_size));
      const std::vector<Tensor> out = run_rows(rows);
      for (size_t o = 0; o < out.size(); ++o) {
        const int64_t r = first_differing_row(out[o], gather_rows(alone[o], rows));
        EXPECT_EQ(r, -1) << "output " << o << ": row " << (r < 0 ? -1 : rows[size_t(r)]) << " at position " << r
                         << " of a batch of " << rows.size() << " differs from the same row computed alone";
      }
    }
  }
}

TEST(BatchInvariance, RowWiseOpsGiveTheSameRowsInBatchesOf1And7And64) {
  constexpr int64_t C = 200, V = 300, H = 4, D = 50, F = 136;
  for (const KernelRegistry& k : invariant_registries()) {
    for (DType dtype : kDTypes) {
      const std::string name = name_of(k, dtype);
      const Tensor table_VC = random_tensor({V, C}, dtype, 1), w_C = random_tensor({C}, dtype, 2, 0.5, 1.5);
      expect_rows_batch_invariant(name + " embedding", tensors(random_ids({kNumRows}, DType::i64, 3, V)), [&](const auto& in) {
        Tensor out({in[0].size(0), C}, dtype);
        k.embedding_forward({}, in[0], table_VC, out);
        return tensors(std::move(out));
      });
      expect_rows_batch_invariant(name + " rmsnorm", tensors(random_tensor({kNumRows, C}, dtype, 4, -3.0, 3.0)),
                                  [&](const auto& in) {
                                    Tensor y(in[0].shape(), dtype), rstd({in[0].size(0)}, DType::f32);
                                    RmsNormSaved saved{rstd};
                                    k.rmsnorm_forward({.eps = 1e-6f}, in[0], w_C, y, saved);
                                    return tensors(std::move(y), std::move(rstd));
                                  });
      Tensor positions({kNumRows}, DType::i64);
      for (int64_t n = 0; n < kNumRows; ++n) positions.data<int64_t>()[n] = (n * 37) % 1000;
      expect_rows_batch_invariant(name + " rope", tensors(random_tensor({kNumRows, H, D}, dtype, 5), std::move(positions)),
                                  [&](const auto& in) {
                                    Tensor x = clone(in[0], dtype);
                                    k.rope_forward({.theta = 1e6}, in[1], x);
                                    return tensors(std::move(x));
                                  });
      expect_rows_batch_invariant(
          name + " swiglu", tensors(random_tensor({kNumRows, F}, dtype, 6, -6.0, 6.0), random_tensor({kNumRows, F}, dtype, 7)),
          [&](const auto& in) {
            Tensor h(in[0].shape(), dtype);
            k.swiglu_forward(in[0], in[1], h);
            return tensors(std::move(h));
          });
      expect_rows_batch_invariant(
          name + " logprob",
          tensors(random_tensor({kNumRows, 1000}, dtype, 8, -10.0, 10.0), random_ids({kNumRows}, DType::i64, 9, 1000)),
          [&](const auto& in) {
            const int64_t N = in[0].size(0);
            Tensor logp({N}, DType::f32), entropy({N}, DType::f32), lse({N}, DType::f32);
            k.logprob_forward({.temperature = 0.7}, in[0], in[1], logp, entropy, lse);
            return tensors(std::move(logp), std::move(entropy), std::move(lse));
          });
    }
  }
}

// The linear layers of one decoder block and the head, at sizes where OpenBLAS would take its
// small-matrix path for few rows and its blocked one for many.
TEST(BatchInvariance, LinearLayersGiveTheSameRowsInBatchesOf1And7And64) {
  struct Layer {
    const char* name;
    int64_t I, O;
    enum class Kind { plain, with_bias, residual } kind;
  };
  constexpr Layer kLayers[] = {{"qkv", 200, 400, Layer::Kind::with_bias},
                               {"o", 200, 200, Layer::Kind::residual},
                               {"gate_up", 200, 544, Layer::Kind::plain},
                               {"down", 272, 200, Layer::Kind::residual},
                               {"lm_head", 200, 1000, Layer::Kind::plain}};
  for (const KernelRegistry& k : invariant_registries()) {
    for (DType dtype : kDTypes) {
      for (const Layer& layer : kLayers) {
        const Tensor w_OI = random_tensor({layer.O, layer.I}, dtype, 11, -0.1, 0.1);
        const Tensor b_O = random_tensor({layer.O}, dtype, 12);
        std::vector<Tensor> pool = tensors(random_tensor({kNumRows, layer.I}, dtype, 13));
        if (layer.kind == Layer::Kind::residual) pool.push_back(random_tensor({kNumRows, layer.O}, dtype, 14));
        expect_rows_batch_invariant(name_of(k, dtype) + " linear " + layer.name, pool, [&](const auto& in) {
          Tensor y({in[0].size(0), layer.O}, dtype);
          if (layer.kind == Layer::Kind::residual)
            k.linear_residual_forward(in[0], w_OI, in[1], y);
          else
            k.linear_forward(in[0], w_OI, layer.kind == Layer::Kind::with_bias ? b_O.view() : TensorView(), y);
          return tensors(std::move(y));
        });
      }
    }
  }
}

TEST(BatchInvariance, RegistryRunsBothDtypesOnTheOrderedGemmWhateverF32GemmSays) {
  for (GemmLibrary asked : {GemmLibrary::onednn, GemmLibrary::openblas, GemmLibrary::ordered}) {
    const KernelRegistry invariant(KernelConfig{.f32_gemm = asked, .batch_invariant = true});
    const KernelRegistry ordered(KernelConfig{.f32_gemm = GemmLibrary::ordered});
    EXPECT_TRUE(invariant.batch_invariant());
    for (DType dtype : kDTypes) {
      EXPECT_EQ(invariant.gemm_library(dtype), GemmLibrary::ordered) << gemm_library_name(asked);
      EXPECT_EQ(invariant.table(KernelOp::linear, dtype).linear_forward,
                ordered.table(KernelOp::linear, DType::f32).linear_forward);
    }
    EXPECT_NE(invariant.describe().find("gemm: f32 on ordered, bf16 on ordered (batch-invariant)"), std::string::npos)
        << invariant.describe();
  }
}

// A decoder block's linear layers on every cpu variant this CPU runs give the same bits: a batch-invariant
// row is also the same row on an AVX2-only CPU as on an AVX-512 one.
TEST(BatchInvariance, LinearLayersGiveTheSameBitsOnEveryVariant) {
  const std::vector<KernelRegistry> registries = invariant_registries();
  ASSERT_GE(registries.size(), 2u);  // ref, and cpu_generic at least
  for (DType dtype : kDTypes) {
    const Tensor x = random_tensor({kNumRows, 200}, dtype, 21), w = random_tensor({300, 200}, dtype, 22, -0.1, 0.1);
    const Tensor b = random_tensor({300}, dtype, 23), resid = random_tensor({kNumRows, 300}, dtype, 24);
    const Tensor first_y({kNumRows, 300}, dtype), first_r({kNumRows, 300}, dtype);
    for (size_t i = 1; i < registries.size(); ++i) {  // [0] is ref (f64-accurate, another order)
      const KernelRegistry& k = registries[i];
      const Tensor y({kNumRows, 300}, dtype), r({kNumRows, 300}, dtype);
      k.linear_forward(x, w, b, y);
      k.linear_residual_forward(x, w, resid, r);
      if (i == 1) {
        copy_convert(y, first_y);
        copy_convert(r, first_r);
        continue;
      }
      const std::string what = name_of(k, dtype) + " vs " + name_of(registries[1], dtype);
      EXPECT_EQ(first_differing_row(y, first_y), -1) << what << ": linear_forward";
      EXPECT_EQ(first_differing_row(r, first_r), -1) << what << ": linear_residual_forward";
    }
  }
}

// --- paged attention ---------------------------------------------------------------------------------

constexpr int64_t kH = 8, kK = 2, kD = 64, kZ = 16;

// 64 sequences of 1 to 90 cached tokens; every fifth is a prefill chunk of up to 9 queries, the others
// decode one token.
struct SequencePool {
  explicit SequencePool(DType dtype, int64_t H = kH, int64_t K = kK) {
    for (int64_t s = 0; s < kNumRows; ++s) {
      const int64_t context = 1 + (s * 29) % 90;
      sequences.push_back(make_sequence(context, H, K, kD, dtype, 100 + uint64_t(s)));
      calls.push_back({nullptr, context, s % 5 == 0 ? std::min<int64_t>(context, 1 + s % 9) : 1});
    }
    for (int64_t s = 0; s < kNumRows; ++s) calls[size_t(s)].sequence = &sequences[size_t(s)];
  }
  std::vector<LogicalSequence> sequences;
  std::vector<SequenceCall> calls;
};

// Output rows of the given sequences' calls, in one call, laid out with block size Z.
std::vector<Tensor> run_paged(const KernelRegistry& k, const std::vector<SequenceCall>& calls, int64_t Z,
                              uint64_t seed) {
  const PagedBatch b = build_paged_batch(calls, Z, seed);
  k.paged_attention_forward(b.params(), b.q_NHD, b.k_cache_PZKD, b.v_cache_PZKD, b.out_NHD);
  std::vector<Tensor> rows;
  for (size_t s = 0; s < calls.size(); ++s) rows.push_back(clone(b.out_rows(s), b.out_NHD.dtype()));
  return rows;
}

void expect_bitwise_equal(const Tensor& actual, const Tensor& expected, const std::string& what) {
  ASSERT_EQ(actual.shape(), expected.shape()) << what;
  const int64_t r = first_differing_row(actual, expected);
  EXPECT_EQ(r, -1) << what << ": query row " << r << " differs";
}

TEST(BatchInvariance, PagedAttentionGivesTheSameRowsAloneAndInBatchesOf7And64) {
  for (const KernelRegistry& k : invariant_registries()) {
    for (DType dtype : kDTypes) {
      for (const auto& [H, K] : {std::pair<int64_t, int64_t>{kH, kK}, {4, 4}}) {
        SCOPED_TRACE(fmt::format("{} H={} K={}", name_of(k, dtype), H, K));
        const SequencePool pool(dtype, H, K);
        std::vector<Tensor> alone;
        for (int64_t s = 0; s < kNumRows; ++s) alone.push_back(std::move(run_paged(k, {pool.calls[size_t(s)]}, kZ, 1)[0]));
        std::vector<size_t> order(kNumRows);
        std::iota(order.begin(), order.end(), 0);
        std::shuffle(order.begin(), order.end(), std::mt19937_64(5));
        for (int64_t batch_size : kBatchSizes) {
          for (int64_t start = 0; start < kNumRows; start += batch_size) {
            std::vector<SequenceCall> calls;
            const int64_t end = std::min(kNumRows, start + batch_size);
            for (int64_t j = start; j < end; ++j) calls.push_back(pool.calls[order[size_t(j)]]);
            const std::vector<Tensor> out = run_paged(k, calls, kZ, uint64_t(batch_size + start));
            for (int64_t j = start; j < end; ++j)
              expect_bitwise_equal(out[size_t(j - start)], alone[order[size_t(j)]],
                                   fmt::format("sequence {} in a batch of {}", order[size_t(j)], calls.size()));
          }
        }
      }
    }
  }
}

// One sequence's 70 positions: as one prefill call, as chunks of 8 (each call also decoding another
// sequence), and token by token; and the whole prefill with block sizes 1 and 5, on 1 and 2 threads.
TEST(BatchInvariance, PagedAttentionGivesTheSameRowsInPrefillChunksAndDecodeSteps) {
  constexpr int64_t T = 70;
  for (const KernelRegistry& k : invariant_registries()) {
    for (DType dtype : kDTypes) {
      SCOPED_TRACE(name_of(k, dtype));
      const LogicalSequence seq = make_sequence(T, kH, kK, kD, dtype, 7);
      const LogicalSequence other = make_sequence(40, kH, kK, kD, dtype, 8);
      const Tensor prefill = std::move(run_paged(k, {{&seq, T, T}}, kZ, 1)[0]);
      for (int64_t t = 0; t < T; ++t)
        expect_bitwise_equal(run_paged(k, {{&seq, t + 1, 1}}, kZ, uint64_t(t))[0],
                             clone(prefill.view().slice(0, t, 1), dtype), fmt::format("decode of position {}", t));
      for (int64_t t0 = 0; t0 < T; t0 += 8) {
        const int64_t len = std::min<int64_t>(8, T - t0);
        const Tensor chunk = std::move(run_paged(k, {{&other, 40, 1}, {&seq, t0 + len, len}}, kZ, uint64_t(t0))[1]);
        expect_bitwise_equal(chunk, clone(prefill.view().slice(0, t0, len), dtype), fmt::format("chunk at {}", t0));
      }
      for (int64_t Z : {1, 5}) expect_bitwise_equal(run_paged(k, {{&seq, T, T}}, Z, 3)[0], prefill, fmt::format("Z={}", Z));
      const int threads = omp_get_max_threads();
      omp_set_num_threads(1);
      const Tensor one_thread = std::move(run_paged(k, {{&seq, T, T}, {&other, 40, 40}}, kZ, 4)[0]);
      omp_set_num_threads(threads);
      expect_bitwise_equal(one_thread, prefill, "one thread");
    }
  }
}

}  // namespace
}  // namespace rf::kernels

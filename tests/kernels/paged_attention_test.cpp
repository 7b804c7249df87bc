// Paged attention and the KV-cache write: the ref kernel against the causal attention ref on the
// same keys gathered into a contiguous row (f64), every cpu variant this machine runs against the ref
// (f32 and bf16) over mixed calls (several sequences of different context lengths, decode steps,
// prefill chunks starting mid-sequence, whole prefills, a sequence with no queries; block sizes 16,
// 5 and 1, contexts that are and are not multiples of the block size; MHA, GQA 4 and 8, MQA; odd head
// dims; strided queries and outputs with sentinels; the optional lse, also through a transposed view),
// the cache write (cpu bitwise equal to ref, padding rows skipped, keys and values sliced from a fused
// qkv buffer), and argument errors.
// The bitwise batch-invariance tests are in batch_invariance_test.cpp.
// Legend: T positions, N query rows, S sequences, W block-table width, P cache blocks, Z tokens per
// block, H query heads, K kv heads, D head dim.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "kernels/fast_variants.h"
#include "kernels/kernel_registry.h"
#include "kernels/paged_batch.h"
#include "support/test_support.h"

namespace rf::kernels {
namespace {

using rf::testing::expect_close;
using rf::testing::GuardedTensor;
using rf::testing::Layout;
using rf::testing::random_tensor;

struct PagedCase {
  std::string name;
  int64_t Z, H, K, D;
  std::vector<std::pair<int64_t, int64_t>> context_and_q_len;  // per sequence
  double softmax_scale = 0.0;
};

const std::vector<PagedCase>& paged_cases() {
  static const std::vector<PagedCase> kCases = {
      // Decode steps at contexts 1, 16 (a full block), 17, 100; a prefill chunk of 8 ending at 40 and one
      // of 3 ending on a block edge; a whole prefill of 33; a sequence with no queries this step.
      {"mixed_z16_gqa4", 16, 8, 2, 64, {{1, 1}, {17, 1}, {40, 8}, {33, 33}, {100, 1}, {16, 3}, {5, 0}}},
      {"z1_mha_d13", 1, 3, 3, 13, {{5, 5}, {9, 2}, {1, 1}, {30, 1}}},
      {"z16_gqa4_d128", 16, 16, 4, 128, {{70, 1}, {45, 12}, {129, 1}, {64, 64}}, 0.05},
      {"z5_mqa_d7", 5, 4, 1, 7, {{12, 4}, {23, 23}, {6, 1}}},
      // G = 8: a task takes 2 queries (16 rows), the second seeing one position more than the first.
      {"z16_group8_d80", 16, 8, 1, 80, {{50, 20}, {31, 1}, {2, 2}}},
  };
  return kCases;
}

struct CaseInputs {
  std::vector<LogicalSequence> sequences;
  PagedBatch batch;
};

CaseInputs make_case(const PagedCase& c, DType dtype) {
  CaseInputs in;
  in.sequences.reserve(c.context_and_q_len.size());
  for (size_t s = 0; s < c.context_and_q_len.size(); ++s)
    in.sequences.push_back(make_sequence(std::max<int64_t>(1, c.context_and_q_len[s].first), c.H, c.K, c.D, dtype, 10 + s));
  std::vector<SequenceCall> calls;
  for (size_t s = 0; s < c.context_and_q_len.size(); ++s)
    calls.push_back({&in.sequences[s], c.context_and_q_len[s].first, c.context_and_q_len[s].second});
  in.batch = build_paged_batch(calls, c.Z, 7);
  return in;
}

double max_abs(TensorView x) { return rf::testing::max_abs_diff(x, Tensor(x.shape(), DType::f64)); }

// The ref is the definition itself: check it against the causal attention ref on each sequence's
// keys gathered into one contiguous row, with its queries at the last q_len positions.
TEST(PagedAttentionRef, MatchesCausalAttentionOnTheGatheredSequence) {
  for (const PagedCase& c : paged_cases()) {
    SCOPED_TRACE(c.name);
    const CaseInputs in = make_case(c, DType::f64);
    const PagedBatch& b = in.batch;
    PagedAttentionParams params = b.params(c.softmax_scale);
    const Tensor lse_NH({b.q_NHD.size(0), c.H}, DType::f64);
    params.lse_NH = lse_NH;
    ref::table().paged_attention_forward(params, b.q_NHD, b.k_cache_PZKD, b.v_cache_PZKD, b.out_NHD);
    for (size_t s = 0; s < c.context_and_q_len.size(); ++s) {
      const auto [T, q_len] = c.context_and_q_len[s];
      if (q_len == 0) continue;
      const LogicalSequence& seq = in.sequences[s];
      const Tensor q({1, T, c.H, c.D}, DType::f64), out({1, T, c.H, c.D}, DType::f64), lse({1, c.H, T}, DType::f64);
      copy_convert(seq.q_THD.view().slice(0, T - q_len, q_len), q.view().slice(1, T - q_len, q_len).reshape({q_len, c.H, c.D}));
      const TensorView k = seq.k_TKD.view().slice(0, 0, T).reshape({1, T, c.K, c.D});
      const TensorView v = seq.v_TKD.view().slice(0, 0, T).reshape({1, T, c.K, c.D});
      ref::table().attention_forward({.softmax_scale = c.softmax_scale}, q, k, v, out, lse);
      expect_close(b.out_rows(s), out.view().slice(1, T - q_len, q_len).reshape({q_len, c.H, c.D}), 1e-12, 1e-12,
                   "sequence " + std::to_string(s));
      expect_close(lse_NH.view().slice(0, b.query_start[s], q_len),
                   lse.view().select(0, 0).slice(1, T - q_len, q_len).transpose(0, 1), 1e-12, 1e-12,
                   "lse of sequence " + std::to_string(s));
    }
  }
}

// f32: the kernel sums in f32 and the ref in f64. bf16: the same f32 arithmetic on the same bf16
// inputs, and one rounding of out (2^-8 relative), so next to the rtol a slack of 2^-8 of the largest
// output element for outputs near zero.
void check_against_ref(const PagedCase& c, DType dtype) {
  SCOPED_TRACE(c.name + " " + std::string(dtype_name(dtype)));
  const CaseInputs in = make_case(c, dtype);
  const PagedBatch& b = in.batch;
  PagedAttentionParams params = b.params(c.softmax_scale);
  const GuardedTensor q = rf::testing::guarded_copy(b.q_NHD, Layout::strided);
  const Tensor expected(b.out_NHD.shape(), dtype);
  // lse: f32, written through a transposed view (the training attention's [H, T] layout).
  const int64_t N = b.q_NHD.size(0);
  const Tensor expected_lse_NH({N, c.H}, DType::f32), lse_HN({c.H, N}, DType::f32);
  params.lse_NH = expected_lse_NH;
  ref::table().paged_attention_forward(params, q, b.k_cache_PZKD, b.v_cache_PZKD, expected);
  params.lse_NH = lse_HN.view().transpose(0, 1);
  const double atol = dtype == DType::bf16 ? std::ldexp(max_abs(expected), -8) : 1e-5;
  const double rtol = dtype == DType::bf16 ? 8e-3 : 1e-5;
  for (const KernelTable* table : fast_tables()) {
    SCOPED_TRACE(std::string(kernel_variant_name(table->variant)));
    const GuardedTensor out = rf::testing::guarded_copy(b.out_NHD, Layout::strided);  // junk
    table->paged_attention_forward(params, q, b.k_cache_PZKD, b.v_cache_PZKD, out);
    expect_close(out, expected, rtol, atol, "out");
    out.expect_sentinels_intact("out");
    expect_close(lse_HN.view().transpose(0, 1), expected_lse_NH, 1e-5, 1e-5, "lse");
  }
}

TEST(PagedAttentionCpu, MatchesRefInF32AndBf16) {
  for (DType dtype : {DType::f32, DType::bf16})
    for (const PagedCase& c : paged_cases()) check_against_ref(c, dtype);
}

// With all keys equal every visible position scores the same, so out is the mean of the values over
// positions 0..p: an independent check of the causal range on both kernels.
TEST(PagedAttention, EqualKeysAverageTheVisibleValues) {
  const int64_t T = 37, H = 4, K = 2, D = 8;
  LogicalSequence seq = make_sequence(T, H, K, D, DType::f32, 3);
  for (int64_t i = 0; i < seq.k_TKD.numel(); ++i) seq.k_TKD.data<float>()[i] = 0.5f;
  const PagedBatch b = build_paged_batch({{&seq, T, 9}}, 16, 5);
  for (const KernelTable* table : {&ref::table(), fast_tables().back()}) {
    table->paged_attention_forward(b.params(), b.q_NHD, b.k_cache_PZKD, b.v_cache_PZKD, b.out_NHD);
    for (int64_t i = 0; i < 9; ++i) {
      const int64_t p = T - 9 + i;
      for (int64_t h = 0; h < H; ++h)
        for (int64_t d = 0; d < D; ++d) {
          double mean = 0;
          for (int64_t t = 0; t <= p; ++t) mean += seq.v_TKD.at<float>({t, h / 2, d});
          EXPECT_NEAR(b.out_NHD.at<float>({i, h, d}), mean / double(p + 1), 1e-5)
              << kernel_variant_name(table->variant) << " query " << i << " head " << h;
        }
    }
  }
}

TEST(KvCacheWrite, CpuMatchesRefAndSkipsPaddingRows) {
  const int64_t N = 9, H = 4, K = 2, D = 24, P = 5, Z = 4;
  for (DType dtype : {DType::f32, DType::bf16}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    // k and v as slices of a fused qkv buffer, as the attention block produces them.
    const Tensor qkv = random_tensor({N, H + 2 * K, D}, dtype, 1);
    const TensorView k = qkv.view().slice(1, H, K), v = qkv.view().slice(1, H + K, K);
    for (DType id_dtype : {DType::i32, DType::i64}) {
      const Tensor slots({N}, id_dtype);
      const int64_t slot_values[N] = {3, 17, -1, 0, 8, 19, -1, 12, 5};
      for (int64_t n = 0; n < N; ++n)
        if (id_dtype == DType::i32)
          slots.data<int32_t>()[n] = int32_t(slot_values[n]);
        else
          slots.data<int64_t>()[n] = slot_values[n];
      const Tensor k_ref = random_tensor({P, Z, K, D}, dtype, 2), v_ref = random_tensor({P, Z, K, D}, dtype, 3);
      const Tensor k_initial = clone(k_ref, dtype);
      ref::table().kv_cache_write(k, v, slots, k_ref, v_ref);
      for (int64_t slot = 0; slot < P * Z; ++slot) {
        const int64_t* hit = std::find(slot_values, slot_values + N, slot);
        const TensorView written = k_ref.view().reshape({P * Z, K, D}).slice(0, slot, 1);
        const TensorView expected = hit == slot_values + N ? k_initial.view().reshape({P * Z, K, D}).slice(0, slot, 1)
                                                            : k.slice(0, hit - slot_values, 1);
        expect_close(written, expected, 0, 0, "k_cache slot " + std::to_string(slot));
      }
      for (const KernelTable* table : fast_tables()) {
        const Tensor k_cache = random_tensor({P, Z, K, D}, dtype, 2), v_cache = random_tensor({P, Z, K, D}, dtype, 3);
        table->kv_cache_write(k, v, slots, k_cache, v_cache);
        EXPECT_EQ(std::memcmp(k_cache.view().raw(), k_ref.view().raw(), size_t(k_ref.numel()) * dtype_size(dtype)), 0);
        EXPECT_EQ(std::memcmp(v_cache.view().raw(), v_ref.view().raw(), size_t(v_ref.numel()) * dtype_size(dtype)), 0);
      }
    }
  }
}

TEST(PagedAttention, RejectsBadCallsNamingTheProblem) {
  const LogicalSequence seq = make_sequence(20, 4, 2, 8, DType::f32, 1);
  for (const KernelTable* table : {&ref::table(), fast_tables().back()}) {
    auto call = [&](PagedBatch& b) {
      table->paged_attention_forward(b.params(), b.q_NHD, b.k_cache_PZKD, b.v_cache_PZKD, b.out_NHD);
    };
    {
      PagedBatch b = build_paged_batch({{&seq, 20, 2}}, 16, 1);
      b.block_table_SW.data<int32_t>()[1] = int32_t(b.k_cache_PZKD.size(0));
      rf::testing::expect_error_containing([&] { call(b); }, "is not a block of the cache");
    }
    {
      PagedBatch b = build_paged_batch({{&seq, 20, 2}}, 16, 1);
      b.context_len[0] = 1;
      rf::testing::expect_error_containing([&] { call(b); }, "has 2 queries but a context of only 1");
    }
    {
      PagedBatch b = build_paged_batch({{&seq, 20, 2}}, 16, 1);
      b.query_start.back() = 1;
      rf::testing::expect_error_containing([&] { call(b); }, "query_start must run from 0 to N");
    }
    {
      PagedBatch b = build_paged_batch({{&seq, 20, 2}}, 16, 1);
      b.context_len[0] = int32_t(b.block_table_SW.size(1) * 16 + 1);
      rf::testing::expect_error_containing([&] { call(b); }, "the table has");
    }
    {
      const Tensor k({1, 2, 8}, DType::f32), v({1, 2, 8}, DType::f32), slots({1}, DType::i32);
      const Tensor cache({2, 4, 2, 8}, DType::f32);
      slots.data<int32_t>()[0] = 8;
      rf::testing::expect_error_containing([&] { table->kv_cache_write(k, v, slots, cache, cache); },
                                           "past the cache's 8 slots");
    }
  }
}

}  // namespace
}  // namespace rf::kernels

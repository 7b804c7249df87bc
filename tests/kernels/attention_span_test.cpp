// Span-mode attention and the ring-attention merge (context parallel's kernels, attention.h): the ref
// span mode against a hand-derivable case, every cpu variant this machine runs against the ref (f32
// and bf16; GQA, MQA, group 8, spans of uneven lengths on both sides of the cpu kernel's 64-key /
// 64-lane tiles, Tk above and below Tq, rows in no span, spans with no queries or no keys, k and v as
// strided slices, the backward with and without its key split), attention_merge cpu against ref, the
// blockwise identity (causal attention split into key blocks, each run as causal-with-documents or
// span mode and merged, equals the whole attention), finite differences of the blockwise (ring)
// attention's gradients, thread-count independence, and argument errors.
// Legend: B batch, T sequence (Tq of q, Tk of k and v), H query heads, K kv heads, D head dim.

#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "core/element_access.h"
#include "kernels/attention_thread_counts.h"
#include "kernels/fast_variants.h"
#include "kernels/kernel_registry.h"
#include "support/test_support.h"

namespace rf::kernels {
namespace {

using rf::testing::expect_close;
using rf::testing::expect_error_containing;
using rf::testing::GuardedTensor;
using rf::testing::Layout;
using rf::testing::random_tensor;

constexpr double kMinusInf = -std::numeric_limits<double>::infinity();

struct SpanCase {
  std::string name;
  int64_t B, Tq, Tk, H, K, D;
  std::vector<AttentionSpan> spans;  // on the flattened axes: q b*Tq + t, k b*Tk + s
};

// The cpu kernel tiles keys by 64 and packs a span's (query, head) rows in panels of 64 lanes padded
// to 16; with fewer than 8 (span, kv head) pairs it splits each span's keys into chunks of 64-key
// tiles ("split": the chunks' dQ are summed at the end).
const std::vector<SpanCase>& span_cases() {
  static const std::vector<SpanCase> kCases = {
      {"one_query_one_key", 1, 1, 1, 1, 1, 4, {{0, 1, 0, 1}}},
      // Row 0: rows 0-2 and 41-49 in no span, a span with no keys; row 1: a span with no queries.
      {"gqa_uneven_tk_above", 2, 70, 150, 4, 2, 12,
       {{3, 40, 0, 97}, {40, 41, 100, 100}, {50, 70, 110, 150}, {70, 70, 150, 160}, {70, 135, 160, 290}}},
      {"mqa_split_tk_below", 1, 200, 90, 4, 1, 16, {{0, 130, 0, 65}, {130, 200, 66, 90}}},
      {"group8_d7", 2, 33, 67, 8, 1, 7, {{1, 32, 2, 66}, {33 + 5, 33 + 33, 67 + 0, 67 + 67}}},
      {"mha_d64_full_tiles", 1, 128, 128, 2, 2, 64, {{0, 64, 0, 64}, {64, 128, 64, 128}}},
      {"d128_T66", 1, 66, 129, 2, 1, 128, {{0, 66, 0, 129}}},
      {"owned_many_spans", 4, 20, 30, 4, 2, 9,
       {{0, 20, 0, 30}, {20, 30, 30, 31}, {35, 40, 40, 60}, {40, 60, 60, 90}, {60, 79, 91, 120}}},
  };
  return kCases;
}

struct SpanInputs {
  Tensor q, kv;  // kv: [B, Tk, 2K + 1, D], k and v are strided slices of it
  TensorView k, v;
};

SpanInputs make_inputs(const SpanCase& c, DType dtype, uint64_t seed) {
  SpanInputs in{random_tensor({c.B, c.Tq, c.H, c.D}, dtype, seed, -2.0, 2.0),
                random_tensor({c.B, c.Tk, 2 * c.K + 1, c.D}, dtype, seed + 1, -2.0, 2.0),
                {},
                {}};
  in.k = in.kv.view().slice(2, 0, c.K);
  in.v = in.kv.view().slice(2, c.K + 1, c.K);
  return in;
}

// An output buffer prefilled with junk, so a kernel that skips an element fails the comparison.
GuardedTensor junk_output(Shape shape, DType dtype, Layout layout, uint64_t seed) {
  return rf::testing::guarded_copy(random_tensor(shape, dtype, seed, 5.0, 9.0), layout);
}

// lse compared where finite; -inf (a row that saw no key) must be -inf on both sides.
void expect_lse_close(TensorView actual, TensorView expected, double tol, const std::string& what) {
  const Tensor a = clone(actual, DType::f64), e = clone(expected, DType::f64);
  int64_t mismatched = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    double& x = a.data<double>()[i];
    double& y = e.data<double>()[i];
    if ((x == kMinusInf) != (y == kMinusInf)) ++mismatched;
    if (x == kMinusInf || y == kMinusInf) x = y = 0.0;
  }
  EXPECT_EQ(mismatched, 0) << what << ": rows at -inf on one side only";
  expect_close(a, e, tol, tol, what);
}

// As attention_test.cpp's: f32 differs from the f64 ref by f32 sums; bf16 by P and dS rounded to
// bf16 before their GEMMs, so an absolute slack of 2^-6 of the tensor's largest element.
void expect_close_for(DType dtype, TensorView actual, TensorView expected, const std::string& what) {
  if (dtype == DType::bf16)
    expect_close(actual, expected, 1e-2, std::ldexp(rf::testing::max_abs(expected), -6), what);
  else
    expect_close(actual, expected, 1e-5, 1e-5, what);
}

void check_span_case_against_ref(const SpanCase& c, DType dtype) {
  SCOPED_TRACE(c.name + " " + std::string(dtype_name(dtype)));
  const SpanInputs in = make_inputs(c, dtype, 11);
  const AttentionParams params{.spans = c.spans};
  const Shape q_shape{c.B, c.Tq, c.H, c.D}, kv_shape{c.B, c.Tk, c.K, c.D}, lse_shape{c.B, c.H, c.Tq};
  const Tensor out_ref(q_shape, dtype), lse_ref(lse_shape, DType::f32);
  ref::table().attention_forward(params, in.q, in.k, in.v, out_ref, lse_ref);
  const Tensor dout = random_tensor(q_shape, dtype, 12);
  const Tensor dq_ref(q_shape, dtype), dk_ref(kv_shape, dtype), dv_ref(kv_shape, dtype);
  ref::table().attention_backward(params, in.q, in.k, in.v, out_ref, lse_ref, dout, dq_ref, dk_ref, dv_ref);

  for (const KernelTable* table : fast_tables()) {
    SCOPED_TRACE(std::string(kernel_variant_name(table->variant)));
    const GuardedTensor out = junk_output(q_shape, dtype, Layout::strided, 6);
    const GuardedTensor lse = junk_output(lse_shape, DType::f32, Layout::strided, 7);
    table->attention_forward(params, in.q, in.k, in.v, out, lse);
    expect_close_for(dtype, out, out_ref, "out");
    expect_lse_close(lse, lse_ref, 1e-5, "lse");
    const GuardedTensor dq = junk_output(q_shape, dtype, Layout::strided, 8);
    const GuardedTensor dk = junk_output(kv_shape, dtype, Layout::strided, 9);
    const GuardedTensor dv = junk_output(kv_shape, dtype, Layout::strided, 10);
    table->attention_backward(params, in.q, in.k, in.v, out_ref, lse_ref, dout, dq, dk, dv);
    expect_close_for(dtype, dq, dq_ref, "dq");
    expect_close_for(dtype, dk, dk_ref, "dk");
    expect_close_for(dtype, dv, dv_ref, "dv");
    for (const GuardedTensor* x : {&out, &lse, &dq, &dk, &dv}) x->expect_sentinels_intact("output");
  }
}

TEST(AttentionSpanCpu, MatchesRefF32) {
  for (const SpanCase& c : span_cases()) check_span_case_against_ref(c, DType::f32);
}

TEST(AttentionSpanCpu, MatchesRefBf16) {
  for (const SpanCase& c : span_cases()) check_span_case_against_ref(c, DType::bf16);
}

// With q = 0 every key of a span scores 0: out is the mean of v over the span's keys and lse =
// log(number of keys); rows in no span (or in a span without keys) get out 0, lse -inf, and in the
// backward keys no query sees get dk = dv = 0.
TEST(AttentionSpanRef, ZeroQueriesAverageTheSpansKeys) {
  const SpanCase c{"uniform", 2, 5, 4, 2, 1, 3, {{1, 3, 0, 3}, {3, 4, 4, 4}, {6, 10, 5, 7}}};
  const Tensor q({c.B, c.Tq, c.H, c.D}, DType::f64);
  const Tensor k = random_tensor({c.B, c.Tk, c.K, c.D}, DType::f64, 21);
  const Tensor v = random_tensor({c.B, c.Tk, c.K, c.D}, DType::f64, 22);
  const Tensor out = random_tensor({c.B, c.Tq, c.H, c.D}, DType::f64, 23);
  const Tensor lse = random_tensor({c.B, c.H, c.Tq}, DType::f64, 24);
  const AttentionParams params{.spans = c.spans};
  ref::table().attention_forward(params, q, k, v, out, lse);
  // Per query token: its keys' flattened range, empty when it sees none.
  const std::pair<int64_t, int64_t> keys_of[10] = {{0, 0}, {0, 3}, {0, 3}, {4, 4}, {0, 0},
                                                   {0, 0}, {5, 7}, {5, 7}, {5, 7}, {5, 7}};
  for (int64_t token = 0; token < c.B * c.Tq; ++token) {
    const int64_t b = token / c.Tq, t = token % c.Tq;
    const auto [k_begin, k_end] = keys_of[token];
    for (int64_t h = 0; h < c.H; ++h) {
      EXPECT_EQ(lse.at<double>({b, h, t}), k_end > k_begin ? std::log(double(k_end - k_begin)) : kMinusInf) << token;
      for (int64_t d = 0; d < c.D; ++d) {
        double mean = 0;
        for (int64_t s = k_begin; s < k_end; ++s) mean += v.at<double>({s / c.Tk, s % c.Tk, 0, d});
        if (k_end > k_begin) mean /= double(k_end - k_begin);
        EXPECT_NEAR(out.at<double>({b, t, h, d}), mean, 1e-14) << token << " " << h << " " << d;
      }
    }
  }
  const Tensor dout = random_tensor({c.B, c.Tq, c.H, c.D}, DType::f64, 25);
  const Tensor dq = random_tensor({c.B, c.Tq, c.H, c.D}, DType::f64, 26);
  const Tensor dk = random_tensor({c.B, c.Tk, c.K, c.D}, DType::f64, 27);
  const Tensor dv = random_tensor({c.B, c.Tk, c.K, c.D}, DType::f64, 28);
  ref::table().attention_backward(params, q, k, v, out, lse, dout, dq, dk, dv);
  for (int64_t d = 0; d < c.D; ++d) {
    EXPECT_EQ(dq.at<double>({0, 0, 1, d}), 0.0);  // query 0: in no span
    EXPECT_EQ(dk.at<double>({0, 3, 0, d}), 0.0);  // key 3: in no span
    EXPECT_EQ(dv.at<double>({1, 0, 0, d}), 0.0);  // key 4: in a span without queries
    EXPECT_NE(dv.at<double>({0, 2, 0, d}), 0.0);  // key 2: seen by queries 1 and 2
  }
}

// ---------------------------------------------------------------------------------------------
// attention_merge

struct MergeInputs {
  Tensor part_out, part_lse, acc_out, acc_lse;
};

// A part and a running result with some rows at -inf on either side (and both), lse values up to
// 30 apart so one weight underflows in f32.
MergeInputs make_merge_inputs(Shape out_shape, DType dtype, uint64_t seed) {
  const int64_t B = out_shape[0], T = out_shape[1], H = out_shape[2];
  const DType wide = dtype == DType::f64 ? DType::f64 : DType::f32;
  MergeInputs m{random_tensor(out_shape, dtype, seed), random_tensor({B, H, T}, wide, seed + 1, -3.0, 3.0),
                random_tensor(out_shape, wide, seed + 2), random_tensor({B, H, T}, wide, seed + 3, -3.0, 3.0)};
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < T; ++t) {
        const int64_t i = (b * H + h) * T + t;
        if (i % 5 == 1 || i % 7 == 3) store_f64(m.part_lse, i, kMinusInf);
        if (i % 5 == 2 || i % 7 == 3) store_f64(m.acc_lse, i, kMinusInf);
        if (i % 11 == 4) store_f64(m.part_lse, i, 30.0);
      }
  return m;
}

TEST(AttentionMergeCpu, MatchesRef) {
  for (DType dtype : {DType::f32, DType::bf16}) {
    for (const Shape& shape : {Shape{1, 1, 1, 1}, Shape{2, 37, 3, 7}, Shape{3, 20, 4, 128}}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " " + shape.to_string());
      const MergeInputs in = make_merge_inputs(shape, dtype, 41);
      const Tensor out_ref = clone(in.acc_out, DType::f32), lse_ref = clone(in.acc_lse, DType::f32);
      ref::table().attention_merge(in.part_out, in.part_lse, out_ref, lse_ref);
      for (const KernelTable* table : fast_tables()) {
        SCOPED_TRACE(std::string(kernel_variant_name(table->variant)));
        const Tensor out = clone(in.acc_out, DType::f32), lse = clone(in.acc_lse, DType::f32);
        table->attention_merge(in.part_out, in.part_lse, out, lse);
        // Both read the same inputs; the cpu weights are f32 (a few ulp of the elements).
        expect_close(out, out_ref, 1e-6, 1e-6, "acc_out");
        expect_lse_close(lse, lse_ref, 1e-6, "acc_lse");
      }
    }
  }
}

// The -inf rules, on one (row, head) each: a part at -inf changes nothing, a running row at -inf
// (whose out may be junk, here NaN) takes the part's row, and equal lse values average.
TEST(AttentionMerge, MinusInfinityRowsAndEqualWeights) {
  std::vector<const KernelTable*> tables = fast_tables();
  tables.push_back(&ref::table());
  for (const KernelTable* table : tables) {
    SCOPED_TRACE(std::string(kernel_variant_name(table->variant)));
    const Tensor part_out({1, 1, 3, 2}, DType::f32), part_lse({1, 3, 1}, DType::f32);
    const Tensor acc_out({1, 1, 3, 2}, DType::f32), acc_lse({1, 3, 1}, DType::f32);
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    const float part[3][2] = {{nan, nan}, {1, 2}, {1, 3}}, acc[3][2] = {{4, 5}, {nan, nan}, {3, 5}};
    const float part_l[3] = {-inf, 0.5f, 2.0f}, acc_l[3] = {1.0f, -inf, 2.0f};
    for (int64_t h = 0; h < 3; ++h) {
      for (int64_t d = 0; d < 2; ++d) {
        part_out.at<float>({0, 0, h, d}) = part[h][d];
        acc_out.at<float>({0, 0, h, d}) = acc[h][d];
      }
      part_lse.at<float>({0, h, 0}) = part_l[h];
      acc_lse.at<float>({0, h, 0}) = acc_l[h];
    }
    table->attention_merge(part_out, part_lse, acc_out, acc_lse);
    const float expected[3][2] = {{4, 5}, {1, 2}, {2, 4}};
    const float expected_lse[3] = {1.0f, 0.5f, 2.0f + std::log(2.0f)};
    for (int64_t h = 0; h < 3; ++h) {
      EXPECT_NEAR(acc_lse.at<float>({0, h, 0}), expected_lse[h], 1e-6) << h;
      for (int64_t d = 0; d < 2; ++d) EXPECT_NEAR(acc_out.at<float>({0, 0, h, d}), expected[h][d], 1e-6) << h;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Blockwise (ring) attention: causal attention with its keys split into blocks

// A causal problem over rows of T tokens whose keys are split at `bounds` (0 = b0 < b1 < ... = T),
// run the way context parallel runs it: one causal call whose documents are the blocks (each query
// against the keys of its own block, up to itself), then for each block j but the last one span-mode
// call on that block's keys alone (k and v sliced to Tk = its length) where every later query sees
// all of them; the parts merged into one running result.
struct BlockwiseProblem {
  int64_t B, T, H, K, D;
  std::vector<int64_t> bounds;

  std::vector<int32_t> block_documents() const {
    std::vector<int32_t> cu{0};
    for (int64_t b = 0; b < B; ++b)
      for (size_t j = 1; j < bounds.size(); ++j) cu.push_back(int32_t(b * T + bounds[j]));
    return cu;
  }
  // Block j's span call: per row, queries after the block see all its keys (k index b*Tk + s).
  std::vector<AttentionSpan> block_spans(size_t j) const {
    const int64_t Tk = bounds[j + 1] - bounds[j];
    std::vector<AttentionSpan> spans;
    for (int64_t b = 0; b < B; ++b) spans.push_back({b * T + bounds[j + 1], (b + 1) * T, b * Tk, (b + 1) * Tk});
    return spans;
  }
  TensorView key_block(const TensorView& x_BTKD, size_t j) const {
    return x_BTKD.slice(1, bounds[j], bounds[j + 1] - bounds[j]);
  }
};

// Each block's forward merged into out and lse (f32 running result, f64 for f64 inputs).
void blockwise_forward(const KernelTable& table, const BlockwiseProblem& p, TensorView q, TensorView k,
                       TensorView v, TensorView out_acc, TensorView lse_acc) {
  const DType dtype = q.dtype(), wide = dtype == DType::f64 ? DType::f64 : DType::f32;
  for (int64_t i = 0; i < lse_acc.numel(); ++i) store_f64(lse_acc, i, kMinusInf);
  const std::vector<int32_t> documents = p.block_documents();
  const Tensor part_out(q.shape(), dtype), part_lse({p.B, p.H, p.T}, wide);
  table.attention_forward({.cu_seqlens = documents}, q, k, v, part_out, part_lse);
  table.attention_merge(part_out, part_lse, out_acc, lse_acc);
  for (size_t j = 0; j + 2 < p.bounds.size(); ++j) {
    const std::vector<AttentionSpan> spans = p.block_spans(j);
    table.attention_forward({.spans = spans}, q, p.key_block(k, j), p.key_block(v, j), part_out, part_lse);
    table.attention_merge(part_out, part_lse, out_acc, lse_acc);
  }
}

// sum_XYZW += part_XYZW (rank 4, any strides).
void add_into(TensorView sum, TensorView part) {
  auto offset = [](const TensorView& x, int64_t i, int64_t j, int64_t l, int64_t m) {
    return i * x.stride(0) + j * x.stride(1) + l * x.stride(2) + m * x.stride(3);
  };
  for (int64_t i = 0; i < part.size(0); ++i)
    for (int64_t j = 0; j < part.size(1); ++j)
      for (int64_t l = 0; l < part.size(2); ++l)
        for (int64_t m = 0; m < part.size(3); ++m)
          store_f64(sum, offset(sum, i, j, l, m), load_f64(sum, offset(sum, i, j, l, m)) + load_f64(part, offset(part, i, j, l, m)));
}

// Each block's backward with the merged out and lse, summed: dq over all blocks, dk and dv of each
// key block from the causal call and its span call.
void blockwise_backward(const KernelTable& table, const BlockwiseProblem& p, TensorView q, TensorView k, TensorView v,
                        TensorView out, TensorView lse, TensorView dout, TensorView dq, TensorView dk, TensorView dv) {
  const std::vector<int32_t> documents = p.block_documents();
  table.attention_backward({.cu_seqlens = documents}, q, k, v, out, lse, dout, dq, dk, dv);
  for (size_t j = 0; j + 2 < p.bounds.size(); ++j) {
    const std::vector<AttentionSpan> spans = p.block_spans(j);
    const Tensor dq_j(q.shape(), q.dtype());
    const Tensor dk_j(p.key_block(k, j).shape(), k.dtype()), dv_j(p.key_block(v, j).shape(), v.dtype());
    table.attention_backward({.spans = spans}, q, p.key_block(k, j), p.key_block(v, j), out, lse, dout, dq_j, dk_j,
                             dv_j);
    add_into(dq, dq_j);
    add_into(p.key_block(dk, j), dk_j);
    add_into(p.key_block(dv, j), dv_j);
  }
}

// Merged blocks equal the whole causal attention: ref in f64 to rounding, every cpu variant in f32.
TEST(AttentionBlockwise, MergedBlocksEqualTheWholeAttention) {
  const BlockwiseProblem p{2, 150, 4, 2, 16, {0, 40, 41, 107, 150}};
  const Shape q_shape{p.B, p.T, p.H, p.D}, kv_shape{p.B, p.T, p.K, p.D};
  std::vector<std::pair<const KernelTable*, DType>> runs{{&ref::table(), DType::f64}, {&ref::table(), DType::f32}};
  for (const KernelTable* table : fast_tables()) runs.emplace_back(table, DType::f32);
  for (const auto& [table, dtype] : runs) {
    SCOPED_TRACE(std::string(kernel_variant_name(table->variant)) + " " + std::string(dtype_name(dtype)));
    const DType wide = dtype == DType::f64 ? DType::f64 : DType::f32;
    const Tensor q = random_tensor(q_shape, dtype, 51, -2.0, 2.0), k = random_tensor(kv_shape, dtype, 52, -2.0, 2.0);
    const Tensor v = random_tensor(kv_shape, dtype, 53);
    const Tensor out_full(q_shape, dtype), lse_full({p.B, p.H, p.T}, wide);
    table->attention_forward({}, q, k, v, out_full, lse_full);
    const Tensor out(q_shape, wide), lse({p.B, p.H, p.T}, wide);
    blockwise_forward(*table, p, q, k, v, out, lse);
    // f32: each part is within f32 rounding of its exact value and the merge adds a few ulp.
    const double tol = dtype == DType::f64 ? 1e-12 : 2e-6;
    expect_close(out, out_full, tol, tol, "out");
    expect_close(lse, lse_full, tol, tol, "lse");

    const Tensor dout = random_tensor(q_shape, dtype, 54);
    const Tensor dq_full(q_shape, dtype), dk_full(kv_shape, dtype), dv_full(kv_shape, dtype);
    table->attention_backward({}, q, k, v, out_full, lse_full, dout, dq_full, dk_full, dv_full);
    const Tensor dq(q_shape, dtype), dk(kv_shape, dtype), dv(kv_shape, dtype);
    const Tensor out_in = clone(out, dtype);
    blockwise_backward(*table, p, q, k, v, out_in, lse, dout, dq, dk, dv);
    expect_close(dq, dq_full, tol * 10, tol * 10, "dq");
    expect_close(dk, dk_full, tol * 10, tol * 10, "dk");
    expect_close(dv, dv_full, tol * 10, tol * 10, "dv");
  }
}

// The ring attention's gradients against finite differences of its own loss: L = sum(w * merged
// out) over a causal problem split into three key blocks (uneven), in f64 with the ref kernels; dq, dk,
// dv are the blocks' backwards (each given the merged out and lse) summed.
TEST(AttentionBlockwise, GradientsMatchFiniteDifferences) {
  const BlockwiseProblem p{2, 7, 4, 2, 3, {0, 3, 5, 7}};
  const Shape q_shape{p.B, p.T, p.H, p.D}, kv_shape{p.B, p.T, p.K, p.D};
  const Tensor q = random_tensor(q_shape, DType::f64, 61, -2.0, 2.0);
  const Tensor k = random_tensor(kv_shape, DType::f64, 62, -2.0, 2.0);
  const Tensor v = random_tensor(kv_shape, DType::f64, 63);
  const Tensor w = random_tensor(q_shape, DType::f64, 64);
  const Tensor out(q_shape, DType::f64), lse({p.B, p.H, p.T}, DType::f64);
  auto loss = [&] {
    blockwise_forward(ref::table(), p, q, k, v, out, lse);
    double sum = 0;
    for (int64_t i = 0; i < out.numel(); ++i) sum += out.data<double>()[i] * w.data<double>()[i];
    return sum;
  };
  loss();
  const Tensor dq(q_shape, DType::f64), dk(kv_shape, DType::f64), dv(kv_shape, DType::f64);
  blockwise_backward(ref::table(), p, q, k, v, out, lse, w, dq, dk, dv);
  rf::testing::expect_gradient_matches_fd(loss, q, dq, "dq");
  rf::testing::expect_gradient_matches_fd(loss, k, dk, "dk");
  rf::testing::expect_gradient_matches_fd(loss, v, dv, "dv");
}

// ---------------------------------------------------------------------------------------------
// Threads and errors

// Forward and backward at 1, 2 and 3 threads, bit for bit: MQA with the backward's key split
// (dQ summed over chunks) and GQA with a span per row whose tasks own their dQ.
TEST(AttentionSpanCpu, ResultsDoNotDependOnThreadCount) {
  const SpanCase cases[] = {
      {"mqa_split", 1, 200, 260, 4, 1, 16, {{0, 70, 0, 130}, {75, 200, 131, 260}}},
      {"gqa_owned", 4, 60, 90, 4, 2, 16, {{0, 60, 0, 90}, {60, 120, 90, 180}, {120, 180, 180, 270}, {190, 240, 300, 360}}},
  };
  for (const SpanCase& c : cases) {
    for (DType dtype : {DType::f32, DType::bf16}) {
      SCOPED_TRACE(c.name + " " + std::string(dtype_name(dtype)));
      const SpanInputs in = make_inputs(c, dtype, 71);
      const Tensor dout = random_tensor({c.B, c.Tq, c.H, c.D}, dtype, 72);
      const AttentionParams params{.spans = c.spans};
      for (const KernelTable* table : fast_tables()) {
        SCOPED_TRACE(std::string(kernel_variant_name(table->variant)));
        expect_thread_count_independent(*table, params, in.q, in.k, in.v, dout);
      }
    }
  }
}

TEST(AttentionSpanErrors, RejectsBadSpansAndExclusiveOptions) {
  // B = 2, Tq = 4, Tk = 3: B*Tq = 8, B*Tk = 6.
  const Tensor q({2, 4, 2, 4}, DType::f32), k({2, 3, 1, 4}, DType::f32), v({2, 3, 1, 4}, DType::f32);
  const Tensor out({2, 4, 2, 4}, DType::f32), lse({2, 2, 4}, DType::f32);
  const Tensor positions({8}, DType::i64);
  const std::vector<int32_t> cu_seqlens{0, 8};
  const std::vector<std::pair<std::vector<AttentionSpan>, std::string>> bad_spans = {
      {{{0, 9, 0, 1}}, "inside [0, B*Tq = 8]"},
      {{{0, 1, 2, 1}}, "key range [2, 1)"},
      {{{0, 2, 0, 2}, {1, 3, 2, 3}}, "starts before the previous span ends"},
      {{{2, 4, 2, 3}, {0, 2, 0, 2}}, "starts before the previous span ends"},
      {{{2, 6, 0, 2}}, "crosses the boundary between rows 0 and 1"},
      {{{0, 2, 3, 5}}, "lets queries of row 0 see keys of row 1"},
  };
  std::vector<const KernelTable*> tables = fast_tables();
  tables.push_back(&ref::table());
  for (const KernelTable* table : tables) {
    SCOPED_TRACE(std::string(kernel_variant_name(table->variant)));
    for (const auto& [spans, needle] : bad_spans) {
      const AttentionParams params{.spans = spans};
      expect_error_containing([&] { table->attention_forward(params, q, k, v, out, lse); }, needle);
      expect_error_containing([&] { table->attention_backward(params, q, k, v, out, lse, out, q, k, v); }, needle);
    }
    const std::vector<AttentionSpan> spans{{0, 4, 0, 3}};
    expect_error_containing(
        [&] { table->attention_forward({.cu_seqlens = cu_seqlens, .spans = spans}, q, k, v, out, lse); },
        "spans and cu_seqlens are exclusive");
    const Tensor q_same({2, 3, 2, 4}, DType::f32), out_same({2, 3, 2, 4}, DType::f32), lse_same({2, 2, 3}, DType::f32);
    const AttentionParams with_rope{.rope = AttentionRope{{}, positions}, .spans = spans};
    expect_error_containing([&] { table->attention_forward(with_rope, q, k, v, out, lse); },
                            "spans and fused RoPE are exclusive");
    // Without spans k and v must have q's length.
    expect_error_containing([&] { table->attention_forward({}, q, k, v, out, lse); }, "k_BTKD");
    // The merge: the running result is f32 for bf16 parts.
    const Tensor part_out({2, 4, 2, 4}, DType::bf16), acc_bf16({2, 4, 2, 4}, DType::bf16);
    expect_error_containing([&] { table->attention_merge(part_out, lse, acc_bf16, lse); }, "acc_out_BTHD");
  }
}

}  // namespace
}  // namespace rf::kernels

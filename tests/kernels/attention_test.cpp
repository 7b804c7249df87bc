// Causal GQA attention: the ref kernel against hand-derivable cases and finite differences (f64),
// every cpu variant this machine runs against the ref (f32 and bf16; GQA, MHA, MQA, group sizes up to
// 8, D from 1 to 128, T=1 and T on both sides of the cpu kernel's 64-key / 64-query / 16-lane tile
// edges, packed documents of length 0, 1 and several tiles, q/k/v sliced from a fused qkv buffer,
// padded outputs with sentinels, the backward with and without its key split), packed attention
// against per-document runs (of the same kernel, and of the ref), RoPE fused into the load against
// the unfused composition of ref kernels (and, f32, of the cpu ones), thread-count independence, and
// argument errors.
// Legend: B batch, T sequence, H query heads, K kv heads, D head dim.

#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kernels/attention_thread_counts.h"
#include "kernels/fast_variants.h"
#include "kernels/kernel_registry.h"
#include "support/test_support.h"

namespace rf::kernels {
namespace {

using rf::testing::expect_close;
using rf::testing::GuardedTensor;
using rf::testing::Layout;
using rf::testing::random_tensor;

struct AttentionCase {
  std::string name;
  int64_t B, T, H, K, D;
  std::vector<int32_t> cu_seqlens;
  // strided: q/k/v are slices of one fused [B, T, (H + 2K) * D] buffer, outputs and the other
  // backward inputs have padded rows.
  Layout layout = Layout::contiguous;
  double softmax_scale = 0.0;
};

// The cpu kernel tiles keys by 64 and takes the (query, head) rows of a kv head's group in panels of
// 64 lanes, padded to 16; when B*K < 8 it splits each row into chunks of 64-key blocks ("split": the
// backward's chunks add dQ into private buffers summed at the end), else a task owns a whole row
// ("owned").
const std::vector<AttentionCase>& conformance_cases() {
  static const std::vector<AttentionCase> kCases = {
      {"T1", 1, 1, 1, 1, 4, {}},
      {"T1_group8_d7", 2, 1, 8, 1, 7, {}},
      {"gqa", 2, 7, 6, 2, 5, {}},
      {"gqa_strided", 2, 7, 6, 2, 5, {}, Layout::strided},
      {"mha_strided_scale", 2, 9, 3, 3, 8, {}, Layout::strided, 0.3},
      {"mqa_two_blocks", 1, 37, 4, 1, 16, {}},
      {"odd_d", 1, 11, 2, 1, 13, {}, Layout::strided},
      {"d1_group2", 2, 20, 4, 2, 1, {}},
      {"d7_group4", 1, 33, 8, 2, 7, {}, Layout::strided},
      {"d64_T63", 1, 63, 2, 2, 64, {}},
      {"d64_T64_group2", 1, 64, 4, 2, 64, {}},
      {"d80_T65", 1, 65, 2, 1, 80, {}, Layout::strided},
      {"d128_T66_group2", 1, 66, 2, 1, 128, {}},
      {"group8_T129", 1, 129, 8, 1, 16, {}},
      {"mha_T127_split", 2, 127, 2, 2, 24, {}},
      {"gqa_T130_owned", 4, 130, 4, 2, 9, {}, Layout::strided},
      {"mqa_T200_split4", 1, 200, 2, 1, 20, {}, Layout::strided, 0.15},
      {"packed_one_row", 1, 13, 4, 2, 6, {0, 4, 5, 13}, Layout::strided},
      {"packed_per_row", 2, 6, 2, 1, 5, {0, 2, 6, 9, 12}},
      {"packed_empty_doc", 2, 6, 4, 4, 3, {0, 3, 3, 6, 12, 12}, Layout::strided},
      {"packed_across_blocks", 1, 70, 4, 2, 7, {0, 30, 31, 66, 70}, Layout::strided},
      // Documents of length 0 and 1, and of several key tiles, on both sides of the tile edges.
      {"packed_many_split", 2, 150, 4, 2, 12, {0, 1, 1, 2, 66, 67, 150, 150, 151, 220, 221, 221, 300}, Layout::strided},
      {"packed_many_owned", 4, 90, 2, 2, 8, {0, 1, 65, 66, 90, 90, 154, 155, 180, 181, 182, 270, 271, 360}},
  };
  return kCases;
}

DType lse_dtype(DType dtype) { return dtype == DType::f64 ? DType::f64 : DType::f32; }

// q, k, v of one case: views into a fused qkv buffer (strided) or separate contiguous tensors.
struct QkvInputs {
  Tensor qkv_BTND;  // [B, T, H + 2K, D]
  Tensor q_own, k_own, v_own;
  TensorView q, k, v;
};

QkvInputs make_qkv(const AttentionCase& c, DType dtype, uint64_t seed) {
  QkvInputs in;
  // [-2, 2) makes the softmax peaked enough that a masking or scaling slip shows.
  in.qkv_BTND = random_tensor({c.B, c.T, c.H + 2 * c.K, c.D}, dtype, seed, -2.0, 2.0);
  in.q = in.qkv_BTND.view().slice(2, 0, c.H);
  in.k = in.qkv_BTND.view().slice(2, c.H, c.K);
  in.v = in.qkv_BTND.view().slice(2, c.H + c.K, c.K);
  if (c.layout == Layout::contiguous) {
    in.q_own = clone(in.q, dtype);
    in.k_own = clone(in.k, dtype);
    in.v_own = clone(in.v, dtype);
    in.q = in.q_own;
    in.k = in.k_own;
    in.v = in.v_own;
  }
  return in;
}

// An output buffer prefilled with junk, so a kernel that skips an element fails the comparison.
GuardedTensor junk_output(Shape shape, DType dtype, Layout layout, uint64_t seed) {
  return rf::testing::guarded_copy(random_tensor(shape, dtype, seed, 5.0, 9.0), layout);
}

AttentionParams params_of(const AttentionCase& c) {
  return AttentionParams{.softmax_scale = c.softmax_scale, .cu_seqlens = c.cu_seqlens};
}

struct Tolerance {
  double rtol, atol;
};

double max_abs(TensorView x) { return rf::testing::max_abs_diff(x, Tensor(x.shape(), DType::f64)); }

// f32: both sides see the same inputs and differ only by f32 vs f64 sums.
// bf16: the kernel rounds P and dS to bf16 before their GEMMs (relative error 2^-9 per term) and
// its outputs once (one bf16 ulp, 2^-8 relative). A sum of terms each off by 2^-9 is off by at most
// 2^-9 of the sum of their magnitudes, which cancellation makes larger than the result itself: so
// next to the elementwise rtol an absolute slack of 2^-6 of the tensor's largest element (8x the
// per-term rounding, for sums of magnitude up to 8x that element). A masking or layout slip moves
// elements by a sizeable fraction of that largest one and still fails.
Tolerance tolerance_of(DType dtype, TensorView expected) {
  return dtype == DType::bf16 ? Tolerance{1e-2, std::ldexp(max_abs(expected), -6)} : Tolerance{1e-5, 1e-5};
}

void expect_close_for(DType dtype, TensorView actual, TensorView expected, const std::string& what) {
  const Tolerance tol = tolerance_of(dtype, expected);
  expect_close(actual, expected, tol.rtol, tol.atol, what);
}

void check_case_against_ref(const AttentionCase& c, DType dtype) {
  SCOPED_TRACE(c.name + " " + std::string(dtype_name(dtype)));
  const QkvInputs in = make_qkv(c, dtype, 11);
  const AttentionParams params = params_of(c);
  const Shape q_shape{c.B, c.T, c.H, c.D}, kv_shape{c.B, c.T, c.K, c.D}, lse_shape{c.B, c.H, c.T};

  const GuardedTensor out_ref = junk_output(q_shape, dtype, Layout::contiguous, 1);
  const GuardedTensor lse_ref = junk_output(lse_shape, DType::f32, Layout::contiguous, 2);
  ref::table().attention_forward(params, in.q, in.k, in.v, out_ref, lse_ref);
  // The backward's own inputs, laid out like the case's outputs.
  const GuardedTensor out_in = rf::testing::guarded_copy(out_ref, c.layout);
  const GuardedTensor lse_in = rf::testing::guarded_copy(lse_ref, c.layout);
  const GuardedTensor dout = rf::testing::guarded_copy(random_tensor(q_shape, dtype, 12), c.layout);
  const GuardedTensor dq_ref = junk_output(q_shape, dtype, Layout::contiguous, 3);
  const GuardedTensor dk_ref = junk_output(kv_shape, dtype, Layout::contiguous, 4);
  const GuardedTensor dv_ref = junk_output(kv_shape, dtype, Layout::contiguous, 5);
  ref::table().attention_backward(params, in.q, in.k, in.v, out_in, lse_in, dout, dq_ref, dk_ref, dv_ref);

  for (const KernelTable* table : fast_tables()) {
    SCOPED_TRACE(std::string(kernel_variant_name(table->variant)));
    const GuardedTensor out = junk_output(q_shape, dtype, c.layout, 6);
    const GuardedTensor lse = junk_output(lse_shape, DType::f32, c.layout, 7);
    table->attention_forward(params, in.q, in.k, in.v, out, lse);
    expect_close_for(dtype, out, out_ref, "out");
    // lse is f32 for both dtypes and computed from the same inputs.
    expect_close(lse, lse_ref, 1e-5, 1e-5, "lse");
    out.expect_sentinels_intact("out");
    lse.expect_sentinels_intact("lse");

    const GuardedTensor dq = junk_output(q_shape, dtype, c.layout, 8);
    const GuardedTensor dk = junk_output(kv_shape, dtype, c.layout, 9);
    const GuardedTensor dv = junk_output(kv_shape, dtype, c.layout, 10);
    table->attention_backward(params, in.q, in.k, in.v, out_in, lse_in, dout, dq, dk, dv);
    expect_close_for(dtype, dq, dq_ref, "dq");
    expect_close_for(dtype, dk, dk_ref, "dk");
    expect_close_for(dtype, dv, dv_ref, "dv");
    dq.expect_sentinels_intact("dq");
    dk.expect_sentinels_intact("dk");
    dv.expect_sentinels_intact("dv");
  }
}

TEST(AttentionCpu, MatchesRefF32) {
  for (const AttentionCase& c : conformance_cases()) check_case_against_ref(c, DType::f32);
}

TEST(AttentionCpu, MatchesRefBf16) {
  for (const AttentionCase& c : conformance_cases()) check_case_against_ref(c, DType::bf16);
}

// With q = 0 every visible key scores 0: out is the mean of v over the query's document prefix and
// lse = log(prefix length). Checks the ref's masking and document handling independently.
TEST(AttentionRef, ZeroQueriesAverageTheVisiblePrefix) {
  const AttentionCase c{"uniform", 2, 6, 2, 1, 3, {0, 2, 6, 9, 9, 12}};
  const Tensor q({c.B, c.T, c.H, c.D}, DType::f64);
  const Tensor k = random_tensor({c.B, c.T, c.K, c.D}, DType::f64, 21);
  const Tensor v = random_tensor({c.B, c.T, c.K, c.D}, DType::f64, 22);
  const Tensor out({c.B, c.T, c.H, c.D}, DType::f64), lse({c.B, c.H, c.T}, DType::f64);
  ref::table().attention_forward(params_of(c), q, k, v, out, lse);
  const int64_t doc_start_BT[2][6] = {{0, 0, 2, 2, 2, 2}, {0, 0, 0, 3, 3, 3}};  // row-local
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t t = 0; t < c.T; ++t)
      for (int64_t h = 0; h < c.H; ++h) {
        const int64_t start = doc_start_BT[b][t];
        EXPECT_NEAR(lse.at<double>({b, h, t}), std::log(double(t - start + 1)), 1e-14) << b << " " << t;
        for (int64_t d = 0; d < c.D; ++d) {
          double mean = 0;
          for (int64_t s = start; s <= t; ++s) mean += v.at<double>({b, s, 0, d});
          mean /= double(t - start + 1);
          EXPECT_NEAR(out.at<double>({b, t, h, d}), mean, 1e-14) << b << " " << t << " " << h << " " << d;
        }
      }
}

// loss = sum(out * r): dq, dk, dv of the ref backward (dout = r) at every coordinate, in f64 (with
// RoPE fused: the gradients w.r.t. the un-rotated q and k).
void check_ref_backward_against_fd(const AttentionCase& c, const std::optional<AttentionRope>& rope = {}) {
  SCOPED_TRACE(c.name);
  AttentionParams params = params_of(c);
  params.rope = rope;
  const Tensor q = random_tensor({c.B, c.T, c.H, c.D}, DType::f64, 31, -2.0, 2.0);
  const Tensor k = random_tensor({c.B, c.T, c.K, c.D}, DType::f64, 32, -2.0, 2.0);
  const Tensor v = random_tensor({c.B, c.T, c.K, c.D}, DType::f64, 33);
  const Tensor r = random_tensor({c.B, c.T, c.H, c.D}, DType::f64, 34);
  const Tensor out({c.B, c.T, c.H, c.D}, DType::f64), lse({c.B, c.H, c.T}, DType::f64);
  auto loss = [&] {
    ref::table().attention_forward(params, q, k, v, out, lse);
    double sum = 0;
    for (int64_t i = 0; i < out.numel(); ++i) sum += out.data<double>()[i] * r.data<double>()[i];
    return sum;
  };
  loss();
  const Tensor dq({c.B, c.T, c.H, c.D}, DType::f64);
  const Tensor dk({c.B, c.T, c.K, c.D}, DType::f64), dv({c.B, c.T, c.K, c.D}, DType::f64);
  ref::table().attention_backward(params, q, k, v, out, lse, r, dq, dk, dv);
  rf::testing::expect_gradient_matches_fd(loss, q, dq, "dq");
  rf::testing::expect_gradient_matches_fd(loss, k, dk, "dk");
  rf::testing::expect_gradient_matches_fd(loss, v, dv, "dv");
}

TEST(AttentionRef, BackwardMatchesFiniteDifferences) {
  check_ref_backward_against_fd({"gqa_two_docs", 1, 5, 4, 2, 3, {0, 2, 5}});
  check_ref_backward_against_fd({"two_rows_scale", 2, 3, 2, 1, 2, {}, Layout::contiguous, 0.7});
}

// Packed attention over documents equals running each document on its own (forward and backward).
void check_packed_equals_separate(const KernelTable& table, DType dtype, double tol) {
  SCOPED_TRACE(std::string(kernel_variant_name(table.variant)) + " " + std::string(dtype_name(dtype)));
  const AttentionCase c{"packed", 1, 13, 4, 2, 5, {0, 4, 5, 13}, Layout::strided};
  const QkvInputs in = make_qkv(c, dtype, 41);
  const Tensor dout = random_tensor({c.B, c.T, c.H, c.D}, dtype, 42);
  const Shape q_shape{c.B, c.T, c.H, c.D}, kv_shape{c.B, c.T, c.K, c.D};
  const Tensor out(q_shape, dtype), lse({c.B, c.H, c.T}, lse_dtype(dtype));
  const Tensor dq(q_shape, dtype), dk(kv_shape, dtype), dv(kv_shape, dtype);
  table.attention_forward(params_of(c), in.q, in.k, in.v, out, lse);
  table.attention_backward(params_of(c), in.q, in.k, in.v, out, lse, dout, dq, dk, dv);

  const Tensor out_sep(q_shape, dtype), lse_sep({c.B, c.H, c.T}, lse_dtype(dtype));
  const Tensor dq_sep(q_shape, dtype), dk_sep(kv_shape, dtype), dv_sep(kv_shape, dtype);
  for (size_t i = 0; i + 1 < c.cu_seqlens.size(); ++i) {
    const int64_t start = c.cu_seqlens[i], length = c.cu_seqlens[i + 1] - start;
    auto doc = [&](const TensorView& x) { return x.slice(1, start, length); };
    const TensorView lse_doc = lse_sep.view().slice(2, start, length);
    table.attention_forward({}, doc(in.q), doc(in.k), doc(in.v), doc(out_sep), lse_doc);
    table.attention_backward({}, doc(in.q), doc(in.k), doc(in.v), doc(out_sep), lse_doc, doc(dout), doc(dq_sep),
                             doc(dk_sep), doc(dv_sep));
  }
  expect_close(out, out_sep, tol, tol, "out");
  expect_close(lse, lse_sep, tol, tol, "lse");
  expect_close(dq, dq_sep, tol, tol, "dq");
  expect_close(dk, dk_sep, tol, tol, "dk");
  expect_close(dv, dv_sep, tol, tol, "dv");
}

TEST(AttentionRef, PackedEqualsSeparateDocuments) { check_packed_equals_separate(ref::table(), DType::f64, 1e-13); }

TEST(AttentionCpu, PackedEqualsSeparateDocuments) {
  for (const KernelTable* table : fast_tables()) check_packed_equals_separate(*table, DType::f32, 1e-6);
}

// Every cpu variant on packed rows against the ref run on each document alone (no cu_seqlens): the
// varlen path against the plain causal definition, forward and backward (both backwards read the
// ref's out and lse, so only the backward is compared there).
void check_packed_against_per_document_ref(const AttentionCase& c, DType dtype) {
  SCOPED_TRACE(c.name + " " + std::string(dtype_name(dtype)));
  const QkvInputs in = make_qkv(c, dtype, 61);
  const Tensor dout = random_tensor({c.B, c.T, c.H, c.D}, dtype, 62);
  const Shape q_shape{c.B, c.T, c.H, c.D}, kv_shape{c.B, c.T, c.K, c.D};
  const Tensor out_ref(q_shape, dtype), lse_ref({c.B, c.H, c.T}, DType::f32);
  const Tensor dq_ref(q_shape, dtype), dk_ref(kv_shape, dtype), dv_ref(kv_shape, dtype);
  for (size_t i = 0; i + 1 < c.cu_seqlens.size(); ++i) {
    const int64_t start = c.cu_seqlens[i], length = c.cu_seqlens[i + 1] - start;
    if (length == 0) continue;
    const int64_t b = start / c.T, t = start % c.T;
    auto doc = [&](const TensorView& x) { return x.slice(0, b, 1).slice(1, t, length); };
    const TensorView lse_doc = lse_ref.view().slice(0, b, 1).slice(2, t, length);
    ref::table().attention_forward({}, doc(in.q), doc(in.k), doc(in.v), doc(out_ref), lse_doc);
    ref::table().attention_backward({}, doc(in.q), doc(in.k), doc(in.v), doc(out_ref), lse_doc, doc(dout), doc(dq_ref),
                                    doc(dk_ref), doc(dv_ref));
  }
  for (const KernelTable* table : fast_tables()) {
    SCOPED_TRACE(std::string(kernel_variant_name(table->variant)));
    const Tensor out(q_shape, dtype), lse({c.B, c.H, c.T}, DType::f32);
    const Tensor dq(q_shape, dtype), dk(kv_shape, dtype), dv(kv_shape, dtype);
    table->attention_forward(params_of(c), in.q, in.k, in.v, out, lse);
    table->attention_backward(params_of(c), in.q, in.k, in.v, out_ref, lse_ref, dout, dq, dk, dv);
    expect_close_for(dtype, out, out_ref, "out");
    expect_close(lse, lse_ref, 1e-5, 1e-5, "lse");
    expect_close_for(dtype, dq, dq_ref, "dq");
    expect_close_for(dtype, dk, dk_ref, "dk");
    expect_close_for(dtype, dv, dv_ref, "dv");
  }
}

TEST(AttentionCpu, PackedMatchesPerDocumentRef) {
  for (const AttentionCase& c : conformance_cases()) {
    if (c.cu_seqlens.empty()) continue;
    check_packed_against_per_document_ref(c, DType::f32);
    check_packed_against_per_document_ref(c, DType::bf16);
  }
}

// ---------------------------------------------------------------------------------------------
// RoPE fused into the load (AttentionParams::rope)

// Positions as a trainer feeds them: restarting at every document (or row), from `offset`.
Tensor document_positions(const AttentionCase& c, int64_t offset) {
  Tensor pos({c.B * c.T}, DType::i64);
  std::vector<int32_t> bounds = c.cu_seqlens;
  if (bounds.empty())
    for (int64_t b = 0; b <= c.B; ++b) bounds.push_back(int32_t(b * c.T));
  for (size_t i = 0; i + 1 < bounds.size(); ++i)
    for (int32_t n = bounds[i]; n < bounds[i + 1]; ++n) pos.at<int64_t>({n}) = offset + n - bounds[i];
  return pos;
}

// The unfused composition, op by op with the ref kernels: rope_forward on copies of q and k,
// attention, and for the backward attention's dq and dk through rope_backward.
struct UnfusedRef {
  Tensor out, lse, dq, dk, dv;
};

UnfusedRef unfused_ref(const AttentionCase& c, DType dtype, const QkvInputs& in, const AttentionRope& rope,
                       TensorView dout) {
  const Shape q_shape{c.B, c.T, c.H, c.D}, kv_shape{c.B, c.T, c.K, c.D};
  const Tensor q = clone(in.q, dtype), k = clone(in.k, dtype);
  ref::table().rope_forward(rope.params, rope.positions_N, q.view().reshape({c.B * c.T, c.H, c.D}));
  ref::table().rope_forward(rope.params, rope.positions_N, k.view().reshape({c.B * c.T, c.K, c.D}));
  UnfusedRef r{Tensor(q_shape, dtype), Tensor({c.B, c.H, c.T}, lse_dtype(dtype)), Tensor(q_shape, dtype),
               Tensor(kv_shape, dtype), Tensor(kv_shape, dtype)};
  ref::table().attention_forward(params_of(c), q, k, in.v, r.out, r.lse);
  ref::table().attention_backward(params_of(c), q, k, in.v, r.out, r.lse, dout, r.dq, r.dk, r.dv);
  ref::table().rope_backward(rope.params, rope.positions_N, r.dq.view().reshape({c.B * c.T, c.H, c.D}));
  ref::table().rope_backward(rope.params, rope.positions_N, r.dk.view().reshape({c.B * c.T, c.K, c.D}));
  return r;
}

// Every kernel with RoPE fused (the ref's own fused path and every cpu variant) against the unfused
// ref composition, forward and backward.
void check_fused_rope_case(const AttentionCase& c, DType dtype, const RopeParams& rope_params, int64_t offset) {
  SCOPED_TRACE(fmt::format("{} {} rotary_dim {} scaling {} offset {}", c.name, dtype_name(dtype),
                           rope_params.rotary_dim, int(rope_params.scaling.type), offset));
  const QkvInputs in = make_qkv(c, dtype, 71);
  const Tensor positions = document_positions(c, offset);
  AttentionParams params = params_of(c);
  params.rope = AttentionRope{rope_params, positions};
  const Shape q_shape{c.B, c.T, c.H, c.D}, kv_shape{c.B, c.T, c.K, c.D}, lse_shape{c.B, c.H, c.T};
  const Tensor dout = random_tensor(q_shape, dtype, 72);
  const UnfusedRef expected = unfused_ref(c, dtype, in, *params.rope, dout);

  std::vector<const KernelTable*> tables = fast_tables();
  tables.push_back(&ref::table());
  for (const KernelTable* table : tables) {
    SCOPED_TRACE(std::string(kernel_variant_name(table->variant)));
    const GuardedTensor out = junk_output(q_shape, dtype, c.layout, 73);
    const GuardedTensor lse = junk_output(lse_shape, DType::f32, c.layout, 74);
    table->attention_forward(params, in.q, in.k, in.v, out, lse);
    expect_close_for(dtype, out, expected.out, "out");
    // In bf16 the rotated q and k are rounded to bf16 from f32 here and from f64 in the ref, so an
    // element may land one bf16 ulp apart and the scores, hence lse, move by that much.
    expect_close_for(dtype, lse, expected.lse, "lse");
    const GuardedTensor dq = junk_output(q_shape, dtype, c.layout, 75);
    const GuardedTensor dk = junk_output(kv_shape, dtype, c.layout, 76);
    const GuardedTensor dv = junk_output(kv_shape, dtype, c.layout, 77);
    table->attention_backward(params, in.q, in.k, in.v, expected.out, expected.lse, dout, dq, dk, dv);
    expect_close_for(dtype, dq, expected.dq, "dq");
    expect_close_for(dtype, dk, expected.dk, "dk");
    expect_close_for(dtype, dv, expected.dv, "dv");
    for (const GuardedTensor* x : {&out, &lse, &dq, &dk, &dv}) x->expect_sentinels_intact("output");
  }
}

TEST(AttentionFusedRope, MatchesTheUnfusedRefComposition) {
  const RopeScaling llama3{.type = RopeScalingType::llama3,
                           .factor = 8.0,
                           .low_freq_factor = 1.0,
                           .high_freq_factor = 4.0,
                           .original_max_position_embeddings = 64.0};
  for (const AttentionCase& c : conformance_cases()) {
    if (c.D < 2) continue;  // RoPE rotates pairs of dims
    const int64_t even_d = c.D / 2 * 2;
    for (DType dtype : {DType::f32, DType::bf16}) {
      check_fused_rope_case(c, dtype, {.theta = 10000.0, .rotary_dim = even_d}, 0);
      // Part of the head rotated, scaled frequencies, positions not starting at 0 (a prefill chunk).
      if (c.D >= 6) check_fused_rope_case(c, dtype, {.theta = 500.0, .rotary_dim = 4, .scaling = llama3}, 37);
    }
  }
}

// The f32 forward rotates with the RoPE kernel's own angles and expression: the same values as the
// separate cpu kernels (rope_forward, then attention), and the backward within f32 rounding of them.
TEST(AttentionFusedRope, F32MatchesTheUnfusedCpuKernels) {
  const AttentionCase c{"packed_many_split", 2, 150, 4, 2, 12, {0, 1, 1, 2, 66, 67, 150, 150, 151, 220, 221, 221, 300}};
  const QkvInputs in = make_qkv(c, DType::f32, 81);
  const Tensor positions = document_positions(c, 3);
  const RopeParams rope_params{.theta = 10000.0};
  const Shape q_shape{c.B, c.T, c.H, c.D}, kv_shape{c.B, c.T, c.K, c.D}, lse_shape{c.B, c.H, c.T};
  const Tensor dout = random_tensor(q_shape, DType::f32, 82);
  for (const KernelTable* table : fast_tables()) {
    SCOPED_TRACE(std::string(kernel_variant_name(table->variant)));
    const Tensor q = clone(in.q, DType::f32), k = clone(in.k, DType::f32);
    table->rope_forward(rope_params, positions, q.view().reshape({c.B * c.T, c.H, c.D}));
    table->rope_forward(rope_params, positions, k.view().reshape({c.B * c.T, c.K, c.D}));
    const Tensor out(q_shape, DType::f32), lse(lse_shape, DType::f32);
    const Tensor dq(q_shape, DType::f32), dk(kv_shape, DType::f32), dv(kv_shape, DType::f32);
    table->attention_forward(params_of(c), q, k, in.v, out, lse);
    table->attention_backward(params_of(c), q, k, in.v, out, lse, dout, dq, dk, dv);
    table->rope_backward(rope_params, positions, dq.view().reshape({c.B * c.T, c.H, c.D}));
    table->rope_backward(rope_params, positions, dk.view().reshape({c.B * c.T, c.K, c.D}));

    AttentionParams fused = params_of(c);
    fused.rope = AttentionRope{rope_params, positions};
    const Tensor out_f(q_shape, DType::f32), lse_f(lse_shape, DType::f32);
    const Tensor dq_f(q_shape, DType::f32), dk_f(kv_shape, DType::f32), dv_f(kv_shape, DType::f32);
    table->attention_forward(fused, in.q, in.k, in.v, out_f, lse_f);
    table->attention_backward(fused, in.q, in.k, in.v, out_f, lse_f, dout, dq_f, dk_f, dv_f);
    expect_close(out_f, out, 0, 0, "out");
    expect_close(lse_f, lse, 0, 0, "lse");
    expect_close(dv_f, dv, 0, 0, "dv");
    expect_close(dq_f, dq, 1e-6, 1e-7, "dq");
    expect_close(dk_f, dk, 1e-6, 1e-7, "dk");
  }
}

// The ref's fused backward at every coordinate, in f64.
TEST(AttentionFusedRope, RefBackwardMatchesFiniteDifferences) {
  const AttentionCase c{"gqa_two_docs", 1, 5, 4, 2, 6, {0, 2, 5}};
  const Tensor positions = document_positions(c, 2);
  check_ref_backward_against_fd(c, AttentionRope{{.theta = 100.0, .rotary_dim = 4}, positions});
}

// Forward and backward at 1, 2 and 3 threads, bit for bit. MQA with packed documents: every query
// head writes into the same dK/dV rows, the worst case for a race or an order that depends on the
// thread count; the backward's key split (B*K < 8, dQ summed over chunks) and its owned-dQ path
// (B*K >= 8) both run. (Large enough for the kernel to go parallel.)
TEST(AttentionCpu, ResultsDoNotDependOnThreadCount) {
  const AttentionCase cases[] = {
      {"mqa_packed_split", 1, 70, 4, 1, 9, {0, 33, 40, 70}},
      {"mqa_packed_split4", 1, 260, 4, 1, 16, {0, 100, 101, 190, 260}},
      {"gqa_owned", 4, 100, 4, 2, 16, {}},
  };
  for (const AttentionCase& c : cases) {
    for (DType dtype : {DType::f32, DType::bf16}) {
      SCOPED_TRACE(c.name + " " + std::string(dtype_name(dtype)));
      const QkvInputs in = make_qkv(c, dtype, 51);
      const Tensor dout = random_tensor({c.B, c.T, c.H, c.D}, dtype, 52);
      for (const KernelTable* table : fast_tables()) {
        SCOPED_TRACE(std::string(kernel_variant_name(table->variant)));
        expect_thread_count_independent(*table, params_of(c), in.q, in.k, in.v, dout);
      }
    }
  }
}

// Runs `fn`, expecting an rf::Error whose message contains `needle`.
template <class Fn>
void expect_error_mentioning(Fn&& fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "expected an rf::Error mentioning '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(AttentionErrors, RejectsHeadsNotAMultipleOfKvHeads) {
  const Tensor q({1, 2, 6, 4}, DType::f32), k({1, 2, 4, 4}, DType::f32), v({1, 2, 4, 4}, DType::f32);
  const Tensor out({1, 2, 6, 4}, DType::f32), lse({1, 6, 2}, DType::f32);
  std::vector<const KernelTable*> tables = fast_tables();
  tables.push_back(&ref::table());
  for (const KernelTable* table : tables) {
    expect_error_mentioning([&] { table->attention_forward({}, q, k, v, out, lse); }, "not a multiple");
    expect_error_mentioning([&] { table->attention_backward({}, q, k, v, out, lse, out, q, k, v); }, "not a multiple");
  }
}

TEST(AttentionErrors, CpuRejectsF64) {
  const Tensor q({1, 2, 2, 4}, DType::f64), k({1, 2, 1, 4}, DType::f64), v({1, 2, 1, 4}, DType::f64);
  const Tensor out({1, 2, 2, 4}, DType::f64), lse({1, 2, 2}, DType::f64);
  for (const KernelTable* table : fast_tables())
    expect_error_mentioning([&] { table->attention_forward({}, q, k, v, out, lse); }, "f32 or bf16");
}

TEST(AttentionErrors, RejectsBadCuSeqlens) {
  // B = 2, T = 4: B*T = 8.
  const Tensor q({2, 4, 2, 3}, DType::f32), k({2, 4, 1, 3}, DType::f32), v({2, 4, 1, 3}, DType::f32);
  const Tensor out({2, 4, 2, 3}, DType::f32), lse({2, 2, 4}, DType::f32);
  const std::vector<std::pair<std::vector<int32_t>, std::string>> bad = {
      {{1, 8}, "start at 0"},
      {{0, 4, 7}, "end at B*T"},
      {{0, 3, 2, 8}, "non-decreasing"},
      {{0, 3, 8}, "crosses the boundary between rows 0 and 1"},
      {{0}, "at least"},
  };
  std::vector<const KernelTable*> tables = fast_tables();
  tables.push_back(&ref::table());
  for (const KernelTable* table : tables) {
    for (const auto& [cu_seqlens, needle] : bad) {
      const AttentionParams params{.cu_seqlens = cu_seqlens};
      expect_error_mentioning([&] { table->attention_forward(params, q, k, v, out, lse); }, needle);
      expect_error_mentioning([&] { table->attention_backward(params, q, k, v, out, lse, out, q, k, v); }, needle);
    }
  }
}

// Fused RoPE's arguments are checked as rope_forward's: positions one per token, non-negative, and
// a rotary_dim that fits the head.
TEST(AttentionErrors, RejectsBadFusedRope) {
  const Tensor q({2, 4, 2, 4}, DType::f32), k({2, 4, 1, 4}, DType::f32), v({2, 4, 1, 4}, DType::f32);
  const Tensor out({2, 4, 2, 4}, DType::f32), lse({2, 2, 4}, DType::f32);
  Tensor positions({8}, DType::i64), too_few({7}, DType::i64), negative({8}, DType::i64);
  negative.at<int64_t>({5}) = -1;
  std::vector<const KernelTable*> tables = fast_tables();
  tables.push_back(&ref::table());
  const std::vector<std::pair<AttentionRope, std::string>> bad = {
      {{{}, too_few}, "rope pos_N"},
      {{{}, negative}, "negative"},
      {{{.rotary_dim = 6}, positions}, "rotary_dim"},
  };
  for (const KernelTable* table : tables) {
    for (const auto& [rope, needle] : bad) {
      const AttentionParams params{.rope = rope};
      expect_error_mentioning([&] { table->attention_forward(params, q, k, v, out, lse); }, needle);
      expect_error_mentioning([&] { table->attention_backward(params, q, k, v, out, lse, out, q, k, v); }, needle);
    }
  }
}

}  // namespace
}  // namespace rf::kernels

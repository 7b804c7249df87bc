// Shared by the ref and cpu attention kernels, so both reject exactly the same calls: the
// argument checks (shapes, dtypes, layouts, cu_seqlens, spans, the merge's tensors) and the lookup
// of a token's document in a packed row. Neither is hot: the checks run once per call, the lookup
// once per query row or block.
// The functions sit in an unnamed namespace on purpose: each cpu variant's translation unit gets
// its own copy, so no instance compiled for one instruction set is shared with another (see
// cpu/cpu_kernels.h).
// Legend: B batch, T sequence (Tq of q, Tk of k in span mode), H query heads, K kv heads, D head dim.
#pragma once

#include <cmath>

#include "kernels/attention.h"
#include "kernels/rowwise_op_checks.h"

namespace rf::kernels {
namespace {

struct AttentionDims {
  int64_t B, T, Tk, H, K, D;  // Tk: k and v's sequence length (T but in span mode)
  double scale;               // softmax_scale resolved (0 -> 1 / sqrt(D))
};

// Validates cu_seqlens: [0, ..., B*T], non-decreasing, and no document crossing a row boundary
// (a kernel walks one row at a time, so a document that spills into the next row cannot be served).
inline void check_cu_seqlens(std::span<const int32_t> cu_seqlens, int64_t B, int64_t T) {
  if (cu_seqlens.empty()) return;
  RF_CHECK(cu_seqlens.size() >= 2, "attention: cu_seqlens needs at least [0, B*T], got {} entries", cu_seqlens.size());
  RF_CHECK(cu_seqlens.front() == 0, "attention: cu_seqlens must start at 0, got {}", cu_seqlens.front());
  RF_CHECK(cu_seqlens.back() == B * T, "attention: cu_seqlens must end at B*T = {}*{} = {}, got {}", B, T, B * T,
           cu_seqlens.back());
  for (size_t i = 1; i < cu_seqlens.size(); ++i) {
    const int64_t start = cu_seqlens[i - 1], end = cu_seqlens[i];
    RF_CHECK(start <= end, "attention: cu_seqlens must be non-decreasing, got {} then {} at index {}", start, end, i);
    RF_CHECK(start == end || start / T == (end - 1) / T,
             "attention: document [{}, {}) of cu_seqlens crosses the boundary between rows {} and {} (T = {}); "
             "every packed document must lie inside one row",
             start, end, start / T, (end - 1) / T, T);
  }
}

// Validates span mode's spans (attention.h): each range ordered and inside its axis, a non-empty
// range inside one row and both ranges of a span in the same row (rows are independent sequences),
// and spans sorted with disjoint ranges: each non-empty query (key) range starts at or after the end
// of the previous non-empty one (an empty range occupies nothing, wherever it points). Kernels rely
// on this to walk spans in order and to own each output row once.
inline void check_spans(std::span<const AttentionSpan> spans, int64_t B, int64_t Tq, int64_t Tk) {
  int64_t q_done = 0, k_done = 0;  // where the previous span's ranges end
  for (size_t i = 0; i < spans.size(); ++i) {
    const AttentionSpan& s = spans[i];
    RF_CHECK(s.q_begin <= s.q_end && s.q_begin >= 0 && s.q_end <= B * Tq,
             "attention: span {} has query range [{}, {}), expected an ordered range inside [0, B*Tq = {}]", i,
             s.q_begin, s.q_end, B * Tq);
    RF_CHECK(s.k_begin <= s.k_end && s.k_begin >= 0 && s.k_end <= B * Tk,
             "attention: span {} has key range [{}, {}), expected an ordered range inside [0, B*Tk = {}]", i,
             s.k_begin, s.k_end, B * Tk);
    const bool has_queries = s.q_begin < s.q_end, has_keys = s.k_begin < s.k_end;
    RF_CHECK((!has_queries || s.q_begin >= q_done) && (!has_keys || s.k_begin >= k_done),
             "attention: span {} (queries [{}, {}), keys [{}, {})) starts before the previous span ends (queries {}, "
             "keys {}); spans must be sorted with disjoint query ranges and disjoint key ranges",
             i, s.q_begin, s.q_end, s.k_begin, s.k_end, q_done, k_done);
    RF_CHECK(!has_queries || s.q_begin / Tq == (s.q_end - 1) / Tq,
             "attention: span {}'s query range [{}, {}) crosses the boundary between rows {} and {} (Tq = {}); every "
             "span must lie inside one row",
             i, s.q_begin, s.q_end, s.q_begin / Tq, (s.q_end - 1) / Tq, Tq);
    RF_CHECK(!has_keys || s.k_begin / Tk == (s.k_end - 1) / Tk,
             "attention: span {}'s key range [{}, {}) crosses the boundary between rows {} and {} (Tk = {}); every "
             "span must lie inside one row",
             i, s.k_begin, s.k_end, s.k_begin / Tk, (s.k_end - 1) / Tk, Tk);
    RF_CHECK(!has_queries || !has_keys || s.q_begin / Tq == s.k_begin / Tk,
             "attention: span {} lets queries of row {} see keys of row {}; a span's queries and keys must be in "
             "the same row",
             i, s.q_begin / Tq, s.k_begin / Tk);
    if (has_queries) q_done = s.q_end;
    if (has_keys) k_done = s.k_end;
  }
}

// Checks the forward arguments (the backward's inputs are the same tensors) and returns the dims.
inline AttentionDims check_attention_args(const AttentionParams& params, const TensorView& q_BTHD,
                                          const TensorView& k_BTKD, const TensorView& v_BTKD,
                                          const TensorView& out_BTHD, const TensorView& lse_BHT) {
  RF_CHECK(q_BTHD.rank() == 4, "attention: q_BTHD must have rank 4, got {}", q_BTHD.describe());
  RF_CHECK(k_BTKD.rank() == 4, "attention: k_BTKD must have rank 4, got {}", k_BTKD.describe());
  const DType dtype = q_BTHD.dtype();
  RF_CHECK(dtype == DType::f32 || dtype == DType::bf16 || dtype == DType::f64,
           "attention: q_BTHD must be f32, bf16 or f64, got {}", dtype_name(dtype));
  const bool span_mode = !params.spans.empty();
  RF_CHECK(!span_mode || params.cu_seqlens.empty(),
           "attention: spans and cu_seqlens are exclusive (span mode has no document list: each span is one "
           "unmasked block)");
  RF_CHECK(!span_mode || !params.rope,
           "attention: spans and fused RoPE are exclusive (span mode takes q and k already rotated)");
  // Only span mode lets k and v have their own length: a causal mask pairs query t with key t.
  const int64_t Tk = span_mode ? k_BTKD.size(1) : q_BTHD.size(1);
  const AttentionDims dims{q_BTHD.size(0), q_BTHD.size(1), Tk, q_BTHD.size(2), k_BTKD.size(2), q_BTHD.size(3), 0.0};
  RF_CHECK(dims.K > 0 && dims.H % dims.K == 0, "attention: {} query heads are not a multiple of {} kv heads", dims.H,
           dims.K);
  check_shape(k_BTKD, {dims.B, dims.Tk, dims.K, dims.D}, "k_BTKD");
  check_shape(v_BTKD, {dims.B, dims.Tk, dims.K, dims.D}, "v_BTKD");
  check_shape(out_BTHD, {dims.B, dims.T, dims.H, dims.D}, "out_BTHD");
  check_shape(lse_BHT, {dims.B, dims.H, dims.T}, "lse_BHT");
  check_dtype(k_BTKD, dtype, "k_BTKD");
  check_dtype(v_BTKD, dtype, "v_BTKD");
  check_dtype(out_BTHD, dtype, "out_BTHD");
  check_dtype(lse_BHT, dtype == DType::f64 ? DType::f64 : DType::f32, "lse_BHT");
  for (const TensorView* x : {&q_BTHD, &k_BTKD, &v_BTKD, &out_BTHD})
    RF_CHECK(x->inner_contiguous(), "attention: head dim must be contiguous, got {}", x->describe());
  check_cu_seqlens(params.cu_seqlens, dims.B, dims.T);
  check_spans(params.spans, dims.B, dims.T, dims.Tk);
  if (params.rope) check_rope_params(params.rope->params, params.rope->positions_N, dims.B * dims.T, dims.D);
  const double scale = params.softmax_scale != 0.0 ? params.softmax_scale : 1.0 / std::sqrt(double(dims.D));
  return {dims.B, dims.T, dims.Tk, dims.H, dims.K, dims.D, scale};
}

inline void check_attention_grads(const AttentionDims& dims, DType dtype, const TensorView& dout_BTHD,
                                  const TensorView& dq_BTHD, const TensorView& dk_BTKD, const TensorView& dv_BTKD) {
  check_shape(dout_BTHD, {dims.B, dims.T, dims.H, dims.D}, "dout_BTHD");
  check_shape(dq_BTHD, {dims.B, dims.T, dims.H, dims.D}, "dq_BTHD");
  check_shape(dk_BTKD, {dims.B, dims.Tk, dims.K, dims.D}, "dk_BTKD");
  check_shape(dv_BTKD, {dims.B, dims.Tk, dims.K, dims.D}, "dv_BTKD");
  for (const TensorView* x : {&dout_BTHD, &dq_BTHD, &dk_BTKD, &dv_BTKD}) {
    check_dtype(*x, dtype, "attention gradient");
    RF_CHECK(x->inner_contiguous(), "attention: head dim must be contiguous, got {}", x->describe());
  }
}

// A document as row-local positions [start, end).
struct DocumentSpan {
  int64_t start, end;
};

// The document holding position t of row b (cu_seqlens already validated).
inline DocumentSpan document_of(std::span<const int32_t> cu_seqlens, int64_t b, int64_t T, int64_t t) {
  if (cu_seqlens.empty()) return {0, T};
  const int64_t row_start = b * T, token = row_start + t;
  // Bisect for adjacent boundaries with cu[lo] <= token < cu[hi] (cu starts at 0 and ends at
  // B*T): cu[hi] ends the token's document and cu[lo] starts it, even around empty documents.
  size_t lo = 0, hi = cu_seqlens.size() - 1;
  while (hi - lo > 1) {
    const size_t mid = (lo + hi) / 2;
    (cu_seqlens[mid] <= token ? lo : hi) = mid;
  }
  return {cu_seqlens[lo] - row_start, cu_seqlens[hi] - row_start};
}

struct AttentionMergeDims {
  int64_t B, T, H, D;
};

// attention_merge's arguments (attention.h): the part in any attention dtype, the running result in
// f32 (f64 for f64 parts), both lse tensors f32 (f64 for f64 parts), all of the same B, T, H, D.
inline AttentionMergeDims check_attention_merge_args(const TensorView& part_out_BTHD, const TensorView& part_lse_BHT,
                                                     const TensorView& acc_out_BTHD, const TensorView& acc_lse_BHT) {
  RF_CHECK(part_out_BTHD.rank() == 4, "attention_merge: part_out_BTHD must have rank 4, got {}",
           part_out_BTHD.describe());
  const DType dtype = part_out_BTHD.dtype();
  RF_CHECK(dtype == DType::f32 || dtype == DType::bf16 || dtype == DType::f64,
           "attention_merge: part_out_BTHD must be f32, bf16 or f64, got {}", dtype_name(dtype));
  const AttentionMergeDims dims{part_out_BTHD.size(0), part_out_BTHD.size(1), part_out_BTHD.size(2),
                                part_out_BTHD.size(3)};
  const DType wide = dtype == DType::f64 ? DType::f64 : DType::f32;
  check_shape(part_lse_BHT, {dims.B, dims.H, dims.T}, "part_lse_BHT");
  check_shape(acc_out_BTHD, {dims.B, dims.T, dims.H, dims.D}, "acc_out_BTHD");
  check_shape(acc_lse_BHT, {dims.B, dims.H, dims.T}, "acc_lse_BHT");
  check_dtype(part_lse_BHT, wide, "part_lse_BHT");
  check_dtype(acc_out_BTHD, wide, "acc_out_BTHD");
  check_dtype(acc_lse_BHT, wide, "acc_lse_BHT");
  for (const TensorView* x : {&part_out_BTHD, &acc_out_BTHD})
    RF_CHECK(x->inner_contiguous(), "attention_merge: head dim must be contiguous, got {}", x->describe());
  return dims;
}

}  // namespace
}  // namespace rf::kernels

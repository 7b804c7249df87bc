// Reference GQA attention: the definition in attention.h, one query row at a time, in f64
// whatever the dtype. Each row forms its scores over the keys it sees (its document's prefix up to
// itself, or in span mode its span's key range), their max, the log-sum-exp and the probabilities
// explicitly; backward recomputes the probabilities from the saved lse and follows the header's
// formulas term by term. A row that sees no key (span mode) sums nothing: out 0, lse -inf, gradients 0. With RoPE fused (params.rope) it is literally the composition the fused
// kernel stands for: rope_forward on copies of q and k, attention, rope_backward on dq and dk, each
// rounded to the input dtype as the separate ops would. Not here: any blocking or online softmax
// (that is the cpu kernel's job).
// Legend: B batch, T sequence (Tk of k and v), H query heads, K kv heads, D head dim.
#include <cmath>
#include <limits>
#include <vector>

#include "core/element_access.h"
#include "core/tensor.h"
#include "kernels/attention_args.h"
#include "kernels/ref/ref_kernels.h"

namespace rf::kernels::ref {
namespace {

// Offset of row [i0, i1, i2] of a rank-4 view (its inner dim is contiguous).
int64_t row_offset(const TensorView& x, int64_t i0, int64_t i1, int64_t i2) {
  return i0 * x.stride(0) + i1 * x.stride(1) + i2 * x.stride(2);
}

int64_t lse_offset(const TensorView& lse_BHT, int64_t b, int64_t h, int64_t t) {
  return b * lse_BHT.stride(0) + h * lse_BHT.stride(1) + t * lse_BHT.stride(2);
}

double dot_rows(const TensorView& x, int64_t x_row, const TensorView& y, int64_t y_row, int64_t D) {
  double sum = 0;
  for (int64_t d = 0; d < D; ++d) sum += load_f64(x, x_row + d) * load_f64(y, y_row + d);
  return sum;
}

// The keys [begin, end) of k's row b that one query sees.
struct KeyRange {
  int64_t b, begin, end;
};

// The key range of every query token (b*T + t): causal, its document up to itself; span mode, its
// span's keys, or none outside every span.
std::vector<KeyRange> key_ranges(const AttentionParams& params, const AttentionDims& dims) {
  std::vector<KeyRange> ranges(size_t(dims.B * dims.T), KeyRange{0, 0, 0});
  if (params.spans.empty()) {
    for (int64_t b = 0; b < dims.B; ++b)
      for (int64_t t = 0; t < dims.T; ++t)
        ranges[size_t(b * dims.T + t)] = {b, document_of(params.cu_seqlens, b, dims.T, t).start, t + 1};
    return ranges;
  }
  for (const AttentionSpan& span : params.spans) {
    const int64_t b = span.k_begin / std::max<int64_t>(dims.Tk, 1);
    for (int64_t token = span.q_begin; token < span.q_end; ++token)
      ranges[size_t(token)] = {b, span.k_begin - b * dims.Tk, span.k_end - b * dims.Tk};
  }
  return ranges;
}

// Attention on q and k as given (already rotated when RoPE is on).
void attention_forward_rotated(const AttentionParams& params, const AttentionDims& dims, TensorView q_BTHD,
                               TensorView k_BTKD, TensorView v_BTKD, TensorView out_BTHD, TensorView lse_BHT) {
  const auto [B, T, Tk, H, K, D, scale] = dims;
  const int64_t group = H / K;
  const std::vector<KeyRange> keys_of = key_ranges(params, dims);
  std::vector<double> score_T(static_cast<size_t>(Tk));
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      const int64_t kv = h / group;
      for (int64_t t = 0; t < T; ++t) {
        const auto [kb, start, end] = keys_of[size_t(b * T + t)];
        const int64_t q_row = row_offset(q_BTHD, b, t, h);
        double max_score = -std::numeric_limits<double>::infinity();
        for (int64_t s = start; s < end; ++s) {
          score_T[size_t(s)] = scale * dot_rows(q_BTHD, q_row, k_BTKD, row_offset(k_BTKD, kb, s, kv), D);
          max_score = std::max(max_score, score_T[size_t(s)]);
        }
        double sum_exp = 0;
        for (int64_t s = start; s < end; ++s) sum_exp += std::exp(score_T[size_t(s)] - max_score);
        const double lse = max_score + std::log(sum_exp);  // -inf + log(0) = -inf with no keys
        store_f64(lse_BHT, lse_offset(lse_BHT, b, h, t), lse);
        const int64_t out_row = row_offset(out_BTHD, b, t, h);
        for (int64_t d = 0; d < D; ++d) {
          double acc = 0;
          for (int64_t s = start; s < end; ++s)
            acc += std::exp(score_T[size_t(s)] - lse) * load_f64(v_BTKD, row_offset(v_BTKD, kb, s, kv) + d);
          store_f64(out_BTHD, out_row + d, acc);
        }
      }
    }
  }
}

void attention_backward_rotated(const AttentionParams& params, const AttentionDims& dims, TensorView q_BTHD,
                                TensorView k_BTKD, TensorView v_BTKD, TensorView out_BTHD, TensorView lse_BHT,
                                TensorView dout_BTHD, TensorView dq_BTHD, TensorView dk_BTKD, TensorView dv_BTKD) {
  const auto [B, T, Tk, H, K, D, scale] = dims;
  const int64_t group = H / K;
  const std::vector<KeyRange> keys_of = key_ranges(params, dims);
  // dK and dV gather from every query head of the group and every query that sees the key: sum in
  // f64, store once (keys no query sees stay 0).
  const Tensor dk_acc({B, Tk, K, D}, DType::f64), dv_acc({B, Tk, K, D}, DType::f64);
  double* dk_f64 = dk_acc.data<double>();
  double* dv_f64 = dv_acc.data<double>();
  std::vector<double> p_T(static_cast<size_t>(Tk)), ds_T(static_cast<size_t>(Tk));
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      const int64_t kv = h / group;
      for (int64_t t = 0; t < T; ++t) {
        const auto [kb, start, end] = keys_of[size_t(b * T + t)];
        const int64_t q_row = row_offset(q_BTHD, b, t, h);
        const int64_t dout_row = row_offset(dout_BTHD, b, t, h);
        const double lse = load_f64(lse_BHT, lse_offset(lse_BHT, b, h, t));
        // D_t = rowsum(dO * O) = sum_s P_s dP_s, from the forward output.
        const double delta = dot_rows(dout_BTHD, dout_row, out_BTHD, row_offset(out_BTHD, b, t, h), D);
        for (int64_t s = start; s < end; ++s) {
          const double p = std::exp(scale * dot_rows(q_BTHD, q_row, k_BTKD, row_offset(k_BTKD, kb, s, kv), D) - lse);
          const double dp = dot_rows(dout_BTHD, dout_row, v_BTKD, row_offset(v_BTKD, kb, s, kv), D);
          p_T[size_t(s)] = p;
          ds_T[size_t(s)] = p * (dp - delta);
        }
        const int64_t dq_row = row_offset(dq_BTHD, b, t, h);
        for (int64_t d = 0; d < D; ++d) {
          double dq = 0;
          for (int64_t s = start; s < end; ++s)
            dq += ds_T[size_t(s)] * load_f64(k_BTKD, row_offset(k_BTKD, kb, s, kv) + d);
          store_f64(dq_BTHD, dq_row + d, scale * dq);
        }
        for (int64_t s = start; s < end; ++s) {
          const int64_t acc_row = ((kb * Tk + s) * K + kv) * D;
          for (int64_t d = 0; d < D; ++d) {
            dk_f64[acc_row + d] += scale * ds_T[size_t(s)] * load_f64(q_BTHD, q_row + d);
            dv_f64[acc_row + d] += p_T[size_t(s)] * load_f64(dout_BTHD, dout_row + d);
          }
        }
      }
    }
  }
  copy_convert(dk_acc, dk_BTKD);
  copy_convert(dv_acc, dv_BTKD);
}

// A contiguous copy of x_BTXD (q or k), rotated by RoPE.
Tensor rotated_copy(const AttentionRope& rope, TensorView x_BTXD) {
  Tensor x = clone(x_BTXD, x_BTXD.dtype());
  rope_forward(rope.params, rope.positions_N,
               x.view().reshape({x_BTXD.size(0) * x_BTXD.size(1), x_BTXD.size(2), x_BTXD.size(3)}));
  return x;
}

// dx_BTXD <- rope_backward(dx_rotated_BTXD).
void rotate_back_into(const AttentionRope& rope, Tensor& dx_rotated_BTXD, TensorView dx_BTXD) {
  const TensorView view = dx_rotated_BTXD.view();
  rope_backward(rope.params, rope.positions_N, view.reshape({view.size(0) * view.size(1), view.size(2), view.size(3)}));
  copy_convert(view, dx_BTXD);
}

}  // namespace

void attention_forward(const AttentionParams& params, TensorView q_BTHD, TensorView k_BTKD, TensorView v_BTKD,
                       TensorView out_BTHD, TensorView lse_BHT) {
  const AttentionDims dims = check_attention_args(params, q_BTHD, k_BTKD, v_BTKD, out_BTHD, lse_BHT);
  if (!params.rope) return attention_forward_rotated(params, dims, q_BTHD, k_BTKD, v_BTKD, out_BTHD, lse_BHT);
  const Tensor q = rotated_copy(*params.rope, q_BTHD), k = rotated_copy(*params.rope, k_BTKD);
  attention_forward_rotated(params, dims, q, k, v_BTKD, out_BTHD, lse_BHT);
}

void attention_backward(const AttentionParams& params, TensorView q_BTHD, TensorView k_BTKD, TensorView v_BTKD,
                        TensorView out_BTHD, TensorView lse_BHT, TensorView dout_BTHD, TensorView dq_BTHD,
                        TensorView dk_BTKD, TensorView dv_BTKD) {
  const AttentionDims dims = check_attention_args(params, q_BTHD, k_BTKD, v_BTKD, out_BTHD, lse_BHT);
  check_attention_grads(dims, q_BTHD.dtype(), dout_BTHD, dq_BTHD, dk_BTKD, dv_BTKD);
  if (!params.rope)
    return attention_backward_rotated(params, dims, q_BTHD, k_BTKD, v_BTKD, out_BTHD, lse_BHT, dout_BTHD, dq_BTHD,
                                      dk_BTKD, dv_BTKD);
  const Tensor q = rotated_copy(*params.rope, q_BTHD), k = rotated_copy(*params.rope, k_BTKD);
  Tensor dq(q.shape(), q.dtype()), dk(k.shape(), k.dtype());
  attention_backward_rotated(params, dims, q, k, v_BTKD, out_BTHD, lse_BHT, dout_BTHD, dq, dk, dv_BTKD);
  rotate_back_into(*params.rope, dq, dq_BTHD);
  rotate_back_into(*params.rope, dk, dk_BTKD);
}

}  // namespace rf::kernels::ref

// Rotary position embedding in Hugging Face's rotate-half layout, in place on q or k:
//   x' = x * cos(p * f) + rotate_half(x) * sin(p * f),  rotate_half([x1, x2]) = [-x2, x1],
//   f_i = theta^(-2i / rotary_dim) for i < rotary_dim / 2, repeated for both halves,
// then rescaled by `scaling` as transformers' ROPE_INIT_FUNCTIONS do (rope_inv_freq below).
// Angles are formed in f64 (HF forms them in f32; the f64 oracle files use f64), then rounded to
// the compute dtype. Backward is the rotation by -angle (the transpose of a rotation).
// Positions come per token, so packed sequences simply restart them at each document.
// Legend: N tokens, H heads (q or kv heads), D head dim.
#pragma once

#include "core/tensor_view.h"

namespace rf::kernels {

// config.json's `rope_scaling`. Only the types whose attention scaling is 1 (so that the softmax and
// the cos/sin amplitudes are unchanged): `linear` divides every frequency by `factor`; `llama3` divides
// the low frequencies (wavelength above original_max_position_embeddings / low_freq_factor) by
// `factor`, keeps the high ones (wavelength below original_max_position_embeddings / high_freq_factor)
// and blends linearly in between.
enum class RopeScalingType : uint8_t { none, linear, llama3 };

struct RopeScaling {
  RopeScalingType type = RopeScalingType::none;
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  double original_max_position_embeddings = 8192.0;
};

struct RopeParams {
  double theta = 10000.0;
  int64_t rotary_dim = 0;  // 0: the whole head dim; otherwise the first rotary_dim dims rotate
  RopeScaling scaling;
};

// f_i in f64, scaling applied: the one definition both the ref and cpu kernels use.
double rope_inv_freq(const RopeParams& p, int64_t i, int64_t rotary_dim);

// pos_N: i32 or i64. x_NHD: f32, bf16 or f64, rotated in place.
using RopeForward = void(const RopeParams&, TensorView pos_N, TensorView x_NHD);
using RopeForwardFn = RopeForward*;
// dx_NHD: the gradient w.r.t. the rotated x on entry, w.r.t. the input x on return.
using RopeBackward = void(const RopeParams&, TensorView pos_N, TensorView dx_NHD);
using RopeBackwardFn = RopeBackward*;

}  // namespace rf::kernels

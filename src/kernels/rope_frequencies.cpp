// The RoPE frequencies (kernels/rope.h), after transformers' `_compute_default_rope_parameters`,
// `_compute_linear_scaling_rope_parameters` and `_compute_llama3_parameters`, in f64.
#include <cmath>
#include <numbers>

#include "kernels/rope.h"

namespace rf::kernels {
namespace {

// Llama 3.1: low frequencies (long wavelengths) slowed by `factor`, high ones kept, a linear blend
// in wavelength-ratio space between the two bands.
double llama3_scaled(const RopeScaling& s, double inv_freq) {
  const double wavelength = 2.0 * std::numbers::pi / inv_freq;
  const double low_freq_wavelength = s.original_max_position_embeddings / s.low_freq_factor;
  const double high_freq_wavelength = s.original_max_position_embeddings / s.high_freq_factor;
  if (wavelength > low_freq_wavelength) return inv_freq / s.factor;
  if (wavelength < high_freq_wavelength) return inv_freq;
  const double smooth = (s.original_max_position_embeddings / wavelength - s.low_freq_factor) /
                        (s.high_freq_factor - s.low_freq_factor);
  return (1.0 - smooth) * inv_freq / s.factor + smooth * inv_freq;
}

}  // namespace

double rope_inv_freq(const RopeParams& p, int64_t i, int64_t rotary_dim) {
  const double inv_freq = std::pow(p.theta, -2.0 * double(i) / double(rotary_dim));
  switch (p.scaling.type) {
    case RopeScalingType::none: return inv_freq;
    case RopeScalingType::linear: return inv_freq / p.scaling.factor;
    case RopeScalingType::llama3: return llama3_scaled(p.scaling, inv_freq);
  }
  return inv_freq;
}

}  // namespace rf::kernels

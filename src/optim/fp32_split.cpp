#include "optim/fp32_split.h"

#include <bit>
#include <cstring>

namespace rf::optim {

bool split_f32(float x, uint16_t& hi, int16_t& remainder) {
  hi = to_bf16(x).bits;
  // Same sign bit on both sides, so the difference is the magnitudes' difference, carries across the exponent
  // (max finite rounding up to inf) included.
  const int64_t difference = int64_t(std::bit_cast<uint32_t>(x)) - (int64_t(hi) << 16);
  remainder = int16_t(difference);
  return difference >= INT16_MIN && difference <= INT16_MAX;
}

float join_f32(uint16_t hi, int16_t remainder) {
  return std::bit_cast<float>(uint32_t((int64_t(hi) << 16) + remainder));
}

Fp32Split::Fp32Split(int64_t numel, TensorAccount account)
    : remainders_({numel * int64_t(sizeof(int16_t))}, DType::u8, account) {}

void Fp32Split::check_views(TensorView x_N, TensorView hi_N, int64_t offset, const char* what) const {
  RF_CHECK(x_N.dtype() == DType::f32 && hi_N.dtype() == DType::bf16 && x_N.is_contiguous() && hi_N.is_contiguous() &&
               x_N.numel() == hi_N.numel(),
           "Fp32Split::{}: contiguous f32 and bf16 views of one size, got {} and {}", what, x_N.describe(),
           hi_N.describe());
  const int64_t numel = remainders_.numel() / int64_t(sizeof(int16_t));
  RF_CHECK(offset >= 0 && offset + x_N.numel() <= numel, "Fp32Split::{}: elements [{}, {}) of {}", what, offset,
           offset + x_N.numel(), numel);
}

void Fp32Split::split(TensorView x_N, TensorView hi_N, int64_t offset) {
  check_views(x_N, hi_N, offset, "split");
  const int64_t N = x_N.numel();
  const float* x = x_N.data<float>();
  bf16* hi = hi_N.data<bf16>();
  uint8_t* remainders = remainders_.data<uint8_t>() + offset * int64_t(sizeof(int16_t));
  const std::lock_guard lock(exact_mutex_);
  exact_.erase(exact_.lower_bound(offset), exact_.lower_bound(offset + N));
  for (int64_t n = 0; n < N; ++n) {
    int16_t remainder = 0;
    if (!split_f32(x[n], hi[n].bits, remainder)) exact_[offset + n] = std::bit_cast<uint32_t>(x[n]);
    std::memcpy(remainders + n * int64_t(sizeof(int16_t)), &remainder, sizeof(int16_t));
  }
}

void Fp32Split::join(TensorView hi_N, int64_t offset, TensorView x_N) const {
  check_views(x_N, hi_N, offset, "join");
  const int64_t N = x_N.numel();
  const bf16* hi = hi_N.data<bf16>();
  const uint8_t* remainders = remainders_.data<uint8_t>() + offset * int64_t(sizeof(int16_t));
  float* x = x_N.data<float>();
  for (int64_t n = 0; n < N; ++n) {
    int16_t remainder = 0;
    std::memcpy(&remainder, remainders + n * int64_t(sizeof(int16_t)), sizeof(int16_t));
    x[n] = join_f32(hi[n].bits, remainder);
  }
  const std::lock_guard lock(exact_mutex_);
  for (auto it = exact_.lower_bound(offset); it != exact_.end() && it->first < offset + N; ++it)
    x[it->first - offset] = std::bit_cast<float>(it->second);
}

int64_t Fp32Split::num_exact() const {
  const std::lock_guard lock(exact_mutex_);
  return int64_t(exact_.size());
}

}  // namespace rf::optim

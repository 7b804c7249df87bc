// Fp32Split: f32 master weights kept as their bf16 compute weights plus a 16-bit remainder each (MindSpeed's
// --reuse-fp32-param), so that bf16 training holds 4 bytes per parameter instead of 6 (f32 master + bf16 copy).
//
// hi = the bf16 round-to-nearest-even of x (rf::to_bf16: what the compute copy holds, bit for bit) and
// remainder = bits(x) - (bits(hi) << 16) as 32-bit integers. Rounding to nearest moves x by at most half a bf16
// ulp, so the difference is in [-0x8000, 0x8000] and fits a signed 16-bit integer except for a tie rounded down
// to an even hi (+0x8000) and for NaNs (to_bf16 truncates and quietens them: only a NaN quiet already with a low
// half below 0x8000 fits). No 16-bit code can hold them all: an even hi is the rounding of 0x10001 f32 patterns.
// Those elements (about one in 2^17 of values whose low bits are random, plus NaNs) keep their f32 bits in a side
// table instead, so join(split(x)) is x bit for bit, every pattern. The table is the one thing the optimizer step
// may allocate (a node per such element it creates). Scalar code, not vectorised: with it the bench's optimizer
// step takes about 1.6x the plain one's time.
// Not here: which elements are split when (TrainEngine, AdamWOptimizer's MasterHome::split).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>

#include "core/tensor.h"

namespace rf::optim {

// One element: hi is to_bf16(x); returns false when the remainder does not fit 16 bits (`remainder` is then
// unspecified and x must be kept whole).
bool split_f32(float x, uint16_t& hi, int16_t& remainder);
float join_f32(uint16_t hi, int16_t remainder);

class Fp32Split {
 public:
  // The remainders of `numel` elements (all zero: the split of zeros), accounted under `account`.
  Fp32Split(int64_t numel, TensorAccount account);

  // Elements [offset, offset + N) of the split store: x_N (f32) -> hi_N (bf16) and their remainders.
  void split(TensorView x_N, TensorView hi_N, int64_t offset);
  // The f32 values of elements [offset, offset + N) from their bf16 weights hi_N: what split was given.
  // May run concurrently with split of other elements.
  void join(TensorView hi_N, int64_t offset, TensorView x_N) const;

  Tensor& storage() { return remainders_; }  // for offload: the buffer keeps its address
  int64_t num_exact() const;                 // elements kept whole (in the side table)

 private:
  // Contiguous f32 and bf16 views of one size, at elements inside the store; `what` names the caller.
  void check_views(TensorView x_N, TensorView hi_N, int64_t offset, const char* what) const;

  Tensor remainders_;  // int16 per element, held as pairs of bytes (there is no 16-bit integer dtype)
  std::map<int64_t, uint32_t> exact_;  // element -> f32 bits, where the remainder does not fit
  mutable std::mutex exact_mutex_;     // the optimizer joins the next slice while it splits this one
};

}  // namespace rf::optim

// Reference ring-attention update (attention_merge, maths in kernels/attention.h): one (row, head)
// at a time in f64 whatever the dtype. The combined lse is max + log1p(exp(min - max)), which never
// overflows and keeps the smaller term's digits; a part row at lse -inf contributed nothing and leaves
// the running row alone, and a running row at -inf (nothing merged yet, its out possibly unwritten)
// takes the part's row as it is.
// Legend: B batch, T sequence, H heads, D head dim.
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/element_access.h"
#include "kernels/attention_args.h"
#include "kernels/ref/ref_kernels.h"

namespace rf::kernels::ref {

void attention_merge(TensorView part_out_BTHD, TensorView part_lse_BHT, TensorView acc_out_BTHD,
                     TensorView acc_lse_BHT) {
  const auto [B, T, H, D] = check_attention_merge_args(part_out_BTHD, part_lse_BHT, acc_out_BTHD, acc_lse_BHT);
  constexpr double kMinusInf = -std::numeric_limits<double>::infinity();
  auto lse_at = [](const TensorView& x, int64_t b, int64_t h, int64_t t) {
    return b * x.stride(0) + h * x.stride(1) + t * x.stride(2);
  };
  auto row_at = [](const TensorView& x, int64_t b, int64_t t, int64_t h) {
    return b * x.stride(0) + t * x.stride(1) + h * x.stride(2);
  };
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t h = 0; h < H; ++h) {
        const double part_lse = load_f64(part_lse_BHT, lse_at(part_lse_BHT, b, h, t));
        const double acc_lse = load_f64(acc_lse_BHT, lse_at(acc_lse_BHT, b, h, t));
        if (part_lse == kMinusInf) continue;
        const int64_t part_row = row_at(part_out_BTHD, b, t, h), acc_row = row_at(acc_out_BTHD, b, t, h);
        if (acc_lse == kMinusInf) {
          for (int64_t d = 0; d < D; ++d) store_f64(acc_out_BTHD, acc_row + d, load_f64(part_out_BTHD, part_row + d));
          store_f64(acc_lse_BHT, lse_at(acc_lse_BHT, b, h, t), part_lse);
          continue;
        }
        const double hi = std::max(acc_lse, part_lse), lo = std::min(acc_lse, part_lse);
        const double lse = hi + std::log1p(std::exp(lo - hi));
        const double acc_weight = std::exp(acc_lse - lse), part_weight = std::exp(part_lse - lse);
        for (int64_t d = 0; d < D; ++d)
          store_f64(acc_out_BTHD, acc_row + d,
                    acc_weight * load_f64(acc_out_BTHD, acc_row + d) +
                        part_weight * load_f64(part_out_BTHD, part_row + d));
        store_f64(acc_lse_BHT, lse_at(acc_lse_BHT, b, h, t), lse);
      }
    }
  }
}

}  // namespace rf::kernels::ref

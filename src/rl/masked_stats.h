// Masked statistics over (B, T) tensors, as verl.utils.torch_functional computes them: the building
// blocks of advantage whitening and of the loss metrics.
//   masked_sum    Σ x·m. Elements under m = 0 never enter the sum, so a NaN there does not spread.
//   masked_mean   masked_sum / (Σm + 1e-8), the 1e-8 added in the values' dtype (in f32 it vanishes
//                 for any count >= 1). An empty mask gives 0, not NaN.
//   masked_var    two-pass: masked_mean((x - mean)², m). Unbiased (verl's default) multiplies by
//                 N/(N-1) and needs N = Σm >= 2, as verl raises otherwise.
//   masked_whiten (x - mean)·rsqrt(var + 1e-8) with the unbiased var over the whole batch, applied to
//                 every element, masked ones included; MeanShift::keep adds the mean back.
// Each comes twice: on TensorViews (the API) and on Matrix (what the other algorithms compose).
// Not here: distributed statistics; advantages are computed on one rank, as verl's driver does.
//
// Dimension legend: B batch (responses), T response tokens.
#pragma once

#include "core/tensor_view.h"
#include "rl/matrix.h"

namespace rf::rl {

enum class VarianceCorrection : uint8_t { unbiased, biased };
enum class MeanShift : uint8_t { remove, keep };  // verl's shift_mean = true / false

double masked_sum(const Matrix& x, const Matrix& mask);
double masked_mean(const Matrix& x, const Matrix& mask);
std::vector<double> masked_row_sums(const Matrix& x, const Matrix& mask);   // (B,): verl's axis=-1
std::vector<double> masked_row_means(const Matrix& x, const Matrix& mask);  // (B,)
double masked_var(const Matrix& x, const Matrix& mask, VarianceCorrection correction);
Matrix masked_whiten(const Matrix& x, const Matrix& mask, MeanShift shift);
// Σm + 1e-8 as verl forms it, in `dtype`.
double masked_count_divisor(double count, DType dtype);

double masked_sum(TensorView values_BT, TensorView mask_BT);
double masked_mean(TensorView values_BT, TensorView mask_BT);
void masked_row_sums(TensorView values_BT, TensorView mask_BT, TensorView sums_B);
void masked_row_means(TensorView values_BT, TensorView mask_BT, TensorView means_B);
double masked_var(TensorView values_BT, TensorView mask_BT, VarianceCorrection correction);
void masked_whiten(TensorView values_BT, TensorView mask_BT, MeanShift shift, TensorView whitened_BT);

}  // namespace rf::rl

#include "rl/masked_stats.h"

#include <cmath>

namespace rf::rl {
namespace {

constexpr double kMeanEps = 1e-8;    // verl's masked_mean
constexpr double kWhitenEps = 1e-8;  // verl's masked_whiten, inside the rsqrt

struct MaskedOperands {
  Matrix x;
  Matrix mask;
};

MaskedOperands read_operands(TensorView values_BT, TensorView mask_BT) {
  MaskedOperands operands{read_matrix(values_BT, "values_BT"), read_mask(mask_BT, "mask_BT")};
  check_same_shape(operands.x, "values_BT", operands.mask, "mask_BT");
  return operands;
}

double mask_count(const Matrix& mask) {
  double count = 0;
  for (double m : mask.values) count += m;
  return count;
}

}  // namespace

double masked_count_divisor(double count, DType dtype) { return round_to(dtype, count + kMeanEps); }

double masked_sum(const Matrix& x, const Matrix& mask) {
  double sum = 0;
  for (size_t i = 0; i < x.values.size(); ++i)
    if (mask.values[i] != 0.0) sum += x.values[i];
  return sum;
}

double masked_mean(const Matrix& x, const Matrix& mask) {
  return masked_sum(x, mask) / masked_count_divisor(mask_count(mask), x.dtype);
}

std::vector<double> masked_row_sums(const Matrix& x, const Matrix& mask) {
  std::vector<double> sums(size_t(x.rows), 0.0);
  for (int64_t b = 0; b < x.rows; ++b)
    for (int64_t t = 0; t < x.cols; ++t)
      if (mask(b, t) != 0.0) sums[size_t(b)] += x(b, t);
  return sums;
}

std::vector<double> masked_row_means(const Matrix& x, const Matrix& mask) {
  std::vector<double> means = masked_row_sums(x, mask);
  for (int64_t b = 0; b < x.rows; ++b) {
    double count = 0;
    for (int64_t t = 0; t < x.cols; ++t) count += mask(b, t);
    means[size_t(b)] /= masked_count_divisor(count, x.dtype);
  }
  return means;
}

double masked_var(const Matrix& x, const Matrix& mask, VarianceCorrection correction) {
  const double mean = masked_mean(x, mask);
  Matrix squared_deviation = x;
  for (double& v : squared_deviation.values) v = (v - mean) * (v - mean);
  double variance = masked_mean(squared_deviation, mask);
  if (correction == VarianceCorrection::unbiased) {
    const double count = mask_count(mask);
    RF_CHECK(count >= 2, "masked_var: the unbiased variance needs at least 2 unmasked elements, the mask has {}",
             count);
    variance *= count / (count - 1);
  }
  return variance;
}

Matrix masked_whiten(const Matrix& x, const Matrix& mask, MeanShift shift) {
  const double mean = masked_mean(x, mask);
  const double inv_std = 1.0 / std::sqrt(masked_var(x, mask, VarianceCorrection::unbiased) + kWhitenEps);
  Matrix whitened = x;
  for (double& v : whitened.values) v = (v - mean) * inv_std + (shift == MeanShift::keep ? mean : 0.0);
  return whitened;
}

double masked_sum(TensorView values_BT, TensorView mask_BT) {
  const MaskedOperands in = read_operands(values_BT, mask_BT);
  return masked_sum(in.x, in.mask);
}

double masked_mean(TensorView values_BT, TensorView mask_BT) {
  const MaskedOperands in = read_operands(values_BT, mask_BT);
  return masked_mean(in.x, in.mask);
}

void masked_row_sums(TensorView values_BT, TensorView mask_BT, TensorView sums_B) {
  const MaskedOperands in = read_operands(values_BT, mask_BT);
  write_elements(masked_row_sums(in.x, in.mask), sums_B, "sums_B");
}

void masked_row_means(TensorView values_BT, TensorView mask_BT, TensorView means_B) {
  const MaskedOperands in = read_operands(values_BT, mask_BT);
  write_elements(masked_row_means(in.x, in.mask), means_B, "means_B");
}

double masked_var(TensorView values_BT, TensorView mask_BT, VarianceCorrection correction) {
  const MaskedOperands in = read_operands(values_BT, mask_BT);
  return masked_var(in.x, in.mask, correction);
}

void masked_whiten(TensorView values_BT, TensorView mask_BT, MeanShift shift, TensorView whitened_BT) {
  const MaskedOperands in = read_operands(values_BT, mask_BT);
  write_matrix(masked_whiten(in.x, in.mask, shift), whitened_BT, "whitened_BT");
}

}  // namespace rf::rl

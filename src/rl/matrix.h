// Matrix: an RL algorithm's (B, T) operand read into row-major doubles.
// The algorithms are O(B*T) bookkeeping next to the model, so each computes in f64 on such a copy
// (any input dtype, any strides) and rounds once, when it writes into the caller's view. `dtype`
// remembers the input's dtype because verl computes in it: where that rounding changes a result
// qualitatively (1e-8 added to a token count vanishes in f32), round_to reproduces it.
// Not here: anything on the training hot path (the model's per-token outputs stay in kernels).
//
// Dimension legend: B batch (responses), T response tokens.
#pragma once

#include <vector>

#include "core/tensor_view.h"

namespace rf::rl {

struct Matrix {
  Matrix() = default;
  Matrix(int64_t num_rows, int64_t num_cols, DType element_dtype)
      : rows(num_rows), cols(num_cols), dtype(element_dtype), values(size_t(num_rows * num_cols), 0.0) {}
  double& operator()(int64_t b, int64_t t) { return values[size_t(b * cols + t)]; }
  double operator()(int64_t b, int64_t t) const { return values[size_t(b * cols + t)]; }

  int64_t rows = 0;
  int64_t cols = 0;
  DType dtype = DType::f64;
  std::vector<double> values;
};

// Every element of a tensor of the given rank, row-major, as doubles (any dtype, any strides).
// `what` names the tensor in errors ("token_level_rewards_BT").
std::vector<double> read_elements(TensorView view, int rank, const char* what);
// A rank-2 floating tensor.
Matrix read_matrix(TensorView view, const char* what);
// A rank-2 mask of any dtype whose elements are all 0 or 1.
Matrix read_mask(TensorView view, const char* what);
// A rank-1 floating tensor of `size` elements.
std::vector<double> read_vector(TensorView view, int64_t size, const char* what);

// Writes into `out` (same extents, any floating dtype and strides), rounding to out's dtype.
void write_matrix(const Matrix& m, TensorView out, const char* what);
void write_elements(const std::vector<double>& values, TensorView out, const char* what);

void check_same_shape(const Matrix& a, const char* what_a, const Matrix& b, const char* what_b);
// x as an element of `dtype` would hold it (identity for f64).
double round_to(DType dtype, double x);

}  // namespace rf::rl

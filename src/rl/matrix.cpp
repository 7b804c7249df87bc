#include "rl/matrix.h"

#include "core/element_access.h"

namespace rf::rl {

std::vector<double> read_elements(TensorView view, int rank, const char* what) {
  RF_CHECK(!view.empty(), "{}: expected a tensor, got none", what);
  RF_CHECK(view.rank() == rank, "{}: expected rank {}, got {}", what, rank, view.describe());
  std::vector<double> values;
  values.reserve(size_t(view.numel()));
  for_each_offset(view.shape(), view.strides(), view.strides(),
                  [&](int64_t offset, int64_t) { values.push_back(load_f64(view, offset)); });
  return values;
}

Matrix read_matrix(TensorView view, const char* what) {
  RF_CHECK(!view.empty() && is_floating(view.dtype()), "{}: expected a floating (B, T) tensor, got {}", what,
           view.empty() ? std::string("none") : view.describe());
  Matrix m;
  m.values = read_elements(view, 2, what);
  m.rows = view.size(0);
  m.cols = view.size(1);
  m.dtype = view.dtype();
  return m;
}

Matrix read_mask(TensorView view, const char* what) {
  Matrix m;
  m.values = read_elements(view, 2, what);
  m.rows = view.size(0);
  m.cols = view.size(1);
  m.dtype = view.dtype();
  for (double v : m.values) RF_CHECK(v == 0.0 || v == 1.0, "{}: expected a 0/1 mask, found the value {}", what, v);
  return m;
}

std::vector<double> read_vector(TensorView view, int64_t size, const char* what) {
  RF_CHECK(!view.empty() && is_floating(view.dtype()), "{}: expected a floating ({},) tensor, got {}", what, size,
           view.empty() ? std::string("none") : view.describe());
  std::vector<double> values = read_elements(view, 1, what);
  RF_CHECK(int64_t(values.size()) == size, "{}: expected ({},), got {}", what, size, view.describe());
  return values;
}

void write_elements(const std::vector<double>& values, TensorView out, const char* what) {
  RF_CHECK(!out.empty() && is_floating(out.dtype()), "{}: expected a floating output tensor, got {}", what,
           out.empty() ? std::string("none") : out.describe());
  RF_CHECK(out.numel() == int64_t(values.size()), "{}: expected {} elements, got {}", what, values.size(),
           out.describe());
  size_t i = 0;
  for_each_offset(out.shape(), out.strides(), out.strides(),
                  [&](int64_t offset, int64_t) { store_f64(out, offset, values[i++]); });
}

void write_matrix(const Matrix& m, TensorView out, const char* what) {
  RF_CHECK(!out.empty() && out.shape() == Shape({m.rows, m.cols}), "{}: expected ({}, {}), got {}", what, m.rows,
           m.cols, out.empty() ? std::string("none") : out.describe());
  write_elements(m.values, out, what);
}

void check_same_shape(const Matrix& a, const char* what_a, const Matrix& b, const char* what_b) {
  RF_CHECK(a.rows == b.rows && a.cols == b.cols, "{}: expected the shape of {} ({}, {}), got ({}, {})", what_b, what_a,
           a.rows, a.cols, b.rows, b.cols);
}

double round_to(DType dtype, double x) {
  switch (dtype) {
    case DType::f32:
      return double(float(x));
    case DType::bf16:
      return to_f32(to_bf16(float(x)));
    case DType::f16:
      return to_f32(to_f16(float(x)));
    default:
      return x;
  }
}

}  // namespace rf::rl

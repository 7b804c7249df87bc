#include "model/moe_rows.h"

#include <type_traits>

#include "core/dtype.h"

namespace rf::model {
namespace {

// The statistics dtype's value of a row element, and the rounding back.
float widen(float x) { return x; }
float widen(bf16 x) { return to_f32(x); }
double widen(double x) { return x; }
template <class T, class A>
T narrow(A x) {
  if constexpr (std::is_same_v<T, bf16>)
    return to_bf16(x);
  else
    return T(x);
}

template <class T>
using Stat = std::conditional_t<std::is_same_v<T, double>, double, float>;

void check_rows(const TensorView& x, const TensorView& p, const TensorView& y, const char* op) {
  RF_CHECK(x.rank() == 2 && x.is_contiguous() && y.rank() == 2 && y.is_contiguous() && x.shape() == y.shape() &&
               x.dtype() == y.dtype(),
           "{}: rows {} and {} must be contiguous matrices of one shape and dtype", op, x.describe(), y.describe());
  const DType stat = x.dtype() == DType::f64 ? DType::f64 : DType::f32;
  RF_CHECK(p.rank() == 1 && p.size(0) == x.size(0) && p.is_contiguous() && p.dtype() == stat,
           "{}: per-row values {} must be a contiguous {}[{}]", op, p.describe(), dtype_name(stat), x.size(0));
  RF_CHECK(x.dtype() == DType::f32 || x.dtype() == DType::bf16 || x.dtype() == DType::f64,
           "{}: rows in {}: expected f32, bf16 or f64", op, dtype_name(x.dtype()));
}

template <class F>
void for_rows(const TensorView& x, F&& f) {
  const int64_t R = x.size(0), W = x.size(1);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < R; ++r) f(r, W);
}

template <class T>
void scale_rows_as(TensorView x, TensorView p, TensorView y) {
  const T* xs = x.data<T>();
  T* ys = y.data<T>();
  const Stat<T>* ps = p.data<Stat<T>>();
  for_rows(x, [&](int64_t r, int64_t W) {
    for (int64_t f = 0; f < W; ++f) ys[r * W + f] = narrow<T>(widen(xs[r * W + f]) * ps[r]);
  });
}

template <class T>
void row_dots_as(TensorView a, TensorView b, TensorView out) {
  const T *as = a.data<T>(), *bs = b.data<T>();
  Stat<T>* os = out.data<Stat<T>>();
  for_rows(a, [&](int64_t r, int64_t W) {
    Stat<T> sum = 0;
    for (int64_t f = 0; f < W; ++f) sum += widen(as[r * W + f]) * widen(bs[r * W + f]);
    os[r] = sum;
  });
}

template <class T>
void add_scaled_rows_as(TensorView s, TensorView p, TensorView y) {
  const T* ss = s.data<T>();
  T* ys = y.data<T>();
  const Stat<T>* ps = p.data<Stat<T>>();
  for_rows(s, [&](int64_t r, int64_t W) {
    for (int64_t f = 0; f < W; ++f) ys[r * W + f] = narrow<T>(widen(ys[r * W + f]) + ps[r] * widen(ss[r * W + f]));
  });
}

template <class T>
void add_rows_as(TensorView x, TensorView y) {
  const T* xs = x.data<T>();
  T* ys = y.data<T>();
  for_rows(x, [&](int64_t r, int64_t W) {
    for (int64_t f = 0; f < W; ++f) ys[r * W + f] = narrow<T>(widen(ys[r * W + f]) + widen(xs[r * W + f]));
  });
}

template <template <class> class Op, class... Args>
void by_dtype(DType dtype, Args... args) {
  switch (dtype) {
    case DType::f32: Op<float>{}(args...); break;
    case DType::bf16: Op<bf16>{}(args...); break;
    default: Op<double>{}(args...); break;
  }
}

template <class T>
struct ScaleRows {
  void operator()(TensorView x, TensorView p, TensorView y) const { scale_rows_as<T>(x, p, y); }
};
template <class T>
struct RowDots {
  void operator()(TensorView a, TensorView b, TensorView out) const { row_dots_as<T>(a, b, out); }
};
template <class T>
struct AddScaledRows {
  void operator()(TensorView s, TensorView p, TensorView y) const { add_scaled_rows_as<T>(s, p, y); }
};

template <class T>
struct AddRows {
  void operator()(TensorView x, TensorView y) const { add_rows_as<T>(x, y); }
};

}  // namespace

void scale_rows(TensorView x_RF, TensorView p_R, TensorView y_RF) {
  check_rows(x_RF, p_R, y_RF, "scale_rows");
  by_dtype<ScaleRows>(x_RF.dtype(), x_RF, p_R, y_RF);
}

void row_dots(TensorView a_RF, TensorView b_RF, TensorView out_R) {
  check_rows(a_RF, out_R, b_RF, "row_dots");
  by_dtype<RowDots>(a_RF.dtype(), a_RF, b_RF, out_R);
}

void add_scaled_rows(TensorView s_RF, TensorView p_R, TensorView y_RF) {
  check_rows(s_RF, p_R, y_RF, "add_scaled_rows");
  by_dtype<AddScaledRows>(s_RF.dtype(), s_RF, p_R, y_RF);
}

void add_rows(TensorView x_RF, TensorView y_RF) {
  RF_CHECK(x_RF.rank() == 2 && x_RF.is_contiguous() && y_RF.is_contiguous() && x_RF.shape() == y_RF.shape() &&
               x_RF.dtype() == y_RF.dtype() &&
               (x_RF.dtype() == DType::f32 || x_RF.dtype() == DType::bf16 || x_RF.dtype() == DType::f64),
           "add_rows: rows {} and {} must be contiguous float matrices of one shape and dtype", x_RF.describe(),
           y_RF.describe());
  by_dtype<AddRows>(x_RF.dtype(), x_RF, y_RF);
}

}  // namespace rf::model

#include "support/test_support.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "core/element_access.h"
#include "core/philox.h"

namespace rf::testing {
namespace {

constexpr double kFdStep = 1e-3;

// The i-th element of `view` in row-major order, as an offset into its data.
int64_t offset_of_element(const TensorView& view, int64_t i) {
  int64_t offset = 0;
  for (int d = view.rank() - 1; d >= 0; --d) {
    offset += (i % view.size(d)) * view.stride(d);
    i /= view.size(d);
  }
  return offset;
}

// Exactly representable in every floating dtype (1232 = 77 * 2^4 fits bf16's 8-bit significand), so
// a sentinel reads back as written.
double sentinel_value(DType dtype) { return dtype == DType::i32 || dtype == DType::i64 ? -123456 : 1232.0; }

}  // namespace

Tensor random_tensor(Shape shape, DType dtype, uint64_t seed, double low, double high) {
  Tensor t(shape, dtype);
  fill_uniform(t, Philox(seed, 0), low, high);
  return t;
}

Tensor random_ids(Shape shape, DType dtype, uint64_t seed, int64_t limit) {
  Tensor t(shape, dtype);
  const Philox rng(seed, 1);
  for (int64_t i = 0; i < t.numel(); ++i)
    store_f64(t, i, double(std::min<int64_t>(limit - 1, int64_t(rng.uniform(uint64_t(i)) * double(limit)))));
  return t;
}

GuardedTensor::GuardedTensor(Shape shape, DType dtype, Layout layout) {
  constexpr int64_t kPad = 16;  // sentinel elements before, after, and between strided rows
  const int rank = shape.rank();
  const int64_t inner = rank ? shape[rank - 1] : 1;
  const int64_t row_stride = layout == Layout::strided ? inner + 3 : inner;
  Shape strides = contiguous_strides(shape);
  if (rank) {
    strides[rank - 1] = 1;
    int64_t stride = row_stride;
    for (int d = rank - 2; d >= 0; --d) {
      strides[d] = stride;
      stride *= shape[d];
    }
  }
  const int64_t rows = rank ? shape.numel() / std::max<int64_t>(inner, 1) : 1;
  const int64_t span = rank ? rows * row_stride : 1;
  buffer_ = Tensor(Shape{span + 2 * kPad}, dtype);
  for (int64_t i = 0; i < buffer_.numel(); ++i) store_f64(buffer_, i, sentinel_value(dtype));
  inside_.assign(size_t(buffer_.numel()), 0);
  auto* base = static_cast<std::byte*>(buffer_.view().raw()) + kPad * int64_t(dtype_size(dtype));
  view_ = TensorView(base, dtype, shape, strides);
  for (int64_t i = 0; i < view_.numel(); ++i) {
    const int64_t at = kPad + offset_of_element(view_, i);
    inside_[size_t(at)] = 1;
    store_f64(buffer_, at, 0.0);
  }
}

void GuardedTensor::expect_sentinels_intact(const std::string& what) const {
  const double sentinel = sentinel_value(buffer_.dtype());
  int64_t broken = 0, first = -1;
  for (int64_t i = 0; i < buffer_.numel(); ++i) {
    if (inside_[size_t(i)]) continue;
    if (load_f64(buffer_, i) != sentinel) {
      if (first < 0) first = i;
      ++broken;
    }
  }
  EXPECT_EQ(broken, 0) << what << ": " << broken << " sentinel element(s) overwritten, first at buffer index "
                       << first;
}

GuardedTensor guarded_copy(TensorView src, Layout layout) {
  GuardedTensor out(src.shape(), src.dtype(), layout);
  copy_convert(src, out.view());
  return out;
}

void expect_error_containing(const std::function<void()>& fn, const std::string& fragment) {
  try {
    fn();
    ADD_FAILURE() << "no exception; expected one containing '" << fragment << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

void expect_config_error(const std::function<void()>& fn, const std::string& key, const std::string& fragment) {
  try {
    fn();
    ADD_FAILURE() << "no exception; expected a ConfigError naming " << key;
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key_path(), key) << e.what();
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

double max_abs_diff(TensorView a, TensorView b) {
  double worst = 0;
  for (int64_t i = 0; i < a.numel(); ++i)
    worst = std::max(worst, std::abs(load_f64(a, offset_of_element(a, i)) - load_f64(b, offset_of_element(b, i))));
  return worst;
}

double max_abs(TensorView t) {
  double worst = 0;
  for (int64_t i = 0; i < t.numel(); ++i) worst = std::max(worst, std::abs(load_f64(t, offset_of_element(t, i))));
  return worst;
}

void expect_close(TensorView actual, TensorView expected, double rtol, double atol, const std::string& what) {
  ASSERT_EQ(actual.shape(), expected.shape()) << what << ": shape " << actual.shape().to_string() << " vs "
                                              << expected.shape().to_string();
  int64_t bad = 0, worst_index = -1;
  double worst_excess = 0, worst_actual = 0, worst_expected = 0;
  for (int64_t i = 0; i < actual.numel(); ++i) {
    const double a = load_f64(actual, offset_of_element(actual, i));
    const double e = load_f64(expected, offset_of_element(expected, i));
    const double allowed = atol + rtol * std::abs(e);
    const double err = std::abs(a - e);
    if (!(err <= allowed)) {  // NaN fails too
      ++bad;
      const double excess = std::isnan(err) ? INFINITY : err / std::max(allowed, 1e-300);
      if (worst_index < 0 || excess > worst_excess) {
        worst_excess = excess;
        worst_index = i;
        worst_actual = a;
        worst_expected = e;
      }
    }
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << actual.numel() << " elements out of tolerance (rtol "
                    << rtol << ", atol " << atol << "); worst at element " << worst_index << ": got "
                    << worst_actual << ", expected " << worst_expected;
}

bool fd_agrees(double g, double g_fd) {
  return std::abs(g - g_fd) <= 1e-6 * std::max(std::abs(g), std::abs(g_fd)) + 1e-9;
}

double fd_coordinate(const std::function<double()>& loss, TensorView x, int64_t element_index) {
  const int64_t offset = offset_of_element(x, element_index);
  double* p = x.data<double>() + offset;
  const double saved = *p;
  auto at = [&](double delta) {
    *p = saved + delta;
    return loss();
  };
  const double h = kFdStep;
  const double g = (at(-2 * h) - 8 * at(-h) + 8 * at(h) - at(2 * h)) / (12 * h);
  *p = saved;
  return g;
}

void expect_gradient_matches_fd(const std::function<double()>& loss, TensorView x, TensorView grad,
                                const std::string& what, int64_t num_samples, uint64_t seed) {
  ASSERT_EQ(x.shape(), grad.shape()) << what;
  std::vector<int64_t> indices;
  if (num_samples <= 0 || num_samples >= x.numel()) {
    for (int64_t i = 0; i < x.numel(); ++i) indices.push_back(i);
  } else {
    const Philox rng(seed, 7);
    for (int64_t s = 0; s < num_samples; ++s)
      indices.push_back(std::min<int64_t>(x.numel() - 1, int64_t(rng.uniform(uint64_t(s)) * double(x.numel()))));
  }
  int failures = 0;
  for (int64_t i : indices) {
    const double g = load_f64(grad, offset_of_element(grad, i));
    const double g_fd = fd_coordinate(loss, x, i);
    if (!fd_agrees(g, g_fd)) {
      if (++failures <= 5)
        ADD_FAILURE() << what << ": element " << i << ": analytic " << g << " vs finite difference " << g_fd
                      << " (diff " << g - g_fd << ")";
    }
  }
  EXPECT_EQ(failures, 0) << what << ": " << failures << " of " << indices.size() << " coordinates disagree";
}

void expect_directional_derivative_matches_fd(const std::function<double()>& loss,
                                              const std::vector<TensorView>& params,
                                              const std::vector<TensorView>& grads,
                                              const std::vector<TensorView>& directions, const std::string& what) {
  ASSERT_EQ(params.size(), grads.size());
  ASSERT_EQ(params.size(), directions.size());
  std::vector<std::vector<double>> saved(params.size());
  double analytic = 0;
  for (size_t t = 0; t < params.size(); ++t) {
    for (int64_t i = 0; i < params[t].numel(); ++i) {
      saved[t].push_back(load_f64(params[t], offset_of_element(params[t], i)));
      analytic += load_f64(grads[t], offset_of_element(grads[t], i)) *
                  load_f64(directions[t], offset_of_element(directions[t], i));
    }
  }
  auto at = [&](double step) {
    for (size_t t = 0; t < params.size(); ++t)
      for (int64_t i = 0; i < params[t].numel(); ++i)
        store_f64(params[t], offset_of_element(params[t], i),
                  saved[t][size_t(i)] + step * load_f64(directions[t], offset_of_element(directions[t], i)));
    return loss();
  };
  // Step kFdStep along the unit vector: a step of kFdStep in every one of ~1e5 coordinates at
  // once would leave the stencil's O(h^4) regime.
  double norm_squared = 0;
  for (const TensorView& d : directions)
    for (int64_t i = 0; i < d.numel(); ++i) norm_squared += std::pow(load_f64(d, offset_of_element(d, i)), 2);
  const double h = kFdStep / std::sqrt(norm_squared);
  const double fd = (at(-2 * h) - 8 * at(-h) + 8 * at(h) - at(2 * h)) / (12 * h);
  at(0.0);
  EXPECT_TRUE(fd_agrees(analytic, fd)) << what << ": directional derivative analytic " << analytic
                                       << " vs finite difference " << fd << " (diff " << analytic - fd << ")";
}

std::string reference_dir() { return RF_REFERENCE_DIR; }

std::vector<std::string> reference_model_dirs() {
  std::vector<std::string> dirs;
  const std::filesystem::path root = std::filesystem::path(RF_REFERENCE_DIR) / "hf_models";
  if (!std::filesystem::is_directory(root)) return dirs;
  for (const auto& entry : std::filesystem::directory_iterator(root))
    if (entry.is_directory() && std::filesystem::exists(entry.path() / "config.json"))
      dirs.push_back(entry.path().string());
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

}  // namespace rf::testing

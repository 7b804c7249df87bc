// Shared test helpers: seeded random tensors, closeness checks, sentinel-guarded output buffers,
// and the one finite-difference rule used everywhere (issue #2, acceptance 3):
//   |g - g_fd| <= 1e-6 * max(|g|, |g_fd|) + 1e-9,
// with g_fd the 5-point central difference (error O(h^4)) at step h = 1e-3 on f64 `ref` kernels.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace rf::testing {

// Uniform in [low, high), from Philox(seed, stream 0): reproducible and thread-count independent.
Tensor random_tensor(Shape shape, DType dtype, uint64_t seed, double low = -1.0, double high = 1.0);
// Integer ids in [0, limit) (i32 or i64).
Tensor random_ids(Shape shape, DType dtype, uint64_t seed, int64_t limit);

enum class Layout : uint8_t { contiguous, strided };

// A buffer with sentinel values on both sides of the tensor and, in the strided layout, between
// rows (the last dim gets a row stride larger than its extent). A kernel that writes outside its
// view overwrites a sentinel, which `expect_sentinels_intact` reports.
class GuardedTensor {
 public:
  GuardedTensor(Shape shape, DType dtype, Layout layout);
  TensorView view() const { return view_; }
  operator TensorView() const { return view_; }  // NOLINT
  void expect_sentinels_intact(const std::string& what) const;

 private:
  Tensor buffer_;
  TensorView view_;
  std::vector<uint8_t> inside_;  // 1 where an element of view_ lives
};

// Copies `src` into a new guarded buffer of `layout` (and dtype of src).
GuardedTensor guarded_copy(TensorView src, Layout layout);

// EXPECT that `fn` throws an rf::Error whose message contains `fragment`.
void expect_error_containing(const std::function<void()>& fn, const std::string& fragment);
// EXPECT that `fn` throws a ConfigError keyed `key` whose message contains `fragment`.
void expect_config_error(const std::function<void()>& fn, const std::string& key, const std::string& fragment);

// EXPECT that |actual - expected| <= atol + rtol * |expected| elementwise (compared in f64), and
// reports the worst element.
void expect_close(TensorView actual, TensorView expected, double rtol, double atol, const std::string& what);
double max_abs_diff(TensorView a, TensorView b);
// The largest |element| of `t` (any strides): the scale of a tensor-relative tolerance.
double max_abs(TensorView t);

// --- finite differences ---------------------------------------------------------------------
bool fd_agrees(double g, double g_fd);
// d loss / d x[offset] by the 5-point stencil; x is an f64 view (any strides), restored after.
double fd_coordinate(const std::function<double()>& loss, TensorView x_f64, int64_t element_index);
// EXPECT fd_agrees at every coordinate of x (or at `num_samples` coordinates drawn with `seed`
// when num_samples > 0); grad_f64 has x's shape. Reports up to 5 failures with their index.
void expect_gradient_matches_fd(const std::function<double()>& loss, TensorView x_f64, TensorView grad_f64,
                                const std::string& what, int64_t num_samples = 0, uint64_t seed = 0);
// Directional derivative along `direction` (one view per parameter tensor, matching `params`)
// by the 5-point stencil, compared with sum(grad . direction).
void expect_directional_derivative_matches_fd(const std::function<double()>& loss,
                                              const std::vector<TensorView>& params_f64,
                                              const std::vector<TensorView>& grads_f64,
                                              const std::vector<TensorView>& directions_f64,
                                              const std::string& what);

// Folders of the reference Hugging Face models (`shared/reference/hf_models/*/`), found by globbing
// for config.json; RF_REFERENCE_DIR is set by CMake.
std::vector<std::string> reference_model_dirs();
std::string reference_dir();

}  // namespace rf::testing

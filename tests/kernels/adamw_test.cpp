// AdamW tests: every cpu variant bitwise equal to the ref over several steps (with and without
// weight decay, bf16 / f32 / no param copy, sizes off every tile), the f64 ref against a loop
// written from the formula, decoupled weight decay alone, and argument errors.
#include <cmath>
#include <cstring>
#include <optional>

#include "core/element_access.h"
#include "kernels/fast_variants.h"
#include "kernels/ref/ref_kernels.h"
#include "support/test_support.h"

namespace rf::kernels {
namespace {

using testing::random_tensor;

struct AdamWState {
  Tensor param, exp_avg, exp_avg_sq;
  explicit AdamWState(TensorView initial_param)
      : param(clone(initial_param, initial_param.dtype())),
        exp_avg(initial_param.shape(), initial_param.dtype()),
        exp_avg_sq(initial_param.shape(), initial_param.dtype()) {}
};

bool bitwise_equal(TensorView a, TensorView b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

// The gradient of step `step`: mixed magnitudes, so that m and v span several binades.
Tensor gradient(int64_t count, DType dtype, int64_t step) {
  Tensor g = random_tensor({count}, dtype, 100 + uint64_t(step));
  for (int64_t i = 0; i < count; i += 3) store_f64(g, i, load_f64(g, i) * 1e-3);
  return g;
}

void check_cpu_against_ref(int64_t count, double weight_decay) {
  constexpr int kSteps = 3;
  const Tensor initial = random_tensor({count}, DType::f32, 7);
  std::vector<Tensor> grads;
  std::vector<AdamWParams> params;
  std::vector<AdamWState> expected;  // the ref's state after each step
  AdamWState ref_state(initial);
  for (int64_t step = 1; step <= kSteps; ++step) {
    grads.push_back(gradient(count, DType::f32, step));
    params.push_back({.lr = 0.05, .beta1 = 0.8, .beta2 = 0.95, .eps = 1e-6, .weight_decay = weight_decay, .step = step});
    ref::adamw_step(params.back(), ref_state.param, grads.back(), ref_state.exp_avg, ref_state.exp_avg_sq, {});
    expected.emplace_back(ref_state.param);
    copy_convert(ref_state.exp_avg, expected.back().exp_avg);
    copy_convert(ref_state.exp_avg_sq, expected.back().exp_avg_sq);
  }
  EXPECT_GT(testing::max_abs_diff(ref_state.param, initial), 0.0) << "the params did not move";

  for (const KernelTable* table : fast_tables()) {
    for (std::optional<DType> copy_dtype : {std::optional<DType>{}, std::optional{DType::f32}, std::optional{DType::bf16}}) {
      const std::string what = fmt::format("{} count={} wd={} copy={}", kernel_variant_name(table->variant), count,
                                           weight_decay, copy_dtype ? dtype_name(*copy_dtype) : "none");
      AdamWState state(initial);
      const Tensor copy = copy_dtype ? Tensor({count}, *copy_dtype) : Tensor();
      for (size_t s = 0; s < kSteps; ++s) {
        table->adamw_step(params[s], state.param, grads[s], state.exp_avg, state.exp_avg_sq, copy);
        ASSERT_TRUE(bitwise_equal(state.exp_avg, expected[s].exp_avg)) << what << " exp_avg, step " << s + 1;
        ASSERT_TRUE(bitwise_equal(state.exp_avg_sq, expected[s].exp_avg_sq)) << what << " exp_avg_sq, step " << s + 1;
        ASSERT_TRUE(bitwise_equal(state.param, expected[s].param)) << what << " param, step " << s + 1;
      }
      for (int64_t i = 0; copy_dtype && i < count; ++i) {
        const float updated = state.param.data<float>()[i];
        if (*copy_dtype == DType::bf16)
          ASSERT_EQ(copy.data<bf16>()[i].bits, to_bf16(updated).bits) << what << " param_copy element " << i;
        else
          ASSERT_EQ(copy.data<float>()[i], updated) << what << " param_copy element " << i;
      }
    }
  }
}

TEST(AdamWCpu, MatchesRefBitwiseOverSteps) {
  // 40000 elements take the threaded path, with a partial last tile.
  for (int64_t count : {int64_t(1), int64_t(1037), int64_t(40000)})
    for (double weight_decay : {0.0, 0.1}) check_cpu_against_ref(count, weight_decay);
}

// The f64 ref against the update written straight from the formula in adamw.h (three steps).
TEST(AdamWRef, F64MatchesTheFormula) {
  constexpr int64_t kCount = 29;
  const AdamWParams base{.lr = 0.01, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.05};
  const Tensor initial = random_tensor({kCount}, DType::f64, 8);
  AdamWState state(initial);
  std::vector<double> p(kCount), m(kCount, 0.0), v(kCount, 0.0);
  for (int64_t i = 0; i < kCount; ++i) p[size_t(i)] = initial.data<double>()[i];
  for (int64_t t = 1; t <= 3; ++t) {
    const Tensor g = gradient(kCount, DType::f64, t);
    AdamWParams params = base;
    params.step = t;
    ref::adamw_step(params, state.param, g, state.exp_avg, state.exp_avg_sq, {});
    for (size_t i = 0; i < size_t(kCount); ++i) {
      const double gi = g.data<double>()[i];
      p[i] *= 1 - base.lr * base.weight_decay;
      m[i] = base.beta1 * m[i] + (1 - base.beta1) * gi;
      v[i] = base.beta2 * v[i] + (1 - base.beta2) * gi * gi;
      const double m_hat = m[i] / (1 - std::pow(base.beta1, double(t)));
      const double v_hat_sqrt = std::sqrt(v[i]) / std::sqrt(1 - std::pow(base.beta2, double(t)));
      p[i] -= base.lr * m_hat / (v_hat_sqrt + base.eps);
    }
  }
  for (size_t i = 0; i < size_t(kCount); ++i) {
    // Different association of the same terms: a few ulps, more where m's terms cancel.
    EXPECT_NEAR(state.param.data<double>()[i], p[i], 1e-14 * std::abs(p[i]) + 1e-17) << "param " << i;
    EXPECT_NEAR(state.exp_avg.data<double>()[i], m[i], 1e-14 * std::abs(m[i]) + 1e-17) << "exp_avg " << i;
    EXPECT_NEAR(state.exp_avg_sq.data<double>()[i], v[i], 1e-14 * std::abs(v[i])) << "exp_avg_sq " << i;
  }
}

// With zero gradients (and moments) the update is 0 / (0 + eps): only the decoupled decay moves
// the params, by exactly the f32 factor 1 - lr wd, and not at all without weight decay.
TEST(AdamWKernels, WeightDecayAloneScalesTheParams) {
  std::vector<const KernelTable*> tables = fast_tables();
  tables.insert(tables.begin(), &ref::table());
  const Tensor initial = random_tensor({37}, DType::f32, 9);
  const Tensor zero_grad({37}, DType::f32);
  for (const KernelTable* table : tables) {
    for (double weight_decay : {0.0, 0.1}) {
      AdamWState state(initial);
      table->adamw_step({.lr = 0.01, .weight_decay = weight_decay, .step = 1}, state.param, zero_grad, state.exp_avg,
                        state.exp_avg_sq, {});
      const float factor = float(1 - 0.01 * weight_decay);
      for (int64_t i = 0; i < 37; ++i)
        ASSERT_EQ(state.param.data<float>()[i], initial.data<float>()[i] * factor)
            << kernel_variant_name(table->variant) << " wd=" << weight_decay << " element " << i;
    }
  }
}

TEST(AdamWKernels, RejectBadArguments) {
  std::vector<const KernelTable*> tables = fast_tables();
  tables.insert(tables.begin(), &ref::table());
  const Tensor p({8}, DType::f32), g({8}, DType::f32), m({8}, DType::f32), v({8}, DType::f32);
  const Tensor short_grad({7}, DType::f32), bf16_param({8}, DType::bf16), wrong_copy({9}, DType::bf16);
  for (const KernelTable* table : tables) {
    const std::string what(kernel_variant_name(table->variant));
    EXPECT_THROW(table->adamw_step({}, bf16_param, g, m, v, {}), Error) << what;
    EXPECT_THROW(table->adamw_step({}, p, short_grad, m, v, {}), Error) << what;
    EXPECT_THROW(table->adamw_step({.step = 0}, p, g, m, v, {}), Error) << what;
    EXPECT_THROW(table->adamw_step({}, p, g, m, v, wrong_copy), Error) << what;
  }
}

}  // namespace
}  // namespace rf::kernels

// RoPE tests: every cpu variant against the ref (f32 and bf16, i32 and i64 positions, partial
// rotary dims, q as a slice of a fused qkv buffer, strided views with sentinels, scaled
// frequencies), a value worked out from the formula, the frequencies of `linear` and `llama3`
// scaling against transformers' formulas, the relative-position property, finite differences of the
// f64 ref backward, and argument errors.
// Legend: N tokens, H heads, D head dim.
#include <cmath>

#include "core/element_access.h"
#include "kernels/fast_variants.h"
#include "kernels/ref/ref_kernels.h"
#include "support/test_support.h"

namespace rf::kernels {
namespace {

using testing::expect_close;
using testing::guarded_copy;
using testing::GuardedTensor;
using testing::Layout;
using testing::random_ids;
using testing::random_tensor;

enum class RopeLayout : uint8_t { contiguous, strided, fused_qkv };
const char* layout_name(RopeLayout layout) {
  return layout == RopeLayout::fused_qkv ? "fused_qkv" : layout == RopeLayout::strided ? "strided" : "contiguous";
}

struct RopeCase {
  int64_t N, H, D, rotary_dim;
  DType dtype, pos_dtype;
  int64_t max_pos;
  RopeLayout layout;
  RopeScaling scaling = {};
};

// Llama 3.1's rope_scaling.
constexpr RopeScaling kLlama31Scaling{.type = RopeScalingType::llama3,
                                      .factor = 8.0,
                                      .low_freq_factor = 1.0,
                                      .high_freq_factor = 4.0,
                                      .original_max_position_embeddings = 8192.0};

// f32: cos and sin are rounded to f32 (error ~6e-8) and applied in f32. bf16: both sides round
// the same f32/f64 value to bf16 and may land one ulp (2^-8 relative) apart.
double rtol_for(DType dtype) { return dtype == DType::bf16 ? 1e-2 : 1e-5; }

void check_against_ref(const RopeCase& k) {
  const std::string name = fmt::format("N={} H={} D={} rotary_dim={} {} pos {} {}", k.N, k.H, k.D, k.rotary_dim,
                                       dtype_name(k.dtype), dtype_name(k.pos_dtype), layout_name(k.layout));
  const RopeParams params{.theta = 10000.0, .rotary_dim = k.rotary_dim, .scaling = k.scaling};
  const Tensor pos = random_ids({k.N}, k.pos_dtype, 1, k.max_pos + 1);
  const Tensor x = random_tensor({k.N, k.H, k.D}, k.dtype, 2);
  const Tensor dx = random_tensor({k.N, k.H, k.D}, k.dtype, 3);
  const Tensor x_ref = clone(x, k.dtype), dx_ref = clone(dx, k.dtype);
  ref::rope_forward(params, pos, x_ref);
  ref::rope_backward(params, pos, dx_ref);

  for (const KernelTable* table : fast_tables()) {
    const std::string what = fmt::format("{} {}", kernel_variant_name(table->variant), name);
    for (bool forward : {true, false}) {
      const TensorView input = forward ? x : dx;
      const TensorView expected = forward ? x_ref : dx_ref;
      const auto run = [&](TensorView view) {
        forward ? table->rope_forward(params, pos, view) : table->rope_backward(params, pos, view);
      };
      const std::string label = what + (forward ? " forward" : " backward");
      if (k.layout == RopeLayout::fused_qkv) {
        // q is the first H heads of a [N, (H + 2) * D] buffer holding q, k and v (one kv head).
        const GuardedTensor qkv_g({k.N, (k.H + 2) * k.D}, k.dtype, Layout::strided);
        const Tensor qkv_before = random_tensor({k.N, (k.H + 2) * k.D}, k.dtype, 4);
        copy_convert(qkv_before, qkv_g);
        const TensorView qkv = qkv_g.view();
        const TensorView q(qkv.raw(), k.dtype, {k.N, k.H, k.D}, {qkv.stride(0), k.D, 1});
        copy_convert(input, q);
        run(q);
        expect_close(q, expected, rtol_for(k.dtype), 1e-6, label);
        expect_close(qkv.slice(1, k.H * k.D, 2 * k.D), qkv_before.view().slice(1, k.H * k.D, 2 * k.D), 0, 0,
                     label + " k and v untouched");
        qkv_g.expect_sentinels_intact(label);
      } else {
        const GuardedTensor x_g =
            guarded_copy(input, k.layout == RopeLayout::strided ? Layout::strided : Layout::contiguous);
        run(x_g);
        expect_close(x_g, expected, rtol_for(k.dtype), 1e-6, label);
        x_g.expect_sentinels_intact(label);
      }
    }
  }
}

TEST(Rope, CpuMatchesRef) {
  for (DType dtype : {DType::f32, DType::bf16}) {
    check_against_ref({1, 1, 2, 0, dtype, DType::i32, 5, RopeLayout::contiguous});
    check_against_ref({5, 3, 6, 4, dtype, DType::i64, 100, RopeLayout::strided});
    check_against_ref({4, 3, 10, 0, dtype, DType::i32, 20, RopeLayout::fused_qkv});
    check_against_ref({7, 3, 64, 0, dtype, DType::i64, 50000, RopeLayout::strided});
    check_against_ref({3, 5, 130, 128, dtype, DType::i32, 4096, RopeLayout::fused_qkv});
    check_against_ref({2, 2, 262, 0, dtype, DType::i64, 300, RopeLayout::contiguous});  // rotary_dim/2 = 131
    check_against_ref({40, 4, 128, 0, dtype, DType::i32, 2048, RopeLayout::strided});  // multi-threaded
    check_against_ref({300, 2, 32, 0, dtype, DType::i64, 16, RopeLayout::fused_qkv});  // tabulated positions
    const RopeScaling linear{.type = RopeScalingType::linear, .factor = 4.0};
    check_against_ref({9, 3, 64, 0, dtype, DType::i64, 30000, RopeLayout::strided, linear});
    check_against_ref({9, 2, 128, 0, dtype, DType::i32, 100000, RopeLayout::contiguous, kLlama31Scaling});
  }
}

// transformers' _compute_llama3_parameters, step for step (torch.where over the frequencies).
double hf_llama3_inv_freq(const RopeScaling& s, double inv_freq) {
  const double low_freq_wavelen = s.original_max_position_embeddings / s.low_freq_factor;
  const double high_freq_wavelen = s.original_max_position_embeddings / s.high_freq_factor;
  const double wavelen = 2 * M_PI / inv_freq;
  double inv_freq_llama = wavelen > low_freq_wavelen ? inv_freq / s.factor : inv_freq;
  const double smooth_factor =
      (s.original_max_position_embeddings / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
  const double smoothed_inv_freq = (1 - smooth_factor) * inv_freq_llama / s.factor + smooth_factor * inv_freq_llama;
  const bool is_medium_freq = !(wavelen < high_freq_wavelen) && !(wavelen > low_freq_wavelen);
  return is_medium_freq ? smoothed_inv_freq : inv_freq_llama;
}

TEST(Rope, ScaledFrequenciesFollowTransformers) {
  constexpr int64_t rotary_dim = 128;
  const double theta = 500000.0;
  int64_t kept = 0, slowed = 0, blended = 0;
  for (int64_t i = 0; i < rotary_dim / 2; ++i) {
    const double plain = std::pow(theta, -double(2 * i) / rotary_dim);
    EXPECT_EQ(rope_inv_freq({.theta = theta}, i, rotary_dim), plain) << i;
    EXPECT_EQ(rope_inv_freq({.theta = theta, .scaling = {.type = RopeScalingType::linear, .factor = 2.5}}, i,
                            rotary_dim),
              plain / 2.5)
        << i;
    const double llama3 = rope_inv_freq({.theta = theta, .scaling = kLlama31Scaling}, i, rotary_dim);
    EXPECT_NEAR(llama3, hf_llama3_inv_freq(kLlama31Scaling, plain), 1e-15 * plain) << i;
    // Wavelengths under 8192 / 4 keep their frequency, over 8192 / 1 are slowed 8x, the rest blend.
    const double wavelength = 2 * M_PI / plain;
    if (wavelength < 2048) {
      EXPECT_EQ(llama3, plain) << i;
      ++kept;
    } else if (wavelength > 8192) {
      EXPECT_DOUBLE_EQ(llama3, plain / 8) << i;
      ++slowed;
    } else {
      EXPECT_GT(llama3, plain / 8) << i;
      EXPECT_LT(llama3, plain) << i;
      ++blended;
    }
  }
  EXPECT_GT(kept, 0);  // Llama 3.1's 64 frequencies fall in all three bands
  EXPECT_GT(slowed, 0);
  EXPECT_GT(blended, 0);
}

// A call whose positions span fewer values than it has tokens tabulates them once; otherwise every
// token computes its own. Both must give the same bits: run tokens 0..63 at positions 0..63 in
// one call (tabulated), then each token alone next to a token at a far position (per token).
TEST(Rope, TabulatedAnglesGiveTheSameBitsAsPerTokenAngles) {
  constexpr int64_t N = 64, H = 3, D = 40;
  for (DType dtype : {DType::f32, DType::bf16}) {
    for (const KernelTable* table : fast_tables()) {
      Tensor pos({N}, DType::i64);
      for (int64_t n = 0; n < N; ++n) pos.at<int64_t>({n}) = n;
      const Tensor x = random_tensor({N, H, D}, dtype, 5);
      const Tensor tabulated = clone(x, dtype);
      table->rope_forward({}, pos, tabulated);
      for (int64_t n = 0; n < N; ++n) {
        Tensor pair({2, H, D}, dtype), pair_pos({2}, DType::i64);
        copy_convert(x.view().slice(0, n, 1), pair.view().slice(0, 0, 1));
        copy_convert(x.view().slice(0, n, 1), pair.view().slice(0, 1, 1));
        pair_pos.at<int64_t>({0}) = n;
        pair_pos.at<int64_t>({1}) = 100000;
        table->rope_forward({}, pair_pos, pair);
        expect_close(pair.view().slice(0, 0, 1), tabulated.view().slice(0, n, 1), 0, 0,
                     fmt::format("{} {} token {}", kernel_variant_name(table->variant), dtype_name(dtype), n));
      }
    }
  }
}

// D = 4, one head at position 3: inv_freq = (1, 10000^(-1/2)), rotate-half pairs (x0, x2), (x1, x3).
TEST(Rope, MatchesTheFormulaAtOnePosition) {
  const double values[4] = {0.5, -1.25, 2.0, 0.75};
  double expected[4];
  for (int i = 0; i < 2; ++i) {
    const double angle = 3.0 * std::pow(10000.0, -2.0 * i / 4.0);
    expected[i] = values[i] * std::cos(angle) - values[i + 2] * std::sin(angle);
    expected[i + 2] = values[i + 2] * std::cos(angle) + values[i] * std::sin(angle);
  }
  Tensor pos({1}, DType::i64);
  pos.at<int64_t>({0}) = 3;
  std::vector<const KernelTable*> tables = fast_tables();
  tables.push_back(&ref::table());
  for (const KernelTable* table : tables) {
    const DType dtype = table->variant == KernelVariant::ref ? DType::f64 : DType::f32;
    Tensor x({1, 1, 4}, dtype);
    for (int64_t d = 0; d < 4; ++d) store_f64(x, d, values[d]);
    table->rope_forward(RopeParams{.theta = 10000.0}, pos, x);
    for (int64_t d = 0; d < 4; ++d)
      EXPECT_NEAR(load_f64(x, d), expected[d], dtype == DType::f64 ? 1e-15 : 1e-6)
          << kernel_variant_name(table->variant) << " d=" << d;
  }
}

// Dims past rotary_dim pass through bit for bit.
TEST(Rope, PartialRotaryLeavesTheTailUntouched) {
  const int64_t N = 3, H = 2, D = 6;
  const Tensor pos = random_ids({N}, DType::i32, 5, 1000);
  const Tensor x = random_tensor({N, H, D}, DType::f32, 6);
  std::vector<const KernelTable*> tables = fast_tables();
  tables.push_back(&ref::table());
  for (const KernelTable* table : tables) {
    const Tensor y = clone(x, DType::f32);
    table->rope_forward(RopeParams{.rotary_dim = 4}, pos, y);
    expect_close(y.view().slice(2, 4, 2), x.view().slice(2, 4, 2), 0, 0,
                 std::string(kernel_variant_name(table->variant)) + " tail");
    EXPECT_GT(testing::max_abs_diff(y.view().slice(2, 0, 4), x.view().slice(2, 0, 4)), 1e-3);
  }
}

// q(m) . k(n) after RoPE depends on m - n only.
TEST(Rope, DotProductDependsOnlyOnRelativePosition) {
  const int64_t D = 8;
  std::vector<const KernelTable*> tables = fast_tables();
  tables.push_back(&ref::table());
  for (const KernelTable* table : tables) {
    const DType dtype = table->variant == KernelVariant::ref ? DType::f64 : DType::f32;
    const double tol = dtype == DType::f64 ? 1e-12 : 1e-5;
    const Tensor q = random_tensor({1, 1, D}, dtype, 7), k = random_tensor({1, 1, D}, dtype, 8);
    auto rotated_dot = [&](int64_t q_pos, int64_t k_pos) {
      Tensor pos({1}, DType::i64);
      const Tensor q_rot = clone(q, dtype), k_rot = clone(k, dtype);
      pos.at<int64_t>({0}) = q_pos;
      table->rope_forward({}, pos, q_rot);
      pos.at<int64_t>({0}) = k_pos;
      table->rope_forward({}, pos, k_rot);
      double dot = 0;
      for (int64_t d = 0; d < D; ++d) dot += load_f64(q_rot, d) * load_f64(k_rot, d);
      return dot;
    };
    const double at_origin = rotated_dot(7, 0);
    EXPECT_NEAR(rotated_dot(12, 5), at_origin, tol) << kernel_variant_name(table->variant);
    EXPECT_NEAR(rotated_dot(1007, 1000), at_origin, tol) << kernel_variant_name(table->variant);
    EXPECT_GT(std::abs(rotated_dot(3, 0) - at_origin), 1e-3) << kernel_variant_name(table->variant);
  }
}

TEST(Rope, RefBackwardMatchesFiniteDifferences) {
  const int64_t N = 2, H = 2, D = 6;
  const RopeParams params{.theta = 500.0, .rotary_dim = 4};
  Tensor pos({N}, DType::i32);
  pos.at<int32_t>({0}) = 3;
  pos.at<int32_t>({1}) = 11;
  const Tensor x = random_tensor({N, H, D}, DType::f64, 9);
  const Tensor r = random_tensor({N, H, D}, DType::f64, 10);
  auto loss = [&] {
    const Tensor y = clone(x, DType::f64);
    ref::rope_forward(params, pos, y);
    double sum = 0;
    for (int64_t i = 0; i < y.numel(); ++i) sum += y.data<double>()[i] * r.data<double>()[i];
    return sum;
  };
  const Tensor dx = clone(r, DType::f64);
  ref::rope_backward(params, pos, dx);
  testing::expect_gradient_matches_fd(loss, x, dx, "rope dx");
}

TEST(Rope, RejectsBadArguments) {
  const Tensor x({2, 1, 6}, DType::f32);
  Tensor pos({2}, DType::i32);
  const Tensor pos_f32({2}, DType::f32);
  std::vector<const KernelTable*> tables = fast_tables();
  tables.push_back(&ref::table());
  for (const KernelTable* table : tables) {
    EXPECT_THROW(table->rope_forward(RopeParams{.rotary_dim = 3}, pos, x), Error);  // odd rotary_dim
    EXPECT_THROW(table->rope_forward({}, pos_f32, x), Error);                       // float positions
    EXPECT_THROW(table->rope_forward({.scaling = {.type = RopeScalingType::linear, .factor = 0}}, pos, x), Error);
    EXPECT_THROW(table->rope_forward({.scaling = {.type = RopeScalingType::llama3, .low_freq_factor = 4,
                                                  .high_freq_factor = 4}},
                                     pos, x),
                 Error);
    pos.at<int32_t>({1}) = -1;
    EXPECT_THROW(table->rope_backward({}, pos, x), Error);
    pos.at<int32_t>({1}) = 0;
  }
}

}  // namespace
}  // namespace rf::kernels

// SwiGLU tests: every cpu variant against the ref (f32 and bf16, gate and up as the two halves of
// one [N, 2F] buffer, the gradients written into the halves of another, strided with sentinels),
// extreme gate values, HF's bf16 rounding point, finite differences of the f64 ref backward, and argument errors.
// Legend: N tokens, F FFN width.
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
using testing::random_tensor;

// f32: our exp is within a few ulp of the true value, and dgate's factor 1 + g (1 - s) cancels
// near g = -1.28, hence the small atol. bf16: the f32 and f64 results may round to neighbouring
// bf16 values, twice in h (silu is rounded before the product): 2 ulps of 2^-8.
struct Tolerance {
  double rtol, atol;
};
Tolerance tolerance_for(DType dtype) { return dtype == DType::bf16 ? Tolerance{1e-2, 1e-5} : Tolerance{1e-5, 1e-6}; }

void check_against_ref(const Tensor& gate_up, const Tensor& dh, Layout layout, Tolerance tol) {
  const DType dtype = gate_up.dtype();
  const int64_t N = dh.size(0), F = dh.size(1);
  const std::string name = fmt::format("N={} F={} {} {}", N, F, dtype_name(dtype),
                                       layout == Layout::strided ? "strided" : "contiguous");
  const TensorView gate = gate_up.view().slice(1, 0, F), up = gate_up.view().slice(1, F, F);
  const Tensor h_ref({N, F}, dtype), dgate_ref({N, F}, dtype), dup_ref({N, F}, dtype);
  ref::swiglu_forward(gate, up, h_ref);
  ref::swiglu_backward(gate, up, dh, dgate_ref, dup_ref);

  for (const KernelTable* table : fast_tables()) {
    const std::string what = fmt::format("{} {}", kernel_variant_name(table->variant), name);
    const GuardedTensor gate_up_g = guarded_copy(gate_up, layout);
    const TensorView gate_g = gate_up_g.view().slice(1, 0, F), up_g = gate_up_g.view().slice(1, F, F);
    const GuardedTensor h_g({N, F}, dtype, layout);
    table->swiglu_forward(gate_g, up_g, h_g);
    expect_close(h_g, h_ref, tol.rtol, tol.atol, what + " h");
    h_g.expect_sentinels_intact(what + " h");

    const GuardedTensor dh_g = guarded_copy(dh, layout);
    const GuardedTensor dgate_up_g({N, 2 * F}, dtype, layout);
    const TensorView dgate_g = dgate_up_g.view().slice(1, 0, F), dup_g = dgate_up_g.view().slice(1, F, F);
    table->swiglu_backward(gate_g, up_g, dh_g, dgate_g, dup_g);
    expect_close(dgate_g, dgate_ref, tol.rtol, tol.atol, what + " dgate");
    expect_close(dup_g, dup_ref, tol.rtol, tol.atol, what + " dup");
    dgate_up_g.expect_sentinels_intact(what + " dgate/dup");
    expect_close(gate_g, gate, 0, 0, what + " gate unchanged");
  }
}

TEST(SwiGlu, CpuMatchesRef) {
  struct Shape2 {
    int64_t N, F;
  };
  for (DType dtype : {DType::f32, DType::bf16}) {
    int seed = 0;
    for (const auto [N, F] : {Shape2{1, 7}, Shape2{3, 37}, Shape2{4, 300}, Shape2{2, 1408}, Shape2{9, 1000}}) {
      const Tensor gate_up = random_tensor({N, 2 * F}, dtype, uint64_t(++seed), -8.0, 8.0);
      const Tensor dh = random_tensor({N, F}, dtype, uint64_t(++seed));
      check_against_ref(gate_up, dh, seed % 4 == 2 ? Layout::contiguous : Layout::strided, tolerance_for(dtype));
    }
  }
}

// Where e^-|g| underflows or the sigmoid saturates. Relative accuracy holds down to values of
// ~1e-37 (our exp returns 0 below e^-87), hence the tiny atol.
TEST(SwiGlu, CpuMatchesRefAtExtremeGates) {
  const double gates[] = {-1000, -120, -88, -87.5, -87, -86, -50, -20, -5, -1e-3, 0,
                          1e-3,  1.5,  20,  50,    86,  88,  120, 1000};
  const int64_t F = std::size(gates);
  Tensor gate_up({1, 2 * F}, DType::f32);
  for (int64_t f = 0; f < F; ++f) {
    gate_up.at<float>({0, f}) = float(gates[f]);
    gate_up.at<float>({0, F + f}) = 0.75f;
  }
  const Tensor dh = random_tensor({1, F}, DType::f32, 40, 0.5, 1.0);
  check_against_ref(gate_up, dh, Layout::contiguous, Tolerance{1e-5, 1e-35});
}

// bf16 follows HF's `act_fn(gate) * up`: h = bf16(bf16(silu(gate)) * up). Recomputed here in f64,
// it must agree exactly with nearly every element (an f32 silu may rarely round to the other
// bf16 neighbour); without the intermediate rounding about a quarter of them would differ.
TEST(SwiGlu, Bf16RoundsTheActivationBeforeTheProduct) {
  const int64_t N = 16, F = 64;
  const Tensor gate = random_tensor({N, F}, DType::bf16, 45, -4.0, 4.0);
  const Tensor up = random_tensor({N, F}, DType::bf16, 46, -2.0, 2.0);
  std::vector<const KernelTable*> tables = fast_tables();
  tables.push_back(&ref::table());
  for (const KernelTable* table : tables) {
    const Tensor h({N, F}, DType::bf16);
    table->swiglu_forward(gate, up, h);
    int64_t mismatches = 0;
    for (int64_t i = 0; i < N * F; ++i) {
      const double g = load_f64(gate, i);
      const float silu = to_f32(to_bf16(float(g / (1.0 + std::exp(-g)))));
      mismatches += h.data<bf16>()[i].bits != to_bf16(float(double(silu) * load_f64(up, i))).bits;
    }
    EXPECT_LE(mismatches, N * F / 100) << kernel_variant_name(table->variant);
  }
}

TEST(SwiGlu, RefBackwardMatchesFiniteDifferences) {
  const int64_t N = 2, F = 3;
  const Tensor gate = random_tensor({N, F}, DType::f64, 51, -3.0, 3.0);
  const Tensor up = random_tensor({N, F}, DType::f64, 52);
  const Tensor r = random_tensor({N, F}, DType::f64, 53);
  const Tensor h({N, F}, DType::f64);
  auto loss = [&] {
    ref::swiglu_forward(gate, up, h);
    double sum = 0;
    for (int64_t i = 0; i < h.numel(); ++i) sum += h.data<double>()[i] * r.data<double>()[i];
    return sum;
  };
  const Tensor dgate({N, F}, DType::f64), dup({N, F}, DType::f64);
  ref::swiglu_backward(gate, up, r, dgate, dup);
  testing::expect_gradient_matches_fd(loss, gate, dgate, "swiglu dgate");
  testing::expect_gradient_matches_fd(loss, up, dup, "swiglu dup");
}

TEST(SwiGlu, RejectsBadShapesAndDtypes) {
  const Tensor gate({2, 5}, DType::f32), up({2, 5}, DType::f32), h({2, 5}, DType::f32);
  const Tensor up_wide({2, 6}, DType::f32), h_f64({2, 5}, DType::f64);
  std::vector<const KernelTable*> tables = fast_tables();
  tables.push_back(&ref::table());
  for (const KernelTable* table : tables) {
    EXPECT_THROW(table->swiglu_forward(gate, up_wide, h), Error);
    EXPECT_THROW(table->swiglu_forward(gate, up, h_f64), Error);
  }
}

}  // namespace
}  // namespace rf::kernels

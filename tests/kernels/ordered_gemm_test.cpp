// The ordered GEMM's contract (kernels/cpu/ordered_gemm.h), bit for bit: every cpu variant this CPU
// runs computes exactly what a plain loop of std::fmaf over k ascending, then the epilogue in its
// written order, computes. That one statement is the GEMM's batch invariance and its ISA invariance:
// M, the blocking, the thread count and the vector width cannot change an element's arithmetic.
// Shapes cross the k slice (256), the row block (8 register tiles) and the column block; operands
// come row- and column-major; f32 and bf16 in and out.
// Legend: a_MK, b_KN, c_MN as in BLAS.
#include <omp.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/element_access.h"
#include "kernels/kernel_registry.h"
#include "support/test_support.h"

namespace rf::kernels {
namespace {

using rf::testing::random_tensor;

// The ordered tables of every cpu variant this CPU runs.
std::vector<const KernelTable*> ordered_tables() {
  const KernelRegistry probe;
  std::vector<const KernelTable*> tables;
  for (KernelVariant v : {KernelVariant::cpu_generic, KernelVariant::cpu_avx2, KernelVariant::cpu_avx512})
    if (probe.can_run(v))
      tables.push_back(&KernelRegistry(KernelConfig{.force_variant = v, .batch_invariant = true})
                            .table(KernelOp::linear, DType::f32));
  return tables;
}

float value_at(TensorView m, int64_t r, int64_t c) { return float(load_f64(m, r * m.stride(0) + c * m.stride(1))); }

// The contract, written as plainly as it reads: c = epilogue(fma chain over k).
Tensor contract_loop(TensorView a_MK, TensorView b_KN, TensorView c_init, DType out, float alpha, float beta,
                     TensorView bias_N, TensorView addend_MN) {
  const int64_t M = a_MK.size(0), K = a_MK.size(1), N = b_KN.size(1);
  Tensor c({M, N}, out);
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = 0; n < N; ++n) {
      float acc = 0.0f;
      for (int64_t k = 0; k < K; ++k) acc = std::fmaf(value_at(a_MK, m, k), value_at(b_KN, k, n), acc);
      float r = acc;
      if (alpha != 1.0f) r = alpha * r;
      if (beta != 0.0f) r = r + beta * value_at(c_init, m, n);
      if (!bias_N.empty()) r = r + float(load_f64(bias_N, n));
      if (!addend_MN.empty()) r = r + value_at(addend_MN, m, n);
      store_f64(c, m * N + n, double(r));  // exact for f32; rounds to nearest even for bf16, as the GEMM does
    }
  }
  return c;
}

void expect_bitwise_equal(TensorView got, TensorView want, const std::string& what) {
  ASSERT_EQ(got.numel(), want.numel()) << what;
  ASSERT_TRUE(got.is_contiguous() && want.is_contiguous()) << what;
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double g = load_f64(got, i), w = load_f64(want, i);
    if (std::memcmp(static_cast<const char*>(got.raw()) + i * got.element_size(),
                    static_cast<const char*>(want.raw()) + i * want.element_size(), got.element_size()) != 0) {
      ADD_FAILURE() << what << ": element " << i << " is " << g << ", the contract gives " << w;
      return;
    }
  }
}

struct Shape3 {
  int64_t M, N, K;
};
// Ragged everywhere: k past one and two slices, rows past one block of every variant's tiles, columns
// past one block.
constexpr Shape3 kShapes[] = {{1, 1, 1}, {5, 7, 3}, {13, 37, 257}, {97, 19, 600}, {2, 700, 40}, {150, 45, 0}};

TEST(OrderedGemm, EveryVariantComputesTheContractBitForBit) {
  uint64_t seed = 1;
  for (const KernelTable* table : ordered_tables()) {
    for (const Shape3& s : kShapes) {
      for (DType in : {DType::f32, DType::bf16}) {
        for (DType out : {DType::f32, DType::bf16}) {
          if (in == DType::f32 && out == DType::bf16) continue;  // the ops' dtype rules
          for (bool trans_a : {false, true}) {
            for (bool trans_b : {false, true}) {
              const std::string what = fmt::format("{} {}x{}x{} {}->{} trans {}{}", kernel_variant_name(table->variant),
                                                   s.M, s.N, s.K, dtype_name(in), dtype_name(out), trans_a ? 't' : 'n',
                                                   trans_b ? 't' : 'n');
              const Tensor a = random_tensor(trans_a ? Shape{s.K, s.M} : Shape{s.M, s.K}, in, ++seed);
              const Tensor b = random_tensor(trans_b ? Shape{s.N, s.K} : Shape{s.K, s.N}, in, ++seed);
              const TensorView a_MK = trans_a ? a.view().transpose(0, 1) : a.view();
              const TensorView b_KN = trans_b ? b.view().transpose(0, 1) : b.view();
              const Tensor c_init = random_tensor({s.M, s.N}, out, ++seed);
              const Tensor c = clone(c_init, out);
              const GemmParams p{.trans_a = trans_a ? Transpose::yes : Transpose::no,
                                 .trans_b = trans_b ? Transpose::yes : Transpose::no, .alpha = -0.75, .beta = 0.5};
              table->gemm(p, a, b, c);
              expect_bitwise_equal(c, contract_loop(a_MK, b_KN, c_init, out, -0.75f, 0.5f, {}, {}), what + " gemm");
            }
          }
        }
      }
    }
  }
}

TEST(OrderedGemm, LinearOpsComputeTheContractBitForBit) {
  uint64_t seed = 100;
  for (const KernelTable* table : ordered_tables()) {
    for (const Shape3& s : kShapes) {
      for (DType dtype : {DType::f32, DType::bf16}) {
        const std::string what = fmt::format("{} N={} O={} I={} {}", kernel_variant_name(table->variant), s.M, s.N,
                                             s.K, dtype_name(dtype));
        const int64_t N = s.M, O = s.N, I = s.K;
        const Tensor x = random_tensor({N, I}, dtype, ++seed), w = random_tensor({O, I}, dtype, ++seed);
        const Tensor bias = random_tensor({O}, dtype, ++seed), resid = random_tensor({N, O}, dtype, ++seed);
        const TensorView w_IO = w.view().transpose(0, 1);
        const Tensor y({N, O}, dtype);
        table->linear_forward(x, w, bias, y);
        expect_bitwise_equal(y, contract_loop(x, w_IO, {}, dtype, 1.0f, 0.0f, bias, {}), what + " forward");
        table->linear_residual_forward(x, w, resid, y);
        expect_bitwise_equal(y, contract_loop(x, w_IO, {}, dtype, 1.0f, 0.0f, {}, resid), what + " residual");
        const Tensor dy = random_tensor({N, O}, dtype, ++seed), dx0 = random_tensor({N, I}, dtype, ++seed);
        const Tensor dx = clone(dx0, dtype);
        table->linear_dgrad(dy, w, dx, Accumulate::add);
        expect_bitwise_equal(dx, contract_loop(dy, w, dx0, dtype, 1.0f, 1.0f, {}, {}), what + " dgrad +=");
        const Tensor dw({O, I}, DType::f32);
        table->linear_wgrad(dy, x, dw, {}, Accumulate::overwrite);
        expect_bitwise_equal(dw, contract_loop(dy.view().transpose(0, 1), x, {}, DType::f32, 1.0f, 0.0f, {}, {}),
                             what + " wgrad =");
      }
    }
  }
}

// The same product on one thread and on every thread, and its rows alone: the same bits.
TEST(OrderedGemm, ThreadCountAndRowCountDoNotChangeTheBits) {
  const int saved_threads = omp_get_max_threads();
  for (const KernelTable* table : ordered_tables()) {
    const Tensor x = random_tensor({200, 300}, DType::f32, 7), w = random_tensor({530, 300}, DType::f32, 8);
    const Tensor y1({200, 530}, DType::f32), y2({200, 530}, DType::f32), row({1, 530}, DType::f32);
    omp_set_num_threads(1);
    table->linear_forward(x, w, {}, y1);
    omp_set_num_threads(std::max(2, saved_threads));
    table->linear_forward(x, w, {}, y2);
    const std::string what(kernel_variant_name(table->variant));
    expect_bitwise_equal(y2, y1, what + ": 2 threads vs 1");
    for (int64_t r : {0, 77, 199}) {
      table->linear_forward(x.view().slice(0, r, 1), w, {}, row);
      expect_bitwise_equal(row, clone(y1.view().slice(0, r, 1), DType::f32), what + fmt::format(": row {} alone", r));
    }
  }
  omp_set_num_threads(saved_threads);
}

}  // namespace
}  // namespace rf::kernels

#include "kernels/kernel_registry.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <climits>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>
#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "core/tensor.h"
#include "kernels/blas_info.h"
#include "kernels/gemm_choice.h"
#include "support/scratch_folder.h"

namespace rf::kernels {
namespace {

TEST(KernelRegistry, LevelZeroRunsEverythingOnRef) {
  const KernelRegistry registry(KernelConfig{.optimization_level = 0});
  for (int op = 0; op < kNumKernelOps; ++op)
    for (DType dtype : {DType::f32, DType::bf16, DType::f64})
      EXPECT_EQ(registry.variant(KernelOp(op), dtype), KernelVariant::ref) << kernel_op_name(KernelOp(op));
}

TEST(KernelRegistry, PicksTheBestVariantThisCpuRunsAndRefForF64) {
  const KernelRegistry registry;
  const KernelVariant expected = registry.can_run(KernelVariant::cpu_avx512) ? KernelVariant::cpu_avx512
                                 : registry.can_run(KernelVariant::cpu_avx2) ? KernelVariant::cpu_avx2
                                                                             : KernelVariant::cpu_generic;
  EXPECT_EQ(registry.variant(KernelOp::rmsnorm, DType::f32), expected);
  EXPECT_EQ(registry.variant(KernelOp::rmsnorm, DType::bf16), expected);
  EXPECT_EQ(registry.variant(KernelOp::rmsnorm, DType::f64), KernelVariant::ref);
}

TEST(KernelRegistry, MachineWithoutAvx512FallsBackToAvx2) {
  CpuFeatures avx2_only;
  avx2_only.avx2 = avx2_only.fma = avx2_only.f16c = true;
  const KernelRegistry registry({}, avx2_only);
  EXPECT_EQ(registry.variant(KernelOp::attention, DType::f32), KernelVariant::cpu_avx2);
  EXPECT_THROW(KernelRegistry(KernelConfig{.force_variant = KernelVariant::cpu_avx512}, avx2_only), ConfigError);
  EXPECT_EQ(KernelRegistry({}, CpuFeatures{}).variant(KernelOp::attention, DType::f32), KernelVariant::cpu_generic);
}

TEST(KernelRegistry, ForcesAVariantAndOverridesSingleOps) {
  const KernelRegistry registry(KernelConfig{.force_variant = KernelVariant::cpu_generic,
                                             .overrides = {{KernelOp::attention, KernelVariant::ref}}});
  EXPECT_EQ(registry.variant(KernelOp::rmsnorm, DType::f32), KernelVariant::cpu_generic);
  EXPECT_EQ(registry.variant(KernelOp::attention, DType::f32), KernelVariant::ref);
  EXPECT_NE(registry.describe().find("attention=ref"), std::string::npos) << registry.describe();
}

TEST(KernelRegistry, F32GemmLibraryChangesOnlyTheF32GemmBackedOps) {
  const KernelRegistry onednn, openblas(KernelConfig{.f32_gemm = GemmLibrary::openblas});
  for (KernelOp op : {KernelOp::gemm, KernelOp::linear}) {
    EXPECT_NE(&onednn.table(op, DType::f32), &openblas.table(op, DType::f32)) << kernel_op_name(op);
    EXPECT_EQ(&onednn.table(op, DType::bf16), &openblas.table(op, DType::bf16)) << kernel_op_name(op);
    EXPECT_EQ(onednn.variant(op, DType::f32), openblas.variant(op, DType::f32)) << kernel_op_name(op);
  }
  EXPECT_NE(onednn.table(KernelOp::linear, DType::f32).linear_forward,
            openblas.table(KernelOp::linear, DType::f32).linear_forward);
  EXPECT_EQ(&onednn.table(KernelOp::rmsnorm, DType::f32), &openblas.table(KernelOp::rmsnorm, DType::f32));
  EXPECT_NE(openblas.describe().find("gemm: f32 on openblas"), std::string::npos) << openblas.describe();
  EXPECT_EQ(parse_gemm_library("openblas"), GemmLibrary::openblas);
  EXPECT_EQ(parse_gemm_library("ordered"), GemmLibrary::ordered);
  try {
    parse_gemm_library("mkl");
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key_path(), "kernels.f32_gemm");
  }
}

TEST(KernelRegistry, RejectsBadConfigNamingTheKey) {
  try {
    KernelRegistry(KernelConfig{.optimization_level = 3});
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key_path(), "kernels.optimization_level");
  }
  EXPECT_THROW(parse_kernel_variant("cuda"), ConfigError);
  EXPECT_EQ(parse_kernel_variant("cpu_avx2"), KernelVariant::cpu_avx2);
  EXPECT_EQ(parse_kernel_op("logprob"), KernelOp::logprob);
}

TEST(KernelRegistry, RlforgeMaxCpuIsaCapsTheFeaturesTheRegistrySees) {
  const CpuFeatures hardware = CpuFeatures::detect();
  const CpuFeatures avx2 = hardware.capped("avx2"), generic = hardware.capped("generic");
  EXPECT_FALSE(avx2.avx512f || avx2.avx512_bf16 || avx2.amx_tile);
  EXPECT_EQ(avx2.avx2, hardware.avx2);
  EXPECT_FALSE(generic.avx2 || generic.fma || generic.avx512f);
  EXPECT_NE(avx2.describe().find("[RLFORGE_MAX_CPU_ISA=avx2]"), std::string::npos) << avx2.describe();
  EXPECT_EQ(KernelRegistry({}, generic).variant(KernelOp::linear, DType::f32), KernelVariant::cpu_generic);
  if (hardware.avx2 && hardware.fma && hardware.f16c) {
    EXPECT_EQ(KernelRegistry({}, avx2).variant(KernelOp::linear, DType::f32), KernelVariant::cpu_avx2);
  }
  try {
    (void)hardware.capped("sse4");
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key_path(), "RLFORGE_MAX_CPU_ISA");
    EXPECT_NE(std::string(e.what()).find("expected generic, avx2 or avx512"), std::string::npos) << e.what();
  }
}

TEST(KernelRegistry, Bf16RunsOnOnednnOnlyWhereItHasABf16Kernel) {
  const KernelRegistry registry;
  const GemmLibrary expected = onednn_has_bf16_matmul() ? GemmLibrary::onednn : GemmLibrary::ordered;
  EXPECT_EQ(registry.gemm_library(DType::bf16), expected);
  EXPECT_EQ(registry.gemm_library(DType::f32), GemmLibrary::onednn);
  // And it computes: [1 2; 3 4] [5; 6] = [17; 39], exact in bf16.
  Tensor a({2, 2}, DType::bf16), b({2, 1}, DType::bf16), c({2, 1}, DType::f32);
  const float a_values[] = {1, 2, 3, 4}, b_values[] = {5, 6};
  for (int i = 0; i < 4; ++i) a.data<bf16>()[i] = to_bf16(a_values[i]);
  for (int i = 0; i < 2; ++i) b.data<bf16>()[i] = to_bf16(b_values[i]);
  registry.gemm({}, a, b, c);
  EXPECT_EQ(c.data<float>()[0], 17.0f);
  EXPECT_EQ(c.data<float>()[1], 39.0f);
}

TEST(KernelRegistry, F32CallsOfFewRowsRunOnTheirOwnEngine) {
  const KernelRegistry registry(KernelConfig{.f32_gemm = GemmLibrary::openblas, .f32_gemm_few_rows = GemmLibrary::ordered});
  const KernelRegistry openblas(KernelConfig{.f32_gemm = GemmLibrary::openblas});
  const KernelRegistry ordered(KernelConfig{.f32_gemm = GemmLibrary::ordered});
  EXPECT_EQ(registry.gemm_library(DType::f32, kFewRows), GemmLibrary::ordered);
  EXPECT_EQ(registry.gemm_library(DType::f32, kFewRows + 1), GemmLibrary::openblas);
  EXPECT_EQ(registry.gemm_table(KernelOp::linear, DType::f32, 1).linear_forward,
            ordered.table(KernelOp::linear, DType::f32).linear_forward);
  EXPECT_EQ(registry.gemm_table(KernelOp::linear, DType::f32, 1000).linear_forward,
            openblas.table(KernelOp::linear, DType::f32).linear_forward);
  EXPECT_EQ(&registry.gemm_table(KernelOp::linear, DType::bf16, 1), &registry.table(KernelOp::linear, DType::bf16));
  EXPECT_NE(registry.describe().find("gemm: f32 on openblas (ordered at <= 64 rows)"), std::string::npos)
      << registry.describe();
}

// The choice is measured once, published as a file named by this CPU's key, and read back after; a
// corrupt file is measured again.
class GemmChoiceCache : public rf::testing::ScratchFolderTest {};

TEST_F(GemmChoiceCache, IsMeasuredOnceCachedPerCpuAndReadBack) {
  const std::filesystem::path folder = dir_;
  const GemmChoice first = cached_gemm_choice(folder);
  EXPECT_NE(first.measurements.find("many rows: onednn"), std::string::npos) << first.measurements;
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(folder)) files.push_back(entry.path());
  ASSERT_EQ(files.size(), 1u);
  std::ifstream in(files[0]);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find(gemm_choice_key()), std::string::npos) << text;
  const GemmChoice second = cached_gemm_choice(folder);  // read, not measured: the same text
  EXPECT_EQ(second.measurements, first.measurements);
  EXPECT_EQ(second.many_rows, first.many_rows);
  EXPECT_EQ(second.few_rows, first.few_rows);
  std::ofstream(files[0]) << "{ not json";
  const GemmChoice third = cached_gemm_choice(folder);  // measured again, and the file replaced
  const GemmChoice fourth = cached_gemm_choice(folder);
  EXPECT_FALSE(third.measurements.empty());
  EXPECT_EQ(fourth.measurements, third.measurements);
}

// A library failure reaches the user as an rlforge error naming the call and the ISA path, never as the
// library's own text. Forced here with oneDNN's bf16 matmul below avx512_core, which it does not have:
// on a CPU where it has one, the test runs itself again with ONEDNN_MAX_CPU_ISA=AVX2.
TEST(LibraryErrors, AOnednnFailureIsAnRlforgeErrorNamingTheCall) {
  if (onednn_has_bf16_matmul()) {
    char self[PATH_MAX] = {};
    ASSERT_GT(readlink("/proc/self/exe", self, sizeof(self) - 1), 0);
    const std::string command = fmt::format(
        "ONEDNN_MAX_CPU_ISA=AVX2 '{}' --gtest_filter=LibraryErrors.AOnednnFailureIsAnRlforgeErrorNamingTheCall", self);
    EXPECT_EQ(std::system(command.c_str()), 0) << command;
    return;
  }
  const Tensor a({4, 8}, DType::bf16), b({8, 3}, DType::bf16), c({4, 3}, DType::f32);
  try {
    cpu_generic::table().gemm({}, a, b, c);  // the oneDNN table, asked for bf16
    FAIL() << "expected an rf::Error";
  } catch (const Error& e) {
    const std::string message = e.what();
    const std::string expected = fmt::format(
        "oneDNN matmul failed: 4x3x8 (MxNxK) bf16 x bf16 -> f32, kernel variant cpu_generic, oneDNN isa {}",
        onednn_isa_name());
    EXPECT_NE(message.find(expected), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace rf::kernels

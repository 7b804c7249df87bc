#include "kernels/gemm_choice.h"

#include <cpuid.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/log.h"
#include "core/philox.h"
#include "core/stopwatch.h"
#include "core/tensor.h"
#include "kernels/blas_info.h"
#include "kernels/kernel_registry.h"

namespace rf::kernels {
namespace {

constexpr GemmLibrary kLibraries[] = {GemmLibrary::onednn, GemmLibrary::openblas, GemmLibrary::ordered};
constexpr int64_t kIn = 1024, kOut = 1024, kManyRows = 512, kSomeRows = 16;

// Best of a few timed calls after a warm-up (the minimum: the least disturbed estimate).
double best_seconds(const std::function<void()>& fn) {
  fn();
  double best = 1e30;
  for (int i = 0; i < 5; ++i) {
    const Stopwatch clock;
    fn();
    best = std::min(best, clock.seconds());
  }
  return best;
}

Tensor random(Shape shape, uint64_t seed) {
  Tensor t(shape, DType::f32);
  fill_uniform(t, Philox(seed, 0), -1.0, 1.0);
  return t;
}

std::string cpu_brand() {
  unsigned regs[12] = {};
  if (__get_cpuid_max(0x80000000, nullptr) < 0x80000004) return "unknown x86-64";
  for (unsigned leaf = 0; leaf < 3; ++leaf)
    __get_cpuid(0x80000002 + leaf, &regs[4 * leaf], &regs[4 * leaf + 1], &regs[4 * leaf + 2], &regs[4 * leaf + 3]);
  std::string brand(reinterpret_cast<const char*>(regs), sizeof(regs));
  brand.erase(std::find(brand.begin(), brand.end(), '\0'), brand.end());
  const auto first = brand.find_first_not_of(' ');
  return first == std::string::npos ? "unknown x86-64" : brand.substr(first);
}

const char* env_or(const char* name, const char* fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : fallback;
}

std::string file_name_of(const std::string& key) {
  return fmt::format("gemm_choice-{:016x}.json", std::hash<std::string>{}(key));
}

// The choice cached in `file` for `key`, if it holds one.
std::optional<GemmChoice> read_choice(const std::filesystem::path& file, const std::string& key) {
  std::ifstream in(file);
  if (!in) return std::nullopt;
  try {
    const nlohmann::json j = nlohmann::json::parse(in);
    if (j.at("key").get<std::string>() != key) return std::nullopt;
    return GemmChoice{parse_gemm_library(j.at("few_rows").get<std::string>()),
                      parse_gemm_library(j.at("many_rows").get<std::string>()), j.at("measurements").get<std::string>()};
  } catch (const std::exception& e) {
    core::log_warning("{}: unreadable GEMM choice ({}); measuring again", file.string(), e.what());
    return std::nullopt;
  }
}

}  // namespace

GemmChoice measure_gemm_choice() {
  const Tensor x = random({kManyRows, kIn}, 1), w = random({kOut, kIn}, 2), dy = random({kManyRows, kOut}, 3);
  const Tensor y({kManyRows, kOut}, DType::f32), dx({kManyRows, kIn}, DType::f32), dw({kOut, kIn}, DType::f32);
  const TensorView x_few = x.view().slice(0, 0, kSomeRows), y_few = y.view().slice(0, 0, kSomeRows);
  GemmChoice choice;
  double best_many = 0, best_few = 0;
  std::string many = "many rows:", few = "few rows:";
  for (GemmLibrary library : kLibraries) {
    const KernelRegistry registry(KernelConfig{.f32_gemm = library});
    const KernelTable& t = registry.table(KernelOp::linear, DType::f32);
    const double many_s = best_seconds([&] {
      t.linear_forward(x, w, {}, y);
      t.linear_dgrad(dy, w, dx, Accumulate::overwrite);
      t.linear_wgrad(dy, x, dw, {}, Accumulate::overwrite);
    });
    const double few_s = best_seconds([&] { t.linear_forward(x_few, w, {}, y_few); });
    const double many_gflops = 3 * 2.0 * double(kManyRows * kIn * kOut) / many_s * 1e-9;
    const double few_gflops = 2.0 * double(kSomeRows * kIn * kOut) / few_s * 1e-9;
    many += fmt::format(" {} {:.1f}", gemm_library_name(library), many_gflops);
    few += fmt::format(" {} {:.1f}", gemm_library_name(library), few_gflops);
    if (many_gflops > best_many) best_many = many_gflops, choice.many_rows = library;
    if (few_gflops > best_few) best_few = few_gflops, choice.few_rows = library;
  }
  choice.measurements = fmt::format("{} GFLOP/s; {} GFLOP/s", many, few);
  return choice;
}

std::string gemm_choice_key() {
  return fmt::format("{} | RLFORGE_MAX_CPU_ISA={} | oneDNN isa {} | OpenBLAS core {} | {} threads", cpu_brand(),
                     env_or("RLFORGE_MAX_CPU_ISA", "unset"), onednn_isa_name(), blas_core_name(),
                     omp_get_max_threads());
}

GemmChoice cached_gemm_choice(const std::filesystem::path& folder) {
  const std::string key = gemm_choice_key();
  const std::filesystem::path file = folder / file_name_of(key);
  if (std::optional<GemmChoice> cached = read_choice(file, key)) return *cached;
  // A file there that did not read (corrupt, or another key's) is replaced by this measurement.
  std::error_code ignored;
  std::filesystem::remove(file, ignored);
  GemmChoice choice = measure_gemm_choice();
  const nlohmann::json j = {{"key", key},
                            {"few_rows", std::string(gemm_library_name(choice.few_rows))},
                            {"many_rows", std::string(gemm_library_name(choice.many_rows))},
                            {"measurements", choice.measurements}};
  // The first process to finish measuring publishes its choice (a hard link fails if the file exists);
  // one that loses takes the published choice, so every process of a machine runs the same engines.
  std::error_code error;
  std::filesystem::create_directories(folder, error);
  const std::filesystem::path temp = file.string() + fmt::format(".tmp.{}", getpid());
  {
    std::ofstream out(temp);
    out << j.dump(1) << "\n";
  }
  std::filesystem::create_hard_link(temp, file, error);
  std::filesystem::remove(temp, ignored);
  if (!error) return choice;
  if (std::filesystem::exists(file, ignored)) return read_choice(file, key).value_or(choice);
  core::log_warning("{}: cannot cache the GEMM choice ({})", file.string(), error.message());
  return choice;
}

KernelConfig run_kernel_config(bool batch_invariant) {
  if (batch_invariant) return KernelConfig{.batch_invariant = true};
  const GemmChoice choice = cached_gemm_choice(default_gemm_choice_folder());
  return KernelConfig{.f32_gemm = choice.many_rows, .f32_gemm_few_rows = choice.few_rows};
}

std::filesystem::path default_gemm_choice_folder() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0')
    return std::filesystem::path(xdg) / "rlforge";
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0')
    return std::filesystem::path(home) / ".cache" / "rlforge";
  return std::filesystem::temp_directory_path() / "rlforge-cache";
}

}  // namespace rf::kernels

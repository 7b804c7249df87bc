// Training-step throughput of a Llama-style model through TrainEngine, run exactly as `rlforge sft`
// runs it (micro-batches from engine::make_micro_batch, token-mean NLL, optimizer_step, lr_step).
// Its PyTorch twin is bench/torch_train_step.py; bench/run_train_step_bench.sh runs both under the
// same environment and prints the ratios.
//   usage: train_step_bench [--config large|tiny] [--dtype f32|bf16] [--steps N] [--threads N]
// A step is forward + backward + AdamW on B rows of T random tokens (each row one document). After
// kWarmupSteps steps, `--steps` steps are timed one by one; tok/s = B*T / the median step time.
// MFU = FLOPs / (step time x peak), with FLOPs per token = 6 x matmul params + 6 L T C (causal
// attention: QK^T and PV, forward and backward), and peak = the best of oneDNN's, OpenBLAS's and the
// ordered f32 GEMM on a 2048^3 product measured in this process. bf16 runs are measured against the same
// f32 peak, so their MFU says how far bf16 gets past what f32 GEMMs can do.
// Output: `peak ...` lines, one `step <i> ms=<t>` line per timed step, then the summary
//   train_step config=<c> dtype=<d> threads=<n> tokens=<B*T> step_ms=<median> tok_s=<r>
//     flops_per_token=<f> peak_gflops=<p> mfu=<m> spread=<(slowest - fastest step) / median>
// Not here: data loading and tokenization (the same random batch runs every step), evaluation,
// checkpointing.
// Legend: B rows, T tokens per row, N = B*T tokens, C hidden, F FFN, V vocab, L layers, H heads,
// K kv heads, D head dim.

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/philox.h"
#include "core/stopwatch.h"
#include "core/tensor.h"
#include "core/thread_pool.h"
#include "engine/train_engine.h"
#include "kernels/gemm_choice.h"
#include "kernels/gemm_peak.h"
#include "model/model_flops.h"
#include "train_step_setup.h"
#include "trainer/sft_loss.h"

namespace {

using rf::DType;

constexpr int kWarmupSteps = 2;

struct BenchOptions {
  std::string config = "large";
  std::string dtype = "f32";
  int num_steps = 5;
  int num_threads = 0;  // 0: one per core
};

// Training FLOPs per token of documents of T tokens (model/model_flops.h).
double flops_per_token(const rf::model::ModelConfig& c, int64_t T) {
  const int64_t lengths[] = {T};
  return rf::model::train_flops(c, lengths) / double(T);
}

// Every line of `text` as a `# ` comment, so the summary lines stay easy to grep.
void print_comment(const std::string& text) {
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = std::min(text.find('\n', start), text.size());
    std::printf("# %s\n", text.substr(start, end - start).c_str());
    start = end + 1;
  }
}

int parse_int(const std::string& flag, const char* value) {
  char* end = nullptr;
  const long parsed = std::strtol(value, &end, 10);
  if (end == value || *end != '\0' || parsed < 0) throw rf::ConfigError(flag, "'" + std::string(value) + "': expected a count");
  return int(parsed);
}

BenchOptions parse_options(int argc, char** argv) {
  BenchOptions options;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) throw rf::ConfigError(flag, "missing value");
    const char* value = argv[++i];
    if (flag == "--config") {
      options.config = value;
    } else if (flag == "--dtype") {
      options.dtype = value;
    } else if (flag == "--steps") {
      options.num_steps = std::max(1, parse_int(flag, value));
    } else if (flag == "--threads") {
      options.num_threads = parse_int(flag, value);
    } else {
      throw rf::ConfigError(flag, "unknown option (expected --config, --dtype, --steps, --threads)");
    }
  }
  if (options.dtype != "f32" && options.dtype != "bf16")
    throw rf::ConfigError("--dtype", "'" + options.dtype + "': expected f32 or bf16");
  return options;
}

void run(const BenchOptions& options) {
  const rf::ThreadPool pool(options.num_threads, "--threads");
  const rf::kernels::KernelRegistry kernels(rf::kernels::run_kernel_config(false));  // the engines rlforge sft picks
  print_comment(pool.describe());
  print_comment(kernels.describe());

  const rf::bench::BenchShape shape = rf::bench::bench_shape(options.config);
  const rf::model::ModelConfig config = rf::bench::bench_model_config(shape);
  const int64_t N = shape.B * shape.T;
  rf::engine::EngineConfig engine_config;
  engine_config.dtype = options.dtype == "bf16" ? "bfloat16" : "float32";
  rf::optim::OptimConfig optim_config;
  optim_config.lr = 1e-4;
  optim_config.weight_decay = 0.01;
  optim_config.total_training_steps = kWarmupSteps + options.num_steps;
  rf::dist::ParallelContext parallel = rf::dist::ParallelContext::single_process();
  rf::MemoryTracker tracker;
  rf::engine::TrainEngine engine(engine_config, optim_config, config, kernels, parallel, tracker, N);
  engine.init_random_weights(engine_config.seed);
  std::printf("# model %s, %ld parameters, batch %ld x %ld tokens\n", config.describe().c_str(),
              long(engine.num_parameters()), long(shape.B), long(shape.T));

  const rf::kernels::GemmPeak peak = rf::kernels::measure_gemm_peak(DType::f32);
  std::printf("peak f32 2048x2048x2048 openblas=%.1f onednn=%.1f ordered=%.1f best=%.1f GFLOP/s\n",
              peak.openblas_gflops, peak.onednn_gflops, peak.ordered_gflops, peak.best());

  std::vector<rf::engine::TensorMap> micro_batches;
  micro_batches.push_back(rf::bench::random_rows(shape, 0, shape.B));
  std::vector<double> times;
  double loss = 0;
  for (int step = 0; step < kWarmupSteps + options.num_steps; ++step) {
    const rf::Stopwatch clock;
    const rf::engine::ForwardBackwardResult fb =
        engine.forward_backward(micro_batches, rf::trainer::token_mean_nll, rf::engine::ForwardOnly::no);
    engine.optimizer_step();
    engine.lr_step();
    const double seconds = clock.seconds();
    loss = fb.loss;
    if (step < kWarmupSteps) continue;
    times.push_back(seconds);
    std::printf("step %d ms=%.1f loss=%.4f\n", step - kWarmupSteps, seconds * 1e3, loss);
  }
  std::sort(times.begin(), times.end());
  const size_t mid = times.size() / 2;
  const double median = times.size() % 2 ? times[mid] : 0.5 * (times[mid - 1] + times[mid]);
  const double tok_s = double(N) / median;
  const double flops = flops_per_token(config, shape.T);
  // How far the slowest timed step is from the fastest, relative to the median: a wide spread means
  // the machine was busy, and run_train_step_bench.sh refuses to quote the ratio.
  const double spread = (times.back() - times.front()) / median;
  std::printf("train_step config=%s dtype=%s threads=%d tokens=%ld step_ms=%.1f tok_s=%.1f flops_per_token=%.0f "
              "peak_gflops=%.1f mfu=%.4f spread=%.3f\n",
              options.config.c_str(), options.dtype.c_str(), pool.num_threads(), long(N), median * 1e3, tok_s, flops,
              peak.best(), tok_s * flops / (peak.best() * 1e9), spread);
  std::printf("# memory %s\n", tracker.summary().c_str());
}

}  // namespace

int main(int argc, char** argv) {
  try {
    run(parse_options(argc, argv));
  } catch (const rf::Error& e) {
    std::fprintf(stderr, "train_step_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}

// Training-step throughput of a Llama-style model through TrainEngine, run exactly as `rlforge sft`
// runs it (micro-batches from engine::make_micro_batch, token-mean NLL, optimizer_step, lr_step).
// Its PyTorch twin is bench/torch_train_step.py; bench/run_train_step_bench.sh runs both under the
// same environment and prints the ratios.
//   usage: train_step_bench [--config large|tiny] [--dtype f32|bf16] [--steps N] [--threads N]
// A step is forward + backward + AdamW on B rows of T random tokens (each row one document). After
// kWarmupSteps steps, `--steps` steps are timed one by one; tok/s = B*T / the median step time.
// MFU = FLOPs / (step time x peak), with FLOPs per token = 6 x matmul params + 6 L T C (causal
// attention: QK^T and PV, forward and backward), and peak = the better of OpenBLAS's and oneDNN's
// f32 GEMM on a 2048^3 product measured in this process. bf16 runs are measured against the same
// f32 peak, so their MFU says how far bf16 gets past what f32 GEMMs can do.
// Output: `peak ...` lines, one `step <i> ms=<t>` line per timed step, then the summary
//   train_step config=<c> dtype=<d> threads=<n> tokens=<B*T> step_ms=<median> tok_s=<r>
//     flops_per_token=<f> peak_gflops=<p> mfu=<m>
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
#include "kernels/gemm_peak.h"

namespace {

using rf::DType;
using rf::Tensor;

constexpr int kWarmupSteps = 2;
constexpr int64_t kIgnoreTarget = -100;

struct BenchShape {
  int64_t C, L, H, K, F, V, T, B;
};

struct BenchOptions {
  std::string config = "large";
  std::string dtype = "f32";
  int num_steps = 5;
  int num_threads = 0;  // 0: one per core
};

BenchShape bench_shape(const std::string& config) {
  if (config == "large") return {512, 8, 8, 4, 1408, 8192, 256, 8};
  if (config == "tiny") return {128, 2, 4, 2, 352, 512, 64, 16};
  throw rf::ConfigError("--config", "'" + config + "': expected large or tiny");
}

rf::model::ModelConfig model_config(const BenchShape& s) {
  rf::model::ModelConfig c;
  c.vocab_size = s.V;
  c.hidden_size = s.C;
  c.intermediate_size = s.F;
  c.num_hidden_layers = s.L;
  c.num_attention_heads = s.H;
  c.num_key_value_heads = s.K;
  c.head_dim = s.C / s.H;
  c.max_position_embeddings = std::max<int64_t>(s.T, c.max_position_embeddings);
  c.tie_word_embeddings = false;
  c.validate();
  return c;
}

// The weights every token multiplies through: q, k, v, o, gate, up, down per layer and the LM head
// (the embedding is a lookup and the norm gains are elementwise).
double matmul_params(const rf::model::ModelConfig& c) {
  const double C = double(c.hidden_size), D = double(c.head_dim), F = double(c.intermediate_size);
  const double attention = C * D * double(2 * c.num_attention_heads + 2 * c.num_key_value_heads);
  return double(c.num_hidden_layers) * (attention + 3.0 * C * F) + double(c.vocab_size) * C;
}

double flops_per_token(const rf::model::ModelConfig& c, int64_t T) {
  const double attention = 6.0 * double(c.num_hidden_layers) * double(T) *
                           double(c.num_attention_heads * c.head_dim);
  return 6.0 * matmul_params(c) + attention;
}

// Best of a few 2048^3 products; the first call pays for setup and is not counted.
// B rows of T random tokens, each row its own document: positions restart at 0 and the target of
// a row's last token is ignored, as the SFT packer does at every document end.
rf::engine::TensorMap random_micro_batch(const BenchShape& s) {
  const int64_t N = s.B * s.T;
  Tensor tokens_N({N}, DType::i64), positions_N({N}, DType::i64), targets_N({N}, DType::i64);
  const rf::Philox rng(7, 0);
  int64_t* tokens = tokens_N.data<int64_t>();
  for (int64_t n = 0; n < N; ++n) tokens[n] = std::min(int64_t(rng.uniform(uint64_t(n)) * double(s.V)), s.V - 1);
  std::vector<int32_t> cu_seqlens = {0};
  for (int64_t b = 0; b < s.B; ++b) {
    for (int64_t t = 0; t < s.T; ++t) {
      const int64_t n = b * s.T + t;
      positions_N.data<int64_t>()[n] = t;
      targets_N.data<int64_t>()[n] = t + 1 < s.T ? tokens[n + 1] : kIgnoreTarget;
    }
    cu_seqlens.push_back(int32_t((b + 1) * s.T));
  }
  return rf::engine::make_micro_batch(std::move(tokens_N), std::move(positions_N), std::move(targets_N),
                                      std::move(cu_seqlens));
}

// The SFT trainer's loss: NLL averaged over the step's loss tokens.
rf::engine::LossOutput token_mean_nll(const rf::engine::TensorMap& mb, const rf::model::ModelOutputs& out,
                                      const rf::engine::LossContext& ctx, rf::TensorView dlogp_N, rf::TensorView) {
  const float* mask = mb.get("loss_mask").data<float>();
  const float* logp = out.logp_N.data<float>();
  float* dlogp = dlogp_N.data<float>();
  const double scale = 1.0 / double(ctx.global_num_tokens);
  rf::engine::LossOutput result;
  for (int64_t n = 0; n < dlogp_N.numel(); ++n) {
    result.loss -= double(mask[n]) * double(logp[n]) * scale;
    dlogp[n] = float(-double(mask[n]) * scale);
  }
  return result;
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
  const rf::ThreadPool pool(options.num_threads);
  const rf::kernels::KernelRegistry kernels;
  print_comment(pool.describe());
  print_comment(kernels.describe());

  const BenchShape shape = bench_shape(options.config);
  const rf::model::ModelConfig config = model_config(shape);
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
  std::printf("peak f32 2048x2048x2048 openblas=%.1f onednn=%.1f best=%.1f GFLOP/s\n", peak.openblas_gflops,
              peak.onednn_gflops, peak.best());

  std::vector<rf::engine::TensorMap> micro_batches;
  micro_batches.push_back(random_micro_batch(shape));
  std::vector<double> times;
  double loss = 0;
  for (int step = 0; step < kWarmupSteps + options.num_steps; ++step) {
    const rf::Stopwatch clock;
    const rf::engine::ForwardBackwardResult fb =
        engine.forward_backward(micro_batches, token_mean_nll, rf::engine::ForwardOnly::no);
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
  std::printf("train_step config=%s dtype=%s threads=%d tokens=%ld step_ms=%.1f tok_s=%.1f flops_per_token=%.0f "
              "peak_gflops=%.1f mfu=%.4f\n",
              options.config.c_str(), options.dtype.c_str(), pool.num_threads(), long(N), median * 1e3, tok_s, flops,
              peak.best(), tok_s * flops / (peak.best() * 1e9));
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

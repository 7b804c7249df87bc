// `rlforge demo`: trains a small Llama-style model from scratch on the built-in copy task with the
// fast kernels, AdamW (f32 master weights; bf16 compute with --dtype bf16), global grad-norm
// clipping and warmup + cosine LR; one live line per step, then a held-out evaluation and a summary.
// It is the project's main job until the SFT trainer (engine, configs, checkpoints) replaces it.
#include <cmath>
#include <cstdio>
#include <numbers>

#include "apps/rlforge/commands.h"
#include "apps/rlforge/copy_task.h"
#include "core/stopwatch.h"
#include "core/thread_pool.h"
#include "model/causal_lm.h"
#include "model/param_init.h"

namespace rf::apps {
namespace {

struct DemoOptions {
  int64_t steps = 300;
  int64_t batch = 32;
  double lr = 3e-3;
  double max_grad_norm = 1.0;
  std::string dtype = "f32";
  uint64_t seed = 1;
  int threads = 0;
};

double learning_rate(const DemoOptions& o, int64_t step) {
  const int64_t warmup = std::max<int64_t>(1, o.steps / 20);
  if (step < warmup) return o.lr * double(step + 1) / double(warmup);
  const double progress = double(step - warmup) / double(std::max<int64_t>(1, o.steps - warmup));
  return o.lr * (0.1 + 0.9 * 0.5 * (1 + std::cos(std::numbers::pi * progress)));
}

struct StepStats {
  double loss = 0;
  double accuracy = 0;  // share of copied tokens the model puts > 1/2 probability on (so greedy gets them)
};

StepStats score(const model::ModelOutputs& out, TensorView targets_N, TensorView dlogp_N) {
  const int64_t N = targets_N.numel();
  int64_t counted = 0, correct = 0;
  double loss = 0;
  for (int64_t n = 0; n < N; ++n) {
    if (targets_N.data<int64_t>()[n] < 0) continue;
    const double logp = out.logp_N.data<float>()[n];  // f32: the model computes in f32 or bf16
    loss -= logp;
    correct += logp > std::log(0.5);
    ++counted;
  }
  if (!dlogp_N.empty()) {
    for (int64_t n = 0; n < N; ++n)
      dlogp_N.data<float>()[n] = targets_N.data<int64_t>()[n] < 0 ? 0.0f : float(-1.0 / double(counted));
  }
  return {loss / double(counted), double(correct) / double(counted)};
}

int run_demo(const DemoOptions& o) {
  const ThreadPool pool(o.threads);
  const kernels::KernelRegistry kernels;
  const DType compute = parse_dtype(o.dtype);
  if (compute != DType::f32 && compute != DType::bf16)
    throw ConfigError("--dtype", fmt::format("expected f32 or bf16, got {}", o.dtype));
  std::printf("%s\n%s\n", pool.describe().c_str(), kernels.describe().c_str());

  model::ModelConfig config;
  config.vocab_size = 32;
  config.hidden_size = 64;
  config.intermediate_size = 128;
  config.num_hidden_layers = 2;
  config.num_attention_heads = 4;
  config.num_key_value_heads = 2;
  config.head_dim = 16;
  config.validate();
  const CopyTask task{config.vocab_size, 8};
  const int64_t T = task.seq_len(), N = o.batch * T;
  std::printf("model %s; task: copy %lld symbols; batch %lld x %lld tokens; %s compute\n", config.describe().c_str(),
              (long long)task.num_symbols, (long long)o.batch, (long long)T, o.dtype.c_str());

  MemoryTracker tracker;
  const model::ParamLayout layout = model::ParamLayout::for_model(config);
  const TensorAccount params_account{&tracker, MemoryTier::device, MemoryCategory::params};
  const model::ParamStore master(layout, DType::f32, params_account);
  model::init_params(master, config, o.seed);
  // bf16 compute reads a bf16 copy of the f32 master weights, refreshed by every optimizer step.
  std::optional<model::ParamStore> bf16_copy;
  if (compute == DType::bf16) {
    bf16_copy.emplace(layout, DType::bf16, params_account);
    copy_convert(master.flat(), bf16_copy->flat());
  }
  const model::ParamStore& weights = bf16_copy ? *bf16_copy : master;
  model::GradBuffer grads(layout, DType::f32, {&tracker, MemoryTier::device, MemoryCategory::grads});
  const TensorAccount optimizer_account{&tracker, MemoryTier::device, MemoryCategory::optimizer};
  const Tensor exp_avg({layout.total_numel()}, DType::f32, optimizer_account);
  const Tensor exp_avg_sq({layout.total_numel()}, DType::f32, optimizer_account);

  dist::ParallelContext parallel = dist::ParallelContext::single_process();
  model::CausalLm lm(config, weights, &grads, kernels, parallel, &tracker);
  lm.reserve(N);
  const Tensor tokens({N}, DType::i64), positions({N}, DType::i64), targets({N}, DType::i64);
  const Tensor dlogp({N}, DType::f32);
  const model::ModelInputs inputs{o.batch, T, tokens, positions, targets, {}, 1.0};

  Stopwatch clock;
  StepStats stats;
  for (int64_t step = 0; step < o.steps; ++step) {
    Stopwatch step_clock;
    task.fill(o.seed, uint64_t(step * o.batch), o.batch, tokens, positions, targets);
    grads.zero();
    stats = score(lm.forward(inputs, model::EntropyOutput::skip), targets, dlogp);
    lm.backward(dlogp, TensorView());
    const double grad_norm = std::sqrt(kernels.sum_squares(grads.flat()));
    const double coefficient = kernels::clip_coefficient(grad_norm, o.max_grad_norm);
    if (coefficient < 1.0) kernels.scale(grads.flat(), coefficient);
    const double lr = learning_rate(o, step);
    kernels.adamw_step({lr, 0.9, 0.95, 1e-8, 0.01, step + 1}, master.flat(), grads.flat(), exp_avg, exp_avg_sq,
                       bf16_copy ? bf16_copy->flat() : TensorView());
    std::printf("\rstep %4lld/%lld  loss %.4f  acc %.3f  grad_norm %.3f  lr %.2e  %6.0f tok/s ", (long long)step + 1,
                (long long)o.steps, stats.loss, stats.accuracy, grad_norm, lr, double(N) / step_clock.seconds());
    std::fflush(stdout);
    if ((step + 1) % 50 == 0 || step + 1 == o.steps) std::printf("\n");
  }
  const double train_seconds = clock.seconds();

  // Held-out evaluation: sequences the model never saw (another Philox stream region).
  task.fill(o.seed + 1000003, 0, o.batch, tokens, positions, targets);
  const StepStats eval = score(lm.forward(inputs, model::EntropyOutput::skip), targets, TensorView());
  std::printf("done: %lld steps in %.1f s (%.0f tok/s); final train loss %.4f\n", (long long)o.steps, train_seconds,
              double(o.steps * N) / train_seconds, stats.loss);
  std::printf("val-core/copy/acc/mean@1 %.3f  (held-out loss %.4f)\n", eval.accuracy, eval.loss);
  std::printf("memory %s\n", tracker.summary().c_str());
  return 0;
}

}  // namespace

Command add_demo_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("demo", "train a small model on the built-in copy task");
  auto o = std::make_shared<DemoOptions>();
  cmd->add_option("--steps", o->steps, "optimizer steps")->check(CLI::PositiveNumber);
  cmd->add_option("--batch", o->batch, "sequences per step")->check(CLI::PositiveNumber);
  cmd->add_option("--lr", o->lr, "peak learning rate")->check(CLI::PositiveNumber);
  cmd->add_option("--dtype", o->dtype, "compute dtype: f32 or bf16");
  cmd->add_option("--seed", o->seed, "seed of the weights and the data");
  cmd->add_option("--threads", o->threads, "OpenMP threads (0: one per core)");
  return [o] { return run_demo(*o); };
}

}  // namespace rf::apps

// Rollout throughput (issue #7, acceptance 5): RolloutEngine on Foundation III's large model
// (train_step_setup.h: hidden 512, 8 layers, 8 heads / 4 kv, head dim 64, ffn 1408, vocab 8192,
// random weights from model::init_params seed 1) generating an RL step's samples: 64 prompts of 64
// random tokens x n = 8 samples, temperature 1, seed 0, ignore_eos, each request's max_tokens drawn
// from [16, 256]. Prompts and lengths come from rollout_workload.h's LCG, which torch_rollout.py (the
// PyTorch baseline) repeats; bench/run_rollout_bench.sh runs both and prints the ratios.
//   usage: rollout_bench [--dtype f32|bf16] [--variants a,b,...] [--max-batched-tokens N] [--threads N]
// Variants, each on a fresh engine (block size 16; a KV cache for all 512 sequences at full length, so
// nothing is ever preempted; one warm-up generate of 4 requests x 8 tokens first, so the cache's pages
// are first touched in the timed generate, as PyTorch's are):
//   continuous            max_num_seqs 512: every sample runs from the first step (the default)
//   static                the same with SchedulerLimits::static_batching; with every sequence in
//                         one batch this schedules exactly as continuous (PyTorch's schedule, minus
//                         the finished rows PyTorch keeps computing)
//   no_prefix_sharing     the 512 samples as 512 requests with n = 1: each prefills its own prompt
//                         and holds its own prompt blocks (the samples draw other tokens: a
//                         throughput ablation)
//   continuous_seats<N>   max_num_seqs N (a request's 8 samples take 8 seats), as a server limits
//                         its batch: finished samples' seats are refilled at once
//   padded_static[_seats<N>]  static batching as a padded generate loop runs it (PyTorch's schedule):
//                         finished samples keep their seat and keep being computed until the batch ends
//   static_seats<N>       max_num_seqs N with static batching: the next requests wait until the
//                         batch's longest sample ends
// Output: first the cost of one draw (token and log-prob from a row of V logits; a step's draws run
// on all threads, engine/rollout/step_draws.h), then one line per variant (generated
// tokens: the samples' lengths, each its max_tokens):
//   RESULT rollout/<dtype>/<variant> tok_s=.. seconds=.. generated_tokens=.. steps=.. preemptions=..
//     prefill_tokens=.. max_running=..
// Not here: a tokenizer, eos handling (ignore_eos), top-k / top-p (temperature 1 alone).
// Legend: V vocab.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/philox.h"
#include "core/stopwatch.h"
#include "core/thread_pool.h"
#include "engine/rollout/rollout_engine.h"
#include "model/param_init.h"
#include "rollout_workload.h"
#include "train_step_setup.h"

namespace {

namespace ro = rf::engine::rollout;
using rf::DType;

constexpr uint64_t kWeightSeed = 1;
constexpr int64_t kBlockSize = 16;

struct BenchOptions {
  DType dtype = DType::f32;
  std::vector<std::string> variants = {"continuous", "static", "no_prefix_sharing", "continuous_seats128",
                                       "static_seats128", "continuous_seats32", "static_seats32"};
  int64_t max_batched_tokens = 4096;
  int num_threads = 0;  // 0: one per core
};

struct Variant {
  int64_t max_num_seqs = rf::bench::kRolloutSamples;
  bool static_batching = false;
  bool pad_finished = false;
  bool share_prefix = true;
};

Variant variant_of(const std::string& name) {
  if (name == "continuous") return {};
  if (name == "static") return {.static_batching = true};
  if (name == "padded_static") return {.static_batching = true, .pad_finished = true};
  if (name == "no_prefix_sharing") return {.share_prefix = false};
  // continuous_seats<N>, static_seats<N>, padded_static_seats<N>
  for (const std::string prefix : {"continuous_seats", "static_seats", "padded_static_seats"}) {
    if (name.rfind(prefix, 0) != 0) continue;
    const int64_t seats = std::atoll(name.c_str() + prefix.size());
    if (seats >= rf::bench::kSamplesPerPrompt && std::to_string(seats) == name.substr(prefix.size()))
      return {.max_num_seqs = seats,
              .static_batching = prefix != "continuous_seats",
              .pad_finished = prefix == "padded_static_seats"};
  }
  throw rf::ConfigError("--variants", "'" + name + "': expected continuous, static, padded_static, no_prefix_sharing, "
                                                   "continuous_seats<N>, static_seats<N> or padded_static_seats<N> (N >= 8)");
}

BenchOptions parse_options(int argc, char** argv) {
  BenchOptions options;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) throw rf::ConfigError(flag, "missing value");
    const std::string value = argv[++i];
    if (flag == "--dtype") {
      if (value != "f32" && value != "bf16") throw rf::ConfigError(flag, "'" + value + "': expected f32 or bf16");
      options.dtype = value == "f32" ? DType::f32 : DType::bf16;
    } else if (flag == "--variants") {
      options.variants.clear();
      std::stringstream list(value);
      for (std::string name; std::getline(list, name, ',');) {
        variant_of(name);  // rejects unknown names before anything runs
        options.variants.push_back(name);
      }
    } else if (flag == "--max-batched-tokens") {
      options.max_batched_tokens = std::max<int64_t>(1, std::atoll(value.c_str()));
    } else if (flag == "--threads") {
      options.num_threads = std::atoi(value.c_str());
    } else {
      throw rf::ConfigError(flag, "unknown option (expected --dtype, --variants, --max-batched-tokens, --threads)");
    }
  }
  return options;
}

struct Setup {
  rf::model::ModelConfig config;
  DType dtype;
  rf::kernels::KernelRegistry kernels{rf::kernels::KernelConfig{.batch_invariant = true}};
  rf::dist::ParallelContext parallel = rf::dist::ParallelContext::single_process();
  rf::MemoryTracker tracker;
  rf::model::ParamStore weights;

  Setup(const rf::model::ModelConfig& c, DType d)
      : config(c), dtype(d), weights(rf::model::ParamLayout::for_model(c), d) {
    rf::model::init_params(weights, config, kWeightSeed);
  }

  std::unique_ptr<ro::RolloutEngine> engine(const Variant& v, int64_t max_batched_tokens) {
    ro::RolloutConfig r;
    r.block_size = kBlockSize;
    // Every sample at its longest at once (no preemption whatever the schedule); prompt blocks shared by
    // a request's samples would need less, a cache that holds only part of them is not this benchmark.
    const int64_t blocks_per_sample = (rf::bench::kPromptLen + rf::bench::kMaxTokensHigh + kBlockSize - 1) / kBlockSize;
    r.kv_cache_bytes = rf::bench::kRolloutSamples * blocks_per_sample *
                       ro::kv_cache_spec(config, 1, dtype, kBlockSize).bytes_per_block();
    r.limits = {.max_num_seqs = v.max_num_seqs,
                .max_num_batched_tokens = max_batched_tokens,
                .enable_chunked_prefill = true,
                .max_model_len = rf::bench::kPromptLen + rf::bench::kMaxTokensHigh,
                .static_batching = v.static_batching,
                .pad_finished = v.pad_finished};
    auto e = std::make_unique<ro::RolloutEngine>(config, dtype, r, kernels, parallel, tracker);
    e->update_weights(weights);
    return e;
  }
};

// The workload as the engine's requests: n samples of each prompt, or (no prefix sharing) each
// sample its own request.
std::vector<ro::RolloutRequest> requests_of(const rf::bench::RolloutWorkload& w, bool share_prefix) {
  std::vector<ro::RolloutRequest> requests;
  const int64_t copies = share_prefix ? 1 : rf::bench::kSamplesPerPrompt;
  for (size_t i = 0; i < w.prompts.size(); ++i)
    for (int64_t k = 0; k < copies; ++k)
      requests.push_back({w.prompts[i], uint64_t(int64_t(i) * copies + k), w.max_tokens[i]});
  return requests;
}

void run_variant(Setup& setup, const rf::bench::RolloutWorkload& workload, const std::string& name,
                 int64_t max_batched_tokens) {
  const Variant v = variant_of(name);
  auto engine = setup.engine(v, max_batched_tokens);
  ro::RolloutSamplingParams params;
  params.temperature = 1.0;
  params.n = v.share_prefix ? rf::bench::kSamplesPerPrompt : 1;
  params.seed = 0;
  params.ignore_eos = true;
  const int64_t V = setup.config.vocab_size;

  std::vector<ro::RolloutRequest> warmup(4);
  for (size_t i = 0; i < warmup.size(); ++i) warmup[i] = {workload.prompts[i], 1000 + i, 8};
  engine->generate(warmup, params, {}, V);

  const std::vector<ro::RolloutRequest> requests = requests_of(workload, v.share_prefix);
  const rf::Stopwatch clock;
  const std::vector<ro::RolloutSample> samples = engine->generate(requests, params, {}, V);
  const double seconds = clock.seconds();

  int64_t generated = 0;
  for (const ro::RolloutSample& s : samples) generated += int64_t(s.token_ids.size());
  RF_CHECK(generated == workload.generated_tokens(), "rollout/{}: {} tokens generated, the workload asks for {}", name,
           generated, workload.generated_tokens());
  const ro::SchedulerStats& stats = engine->last_stats();
  std::printf("RESULT rollout/%s/%s tok_s=%.1f seconds=%.3f generated_tokens=%ld steps=%ld preemptions=%ld "
              "prefill_tokens=%ld max_running=%ld\n",
              rf::dtype_name(setup.dtype).data(), name.c_str(), double(generated) / seconds, seconds, long(generated),
              long(stats.steps), long(stats.preemptions), long(stats.prefill_tokens), long(stats.max_running));
  std::fflush(stdout);
}

// The serial part of a step that is not the model: one draw (token and log-prob, as the engine draws
// at temperature 1) from a row of V random logits, median over 2000 draws.
void time_draw(const rf::model::ModelConfig& config, DType dtype) {
  rf::Tensor logits({config.vocab_size}, dtype);
  rf::fill_normal(logits, rf::Philox(3, 0), 0.0, 1.0);
  ro::RolloutSamplingParams params;
  std::vector<double> times;
  int64_t checksum = 0;
  for (int i = 0; i < 2000; ++i) {
    const rf::Stopwatch clock;
    checksum += ro::draw_rollout_token(logits, params, 7, 0, i, config.vocab_size).first;
    times.push_back(clock.seconds());
  }
  std::nth_element(times.begin(), times.begin() + 1000, times.end());
  std::printf("# draw_rollout_token: %.1f us per draw (V=%ld, %s logits; checksum %ld)\n", times[1000] * 1e6,
              long(config.vocab_size), rf::dtype_name(dtype).data(), long(checksum));
}

void run(const BenchOptions& options) {
  const rf::ThreadPool pool(options.num_threads, "--threads");
  const rf::model::ModelConfig config = rf::bench::bench_model_config(rf::bench::bench_shape("large"));
  time_draw(config, options.dtype);
  Setup setup(config, options.dtype);
  std::printf("# %s\n# model %s, %s\n", pool.describe().c_str(), config.describe().c_str(),
              rf::dtype_name(options.dtype).data());
  const rf::bench::RolloutWorkload workload = rf::bench::rollout_workload(config.vocab_size);
  std::printf("# workload: %zu prompts x %ld tokens x n=%ld, max_tokens %ld..%ld (sum %ld), %ld tokens to generate; "
              "max_num_batched_tokens %ld\n",
              workload.prompts.size(), long(rf::bench::kPromptLen), long(rf::bench::kSamplesPerPrompt),
              long(*std::min_element(workload.max_tokens.begin(), workload.max_tokens.end())),
              long(*std::max_element(workload.max_tokens.begin(), workload.max_tokens.end())),
              long(workload.generated_tokens() / rf::bench::kSamplesPerPrompt), long(workload.generated_tokens()),
              long(options.max_batched_tokens));
  std::fflush(stdout);
  for (const std::string& name : options.variants) run_variant(setup, workload, name, options.max_batched_tokens);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    run(parse_options(argc, argv));
  } catch (const rf::Error& e) {
    std::fprintf(stderr, "rollout_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}

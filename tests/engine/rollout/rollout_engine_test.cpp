// The rollout engine against its oracle (issue #7, acceptance 2 and 4, TP 1): NaiveRollout recomputes
// every token of one sequence at a time; the engine batches, pages, chunks, preempts and shares
// prefixes. With batch-invariant kernels their tokens and log-probs must be identical, greedy and
// seeded sampling, f32 and bf16: with a roomy cache, a tiny cache that forces preemption, small token
// budgets that force chunked prefill, prefix caching on, and a request alone or among 64. And no request
// is lost: 500 requests into a cache that holds 5% of them each finish exactly once with their lengths.
#include "engine/rollout/rollout_engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "core/philox.h"
#include "engine/rollout/naive_rollout.h"
#include "engine/sampling.h"
#include "model/param_init.h"
#include "model/model_inputs.h"
#include "support/test_support.h"

namespace rf::engine::rollout {
namespace {

model::ModelConfig tiny_config(model::Arch arch) {
  model::ModelConfig c;
  c.arch = arch;
  c.vocab_size = 97;
  c.hidden_size = 32;
  c.intermediate_size = 48;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 8;
  c.attention_bias = arch == model::Arch::qwen2;
  c.qk_norm = arch == model::Arch::qwen3 || arch == model::Arch::qwen3_moe;
  if (arch == model::Arch::qwen3_moe)
    c.moe = model::MoeConfig{.num_experts = 6, .num_experts_per_tok = 2, .moe_intermediate_size = 16,
                             .norm_topk_prob = true};
  c.initializer_range = 0.5;  // peaked distributions: greedy has clear winners, samples differ
  return c;
}

constexpr int64_t kMaxModelLen = 96;

// `count` prompts of 3..40 tokens; every third shares its first 20 tokens with the first prompt.
std::vector<RolloutRequest> make_requests(int64_t count, uint64_t seed, int64_t vocab) {
  const Philox rng(seed, 1);
  std::vector<int64_t> shared;
  for (int64_t t = 0; t < 20; ++t) shared.push_back(int64_t(rng.uniform(uint64_t(t)) * double(vocab)));
  std::vector<RolloutRequest> requests;
  uint64_t draw = 100;
  for (int64_t i = 0; i < count; ++i) {
    RolloutRequest r;
    r.request_id = uint64_t(1000 + i);
    const int64_t length = 3 + int64_t(rng.uniform(draw++) * 38);
    if (i % 3 == 0 && length > 20) r.prompt = shared;
    while (int64_t(r.prompt.size()) < length) r.prompt.push_back(int64_t(rng.uniform(draw++) * double(vocab)));
    r.max_tokens = 4 + int64_t(rng.uniform(draw++) * 20);
    requests.push_back(std::move(r));
  }
  return requests;
}

struct TinyModel {
  model::ModelConfig config;
  DType dtype;
  kernels::KernelRegistry kernels{kernels::KernelConfig{.batch_invariant = true}};
  dist::ParallelContext parallel = dist::ParallelContext::single_process();
  MemoryTracker tracker;
  model::ParamStore weights;

  TinyModel(model::Arch arch, DType d)
      : config(tiny_config(arch)), dtype(d), weights(model::ParamLayout::for_model(config), d) {
    model::init_params(weights, config, 7);
  }

  std::unique_ptr<RolloutEngine> engine(int64_t num_blocks, int64_t block_size, int64_t max_batched_tokens,
                                        bool prefix_caching, int64_t max_num_seqs = 64, bool static_batching = false,
                                        bool pad_finished = false) {
    auto e = std::make_unique<RolloutEngine>(config, dtype, rollout_config(num_blocks, block_size, max_batched_tokens,
                                                                           prefix_caching, max_num_seqs,
                                                                           static_batching, pad_finished),
                                             kernels, parallel, tracker);
    e->update_weights(weights);
    return e;
  }

  RolloutConfig rollout_config(int64_t num_blocks, int64_t block_size, int64_t max_batched_tokens, bool prefix_caching,
                               int64_t max_num_seqs = 64, bool static_batching = false,
                               bool pad_finished = false) const {
    RolloutConfig r;
    r.block_size = block_size;
    r.kv_cache_bytes = num_blocks * kv_cache_spec(config, 1, dtype, block_size).bytes_per_block();
    r.enable_prefix_caching = prefix_caching;
    r.limits = {.max_num_seqs = max_num_seqs, .max_num_batched_tokens = max_batched_tokens,
                .enable_chunked_prefill = true, .max_model_len = kMaxModelLen, .static_batching = static_batching,
                .pad_finished = pad_finished};
    return r;
  }
};

void expect_same(const std::vector<RolloutSample>& got, const std::vector<RolloutSample>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    SCOPED_TRACE(what + ": request " + std::to_string(want[i].request_id) + " sample " + std::to_string(want[i].sample));
    EXPECT_EQ(got[i].request_id, want[i].request_id);
    EXPECT_EQ(got[i].sample, want[i].sample);
    EXPECT_EQ(got[i].token_ids, want[i].token_ids);
    EXPECT_EQ(got[i].logprobs, want[i].logprobs);  // bit for bit
    EXPECT_EQ(got[i].finish_reason, want[i].finish_reason);
  }
}

// Seeded sampling at temperature 1, n samples each, every sample to its max_tokens.
RolloutSamplingParams sampled_to_length(int64_t n, uint64_t seed) {
  RolloutSamplingParams params;
  params.n = n;
  params.seed = seed;
  params.ignore_eos = true;
  return params;
}

class RolloutVsNaive : public ::testing::TestWithParam<std::tuple<model::Arch, DType>> {};

TEST_P(RolloutVsNaive, SameTokensAndLogprobsWhateverTheScheduling) {
  TinyModel setup(std::get<0>(GetParam()), std::get<1>(GetParam()));
  const std::vector<RolloutRequest> requests = make_requests(12, 5, setup.config.vocab_size);
  const std::vector<int64_t> eos = {3};
  NaiveRollout naive(setup.config, setup.weights, setup.kernels, setup.parallel, kMaxModelLen);
  for (const bool greedy : {true, false}) {
    RolloutSamplingParams params;
    params.n = greedy ? 1 : 3;
    params.do_sample = !greedy;
    params.temperature = 0.9;
    params.top_k = 40;
    params.top_p = 0.95;
    params.seed = 11;
    const std::string mode = greedy ? "greedy" : "sampled";
    const auto want = naive.generate(requests, params, eos, setup.config.vocab_size);

    auto roomy = setup.engine(256, 16, 512, false);
    expect_same(roomy->generate(requests, params, eos, setup.config.vocab_size), want, mode + ", roomy cache");
    EXPECT_EQ(roomy->last_stats().preemptions, 0);

    // 12 blocks of 4 tokens: a few sequences at a time, the newest preempted and recomputed.
    auto tiny = setup.engine(24, 4, 64, false);
    expect_same(tiny->generate(requests, params, eos, setup.config.vocab_size), want, mode + ", tiny cache");
    EXPECT_GT(tiny->last_stats().preemptions, 0) << "the tiny cache was meant to force preemption";

    // 7 tokens per step: prompts are cut into chunks.
    auto chunked = setup.engine(256, 16, 7, true);
    expect_same(chunked->generate(requests, params, eos, setup.config.vocab_size), want, mode + ", chunked");

    auto cached = setup.engine(256, 4, 512, true);
    expect_same(cached->generate(requests, params, eos, setup.config.vocab_size), want, mode + ", prefix caching");
    expect_same(cached->generate(requests, params, eos, setup.config.vocab_size), want,
                mode + ", prefix caching again (warm)");
    EXPECT_GT(cached->kv_cache().prefix_cache_hits(), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Archs, RolloutVsNaive,
                         ::testing::Values(std::make_tuple(model::Arch::llama, DType::f32),
                                           std::make_tuple(model::Arch::qwen3, DType::f32),
                                           std::make_tuple(model::Arch::qwen2, DType::bf16)));

// The trainer's forward (CausalLm::forward at the sampling temperature) over every sample's prompt +
// response, packed into one batch of documents, against the log-probs the engine returned.
struct TrainerComparison {
  double worst_logprob_diff = 0;  // the trainer's f32 log-prob kernel vs the engine's log-probs
  int64_t tokens = 0, logits_bit_equal = 0;  // the engine's log-prob recomputed from the trainer's logits
};
TrainerComparison compare_with_trainer(const kernels::KernelRegistry& trainer_kernels) {
  TinyModel setup(model::Arch::qwen3, DType::f32);
  const std::vector<RolloutRequest> requests = make_requests(6, 13, setup.config.vocab_size);
  RolloutSamplingParams params;
  params.n = 2;
  params.temperature = 0.7;
  params.seed = 5;
  params.ignore_eos = true;
  auto engine = setup.engine(256, 16, 512, false);
  const auto samples = engine->generate(requests, params, {}, setup.config.vocab_size);
  std::vector<std::vector<int64_t>> documents;
  for (const RolloutSample& s : samples) {
    documents.push_back(requests[size_t(s.request_id - 1000)].prompt);
    documents.back().insert(documents.back().end(), s.token_ids.begin(), s.token_ids.end());
  }
  const model::PackedSequences packed = model::pack_sequences(documents);
  model::CausalLm trainer(setup.config, setup.weights, nullptr, trainer_kernels, setup.parallel);
  trainer.reserve(packed.tokens_N.numel());
  const model::ModelOutputs out = trainer.forward(packed.inputs(params.temperature), model::EntropyOutput::skip);
  TrainerComparison c;
  for (size_t k = 0; k < samples.size(); ++k) {
    const RolloutSample& s = samples[k];
    const int64_t first = packed.cu_seqlens[k] + int64_t(requests[size_t(s.request_id - 1000)].prompt.size()) - 1;
    for (size_t i = 0; i < s.token_ids.size(); ++i) {  // row first + i predicts response token i
      const int64_t row = first + int64_t(i);
      c.worst_logprob_diff = std::max(c.worst_logprob_diff, std::abs(out.logp_N.data<float>()[row] - s.logprobs[i]));
      c.logits_bit_equal += token_logprob(trainer.vocab_logits(row), s.token_ids[i], params.temperature) == s.logprobs[i];
      ++c.tokens;
    }
  }
  return c;
}

// #7 acceptance 3: with the training kernels (flash attention's tiles, any GEMM library) the trainer's
// log-probs are the engine's to 1e-5 in f32, not to the bit.
TEST(RolloutEngine, LogprobsMatchTheTrainersForward) {
  const TrainerComparison c = compare_with_trainer(kernels::KernelRegistry{});
  EXPECT_LE(c.worst_logprob_diff, 1e-5);
  EXPECT_LT(c.logits_bit_equal, c.tokens) << "two different kernels agreeing to the bit is suspicious: is the "
                                             "trainer's path used?";
}

// #9 (the RL trainer's deterministic mode): with a batch-invariant registry the trainer's forward runs
// the rollout's arithmetic (model/paged_order_attention.h), so its logits are the engine's bit for bit
// (the engine's log-prob recomputed from them is equal) and its f32 log-probs differ by one rounding.
TEST(RolloutEngine, BatchInvariantTrainerComputesTheEnginesLogitsBitForBit) {
  const TrainerComparison c = compare_with_trainer(kernels::KernelRegistry{kernels::KernelConfig{.batch_invariant = true}});
  EXPECT_EQ(c.logits_bit_equal, c.tokens);
  EXPECT_LE(c.worst_logprob_diff, 1e-6);
  EXPECT_GT(c.tokens, 100);
}

// The benchmark's ablation: static batching (a batch of at most max_num_seqs runs until its longest
// sample ends) draws the same samples in more steps than continuous batching.
TEST(RolloutEngine, StaticBatchingGivesTheSameSamplesInMoreSteps) {
  TinyModel setup(model::Arch::llama, DType::f32);
  const std::vector<RolloutRequest> requests = make_requests(16, 8, setup.config.vocab_size);
  const RolloutSamplingParams params = sampled_to_length(2, 2);
  auto continuous = setup.engine(512, 16, 256, false, 8);
  auto batched = setup.engine(512, 16, 256, false, 8, /*static_batching=*/true);
  const auto want = continuous->generate(requests, params, {}, setup.config.vocab_size);
  expect_same(batched->generate(requests, params, {}, setup.config.vocab_size), want, "static batching");
  EXPECT_GT(batched->last_stats().steps, continuous->last_stats().steps);
  EXPECT_LE(batched->last_stats().max_running, 8);
}

// Padded static batching (PyTorch's schedule): finished samples keep being computed until their batch
// ends, and their extra tokens are dropped: the same samples, with eos stops too, for more computed tokens.
TEST(RolloutEngine, PaddedStaticBatchingGivesTheSameSamplesForMoreComputedTokens) {
  TinyModel setup(model::Arch::llama, DType::f32);
  std::vector<RolloutRequest> requests = make_requests(16, 8, setup.config.vocab_size);
  for (size_t i = 0; i < requests.size(); ++i) requests[i].max_tokens = 2 + int64_t(i % 5) * 3;  // mixed lengths
  RolloutSamplingParams params;
  params.n = 2;
  params.seed = 5;
  const std::vector<int64_t> eos = {3};  // some samples stop early on it
  auto continuous = setup.engine(512, 16, 256, false, 8);
  auto padded = setup.engine(512, 16, 256, false, 8, /*static_batching=*/true, /*pad_finished=*/true);
  const auto want = continuous->generate(requests, params, eos, setup.config.vocab_size);
  expect_same(padded->generate(requests, params, eos, setup.config.vocab_size), want, "padded static batching");
  EXPECT_GT(padded->last_stats().decode_tokens, continuous->last_stats().decode_tokens);
  EXPECT_LE(padded->last_stats().max_running, 8);
  EXPECT_EQ(setup.tracker.current(MemoryTier::device, MemoryCategory::kv_cache), 0);
}

// Acceptance 4's second half: with n = 8 the prompt's KV is held once. A 40-token prompt in blocks of
// 16 fills 2 blocks and half a third; the 8 samples share all three, and the first 7 to write copy the
// partial one (the 8th writes in place): 10 blocks at the peak, where 8 separate copies would take 24.
TEST(RolloutEngine, EightSamplesHoldThePromptsKvOnce) {
  TinyModel setup(model::Arch::llama, DType::f32);
  RolloutRequest request;
  for (int64_t t = 0; t < 40; ++t) request.prompt.push_back((5 * t + 1) % setup.config.vocab_size);
  request.max_tokens = 4;
  auto engine = setup.engine(64, 16, 256, false);
  const int64_t block_bytes = kv_cache_spec(setup.config, 1, DType::f32, 16).bytes_per_block();
  engine->generate({request}, sampled_to_length(8, 1), {}, setup.config.vocab_size);
  EXPECT_EQ(setup.tracker.peak(MemoryTier::device, MemoryCategory::kv_cache), 10 * block_bytes);
  EXPECT_EQ(setup.tracker.current(MemoryTier::device, MemoryCategory::kv_cache), 0);
}

TEST(RolloutEngine, ARequestAloneAndAmong64GetsTheSameSamples) {
  TinyModel setup(model::Arch::llama, DType::f32);
  const std::vector<RolloutRequest> requests = make_requests(64, 9, setup.config.vocab_size);
  const RolloutSamplingParams params = sampled_to_length(2, 3);
  auto engine = setup.engine(512, 16, 256, false);
  const auto all = engine->generate(requests, params, {}, setup.config.vocab_size);
  for (size_t i : {size_t(0), size_t(17), size_t(63)}) {
    const auto alone = engine->generate({requests[i]}, params, {}, setup.config.vocab_size);
    expect_same(alone, {all[2 * i], all[2 * i + 1]}, "request " + std::to_string(i));
  }
}

TEST(RolloutEngine, NoRequestIsLostWhenTheCacheHoldsFivePercent) {
  TinyModel setup(model::Arch::llama, DType::f32);
  const std::vector<RolloutRequest> requests = make_requests(500, 21, setup.config.vocab_size);
  int64_t total_tokens = 0;
  for (const RolloutRequest& r : requests) total_tokens += int64_t(r.prompt.size()) + r.max_tokens;
  const RolloutSamplingParams params = sampled_to_length(1, 1);
  const int64_t block_size = 4;
  const int64_t blocks = std::max<int64_t>(total_tokens / 20 / block_size, kMaxModelLen / block_size);
  auto engine = setup.engine(blocks, block_size, 256, false, 128);
  const auto out = engine->generate(requests, params, {}, setup.config.vocab_size);
  ASSERT_EQ(out.size(), requests.size());
  for (size_t i = 0; i < out.size(); ++i) {
    EXPECT_EQ(out[i].request_id, requests[i].request_id);
    EXPECT_EQ(int64_t(out[i].token_ids.size()), requests[i].max_tokens) << "request " << i;
    EXPECT_EQ(out[i].finish_reason, FinishReason::length);
  }
  EXPECT_GT(engine->last_stats().preemptions, 0);
  EXPECT_EQ(engine->kv_cache().num_used_blocks(), 0) << "blocks leaked";
}

// The hybrid engine's sync without a copy: a rollout over the actor's weights in place holds no params of its
// own (MemoryTracker), samples what a rollout with its own copy samples, follows the weights as they change,
// refuses update_weights, and refuses weights of another layout or dtype.
TEST(RolloutEngine, SharedWeightsAreReadInPlaceWithNoCopy) {
  for (const DType dtype : {DType::f32, DType::bf16}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    TinyModel setup(model::Arch::qwen3, dtype);
    const std::vector<RolloutRequest> requests = make_requests(6, 4, setup.config.vocab_size);
    const RolloutSamplingParams params = sampled_to_length(2, 5);
    const auto own = setup.engine(64, 16, 256, true);
    const int64_t own_params = setup.tracker.current(MemoryTier::device, MemoryCategory::params);
    ASSERT_GT(own_params, 0);

    MemoryTracker shared_tracker;
    RolloutEngine shared(setup.config, dtype, setup.rollout_config(64, 16, 256, true), setup.kernels, setup.parallel,
                         shared_tracker, &setup.weights);
    EXPECT_TRUE(shared.shares_weights());
    EXPECT_EQ(shared_tracker.current(MemoryTier::device, MemoryCategory::params), 0);
    EXPECT_EQ(shared.weights().flat().raw(), setup.weights.flat().raw());
    expect_same(shared.generate(requests, params, {}, setup.config.vocab_size),
                own->generate(requests, params, {}, setup.config.vocab_size), "shared vs own copy");

    // New weights (an update) are what the next generation reads, as a synced copy would.
    model::init_params(setup.weights, setup.config, 8);
    own->update_weights(setup.weights);
    expect_same(shared.generate(requests, params, {}, setup.config.vocab_size),
                own->generate(requests, params, {}, setup.config.vocab_size), "after an update");

    testing::expect_error_containing([&] { shared.update_weights(setup.weights); }, "reads shared weights in place");
    model::ModelConfig wider = setup.config;
    wider.intermediate_size = 64;
    testing::expect_error_containing(
        [&] {
          RolloutEngine(wider, dtype, setup.rollout_config(64, 16, 256, true), setup.kernels, setup.parallel,
                        shared_tracker, &setup.weights);
        },
        "shared weights");
    const DType other = dtype == DType::f32 ? DType::bf16 : DType::f32;
    testing::expect_error_containing(
        [&] {
          RolloutEngine(setup.config, other, setup.rollout_config(64, 16, 256, true), setup.kernels, setup.parallel,
                        shared_tracker, &setup.weights);
        },
        "the rollout computes in");
  }
}

// Colocated with training, a rollout's own copy is dropped while the actor updates: its device bytes go back,
// generation is refused until a sync rewrites the weights, and then samples as before.
TEST(RolloutEngine, DroppedWeightsComeBackWithTheSync) {
  TinyModel setup(model::Arch::llama, DType::f32);
  const std::vector<RolloutRequest> requests = make_requests(4, 6, setup.config.vocab_size);
  const RolloutSamplingParams params = sampled_to_length(2, 7);
  auto engine = setup.engine(64, 16, 256, false);
  const auto before = engine->generate(requests, params, {}, setup.config.vocab_size);
  const int64_t param_bytes = setup.tracker.current(MemoryTier::device, MemoryCategory::params);
  ASSERT_GT(param_bytes, 0);
  engine->drop_weights();
  EXPECT_TRUE(engine->weights_dropped());
  EXPECT_EQ(setup.tracker.current(MemoryTier::device, MemoryCategory::params), 0);
  EXPECT_EQ(setup.tracker.current(MemoryTier::host, MemoryCategory::params), 0) << "nothing is kept";
  testing::expect_error_containing([&] { (void)engine->generate(requests, params, {}, setup.config.vocab_size); },
                                   "generate on dropped weights");
  engine->update_weights(setup.weights);
  EXPECT_FALSE(engine->weights_dropped());
  EXPECT_EQ(setup.tracker.current(MemoryTier::device, MemoryCategory::params), param_bytes);
  expect_same(engine->generate(requests, params, {}, setup.config.vocab_size), before, "after the sync");
}

// MoE router replay R3's source: each sample's routing per MoE layer, recorded by the paged forward. The same with
// prefix caching on or off (cached prompt blocks carry the routing of the pass that computed them), with chunked
// prefills and preemption, and as the batch-invariant trainer's forward routes the same documents; replayed there, its log-probs are the free ones.
TEST(RolloutEngine, RecordsEachTokensExpertsAsTheTrainerRoutesThem) {
  TinyModel setup(model::Arch::qwen3_moe, DType::f32);
  const int64_t L = 2, k = 2, width = L * k;
  const std::vector<RolloutRequest> requests = make_requests(6, 21, setup.config.vocab_size);
  const RolloutSamplingParams params = sampled_to_length(3, 9);
  const auto cached = setup.engine(256, 4, 64, true)->generate(requests, params, {}, setup.config.vocab_size);
  const auto uncached = setup.engine(256, 4, 512, false)->generate(requests, params, {}, setup.config.vocab_size);
  expect_same(cached, uncached, "prefix caching");
  auto tiny = setup.engine(24, 4, 7, false);  // chunked prefills, and sequences preempted and recomputed
  const auto preempted = tiny->generate(requests, params, {}, setup.config.vocab_size);
  EXPECT_GT(tiny->last_stats().preemptions, 0);
  expect_same(preempted, uncached, "preemption");
  std::vector<std::vector<int64_t>> documents;
  for (size_t i = 0; i < cached.size(); ++i) {
    const RolloutSample& s = cached[i];
    const std::vector<int64_t>& prompt = requests[size_t(s.request_id - 1000)].prompt;
    ASSERT_EQ(int64_t(s.routed_experts.size()), (int64_t(prompt.size() + s.token_ids.size()) - 1) * width);
    EXPECT_EQ(s.routed_experts, uncached[i].routed_experts) << "sample " << i;
    EXPECT_EQ(s.routed_experts, preempted[i].routed_experts) << "sample " << i;
    documents.push_back(prompt);
    documents.back().insert(documents.back().end(), s.token_ids.begin(), s.token_ids.end());
  }
  const model::PackedSequences packed = model::pack_sequences(documents);
  const int64_t N = packed.tokens_N.numel();
  model::CausalLm trainer(setup.config, setup.weights, nullptr, setup.kernels, setup.parallel);
  trainer.reserve(N);
  Tensor record({N, L, k}, DType::i32), replay({N, L, k}, DType::i32);
  std::fill_n(replay.data<int32_t>(), replay.numel(), -1);  // each sequence's last token: the router chooses
  for (size_t i = 0; i < cached.size(); ++i)
    std::copy(cached[i].routed_experts.begin(), cached[i].routed_experts.end(),
              replay.data<int32_t>() + packed.cu_seqlens[i] * width);
  model::ModelInputs in = packed.inputs();
  in.record_experts_NLk = record;
  const Tensor free_logp = clone(trainer.forward(in, model::EntropyOutput::skip).logp_N, DType::f32);
  int64_t rows = 0, equal = 0;
  for (size_t i = 0; i < cached.size(); ++i)
    for (int64_t t = packed.cu_seqlens[i]; t + 1 < packed.cu_seqlens[i + 1]; ++t, ++rows)
      equal += std::equal(record.data<int32_t>() + t * width, record.data<int32_t>() + (t + 1) * width,
                          replay.data<int32_t>() + t * width);
  EXPECT_EQ(equal, rows);
  EXPECT_GT(rows, 100);
  in.replay_experts_NLk = replay;
  const Tensor replayed_logp = clone(trainer.forward(in, model::EntropyOutput::skip).logp_N, DType::f32);
  EXPECT_EQ(std::memcmp(replayed_logp.view().raw(), free_logp.view().raw(), size_t(N) * 4), 0);
}

}  // namespace
}  // namespace rf::engine::rollout

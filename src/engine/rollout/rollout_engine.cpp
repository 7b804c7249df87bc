#include "engine/rollout/rollout_engine.h"
#include "engine/rollout/step_draws.h"

#include <algorithm>


namespace rf::engine::rollout {
namespace {

int64_t num_blocks(const RolloutConfig& r, const KvCacheSpec& spec) {
  const KvCacheBudget budget =
      kv_cache_budget(r.kv_cache_bytes, r.gpu_memory_utilization, r.device_memory_bytes, /*held_bytes=*/0);
  return num_kv_blocks_for_budget(spec, budget.bytes, r.limits.max_model_len, budget.key);
}

Tensor i64_tensor(const std::vector<int64_t>& values) {
  Tensor t({int64_t(values.size())}, DType::i64);
  std::copy(values.begin(), values.end(), t.data<int64_t>());
  return t;
}

// Shared weights are read by the offsets of this engine's own layout: every entry must match.
void check_same_layout(const model::ParamLayout& shared, const model::ParamLayout& mine) {
  RF_CHECK(shared.entries().size() == mine.entries().size() && shared.total_numel() == mine.total_numel(),
           "rollout: shared weights hold {} parameters in {} elements, the rollout's layout {} in {}",
           shared.entries().size(), shared.total_numel(), mine.entries().size(), mine.total_numel());
  for (size_t i = 0; i < mine.entries().size(); ++i) {
    const model::ParamEntry &a = shared.entries()[i], &b = mine.entries()[i];
    RF_CHECK(a.name == b.name && a.shape == b.shape && a.offset == b.offset && a.shard_start == b.shard_start,
             "rollout: shared weights differ from the rollout's layout at '{}' (as '{}')", b.name, a.name);
  }
}

}  // namespace

KvCacheSpec kv_cache_spec(const model::ModelConfig& config, int64_t tp, DType dtype, int64_t block_size) {
  return KvCacheSpec{config.num_hidden_layers, config.num_key_value_heads / tp, config.head_dim, block_size, dtype};
}

RolloutEngine::RolloutEngine(const model::ModelConfig& config, DType dtype, const RolloutConfig& rollout,
                             const kernels::KernelRegistry& kernels, dist::ParallelContext& parallel,
                             MemoryTracker& tracker, const model::ParamStore* shared_weights)
    : config_(config),
      rollout_(rollout),
      parallel_(parallel),
      kv_(kv_cache_spec(config, parallel.tp().size(), dtype, rollout.block_size),
          num_blocks(rollout, kv_cache_spec(config, parallel.tp().size(), dtype, rollout.block_size)), &tracker,
          KvBlockManagerOptions{rollout.enable_prefix_caching}) {
  RF_CHECK(!parallel.sequence_parallel(), "the rollout engine runs without sequence parallel");
  RF_CHECK(kernels.batch_invariant(),
           "the rollout engine needs a batch-invariant kernel registry (KernelConfig::batch_invariant)");
  // The experts split over TP (Megatron's default expert_tensor_parallel_size), or as the weights it shares.
  model::TensorParallelShard tp_shard{.rank = parallel.tp().rank(), .size = parallel.tp().size()};
  if (shared_weights) tp_shard.split_experts = shared_weights->layout().tp().split_experts;
  model::ParamLayout layout = model::ParamLayout::for_model(config, tp_shard);
  if (shared_weights) {
    check_same_layout(shared_weights->layout(), layout);
    RF_CHECK(shared_weights->flat().dtype() == dtype, "rollout: shared weights are {}, the rollout computes in {}",
             dtype_name(shared_weights->flat().dtype()), dtype_name(dtype));
    weights_ = shared_weights;
  } else {
    own_weights_.emplace(std::move(layout), dtype, TensorAccount{&tracker, MemoryTier::device, MemoryCategory::params});
    std::fill_n(static_cast<char*>(own_weights_->flat().raw()), own_weights_->flat().numel() * int64_t(dtype_size(dtype)), 0);
    own_weights_offload_.add(own_weights_->storage());
    weights_ = &*own_weights_;
  }
  if (config_.moe.enabled()) {
    int64_t moe_layers = 0;
    for (int64_t l = 0; l < config_.num_hidden_layers; ++l) moe_layers += config_.moe.is_moe_layer(l);
    routing_width_ = moe_layers * config_.moe.num_experts_per_tok;
    routing_slots_ = Tensor({kv_.num_blocks() * rollout.block_size, routing_width_}, DType::i32,
                            TensorAccount{&tracker, MemoryTier::device, MemoryCategory::kv_cache});
  }
  model_ = std::make_unique<model::CausalLm>(config_, *weights_, nullptr, kernels, parallel, &tracker);
  model_->reserve_paged(rollout.limits.max_num_batched_tokens, rollout.limits.max_num_seqs);
  reserved_rows_ = rollout.limits.max_num_seqs;
}

void RolloutEngine::update_weights(const std::string& hf_name, TensorView full) {
  RF_CHECK(own_weights_, "rollout: update_weights on an engine that reads shared weights in place ({})", hf_name);
  own_weights_offload_.onload();
  const model::ParamEntry& e = own_weights_->layout().entry(hf_name);
  check_shape(full, e.hf_shape, hf_name.c_str());
  copy_convert(e.hf_part(full), e.local_part(own_weights_->get(hf_name)));
}

void RolloutEngine::drop_weights() {
  RF_CHECK(own_weights_, "rollout: drop_weights on an engine that reads shared weights in place");
  own_weights_offload_.offload(OffloadContents::discard);
}

void RolloutEngine::update_weights(const model::ParamStore& full) {
  for (const model::ParamEntry& e : full.layout().entries()) update_weights(e.name, full.get(e.name));
}

TensorView RolloutEngine::run_step(const std::vector<ScheduledChunk>& chunks) {
  std::vector<int64_t> tokens, positions, slots, logit_rows;
  std::vector<int32_t> query_start = {0}, context_len;
  size_t width = 1;
  for (const ScheduledChunk& c : chunks) {
    const RolloutSequence& s = *c.sequence;
    for (int64_t t = c.begin; t < c.end; ++t) {
      tokens.push_back(s.tokens[size_t(t)]);
      positions.push_back(t);
    }
    const std::vector<int64_t> chunk_slots = kv_.slot_mapping(s.id, c.begin, c.end);
    slots.insert(slots.end(), chunk_slots.begin(), chunk_slots.end());
    query_start.push_back(int32_t(tokens.size()));
    context_len.push_back(int32_t(c.end));
    if (c.samples()) logit_rows.push_back(int64_t(tokens.size()) - 1);
    width = std::max(width, kv_.block_table(s.id).size());
  }
  Tensor table({int64_t(chunks.size()), int64_t(width)}, DType::i32);
  std::fill_n(table.data<int32_t>(), table.numel(), 0);
  for (size_t i = 0; i < chunks.size(); ++i) {
    const std::vector<int32_t>& blocks = kv_.block_table(chunks[i].sequence->id);
    std::copy(blocks.begin(), blocks.end(), table.data<int32_t>() + i * width);
  }
  const Tensor tokens_N = i64_tensor(tokens), positions_N = i64_tensor(positions), slots_N = i64_tensor(slots);
  model::PagedBatch batch{tokens_N, positions_N, slots_N, query_start, context_len, table};
  Tensor record_NLk;
  if (routing_width_ > 0) {
    for (const ScheduledChunk& c : chunks) routing_before(c);
    record_NLk = Tensor({int64_t(tokens.size()), routing_width_ / config_.moe.num_experts_per_tok,
                         config_.moe.num_experts_per_tok},
                        DType::i32);
    batch.record_experts_NLk = record_NLk;
  }
  std::vector<model::PagedLayerCache> cache;
  for (int64_t l = 0; l < config_.num_hidden_layers; ++l) cache.push_back({kv_.pool().keys(l), kv_.pool().values(l)});
  if (int64_t(logit_rows.size()) > reserved_rows_) {
    reserved_rows_ = int64_t(logit_rows.size());
    model_->reserve_paged(rollout_.limits.max_num_batched_tokens, reserved_rows_);
  }
  const TensorView logits = model_->forward_paged(batch, cache, logit_rows);
  for (size_t i = 0, first = 0; routing_width_ > 0 && i < chunks.size(); ++i) {
    const size_t count = size_t(chunks[i].end - chunks[i].begin);
    routing_after(chunks[i], record_NLk, int64_t(first), std::span<const int64_t>(slots).subspan(first, count));
    first += count;
  }
  return logits;
}

void RolloutEngine::routing_before(const ScheduledChunk& c) {
  std::vector<int32_t>& rows = routing_[c.sequence->id];
  const int64_t have = int64_t(rows.size()) / routing_width_;
  if (have >= c.begin) return;
  // A forked sample's prompt: its sibling's record (the shared partial last block was copied on write, so its slots
  // hold no routing); tokens of prefix-cached blocks: their slots.
  const std::vector<int32_t>& prompt = prompt_routing_[c.sequence->request];
  const int64_t from_prompt = std::min(c.begin, int64_t(prompt.size()) / routing_width_);
  if (have < from_prompt)
    rows.insert(rows.end(), prompt.begin() + have * routing_width_, prompt.begin() + from_prompt * routing_width_);
  const int32_t* store = routing_slots_.data<int32_t>();
  for (const int64_t slot : kv_.slot_mapping(c.sequence->id, std::max(have, from_prompt), c.begin))
    rows.insert(rows.end(), store + slot * routing_width_, store + (slot + 1) * routing_width_);
}

void RolloutEngine::routing_after(const ScheduledChunk& c, const Tensor& record_NLk, int64_t first,
                                  std::span<const int64_t> slots) {
  std::vector<int32_t>& rows = routing_[c.sequence->id];
  rows.resize(size_t(c.begin * routing_width_));  // a recomputed (preempted) sequence writes its rows again
  const int32_t* record = record_NLk.data<int32_t>() + first * routing_width_;
  rows.insert(rows.end(), record, record + int64_t(slots.size()) * routing_width_);
  int32_t* store = routing_slots_.data<int32_t>();
  for (size_t t = 0; t < slots.size(); ++t)
    std::copy_n(record + int64_t(t) * routing_width_, routing_width_, store + slots[t] * routing_width_);
  std::vector<int32_t>& prompt = prompt_routing_[c.sequence->request];
  const size_t prompt_entries = size_t(c.sequence->prompt_len * routing_width_);
  if (prompt.size() < prompt_entries && rows.size() >= prompt_entries)
    prompt.assign(rows.begin(), rows.begin() + int64_t(prompt_entries));
}

std::vector<RolloutSample> RolloutEngine::generate(const std::vector<RolloutRequest>& requests,
                                                   const RolloutSamplingParams& params,
                                                   std::span<const int64_t> eos_ids, int64_t num_candidates) {
  RF_CHECK(!weights_dropped(), "rollout: generate on dropped weights (no weight sync since drop_weights)");
  params.validate();
  std::vector<int64_t> stop_ids = params.stop_token_ids;
  if (!params.ignore_eos) stop_ids.insert(stop_ids.end(), eos_ids.begin(), eos_ids.end());
  RolloutScheduler scheduler(kv_, rollout_.limits, stop_ids);
  for (size_t i = 0; i < requests.size(); ++i)
    scheduler.add(i, requests[i].prompt, params.n, requests[i].max_tokens > 0 ? requests[i].max_tokens : params.max_tokens);

  routing_.clear();
  prompt_routing_.clear();
  std::vector<std::unique_ptr<RolloutSequence>> finished;
  while (!scheduler.done()) {
    const std::vector<ScheduledChunk> chunks = scheduler.schedule();
    const TensorView logits_RV = run_step(chunks);
    StepDraws draws;
    draws.compute(chunks, logits_RV, requests, params, num_candidates);
    scheduler.complete(chunks, [&](const RolloutSequence& s, int64_t row) { return draws.take(s, row); });
    for (auto& s : scheduler.take_finished()) finished.push_back(std::move(s));
  }
  stats_ = scheduler.stats();

  std::sort(finished.begin(), finished.end(), [](const auto& a, const auto& b) {
    return a->request != b->request ? a->request < b->request : a->sample < b->sample;
  });
  std::vector<RolloutSample> out;
  for (const auto& s : finished) {
    RolloutSample sample{requests[s->request].request_id, s->sample,
                         std::vector<int64_t>(s->tokens.begin() + s->prompt_len, s->tokens.end()), s->logprobs,
                         FinishReason::length};
    if (std::find(stop_ids.begin(), stop_ids.end(), sample.token_ids.back()) != stop_ids.end())
      sample.finish_reason = FinishReason::stop;
    if (routing_width_ > 0) {
      std::vector<int32_t>& rows = routing_[s->id];
      rows.resize(size_t((s->prompt_len + int64_t(sample.token_ids.size()) - 1) * routing_width_), -1);
      sample.routed_experts = std::move(rows);
    }
    out.push_back(std::move(sample));
  }
  routing_.clear();
  prompt_routing_.clear();
  return out;
}

}  // namespace rf::engine::rollout

// RolloutEngine: rlforge's vLLM (DESIGN §4). Generates n samples per prompt with a paged KV cache
// (kv_block_manager.h), continuous batching (rollout_scheduler.h) and the model's paged inference
// forward (CausalLm::forward_paged), on its own tensor-parallel layout: every rank of its context runs
// the same schedule and holds the same logits (gathered over TP), so every rank draws the same tokens.
//
// Reproducible whatever the scheduling: the kernels on this path are batch-invariant (a token's
// logits do not depend on what else is in its step), and the draw for (request, sample, position) is
// Philox(seed, request_id << 32 | sample).uniform(position), position counting generated tokens
// (engine/sampling.h's convention). A request therefore gets the same tokens alone or among 64,
// preempted and recomputed or not, with prefix sharing on or off; NaiveRollout (naive_rollout.h) is the
// oracle that checks it. Each sample's log-probs are those of its drawn tokens under the
// temperature-scaled distribution over the whole vocabulary, before top-k / top-p (verl's rollout
// log-probs, what the trainer recomputes with that temperature); temperature 1 for greedy.
// Legend: V vocab.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/offload.h"
#include "engine/rollout/kv_block_manager.h"
#include "engine/rollout/rollout_config.h"
#include "engine/rollout/rollout_request.h"
#include "engine/rollout/rollout_scheduler.h"
#include "model/causal_lm.h"

namespace rf::engine::rollout {

class RolloutEngine {
 public:
  // The weights start at zero: load them with update_weights. `parallel` is the rollout's own layout
  // (TP; no sequence parallel), kept by reference, like `kernels` (built with batch_invariant) and
  // `tracker`. With `shared_weights` the engine holds no weights of its own and reads those in place
  // (kept by reference): the actor's compute weights when their layout and dtype are this engine's (the
  // hybrid engine's sync without a copy). Their layout must be this engine's (checked: an Error naming
  // the first parameter that differs).
  RolloutEngine(const model::ModelConfig& config, DType dtype, const RolloutConfig& rollout,
                const kernels::KernelRegistry& kernels, dist::ParallelContext& parallel, MemoryTracker& tracker,
                const model::ParamStore* shared_weights = nullptr);

  // One weight by HF name, whole (any floating dtype): this rank keeps its TP shard (the hybrid
  // engine's resharding from the trainer's layout into this one). Not with shared weights. Dropped weights
  // come back first (as zeros: a sync rewrites every weight).
  void update_weights(const std::string& hf_name, TensorView full);
  // Every weight of a whole (TP 1) store laid out for this model.
  void update_weights(const model::ParamStore& full);

  // Generates for every request (n samples each); samples ordered by request, then sample index.
  // eos_ids end a sample unless params.ignore_eos; only ids < num_candidates are drawn.
  std::vector<RolloutSample> generate(const std::vector<RolloutRequest>& requests,
                                      const RolloutSamplingParams& params, std::span<const int64_t> eos_ids,
                                      int64_t num_candidates);

  // Colocation with training: frees the KV cache; resume() re-allocates it (empty).
  void release() { kv_.release(); }
  void resume() { kv_.resume(); }
  // Colocation with training, for an engine with its own weight copy: gives its device pages back, keeping
  // nothing (the next sync rewrites every weight: update_weights). generate refuses dropped weights.
  void drop_weights();
  bool weights_dropped() const { return own_weights_offload_.offloaded(); }

  const SchedulerStats& last_stats() const { return stats_; }
  const KvBlockManager& kv_cache() const { return kv_; }
  const model::ParamStore& weights() const { return *weights_; }
  bool shares_weights() const { return !own_weights_.has_value(); }

 private:
  // Gathers chunk's sequence's routing rows up to c.begin from the slots (tokens another pass computed), then
  // after the step stores the chunk's rows (record_NLk's `first` on) into the sequence's and the slots'.
  void routing_before(const ScheduledChunk& c);
  void routing_after(const ScheduledChunk& c, const Tensor& record_NLk, int64_t first,
                     std::span<const int64_t> slots);
  // Runs one step's chunks through the model; returns the logits of the sampling chunks' last tokens.
  TensorView run_step(const std::vector<ScheduledChunk>& chunks);

  model::ModelConfig config_;
  RolloutConfig rollout_;
  dist::ParallelContext& parallel_;
  std::optional<model::ParamStore> own_weights_;  // none with shared weights
  OffloadGroup own_weights_offload_;              // own_weights_' storage, for drop_weights
  const model::ParamStore* weights_;               // what the model reads: own_weights_ or the shared ones
  std::unique_ptr<model::CausalLm> model_;
  KvBlockManager kv_;
  // MoE routing record (RolloutSample::routed_experts): per KV slot the experts its token was routed to (i32
  // [slots, L_moe k]), so a sequence reusing prefix-cached blocks finds their routing there, per sequence the rows
  // gathered so far, and per request its prompt's (what a forked sample starts from). routing_width_ = L_moe k; 0
  // for a dense model.
  int64_t routing_width_ = 0;
  Tensor routing_slots_;
  std::map<int64_t, std::vector<int32_t>> routing_;
  std::map<size_t, std::vector<int32_t>> prompt_routing_;  // per request: its prompt's rows, once one sample has them
  int64_t reserved_rows_ = 0;
  SchedulerStats stats_;
};

// The KV cache spec of `config` at `tp` ranks in `dtype`.
KvCacheSpec kv_cache_spec(const model::ModelConfig& config, int64_t tp, DType dtype, int64_t block_size);

}  // namespace rf::engine::rollout

// RolloutScheduler: continuous batching over the paged KV cache (vLLM's scheduler). Each step takes
// the running sequences' next tokens first (a decode token, or the rest of a chunked prefill), oldest
// first, then admits waiting sequences in arrival order while the step has room: max_num_seqs
// sequences, max_num_batched_tokens tokens (a long prompt is cut into chunks with
// enable_chunked_prefill, else it waits for a step with room for all of it).
//
// A request with n samples is one sequence until its prompt is computed; then it forks into n that
// share the prompt's blocks (KvBlockManager::fork; the shared partial block is copied on the first
// write) and each samples its own first token from the same logits.
//
// When a running sequence needs a block and none is free, the newest running sequence is preempted:
// its blocks are freed and it goes back to the front of the waiting queue with every token it has, to be
// recomputed as one prefill (vLLM's recompute preemption). Nothing is lost or run twice: a sequence is
// in exactly one of waiting, running and finished. Because the kernels are batch-invariant and the
// sampler's randomness is keyed by (seed, request, sample, position), a recomputed sequence continues
// with the tokens it would have drawn anyway.
// Not here: running the model and drawing tokens (rollout_engine.h).
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include "engine/rollout/kv_block_manager.h"
#include "engine/rollout/rollout_config.h"
#include "engine/rollout/rollout_request.h"

namespace rf::engine::rollout {

struct RolloutSequence {
  int64_t id = 0;        // the KV manager's sequence id
  size_t request = 0;    // index of its request in the generate call
  int64_t sample = 0;    // 0 .. n - 1 (0 for a prompt not yet forked)
  int64_t forks_pending = 0;  // n - 1 until the prompt is computed
  int64_t prompt_len = 0;
  int64_t max_tokens = 0;
  std::vector<int64_t> tokens;   // prompt + generated
  std::vector<double> logprobs;  // of the generated tokens
  int64_t num_computed = 0;      // tokens whose KV is in the cache
  int64_t end_length = -1;       // pad_finished: its length when it finished (>= 0), computed on as padding
  int64_t generated() const { return int64_t(tokens.size()) - prompt_len; }
};

// One sequence's part of a step: its tokens [begin, end) run through the model; it samples a token
// when end is its last token.
struct ScheduledChunk {
  RolloutSequence* sequence = nullptr;
  int64_t begin = 0, end = 0;
  bool samples() const { return end == int64_t(sequence->tokens.size()); }
};

struct SchedulerStats {
  int64_t steps = 0, preemptions = 0, prefill_tokens = 0, decode_tokens = 0, max_running = 0;
};

class RolloutScheduler {
 public:
  // `stop_ids`: the ids that end a sample ("stop"), eos included unless ignore_eos.
  RolloutScheduler(KvBlockManager& kv, const SchedulerLimits& limits, std::vector<int64_t> stop_ids);

  // Queues a request's n samples. rf::Error naming the request when its prompt cannot run: longer
  // than max_model_len, or (without chunked prefill) than max_num_batched_tokens.
  void add(size_t request, const std::vector<int64_t>& prompt, int64_t n, int64_t max_tokens);
  bool done() const { return waiting_.empty() && running_.empty(); }

  // The next step's chunks, in the order their tokens go into the batch. Never empty while not done:
  // rf::Error when the cache cannot hold even one waiting sequence alone.
  std::vector<ScheduledChunk> schedule();
  // After the model ran the step: draws (token, log-prob) for a sampling chunk's sequence from logits
  // row `row` (the step's sampling chunks in order); forks a prompt's n samples first.
  using DrawFn = std::function<std::pair<int64_t, double>(const RolloutSequence&, int64_t row)>;
  void complete(const std::vector<ScheduledChunk>& chunks, const DrawFn& draw);
  // Sequences finished since the last call, in completion order; their blocks are already freed.
  std::vector<std::unique_ptr<RolloutSequence>> take_finished();
  const SchedulerStats& stats() const { return stats_; }

 private:
  bool finished(const RolloutSequence& s) const;
  // Moves a finished sequence from running to finished, its blocks freed and its tokens cut to where it
  // ended (pad_finished).
  void retire(RolloutSequence* s);
  // Preempts the newest running sequence; returns it.
  RolloutSequence* preempt_newest();

  KvBlockManager& kv_;
  SchedulerLimits limits_;
  std::vector<int64_t> stop_ids_;
  int64_t next_id_ = 0;
  bool batch_open_ = true;  // static batching: admission allowed
  std::deque<std::unique_ptr<RolloutSequence>> waiting_;
  std::vector<std::unique_ptr<RolloutSequence>> running_;  // oldest admitted first
  std::vector<std::unique_ptr<RolloutSequence>> finished_;
  SchedulerStats stats_;
};

}  // namespace rf::engine::rollout

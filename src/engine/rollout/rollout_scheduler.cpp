#include "engine/rollout/rollout_scheduler.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"

namespace rf::engine::rollout {

RolloutScheduler::RolloutScheduler(KvBlockManager& kv, const SchedulerLimits& limits, std::vector<int64_t> stop_ids)
    : kv_(kv), limits_(limits), stop_ids_(std::move(stop_ids)) {
  RF_CHECK(limits.max_num_seqs > 0 && limits.max_num_batched_tokens > 0 && limits.max_model_len > 0,
           "rollout limits must be positive: max_num_seqs {}, max_num_batched_tokens {}, max_model_len {}",
           limits.max_num_seqs, limits.max_num_batched_tokens, limits.max_model_len);
}

void RolloutScheduler::add(size_t request, const std::vector<int64_t>& prompt, int64_t n, int64_t max_tokens) {
  const int64_t length = int64_t(prompt.size());
  RF_CHECK(length > 0, "request {}: empty prompt", request);
  RF_CHECK(n >= 1 && max_tokens >= 1, "request {}: n {} and max_tokens {} must be >= 1", request, n, max_tokens);
  RF_CHECK(length < limits_.max_model_len, "request {}: a prompt of {} tokens leaves no room under max_model_len {}",
           request, length, limits_.max_model_len);
  RF_CHECK(limits_.enable_chunked_prefill || length <= limits_.max_num_batched_tokens,
           "request {}: a prompt of {} tokens exceeds max_num_batched_tokens {} (enable_chunked_prefill is off)",
           request, length, limits_.max_num_batched_tokens);
  auto s = std::make_unique<RolloutSequence>();
  s->id = next_id_++;
  s->request = request;
  s->forks_pending = n - 1;
  s->prompt_len = length;
  s->max_tokens = max_tokens;
  s->tokens = prompt;
  waiting_.push_back(std::move(s));
}

RolloutSequence* RolloutScheduler::preempt_newest() {
  std::unique_ptr<RolloutSequence> victim = std::move(running_.back());
  running_.pop_back();
  kv_.free(victim->id);
  victim->num_computed = 0;
  ++stats_.preemptions;
  waiting_.push_front(std::move(victim));
  return waiting_.front().get();
}

std::vector<ScheduledChunk> RolloutScheduler::schedule() {
  RF_CHECK(!done(), "schedule: nothing to run");
  std::vector<ScheduledChunk> chunks;
  int64_t budget = limits_.max_num_batched_tokens;
  bool preempted = false;
  // 1. The running sequences' next tokens, oldest first; the newest make room when blocks run out.
  for (size_t i = 0; i < running_.size() && budget > 0; ++i) {
    RolloutSequence& s = *running_[i];
    const int64_t remaining = int64_t(s.tokens.size()) - s.num_computed;
    if (remaining > budget && !limits_.enable_chunked_prefill) continue;
    const int64_t end = s.num_computed + std::min(remaining, budget);
    const int64_t new_slots = end - kv_.num_tokens(s.id);
    bool self_preempted = false;
    while (new_slots > 0 && !kv_.can_append(s.id, new_slots)) {
      preempted = true;
      if (preempt_newest() == &s) {
        self_preempted = true;
        break;
      }
    }
    if (self_preempted) break;  // it was the newest: nothing after it is running
    if (new_slots > 0) {
      const std::span<const int64_t> tokens(s.tokens);
      kv_.append_slots(s.id, tokens.subspan(size_t(kv_.num_tokens(s.id)), size_t(new_slots)));
    }
    chunks.push_back({&s, s.num_computed, end});
    budget -= end - s.num_computed;
  }
  // 2. Waiting sequences in arrival order, unless this step had to preempt (the cache is full).
  int64_t num_seqs = 0;
  for (const auto& s : running_) num_seqs += 1 + s->forks_pending;
  // Static batching: a batch forms while nothing runs, over as many steps as its prefill needs, and
  // closes once something other than this step's token budget stops admission.
  if (limits_.static_batching && running_.empty()) batch_open_ = true;
  const bool may_admit = !preempted && (!limits_.static_batching || batch_open_);
  while (may_admit && !waiting_.empty() && budget > 0) {
    RolloutSequence& s = *waiting_.front();
    const int64_t length = int64_t(s.tokens.size());
    if (num_seqs + 1 + s.forks_pending > limits_.max_num_seqs && num_seqs > 0) break;
    if (!limits_.enable_chunked_prefill && length > budget) break;
    if (!kv_.can_allocate(s.tokens)) {
      RF_CHECK(!running_.empty() || !chunks.empty(),
               "the KV cache ({} blocks of {} tokens) cannot hold a sequence of {} tokens even alone: raise "
               "rollout.kv_cache_bytes or gpu_memory_utilization",
               kv_.num_blocks(), kv_.pool().spec().block_size, length);
      break;
    }
    s.num_computed = kv_.allocate_prompt(s.id, s.tokens);
    const int64_t end = s.num_computed + std::min(length - s.num_computed, budget);
    num_seqs += 1 + s.forks_pending;
    running_.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
    chunks.push_back({running_.back().get(), s.num_computed, end});
    budget -= end - s.num_computed;
  }
  if (budget > 0) batch_open_ = false;  // admission stopped for want of sequences, seats or blocks
  RF_CHECK(!chunks.empty(), "rollout scheduler: no sequence could run this step");
  ++stats_.steps;
  stats_.max_running = std::max(stats_.max_running, int64_t(running_.size()));
  for (const ScheduledChunk& c : chunks)
    (c.end - c.begin == 1 && c.sequence->generated() > 0 ? stats_.decode_tokens : stats_.prefill_tokens) +=
        c.end - c.begin;
  return chunks;
}

bool RolloutScheduler::finished(const RolloutSequence& s) const {
  if (s.generated() == 0) return false;
  if (std::find(stop_ids_.begin(), stop_ids_.end(), s.tokens.back()) != stop_ids_.end()) return true;
  return s.generated() >= s.max_tokens || int64_t(s.tokens.size()) >= limits_.max_model_len;
}

void RolloutScheduler::complete(const std::vector<ScheduledChunk>& chunks, const DrawFn& draw) {
  int64_t row = 0;
  std::vector<RolloutSequence*> done_now;
  for (const ScheduledChunk& c : chunks) {
    RolloutSequence& s = *c.sequence;
    const bool samples = c.samples();
    s.num_computed = c.end;
    kv_.mark_computed(s.id, c.end);
    if (!samples) continue;
    std::vector<RolloutSequence*> drawing = {&s};
    // The prompt is computed: its samples share its blocks from here on, each drawing its own token.
    for (int64_t k = 1; k <= s.forks_pending; ++k) {
      auto child = std::make_unique<RolloutSequence>(s);
      child->id = next_id_++;
      child->sample = k;
      child->forks_pending = 0;
      kv_.fork(s.id, child->id);
      drawing.push_back(child.get());
      running_.push_back(std::move(child));
    }
    s.forks_pending = 0;
    for (RolloutSequence* d : drawing) {
      const auto [token, logprob] = draw(*d, row);
      d->tokens.push_back(token);
      d->logprobs.push_back(logprob);
      const bool padding = d->end_length >= 0;
      if (padding && int64_t(d->tokens.size()) >= limits_.max_model_len) done_now.push_back(d);  // no room to pad
      if (padding || !finished(*d)) continue;
      if (limits_.static_batching && limits_.pad_finished) {
        d->end_length = int64_t(d->tokens.size());
      } else {
        done_now.push_back(d);
      }
    }
    ++row;
  }
  for (RolloutSequence* d : done_now) retire(d);
  // A padded batch retires when its last sequence ends and nothing of it is left to admit.
  const bool all_padding = std::all_of(running_.begin(), running_.end(), [](const auto& p) { return p->end_length >= 0; });
  if (limits_.static_batching && limits_.pad_finished && all_padding && !batch_open_) {
    std::vector<RolloutSequence*> batch;
    for (const auto& p : running_) batch.push_back(p.get());
    for (RolloutSequence* d : batch) retire(d);
  }
}

void RolloutScheduler::retire(RolloutSequence* s) {
  kv_.free(s->id);
  if (s->end_length >= 0) {
    s->tokens.resize(size_t(s->end_length));
    s->logprobs.resize(size_t(s->end_length - s->prompt_len));
  }
  const auto it = std::find_if(running_.begin(), running_.end(), [&](const auto& p) { return p.get() == s; });
  finished_.push_back(std::move(*it));
  running_.erase(it);
}

std::vector<std::unique_ptr<RolloutSequence>> RolloutScheduler::take_finished() {
  std::vector<std::unique_ptr<RolloutSequence>> out;
  out.swap(finished_);
  return out;
}

}  // namespace rf::engine::rollout

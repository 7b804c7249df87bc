// StepDraws: one step's draws (token and log-prob of every sampling sequence, forks included), computed
// on all threads before RolloutScheduler::complete asks for them one by one. complete() calls its
// DrawFn serially, and a draw over a vocabulary of 8192 costs about as much as a sequence's share of
// the model step (rollout_bench: about a quarter of a 512-sequence decode step), so drawing inside it
// leaves the other threads idle. A draw depends only on its logits row and its (request, sample,
// position) (rollout_request.h: draw_rollout_token), so drawing ahead, on any thread, gives exactly
// the tokens and log-probs complete() would have drawn itself.
//
// Use, in RolloutEngine::generate:
//   const TensorView logits_RV = run_step(chunks);
//   StepDraws draws;
//   draws.compute(chunks, logits_RV, requests, params, num_candidates);
//   scheduler.complete(chunks, [&](const RolloutSequence& s, int64_t row) { return draws.take(s, row); });
// Legend: R sampling rows of the step, V vocab.
#pragma once

#include <utility>
#include <vector>

#include "engine/rollout/rollout_request.h"
#include "engine/rollout/rollout_scheduler.h"

namespace rf::engine::rollout {

class StepDraws {
 public:
  // The draws complete() will ask for: for the r-th sampling chunk of `chunks` (logits row r), its
  // sequence's sample and, for a prompt about to fork, samples 1 .. forks_pending, all at the
  // sequence's current generated position.
  void compute(const std::vector<ScheduledChunk>& chunks, TensorView logits_RV,
               const std::vector<RolloutRequest>& requests, const RolloutSamplingParams& params,
               int64_t num_candidates);
  // What complete() asks for sample s.sample of row `row`; rf::Error if compute() did not draw it.
  std::pair<int64_t, double> take(const RolloutSequence& s, int64_t row) const;

 private:
  struct Row {
    size_t first = 0;          // its draws: draws_[first, first + count), samples base_sample ..
    int64_t count = 0, base_sample = 0, position = 0;
  };
  std::vector<Row> rows_;
  std::vector<std::pair<int64_t, double>> draws_;
};

}  // namespace rf::engine::rollout

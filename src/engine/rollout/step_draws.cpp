#include "engine/rollout/step_draws.h"

#include "core/error.h"

namespace rf::engine::rollout {

void StepDraws::compute(const std::vector<ScheduledChunk>& chunks, TensorView logits_RV,
                        const std::vector<RolloutRequest>& requests, const RolloutSamplingParams& params,
                        int64_t num_candidates) {
  rows_.clear();
  struct Job {
    int64_t row;
    const RolloutSequence* sequence;
    int64_t sample;
  };
  std::vector<Job> jobs;
  for (const ScheduledChunk& c : chunks) {
    if (!c.samples()) continue;
    const RolloutSequence& s = *c.sequence;
    const int64_t row = int64_t(rows_.size());
    rows_.push_back({jobs.size(), 1 + s.forks_pending, s.sample, s.generated()});
    for (int64_t k = 0; k <= s.forks_pending; ++k) jobs.push_back({row, &s, s.sample + k});
  }
  draws_.clear();
  if (jobs.empty()) return;  // only prompt chunks that do not sample yet: the step has no logits
  RF_CHECK(logits_RV.rank() == 2 && logits_RV.size(0) >= int64_t(rows_.size()),
           "StepDraws: {} sampling rows, logits {}", rows_.size(), logits_RV.describe());
  draws_.assign(jobs.size(), {0, 0.0});
  const int64_t num_jobs = int64_t(jobs.size());
#pragma omp parallel for schedule(dynamic, 4) if (num_jobs > 1)
  for (int64_t i = 0; i < num_jobs; ++i) {
    const Job& job = jobs[size_t(i)];
    const RolloutSequence& s = *job.sequence;
    draws_[size_t(i)] = draw_rollout_token(logits_RV.select(0, job.row), params, requests[s.request].request_id,
                                           job.sample, s.generated(), num_candidates);
  }
}

std::pair<int64_t, double> StepDraws::take(const RolloutSequence& s, int64_t row) const {
  RF_CHECK(row >= 0 && row < int64_t(rows_.size()), "StepDraws: row {} of {}", row, rows_.size());
  const Row& r = rows_[size_t(row)];
  const int64_t k = s.sample - r.base_sample;
  RF_CHECK(k >= 0 && k < r.count && s.generated() == r.position,
           "StepDraws: row {} drew samples {}..{} at position {}, asked for sample {} at position {}", row,
           r.base_sample, r.base_sample + r.count - 1, r.position, s.sample, s.generated());
  return draws_[r.first + size_t(k)];
}

}  // namespace rf::engine::rollout

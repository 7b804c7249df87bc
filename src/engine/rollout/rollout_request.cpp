#include "engine/rollout/rollout_request.h"

#include <fmt/format.h>

#include "core/error.h"
#include "core/philox.h"

namespace rf::engine::rollout {

void RolloutSamplingParams::validate() const {
  SamplingParams{temperature, top_k, top_p, seed}.validate();  // the key as written, greedy or not
  if (top_k < -1) throw ConfigError("top_k", fmt::format("must be >= 1, or -1 / 0 for off, got {}", top_k));
  if (n < 1) throw ConfigError("n", fmt::format("must be >= 1, got {}", n));
  if (max_tokens < 1) throw ConfigError("max_tokens", fmt::format("must be >= 1, got {}", max_tokens));
}

SamplingParams RolloutSamplingParams::sampler() const {
  return SamplingParams{greedy() ? 0.0 : temperature, top_k, top_p, seed};
}

std::pair<int64_t, double> draw_rollout_token(TensorView logits_V, const RolloutSamplingParams& params,
                                              uint64_t request_id, int64_t sample, int64_t position,
                                              int64_t num_candidates) {
  const double u = Philox(params.seed, request_id << 32 | uint64_t(sample)).uniform(uint64_t(position));
  return sample_token_with_logprob(logits_V, num_candidates, params.sampler(), u, params.logprob_temperature());
}

}  // namespace rf::engine::rollout

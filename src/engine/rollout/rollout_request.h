// What the rollout engine is asked for and what it returns (vLLM's SamplingParams, request and
// RequestOutput, with verl's rollout keys).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engine/sampling.h"

namespace rf::engine::rollout {

struct RolloutSamplingParams {
  double temperature = 1.0;  // 0 or do_sample = false: greedy
  int64_t top_k = -1;        // <= 0: no cut
  double top_p = 1.0;
  bool do_sample = true;
  int64_t n = 1;             // samples per prompt
  int64_t max_tokens = 16;   // generated tokens per sample at most
  uint64_t seed = 0;
  bool ignore_eos = false;
  std::vector<int64_t> stop_token_ids;  // stop on these as on eos (even with ignore_eos, as vLLM)

  // The sampling keys a user sets (verl's rollout and rollout.val_kwargs keys); the rest is the caller's.
  template <class Fields>
  void fields(Fields& f) {
    f("temperature", temperature, "sampling temperature (0: greedy)");
    f("top_k", top_k, "top-k (-1: off)");
    f("top_p", top_p, "top-p");
    f("do_sample", do_sample, "sample (false: greedy)");
    f("n", n, "responses per prompt");
  }
  // ConfigError naming the field: a temperature that is negative or not finite, top_p outside (0, 1],
  // top_k below -1, n or max_tokens below 1.
  void validate() const;

  bool greedy() const { return !do_sample || temperature == 0; }
  // The sampler's parameters (engine/sampling.h); greedy maps to temperature 0.
  SamplingParams sampler() const;
  // The temperature of the reported log-probs: the sampling temperature, 1 for greedy (the quantity
  // the trainer recomputes with `--temperature`).
  double logprob_temperature() const { return greedy() ? 1.0 : temperature; }
};

struct RolloutRequest {
  std::vector<int64_t> prompt;  // token ids, non-empty
  uint64_t request_id = 0;      // keys the sampler's random streams with the sample index
  // Per request, overriding the engine call's params.max_tokens when > 0 (RL draws lengths per prompt).
  int64_t max_tokens = 0;
};

struct RolloutSample {
  uint64_t request_id = 0;
  int64_t sample = 0;                // 0 .. n - 1
  std::vector<int64_t> token_ids;    // generated, without the prompt; ends with the stop token when stopped
  std::vector<double> logprobs;      // of each generated token under the temperature-scaled distribution
  FinishReason finish_reason = FinishReason::length;
  // MoE models: the experts each MoE layer routed each token to, i32 [T - 1, L_moe, k] flattened (T = prompt +
  // generated tokens; the last token never ran through the model), increasing within each k, in
  // model_inputs.h's replay format. Recorded by the paged forward; prefix-cached tokens carry the routing of the
  // pass that computed them (batch-invariant, so the same). Empty for a dense model.
  std::vector<int32_t> routed_experts;
};

// The token drawn for sample `sample` of request `request_id` at generated position `position` from
// logits_V (only ids < num_candidates), with Philox(seed, request_id << 32 | sample).uniform(position),
// and its log-prob at params.logprob_temperature(). The one draw of the engine and of its oracle.
std::pair<int64_t, double> draw_rollout_token(TensorView logits_V, const RolloutSamplingParams& params,
                                              uint64_t request_id, int64_t sample, int64_t position,
                                              int64_t num_candidates);

}  // namespace rf::engine::rollout

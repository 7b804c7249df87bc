// Greedy decoding by full recompute: sample_decode (sampling.h) at temperature 0, i.e. the argmax of
// the last position's logits over the whole vocabulary, first maximum on ties. O(length^2) work,
// which is fine for evaluating short answers; the rollout engine (paged KV cache, continuous
// batching) is its own piece.
#pragma once

#include <span>
#include <vector>

#include "model/causal_lm.h"

namespace rf::engine {

// Returns, for each prompt, the generated ids (without the prompt), stopping at any of `eos_ids`
// (included) or after max_new_tokens; only ids below `num_candidates` are generated (sampling.h). The
// model must have room for every prompt plus max_new_tokens.
std::vector<std::vector<int64_t>> greedy_decode(model::CausalLm& model, const std::vector<std::vector<int64_t>>& prompts,
                                                int64_t max_new_tokens, std::span<const int64_t> eos_ids,
                                                int64_t num_candidates);

}  // namespace rf::engine

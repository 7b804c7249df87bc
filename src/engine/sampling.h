// Sampling decode by full recompute: the simple, obviously-right generation path behind
// `rlforge generate` until the rollout engine (paged KV cache, continuous batching) lands, which will
// keep this as its oracle. Each step re-runs every unfinished sequence as one packed forward and draws
// each one's next token from its last position's logits:
//   z = logits / temperature; keep the top_k largest z (all when top_k <= 0); of those keep the
//   smallest set of the most likely whose probability reaches top_p; renormalise and draw.
// temperature 0 is greedy: the argmax, first maximum on ties, as torch.argmax (top_k / top_p ignored).
// Ties in z are ordered by token id, so the kept set never depends on sort stability.
// Every draw is Philox(seed, stream = request << 32 | sample).uniform(position), position counting the
// generated tokens: a sequence's tokens do not depend on what else is in the batch (DESIGN §10).
// Legend: V vocab.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "model/causal_lm.h"

namespace rf::engine {

struct SamplingParams {
  double temperature = 1.0;  // 0: greedy
  int64_t top_k = 0;         // <= 0: no top-k cut (vLLM's -1, HF's 0)
  double top_p = 1.0;        // in (0, 1]
  uint64_t seed = 0;
  void validate() const;     // rf::Error naming the field
};

// The token drawn from `logits_V` (any floating dtype, any stride) with the uniform number u in
// [0, 1). Only ids below `num_candidates` (<= V) are considered: a model's padded rows that the
// tokenizer has no text for are never drawn.
int64_t sample_token(TensorView logits_V, int64_t num_candidates, const SamplingParams& params, double u);

// The probabilities sample_token draws from (0 for every dropped id), in f64: for tests and for
// reporting a sample's log-probability.
std::vector<double> sampling_distribution(TensorView logits_V, int64_t num_candidates, const SamplingParams& params);

// log softmax(logits_V / temperature)[token] over the whole row, in f64: a drawn token's log-prob as
// the trainer recomputes it (before top-k / top-p).
double token_logprob(TensorView logits_V, int64_t token, double temperature);

// {sample_token(logits_V, num_candidates, params, u), token_logprob(logits_V, that token,
// logprob_temperature)}, bit for bit, at about the cost of one: when the two temperatures agree and
// every id is a candidate, both take the same exp(z - max z) values (the rollout engine's draw).
std::pair<int64_t, double> sample_token_with_logprob(TensorView logits_V, int64_t num_candidates,
                                                     const SamplingParams& params, double u,
                                                     double logprob_temperature);

struct SampleRequest {
  std::vector<int64_t> prompt;
  uint64_t request = 0;  // the prompt's index
  uint64_t sample = 0;   // which of its n samples
};

enum class FinishReason : uint8_t { stop, length };  // vLLM's names: an eos id, or max_new_tokens

struct SampledSequence {
  std::vector<int64_t> ids;  // generated, without the prompt; ends with the eos id when stopped by one
  FinishReason finish_reason = FinishReason::length;
};

// Generates for every request; the model must have room for every prompt plus max_new_tokens.
std::vector<SampledSequence> sample_decode(model::CausalLm& model, const std::vector<SampleRequest>& requests,
                                           int64_t max_new_tokens, std::span<const int64_t> eos_ids,
                                           int64_t num_candidates, const SamplingParams& params);

std::string finish_reason_name(FinishReason reason);

}  // namespace rf::engine

#include "engine/greedy_decode.h"

#include "engine/sampling.h"

namespace rf::engine {

std::vector<std::vector<int64_t>> greedy_decode(model::CausalLm& model, const std::vector<std::vector<int64_t>>& prompts,
                                                int64_t max_new_tokens, std::span<const int64_t> eos_ids,
                                                int64_t num_candidates) {
  std::vector<SampleRequest> requests;
  for (size_t i = 0; i < prompts.size(); ++i) requests.push_back({prompts[i], uint64_t(i), 0});
  const std::vector<SampledSequence> sampled =
      sample_decode(model, requests, max_new_tokens, eos_ids, num_candidates, {.temperature = 0.0});
  std::vector<std::vector<int64_t>> generated;
  for (const SampledSequence& s : sampled) generated.push_back(s.ids);
  return generated;
}

}  // namespace rf::engine

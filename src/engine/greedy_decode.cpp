#include "engine/greedy_decode.h"

#include "core/element_access.h"

namespace rf::engine {

std::vector<std::vector<int64_t>> greedy_decode(model::CausalLm& model, const std::vector<std::vector<int64_t>>& prompts,
                                                int64_t max_new_tokens, int64_t eos_id) {
  std::vector<std::vector<int64_t>> sequences = prompts;
  std::vector<std::vector<int64_t>> generated(prompts.size());
  std::vector<bool> done(prompts.size(), false);
  for (int64_t step = 0; step < max_new_tokens; ++step) {
    std::vector<std::vector<int64_t>> active;
    std::vector<size_t> which;
    for (size_t i = 0; i < sequences.size(); ++i) {
      if (done[i]) continue;
      active.push_back(sequences[i]);
      which.push_back(i);
    }
    if (active.empty()) break;
    const model::PackedSequences packed = model::pack_sequences(active);
    const model::ModelOutputs out = model.forward(packed.inputs(), model::EntropyOutput::skip);
    const int64_t V = out.logits_NV.size(1);
    for (size_t a = 0; a < active.size(); ++a) {
      const TensorView row = out.logits_NV.select(0, packed.cu_seqlens[a + 1] - 1);
      int64_t best = 0;
      double best_logit = load_f64(row, 0);
      for (int64_t v = 1; v < V; ++v) {
        const double logit = load_f64(row, v * row.stride(0));
        if (logit > best_logit) {  // first maximum wins on ties, as torch.argmax
          best_logit = logit;
          best = v;
        }
      }
      const size_t i = which[a];
      sequences[i].push_back(best);
      generated[i].push_back(best);
      if (best == eos_id) done[i] = true;
    }
  }
  return generated;
}

}  // namespace rf::engine

// SFT packing: examples -> the packed micro-batches a causal LM reads (model/model_inputs.h: one row,
// batch 1, seq_len N, documents delimited by cu_seqlens on the flattened token axis, positions
// restarting at 0 in each document). An example becomes [bos] + encode(prompt) + encode(response) +
// [eos] (no bos when there is none, as for Qwen); the loss covers the response tokens and eos only:
// the target at position t is token t+1 when that is a response token or eos, else -100. Which bos
// and eos is the caller's choice (SftSpecialIds): apps/rlforge/run_tokenizer.h takes the model's.
// Examples are packed first-fit in order: each goes into the first micro-batch with room for it, or
// opens a new one, so no token is padding. Not here: loss aggregation (the trainer divides by
// num_loss_tokens summed over the global batch) and DP sharding of the micro-batches.
// Legend: N tokens of one micro-batch (all its documents, concatenated).
#pragma once

#include <optional>
#include <span>
#include <vector>

#include "core/tensor.h"
#include "data/task.h"
#include "data/tokenizer.h"

namespace rf::data {

inline constexpr int64_t kIgnoreTarget = -100;  // as in Hugging Face and the model's targets_N

struct SftPackingConfig {
  int64_t max_length = 0;                  // data.max_length: tokens of one example, bos and eos included
  int64_t max_tokens_per_micro_batch = 0;  // data.max_tokens_per_micro_batch: N of one micro-batch at most
  void validate() const;                   // ConfigError naming the key
};

// The ids every example is framed with.
struct SftSpecialIds {
  std::optional<int64_t> bos;  // nullopt: no bos (Qwen's tokenizers have none)
  int64_t eos = 0;             // ends every response, and is trained on
};

// One tokenized example.
struct SftSequence {
  std::vector<int64_t> tokens;    // [bos] prompt response eos
  int64_t num_prompt_tokens = 0;  // bos included: tokens[num_prompt_tokens] is the first response token
};

struct SftMicroBatch {
  Tensor tokens_N, positions_N, targets_N;  // i64
  std::vector<int32_t> cu_seqlens;          // [0, end of document 1, ..., N]
  int64_t num_sequences = 0;
  int64_t num_loss_tokens = 0;  // targets other than kIgnoreTarget
};

class SftBatchBuilder {
 public:
  // Keeps a reference to `tokenizer`, which must outlive the builder.
  SftBatchBuilder(const Tokenizer& tokenizer, SftSpecialIds special_ids, SftPackingConfig config);

  // [bos] + encode(prompt): what the model continues from when it answers (evaluation).
  std::vector<int64_t> prompt_tokens(const Example& example) const;
  // rf::Error naming the example (`example_index` and the start of its prompt) when it is longer than
  // max_length.
  SftSequence tokenize(const Example& example, size_t example_index) const;
  // `examples[i]` is named "example i" in errors.
  std::vector<SftMicroBatch> build(std::span<const Example> examples) const;

 private:
  const Tokenizer& tokenizer_;
  SftSpecialIds special_ids_;
  SftPackingConfig config_;
};

}  // namespace rf::data

#include "data/sft_batch.h"

#include <fmt/format.h>

#include <limits>

#include "core/error.h"

namespace rf::data {
namespace {

constexpr size_t kPromptPreviewChars = 40;

// Fills one micro-batch from the sequences packed into it, in order.
SftMicroBatch make_micro_batch(const std::vector<const SftSequence*>& sequences) {
  SftMicroBatch batch;
  int64_t N = 0;
  for (const SftSequence* s : sequences) N += int64_t(s->tokens.size());
  batch.tokens_N = Tensor(Shape{N}, DType::i64);
  batch.positions_N = Tensor(Shape{N}, DType::i64);
  batch.targets_N = Tensor(Shape{N}, DType::i64);
  batch.num_sequences = int64_t(sequences.size());
  batch.cu_seqlens.push_back(0);
  int64_t* tokens = batch.tokens_N.data<int64_t>();
  int64_t* positions = batch.positions_N.data<int64_t>();
  int64_t* targets = batch.targets_N.data<int64_t>();
  int64_t n = 0;
  for (const SftSequence* s : sequences) {
    const int64_t length = int64_t(s->tokens.size());
    for (int64_t t = 0; t < length; ++t, ++n) {
      tokens[n] = s->tokens[size_t(t)];
      positions[n] = t;
      const bool next_is_trained = t + 1 < length && t + 1 >= s->num_prompt_tokens;
      targets[n] = next_is_trained ? s->tokens[size_t(t + 1)] : kIgnoreTarget;
      batch.num_loss_tokens += next_is_trained;
    }
    batch.cu_seqlens.push_back(int32_t(n));
  }
  return batch;
}

}  // namespace

void SftPackingConfig::validate() const {
  if (max_length < 2)
    throw ConfigError("data.max_length", fmt::format("{} leaves no room for bos and eos", max_length));
  if (max_tokens_per_micro_batch < max_length)
    throw ConfigError("data.max_tokens_per_micro_batch",
                      fmt::format("{} is below data.max_length={}: a full-length example would not fit",
                                  max_tokens_per_micro_batch, max_length));
  if (max_tokens_per_micro_batch > std::numeric_limits<int32_t>::max())
    throw ConfigError("data.max_tokens_per_micro_batch",
                      fmt::format("{} does not fit the int32 cu_seqlens", max_tokens_per_micro_batch));
}

SftBatchBuilder::SftBatchBuilder(const Tokenizer& tokenizer, SftSpecialIds special_ids, SftPackingConfig config)
    : tokenizer_(tokenizer), special_ids_(special_ids), config_(config) {
  config_.validate();
  RF_CHECK(special_ids_.eos >= 0, "SFT eos id {} is not a token id", special_ids_.eos);
  RF_CHECK(!special_ids_.bos || *special_ids_.bos >= 0, "SFT bos id {} is not a token id", *special_ids_.bos);
}

std::vector<int64_t> SftBatchBuilder::prompt_tokens(const Example& example) const {
  std::vector<int64_t> tokens;
  if (special_ids_.bos) tokens.push_back(*special_ids_.bos);
  const std::vector<int64_t> prompt = tokenizer_.encode(example.prompt);
  tokens.insert(tokens.end(), prompt.begin(), prompt.end());
  return tokens;
}

SftSequence SftBatchBuilder::tokenize(const Example& example, size_t example_index) const {
  SftSequence s;
  s.tokens = prompt_tokens(example);
  const std::vector<int64_t> response = tokenizer_.encode(example.response);
  s.num_prompt_tokens = int64_t(s.tokens.size());
  s.tokens.insert(s.tokens.end(), response.begin(), response.end());
  s.tokens.push_back(special_ids_.eos);
  const int64_t length = int64_t(s.tokens.size());
  if (length > config_.max_length) {
    const bool cut = example.prompt.size() > kPromptPreviewChars;
    throw Error(fmt::format("example {} (prompt \"{}{}\"): {} tokens ({} prompt with bos, {} response, eos) exceed "
                            "data.max_length={}",
                            example_index, example.prompt.substr(0, kPromptPreviewChars), cut ? "..." : "", length,
                            s.num_prompt_tokens, response.size(), config_.max_length));
  }
  return s;
}

std::vector<SftMicroBatch> SftBatchBuilder::build(std::span<const Example> examples) const {
  std::vector<SftSequence> sequences;
  sequences.reserve(examples.size());
  for (size_t i = 0; i < examples.size(); ++i) sequences.push_back(tokenize(examples[i], i));

  // First fit in order: bins keep their sequences in example order.
  std::vector<std::vector<const SftSequence*>> bins;
  std::vector<int64_t> bin_tokens;
  for (const SftSequence& s : sequences) {
    const int64_t length = int64_t(s.tokens.size());
    size_t bin = 0;
    while (bin < bins.size() && bin_tokens[bin] + length > config_.max_tokens_per_micro_batch) ++bin;
    if (bin == bins.size()) {
      bins.emplace_back();
      bin_tokens.push_back(0);
    }
    bins[bin].push_back(&s);
    bin_tokens[bin] += length;
  }

  std::vector<SftMicroBatch> micro_batches;
  micro_batches.reserve(bins.size());
  for (const auto& bin : bins) micro_batches.push_back(make_micro_batch(bin));
  return micro_batches;
}

}  // namespace rf::data

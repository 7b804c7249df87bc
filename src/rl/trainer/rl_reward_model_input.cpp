#include "rl/trainer/rl_reward_model_input.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/log.h"
#include "data/load_tokenizer.h"
#include "data/tokenizer_config.h"

namespace rf::rl {
namespace {

constexpr const char* kPathKey = "reward_model.model.path";
constexpr const char* kInputTokenizerKey = "reward_model.model.input_tokenizer";

// The tokenizer.json the policy's ids mean: a built-in or named tokenizer's own files, else the model
// folder's.
std::string policy_tokenizer_json(const trainer::RunTokenizer& policy, const model::HfModelFolder& policy_folder) {
  const auto own = policy.hf_files.find("tokenizer.json");
  if (own != policy.hf_files.end()) return own->second;
  const auto in_folder = policy_folder.side_files.find("tokenizer.json");
  return in_folder == policy_folder.side_files.end() ? std::string() : in_folder->second;
}

// A sequence classifier with one label scores a sequence at its last token (a one-label token
// classifier too: its output at the last token).
void check_scores_sequences(const model::HfModelFolder& folder, const std::string& dir) {
  const model::ModelConfig& c = folder.config;
  const std::string expected = "expected a reward model, a *ForSequenceClassification folder with one label";
  if (c.head == model::HeadKind::lm)
    throw ConfigError(kPathKey, fmt::format("'{}' is a language model (no score head): {}", dir, expected));
  if (c.num_labels != 1)
    throw ConfigError(kPathKey, fmt::format("'{}' is a {} model with {} labels: {}", dir, model::head_name(c.head),
                                            c.num_labels, expected));
}

}  // namespace

RewardModelInput::RewardModelInput(const RlConfig& config, const trainer::RunTokenizer& policy,
                                   const model::HfModelFolder& policy_folder)
    : policy_(policy) {
  const RewardModelSection& rm = config.reward_model;
  const std::string dir = *rm.model.path;
  const model::HfModelFolder folder = model::HfModelFolder::open(dir);
  check_scores_sequences(folder, dir);
  const std::string policy_json = policy_tokenizer_json(policy, policy_folder);
  const auto rm_json = folder.side_files.find("tokenizer.json");

  if (!rm.model.input_tokenizer) {
    if (rm_json != folder.side_files.end() && rm_json->second != policy_json)
      throw ConfigError(kInputTokenizerKey,
                        fmt::format("null, so the reward model reads the rollout's token ids, but {}'s tokenizer.json "
                                    "differs from the policy's ({}): set {} to the policy's tokenizer to re-render "
                                    "each chat with the reward model's template and tokenizer",
                                    dir, policy.name, kInputTokenizerKey));
    if (policy.tokenizer->vocab_size() > folder.config.vocab_size)
      throw ConfigError(kPathKey, fmt::format("{} has vocab_size {}, but the policy's tokenizer {} has {} ids", dir,
                                              folder.config.vocab_size, policy.name, policy.tokenizer->vocab_size()));
    return;
  }

  // The switch decodes the rollout's ids, which are the policy's: input_tokenizer must name its tokenizer.
  const std::string& named = *rm.model.input_tokenizer;
  const std::filesystem::path named_json = std::filesystem::path(named) / "tokenizer.json";
  const bool is_policy = named == policy.name || named == config.actor_rollout_ref.model.path.value_or("") ||
                         (std::filesystem::exists(named_json) && model::read_file_bytes(named_json) == policy_json);
  if (!is_policy)
    throw ConfigError(kInputTokenizerKey,
                      fmt::format("'{}' is not the policy's tokenizer ({}): the responses are the policy's ids, decoded "
                                  "with its tokenizer",
                                  named, policy.name));
  if (rm_json == folder.side_files.end())
    throw ConfigError(kPathKey, fmt::format("{} has no tokenizer.json, which {} needs to encode the re-rendered chat",
                                            dir, kInputTokenizerKey));
  const std::filesystem::path tokenizer_config = std::filesystem::path(dir) / "tokenizer_config.json";
  if (!std::filesystem::exists(tokenizer_config))
    throw ConfigError(kPathKey, fmt::format("{} has no tokenizer_config.json with the chat template {} renders with",
                                            dir, kInputTokenizerKey));
  switch_ = ChatSwitch{data::load_tokenizer(dir),
                       data::ChatTemplate::from_config(data::read_tokenizer_config(tokenizer_config.string())),
                       rm.max_length.value_or(config.prompt_length() + config.response_length())};
  if (switch_->max_length < 2)
    throw ConfigError("reward_model.max_length", fmt::format("must be at least 2 tokens, got {}", switch_->max_length));
  core::log_info("reward model {}: each chat re-rendered with its template and tokenizer (up to {} tokens)", dir,
                 switch_->max_length);
}

std::vector<int64_t> RewardModelInput::switched(const RlResponse& r, const PromptRow& row) {
  std::span<const int64_t> response(r.response);
  // verl removes the eos text from the decoded response; the rollout's stop token is its last id.
  if (!r.truncated && !response.empty() &&
      std::find(policy_.stop_ids.begin(), policy_.stop_ids.end(), response.back()) != policy_.stop_ids.end())
    response = response.first(response.size() - 1);
  std::vector<data::ChatMessage> chat = row.messages;
  chat.push_back({"assistant", policy_.tokenizer->decode(response, data::SpecialTokens::keep)});
  const std::string text = switch_->chat_template.render(chat, data::GenerationPrompt::no);
  if (!logged_) {
    core::log_info("reward model input, switched chat template: {}", nlohmann::json(text).dump());
    logged_ = true;
  }
  std::vector<int64_t> ids = switch_->tokenizer->encode(text, data::AddSpecialTokens::no);
  if (int64_t(ids.size()) > switch_->max_length) ids.resize(size_t(switch_->max_length));
  return ids;
}

RlBatch RewardModelInput::sequences(const RlBatch& batch, std::span<const PromptRow> rows) {
  RlBatch out(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    const RlResponse& r = batch[i];
    RlResponse& s = out[i];
    s.group = r.group;
    if (switch_) {
      s.prompt = switched(r, rows[size_t(r.group)]);
    } else {
      s.prompt = r.prompt;
      s.prompt.insert(s.prompt.end(), r.response.begin(), r.response.end());
    }
    RF_CHECK(s.prompt.size() >= 2, "reward model sequence {} has {} tokens", i, s.prompt.size());
    // The scored last token as the "response", so the sequence packs as any response does.
    s.response = {s.prompt.back()};
    s.prompt.pop_back();
  }
  return out;
}

}  // namespace rf::rl

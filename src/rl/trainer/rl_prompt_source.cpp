#include "rl/trainer/rl_prompt_source.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "config/yaml_json.h"
#include "core/error.h"
#include "core/log.h"
#include "core/philox.h"
#include "data/index_permutation.h"
#include "data/jsonl_dataset.h"
#include "data/tokenizer_config.h"

namespace rf::rl {
namespace {

constexpr uint64_t kRowOrderStream = 0x726c2d6f72646572;  // "rl-order": the Philox stream of epoch keys
constexpr size_t kPromptPreviewChars = 40;

// "<path>: line <k>", for messages.
std::string row_name(const std::string& path, int64_t line) { return fmt::format("{}: line {}", path, line); }

// The rows of the cursor's epoch in order: a permutation keyed by (seed, epoch), computed rather than
// stored (as data::take_example orders an SFT file), or the file's order.
class RowOrder {
 public:
  RowOrder(uint64_t num_rows, const data::DataCursor& cursor, bool shuffle) {
    if (!shuffle) return;
    const auto words = Philox(cursor.seed, kRowOrderStream).block_at(cursor.epoch);
    permutation_.emplace(num_rows, uint64_t(words[0]) << 32 | words[1]);
  }
  uint64_t operator()(uint64_t index) const { return permutation_ ? permutation_->forward(index) : index; }

 private:
  std::optional<data::IndexPermutation> permutation_;  // none: file order
};

// A row's columns but the prompt, checked; IoError naming the file, the line and the column.
PromptRow read_reward_columns(const nlohmann::json& row, const std::string& path, int64_t line,
                              const std::string& reward_fn_key) {
  const auto fail = [&](const std::string& what) { throw IoError(path, fmt::format("line {}: {}", line, what)); };
  PromptRow p;
  if (!row.contains(reward_fn_key)) fail(fmt::format("missing \"{}\" (data.reward_fn_key)", reward_fn_key));
  const nlohmann::json& source = row.at(reward_fn_key);
  if (!source.is_string()) fail(fmt::format("\"{}\" must be a string, got {}", reward_fn_key, source.dump()));
  p.data_source = source.get<std::string>();
  if (!row.contains("reward_model")) fail("missing \"reward_model\" (an object with the \"ground_truth\")");
  const nlohmann::json& reward_model = row.at("reward_model");
  if (!reward_model.is_object() || !reward_model.contains("ground_truth") || reward_model.at("ground_truth").is_null())
    fail(fmt::format("\"reward_model\" must be an object with a non-null \"ground_truth\", got {}",
                     reward_model.dump().substr(0, 80)));
  p.ground_truth = reward_model.at("ground_truth");
  if (row.contains("extra_info")) {
    p.extra_info = row.at("extra_info");
    if (!p.extra_info.is_object() && !p.extra_info.is_null())
      fail(fmt::format("\"extra_info\" must be an object, got {}", p.extra_info.type_name()));
  }
  return p;
}

std::vector<data::ChatMessage> read_messages(const nlohmann::json& prompt, const std::string& path, int64_t line,
                                             const std::string& prompt_key) {
  if (prompt.empty())
    throw IoError(path, fmt::format("line {}: \"{}\" is an empty list of messages", line, prompt_key));
  std::vector<data::ChatMessage> messages;
  for (size_t i = 0; i < prompt.size(); ++i) {
    const nlohmann::json& m = prompt[i];
    for (const char* field : {"role", "content"})
      if (!m.is_object() || !m.contains(field) || !m.at(field).is_string())
        throw IoError(path, fmt::format("line {}: \"{}\"[{}].{}: expected a message {{\"role\": string, \"content\": "
                                        "string}}, got {}",
                                        line, prompt_key, i, field, m.dump().substr(0, 80)));
    messages.push_back({m.at("role").get<std::string>(), m.at("content").get<std::string>()});
  }
  return messages;
}

}  // namespace

PromptSource::PromptSource(const RlConfig& config, const trainer::RunTokenizer& tokens)
    : tokens_(tokens),
      seed_(config.data.seed.value_or(1)),
      batch_size_(config.data.train_batch_size),
      val_size_(config.data.val_size),
      shuffle_(config.data.shuffle),
      framing_(*tokens.tokenizer, tokens.special_ids,
               data::SftPackingConfig{config.prompt_length() + config.response_length(),
                                      config.prompt_length() + config.response_length()}),
      limit_key_(config.actor_rollout_ref.rollout.prompt_length ? "actor_rollout_ref.rollout.prompt_length"
                                                                : "data.max_prompt_length"),
      max_prompt_length_(config.prompt_length()),
      truncation_(config.data.truncation),
      filter_overlong_(config.data.filter_overlong_prompts),
      prompt_key_(config.data.prompt_key),
      reward_fn_key_(config.data.reward_fn_key) {
  if (!config.data.train_files) {
    task_ = data::make_task(config.data.builtin_task(), config::yaml_to_json(config.data.task_kwargs), seed_);
    data_sources_[std::string(task_->name())] = "data.task";
    validation_data_sources_ = data_sources_;
    return;
  }
  train_ = read_files(config.data.train_files->paths, "data.train_files");
  if (config.data.val_files) val_ = read_files(config.data.val_files->paths, "data.val_files");
  if (int64_t(train_.size()) < batch_size_)
    throw ConfigError("data.train_batch_size",
                      fmt::format("{} prompts per step, but data.train_files has {} usable rows: a step takes whole "
                                  "batches of one epoch",
                                  batch_size_, train_.size()));
}

std::vector<PromptRow> PromptSource::read_files(const std::vector<std::string>& paths, const std::string& key) {
  std::vector<PromptRow> rows;
  for (const std::string& path : paths) {
    int64_t num_rows = 0, num_dropped = 0;
    data::for_each_jsonl_row(path, key, [&](const nlohmann::json& row, int64_t line_number) {
      ++num_rows;
      PromptRow p = read_row(row, path, line_number);
      if (!fit(p.tokens, row_name(path, line_number))) {
        ++num_dropped;
        return;
      }
      data_sources_.try_emplace(p.data_source, row_name(path, line_number));
      if (key == "data.val_files") validation_data_sources_.try_emplace(p.data_source, row_name(path, line_number));
      rows.push_back(std::move(p));
    });
    if (num_rows == 0) throw IoError(path, fmt::format("no rows ({})", key));
    core::log_info("{} {}: {} prompts{}", key, path, num_rows - num_dropped,
                   num_dropped ? fmt::format(" ({} of {} rows dropped by data.filter_overlong_prompts: over {} tokens)",
                                             num_dropped, num_rows, max_prompt_length_)
                               : "");
  }
  if (rows.empty())
    throw ConfigError("data.filter_overlong_prompts", fmt::format("every row of {} is longer than {} = {} tokens", key,
                                                                  limit_key_, max_prompt_length_));
  return rows;
}

PromptRow PromptSource::read_row(const nlohmann::json& row, const std::string& path, int64_t line) {
  if (!row.is_object())
    throw IoError(path, fmt::format("line {}: expected a JSON object, got {}", line, row.type_name()));
  PromptRow p = read_reward_columns(row, path, line, reward_fn_key_);
  if (!row.contains(prompt_key_))
    throw IoError(path, fmt::format("line {}: missing \"{}\" (data.prompt_key)", line, prompt_key_));
  const nlohmann::json& prompt = row.at(prompt_key_);
  if (prompt.is_string()) {
    p.tokens = framing_.prompt_tokens(data::Example{.prompt = prompt.get<std::string>()});
    p.messages = {{"user", prompt.get<std::string>()}};
  } else if (prompt.is_array()) {
    p.messages = read_messages(prompt, path, line, prompt_key_);
    p.tokens = encode_messages(p.messages, path, line);
  } else
    throw IoError(path, fmt::format("line {}: \"{}\" must be a string or a list of chat messages, got {}", line,
                                    prompt_key_, prompt.type_name()));
  if (p.tokens.empty()) throw IoError(path, fmt::format("line {}: the prompt has no tokens", line));
  return p;
}

std::vector<int64_t> PromptSource::encode_messages(std::span<const data::ChatMessage> messages,
                                                   const std::string& path, int64_t line) {
  if (!chat_template_) {
    const std::filesystem::path config = std::filesystem::path(tokens_.name) / "tokenizer_config.json";
    std::error_code ec;
    if (!std::filesystem::exists(config, ec))
      throw IoError(path, fmt::format("line {}: \"{}\" is a list of chat messages, but the tokenizer {} has no "
                                      "tokenizer_config.json with the chat template to render them",
                                      line, prompt_key_, tokens_.name));
    // An IoError naming that file when its template is missing or of no family rlforge renders.
    chat_template_ = data::ChatTemplate::from_config(data::read_tokenizer_config(config.string()));
  }
  std::string text;
  try {
    // The generation prompt opens the assistant turn the rollout completes (verl's add_generation_prompt=True).
    text = chat_template_->render(messages, data::GenerationPrompt::yes);
  } catch (const Error& e) {  // a role the template does not render
    throw IoError(path, fmt::format("line {}: \"{}\": {}", line, prompt_key_, e.what()));
  }
  return tokens_.tokenizer->encode(text, data::AddSpecialTokens::no);
}

bool PromptSource::fit(std::vector<int64_t>& tokens, const std::string& where) const {
  const int64_t length = int64_t(tokens.size()), limit = max_prompt_length_;
  if (length <= limit) return true;
  if (filter_overlong_) return false;
  switch (truncation_) {
    case Truncation::error:
      throw ConfigError(limit_key_, fmt::format("{}: the prompt has {} tokens, more than {}; set data.truncation "
                                                "(left, right, middle) or data.filter_overlong_prompts, or raise the "
                                                "limit",
                                                where, length, limit));
    case Truncation::left:
      tokens.erase(tokens.begin(), tokens.end() - limit);
      break;
    case Truncation::right:
      tokens.resize(size_t(limit));
      break;
    case Truncation::middle:
      tokens.erase(tokens.begin() + limit / 2, tokens.end() - (limit - limit / 2));
      break;
  }
  return true;
}

PromptRow PromptSource::task_prompt(const data::Example& example) const {
  PromptRow p{framing_.prompt_tokens(example), std::string(task_->name()), example.ground_truth, nullptr,
              {{"user", example.prompt}}};
  const bool cut = example.prompt.size() > kPromptPreviewChars;
  fit(p.tokens, fmt::format("data.task {}, prompt \"{}{}\"", task_->name(),
                            example.prompt.substr(0, kPromptPreviewChars), cut ? "..." : ""));
  return p;
}

std::vector<PromptRow> PromptSource::next_batch(data::DataCursor& cursor) const {
  std::vector<PromptRow> batch;
  batch.reserve(size_t(batch_size_));
  if (task_) {
    for (int64_t i = 0; i < batch_size_; ++i) batch.push_back(task_prompt(data::take_example(*task_, cursor)));
    return batch;
  }
  const uint64_t num_rows = train_.size(), batch_size = uint64_t(batch_size_);
  // Only a resume with other files can leave the cursor without a whole batch in its epoch.
  if (cursor.next_index + batch_size > num_rows)
    throw Error(
        fmt::format("the data cursor is at row {} of epoch {}, but data.train_files has {} usable rows and a "
                    "batch takes {}: did the files change since the checkpoint?",
                    cursor.next_index, cursor.epoch, num_rows, batch_size));
  const RowOrder order(num_rows, cursor, shuffle_);
  for (uint64_t i = 0; i < batch_size; ++i) batch.push_back(train_[order(cursor.next_index++)]);
  // verl's drop_last: the rows left are fewer than a batch, so the next batch opens the next epoch.
  if (cursor.next_index + batch_size > num_rows) {
    ++cursor.epoch;
    cursor.next_index = 0;
  }
  return batch;
}

std::vector<PromptRow> PromptSource::validation() const {
  if (!task_) return val_;
  std::vector<PromptRow> rows;
  const uint64_t count = std::min<uint64_t>(uint64_t(val_size_), task_->num_val_examples());
  for (uint64_t i = 0; i < count; ++i) rows.push_back(task_prompt(task_->example(data::Split::val, i)));
  return rows;
}

}  // namespace rf::rl

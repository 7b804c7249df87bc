// PromptSource: the prompts `rlforge train` generates from, verl's RLHFDataset and its sampler
// (spec verl.md §2.2), from one of two places:
//   a built-in task (data.task; data.train_files null): an endless stream drawn from data.seed, framed
//     as the SFT warm start saw it ([bos] prompt); validation is the first data.val_size problems of
//     the task's held-out split; the task's name is its data_source.
//   JSONL files in verl's columns (data.train_files, data.val_files: one object per line):
//     {"prompt": "text" | [{"role": ..., "content": ...}, ...], "data_source": "openai/gsm8k",
//      "reward_model": {"ground_truth": ...}, "extra_info": {...}}
//     prompt and data_source are the columns data.prompt_key and data.reward_fn_key name; extra_info
//     is optional; other columns are ignored. Chat messages are rendered with the chat template of the
//     tokenizer's tokenizer_config.json with the generation prompt (data/chat_template.h) and encoded
//     without special tokens: verl's apply_chat_template(tokenize=False) then tokenizer(text,
//     add_special_tokens=False), so any bos is the template's own. A text prompt is framed as SFT
//     frames it, [bos] text (Hugging Face's tokenizer(text) for Qwen and Llama-3 alike).
// Every file is read and tokenized when the source is made, so a bad row (an IoError naming the file,
// the line and the column) or an overlong prompt fails before any work. Prompt length (the rollout's
// prompt limit: data.max_prompt_length unless rollout.prompt_length is set): with
// data.filter_overlong_prompts a longer row is dropped (the count is logged per file; verl filters by
// the full length, before truncation); otherwise data.truncation: error (a ConfigError naming the
// file, line and both lengths), left (keep the last tokens), right (keep the first), middle (keep the
// first limit/2 and the last limit - limit/2). The same rule applies to a built-in task's prompts.
// Training order: each epoch visits every row once, shuffled by (data.seed, epoch) when data.shuffle,
// else in file order; as verl's drop_last DataLoader, a batch never straddles two epochs (the rows
// left over at an epoch's end are skipped), so each epoch starts reshuffled. The position is a
// data::DataCursor, saved in checkpoints: a resumed run draws exactly the batches the uninterrupted
// run would. Validation is every row of data.val_files, in file order, as one batch.
// No padding is materialised: verl left-pads prompts into a (batch, max_prompt_length) tensor for
// its rollout, rlforge's paged rollout engine takes each prompt at its own length (rl_metrics.h logs
// verl's prompt_length/* from those lengths).
// Not here: scoring (rl_trainer.cpp keeps a rule scorer per data_source), parquet files, multimodal
// columns, tools.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "rl/trainer/rl_config.h"
#include "trainer/run_tokenizer.h"
#include "data/chat_template.h"
#include "data/data_cursor.h"
#include "data/task.h"

namespace rf::rl {

// One prompt and the columns its reward reads (verl's non-tensor batch keys).
struct PromptRow {
  std::vector<int64_t> tokens;
  std::string data_source;      // picks the rule scorer, and groups the validation metrics
  nlohmann::json ground_truth;  // reward_model.ground_truth as the row has it
  nlohmann::json extra_info;    // null when the row has none
  // The prompt as a conversation (a text prompt: one user message), for a reward model that renders
  // the chat with a template of its own (reward_model.model.input_tokenizer).
  std::vector<data::ChatMessage> messages;
};

class PromptSource {
 public:
  // Keeps a reference to `tokens`, which must outlive the source.
  PromptSource(const RlConfig& config, const trainer::RunTokenizer& tokens);

  // Where a run starts: epoch 0, row 0, of the order data.seed (null: 1) selects.
  data::DataCursor start() const { return {seed_, 0, 0}; }
  // The next data.train_batch_size prompts at `cursor`; advances it.
  std::vector<PromptRow> next_batch(data::DataCursor& cursor) const;
  // The validation prompts, the same at every validation.
  std::vector<PromptRow> validation() const;
  // Every data_source of the training and validation prompts -> where it first appears
  // ("<file>: line <k>", or "data.task"), for the trainer's scorers and their errors.
  const std::map<std::string, std::string>& data_sources() const { return data_sources_; }
  // Those of the validation prompts only (the ones a reward function scores when a reward model scores
  // the training responses).
  const std::map<std::string, std::string>& validation_data_sources() const { return validation_data_sources_; }

 private:
  // Every row of `paths` (the config key `key` lists them), tokenized and length-checked.
  std::vector<PromptRow> read_files(const std::vector<std::string>& paths, const std::string& key);
  // One row's columns and its prompt's tokens; IoError naming the file, the line and the column.
  PromptRow read_row(const nlohmann::json& row, const std::string& path, int64_t line);
  std::vector<int64_t> encode_messages(std::span<const data::ChatMessage> messages, const std::string& path,
                                       int64_t line);
  PromptRow task_prompt(const data::Example& example) const;
  // Applies the length rule to `tokens`; false when the prompt is to be dropped (filter_overlong_prompts).
  bool fit(std::vector<int64_t>& tokens, const std::string& where) const;

  const trainer::RunTokenizer& tokens_;
  uint64_t seed_;
  int64_t batch_size_;
  int64_t val_size_;
  bool shuffle_;
  data::SftBatchBuilder framing_;                    // [bos] text
  std::optional<data::ChatTemplate> chat_template_;  // read when a row first needs it
  std::unique_ptr<data::Task> task_;                 // the built-in task, or null for JSONL files
  std::vector<PromptRow> train_, val_;               // JSONL rows, tokenized
  std::map<std::string, std::string> data_sources_, validation_data_sources_;
  std::string limit_key_;  // the key that sets the prompt limit, for messages
  int64_t max_prompt_length_;
  Truncation truncation_;
  bool filter_overlong_;
  std::string prompt_key_, reward_fn_key_;
};

}  // namespace rf::rl

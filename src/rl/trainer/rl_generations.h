// What a run generated, for the user to read (verl's trainer._dump_generations and
// _maybe_log_val_generations):
//   trainer.rollout_data_dir     each training step's responses as <dir>/<step>.jsonl,
//   trainer.validation_data_dir  each validation's as <dir>/<step>.jsonl (step 0: before training),
// one JSON object per response, verl's keys: "input" (the prompt) and "output" (the response), both
// decoded without special tokens; "gts" (the row's reward_model.ground_truth); "score" (the reward of the
// response: the reward function's or the reward model's); "step"; then each reward extra (e.g. "acc").
// A file is written whole, then renamed into place, so a reader never sees half of it.
//   trainer.log_val_generations  the first k validation samples (input, output, score) in the log at each
//                                validation. (verl shuffles the samples sorted by input with numpy's seed
//                                42 before taking k; here they are the first k in prompt order.)
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "rl/trainer/rl_batch.h"
#include "rl/trainer/rl_prompt_source.h"
#include "data/tokenizer.h"

namespace rf::rl {

struct Generation {
  std::string input, output;
  nlohmann::json ground_truth;
  double score = 0;
  std::map<std::string, double> reward_extra;
};

// One per response of `batch`, whose prompt is rows[r.group].
std::vector<Generation> generations_of(const RlBatch& batch, std::span<const PromptRow> rows,
                                       const data::Tokenizer& tokenizer);

// Writes <dir>/<step>.jsonl (creating dir); IoError naming the file when it cannot.
void dump_generations(const std::string& dir, int64_t step, std::span<const Generation> generations);

// Logs the first `count` generations, one line each.
void log_generations(std::span<const Generation> generations, int64_t count, int64_t step);

}  // namespace rf::rl

#include "data/jsonl_dataset.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/input_file.h"
#include "formats/json_input.h"

namespace rf::data {

Example example_from_jsonl_row(const nlohmann::json& row, const std::string& path, int64_t line_number) {
  const auto require = [&](bool ok, const std::string& what) {
    if (!ok) throw IoError(path, fmt::format("line {}: {}", line_number, what));
  };
  require(row.is_object(), fmt::format("expected a JSON object, got {}", row.type_name()));
  require(row.contains("prompt"), "missing \"prompt\"");
  const nlohmann::json& prompt = row.at("prompt");
  require(!prompt.is_array(),
          "\"prompt\" is a list of chat messages, which SFT does not render yet; give the prompt as a string "
          "(the chat template's text, e.g. \"<|im_start|>user\\n...<|im_end|>\\n<|im_start|>assistant\\n\")");
  require(prompt.is_string(), fmt::format("\"prompt\" must be a string, got {}", prompt.type_name()));
  Example example{.prompt = prompt.get<std::string>()};
  if (row.contains("response")) {
    const nlohmann::json& response = row.at("response");
    require(response.is_string(), fmt::format("\"response\" must be a string, got {}", response.type_name()));
    example.response = response.get<std::string>();
    example.ground_truth = example.response;
  }
  if (row.contains("reward_model")) {
    const nlohmann::json& reward_model = row.at("reward_model");
    require(reward_model.is_object() && reward_model.contains("ground_truth"),
            "\"reward_model\" must be an object with a \"ground_truth\"");
    const nlohmann::json& ground_truth = reward_model.at("ground_truth");
    require(ground_truth.is_string() || ground_truth.is_number(),
            fmt::format("\"reward_model.ground_truth\" must be a string or a number, got {}",
                        ground_truth.type_name()));
    example.ground_truth = ground_truth.is_string() ? ground_truth.get<std::string>() : ground_truth.dump();
  }
  require(row.contains("response") || row.contains("reward_model"),
          "neither \"response\" (SFT) nor \"reward_model\": {\"ground_truth\"} (RL)");
  return example;
}

void for_each_jsonl_row(std::istream& in, const std::string& path, const JsonlRowFn& row) {
  std::string line;
  for (int64_t line_number = 1; core::read_line(in, line, kMaxJsonlLineBytes, path, line_number); ++line_number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    formats::check_json_nesting(line, path, fmt::format("line {}: ", line_number));
    nlohmann::json parsed;
    try {
      parsed = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      throw IoError(path, fmt::format("line {}: invalid JSON: {}", line_number, e.what()));
    }
    row(parsed, line_number);
  }
}

void for_each_jsonl_row(const std::string& path, const std::string& what, const JsonlRowFn& row) {
  std::ifstream in;
  try {
    in = core::open_input_file(path, "JSONL rows");
  } catch (const IoError& e) {
    if (what.empty()) throw;
    // The key that named the file ("data.train_files") says which list to fix.
    throw IoError(path, fmt::format("{} (named by {})", e.detail(), what));
  }
  for_each_jsonl_row(in, path, row);
}

JsonlDataset::JsonlDataset(std::vector<std::string> paths) : path_(fmt::format("{}", fmt::join(paths, ", "))) {
  if (paths.empty()) throw IoError("", "no JSONL files named");
  for (const std::string& path : paths) {
    const size_t before = examples_.size();
    for_each_jsonl_row(path, "", [&](const nlohmann::json& row, int64_t line) {
      examples_.push_back(example_from_jsonl_row(row, path, line));
    });
    if (examples_.size() == before) throw IoError(path, "no rows");
  }
}

const Example& JsonlDataset::example(size_t index) const {
  RF_CHECK(index < examples_.size(), "{}: row {} is outside the {} rows", path_, index, examples_.size());
  return examples_[index];
}

}  // namespace rf::data

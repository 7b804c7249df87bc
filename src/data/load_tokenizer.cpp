#include "data/load_tokenizer.h"

#include <fmt/format.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/bpe_tokenizer.h"
#include "data/char_tokenizer.h"
#include "data/tokenizer_json.h"

namespace rf::data {

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / "tokenizer.json").string();
  std::error_code error;
  if (!std::filesystem::exists(path, error))
    throw IoError(path, "missing (expected a folder with a tokenizer.json)");
  // Parsed once: a real model's tokenizer.json takes megabytes.
  const nlohmann::json tokenizer_json = read_json_file(path);
  const nlohmann::json* model = tokenizer_json.is_object() && tokenizer_json.contains("model")
                                    ? &tokenizer_json.at("model")
                                    : nullptr;
  const nlohmann::json type = model && model->is_object() ? model->value("type", nlohmann::json()) : nlohmann::json();
  if (type == "BPE") return std::make_unique<BpeTokenizer>(BpeTokenizer::from_folder(dir, tokenizer_json));
  if (type == "WordLevel") return std::make_unique<CharTokenizer>(CharTokenizer::from_json(tokenizer_json, path));
  throw IoError(path, fmt::format("model.type is {}: expected \"BPE\" (Hugging Face byte-level BPE) or \"WordLevel\" "
                                  "(the built-in character tokenizer)",
                                  type.dump()));
}

}  // namespace rf::data

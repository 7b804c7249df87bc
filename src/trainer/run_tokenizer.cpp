#include "trainer/run_tokenizer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <string_view>

#include "core/error.h"
#include "core/log.h"
#include "data/char_tokenizer.h"
#include "data/load_tokenizer.h"

namespace rf::trainer {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kBuiltin = "builtin:";

// The tokenizer files of folder `dir`: the side files a model folder carries, but generation_config.json.
std::map<std::string, std::string> tokenizer_files(const std::string& dir) {
  std::map<std::string, std::string> files;
  std::error_code ec;
  for (const char* name : model::kHfSideFiles) {
    const fs::path path = fs::path(dir) / name;
    if (std::string_view(name) != "generation_config.json" && fs::exists(path, ec))
      files[name] = model::read_file_bytes(path.string());
  }
  return files;
}

// The id every response ends with (see the file comment).
int64_t choose_eos(const RunTokenizer& t) {
  const auto stops_at = [&](int64_t id) {
    return std::find(t.stop_ids.begin(), t.stop_ids.end(), id) != t.stop_ids.end();
  };
  const std::optional<int64_t> own = t.tokenizer->eos_id();
  if (own && (t.stop_ids.empty() || stops_at(*own))) return *own;
  for (int64_t id : t.stop_ids)
    if (id < t.tokenizer->vocab_size()) return id;
  throw ConfigError(
      "model.tokenizer",
      fmt::format("{}: no eos to end each response with: the tokenizer's eos_token is {}, and the model's generation "
                  "stops at {}",
                  t.name, own ? fmt::format("id {}", *own) : std::string("not set (tokenizer_config.json)"),
                  t.stop_ids.empty() ? std::string("no id (no eos_token_id in model.path's generation_config.json or "
                                                   "config.json)")
                                     : fmt::format("ids [{}] (eos_token_id of model.path), none of them a token of it",
                                                   fmt::join(t.stop_ids, ", "))));
}

}  // namespace

RunTokenizer make_run_tokenizer(const ModelSection& m, const data::DataConfig& data,
                                const model::HfModelFolder* source) {
  const bool source_has_tokenizer = source && source->side_files.count("tokenizer.json");
  RunTokenizer t;
  t.name = m.tokenizer.value_or(source_has_tokenizer ? *m.path : std::string(kBuiltin) + data.builtin_task());
  if (t.name.starts_with(kBuiltin)) {
    auto builtin = std::make_unique<data::CharTokenizer>(data::CharTokenizer::for_task(t.name.substr(kBuiltin.size())));
    t.hf_files = builtin->hf_files(data.max_length);
    t.tokenizer = std::move(builtin);
  } else {
    t.tokenizer = data::load_tokenizer(t.name);
    t.hf_files = tokenizer_files(t.name);
  }
  if (source_has_tokenizer) {
    if (t.hf_files["tokenizer.json"] != source->side_files.at("tokenizer.json"))
      throw ConfigError("model.tokenizer",
                        fmt::format("{} is not the tokenizer of model.path {} (its tokenizer.json differs): the "
                                    "model's embeddings, and the tokenizer its export carries, mean that folder's "
                                    "ids; leave model.tokenizer null to use them",
                                    t.name, *m.path));
    t.hf_files.clear();
  }
  if (source) t.stop_ids = model::generation_eos_ids(*source, *m.path);
  t.special_ids = {t.tokenizer->bos_id(), choose_eos(t)};
  // Generation also stops at the tokenizer's own eos, as vLLM (verl's rollout) does beside
  // generation_config.json's ids: a model whose config names only <|im_end|> or <|eot_id|> still ends
  // at its tokenizer's end of text.
  for (const std::optional<int64_t> id : {std::optional<int64_t>(t.special_ids.eos), t.tokenizer->eos_id()})
    if (id && std::find(t.stop_ids.begin(), t.stop_ids.end(), *id) == t.stop_ids.end()) t.stop_ids.push_back(*id);
  const auto text_of = [&](int64_t id) { return t.tokenizer->decode(std::span(&id, 1), data::SpecialTokens::keep); };
  core::log_info("tokenizer {}: {} ids; each example is {}prompt response {} (id {})", t.name,
                 t.tokenizer->vocab_size(),
                 t.special_ids.bos ? fmt::format("{} (id {}) ", text_of(*t.special_ids.bos), *t.special_ids.bos) : "",
                 text_of(t.special_ids.eos), t.special_ids.eos);
  return t;
}

void check_tokenizer_fits(const RunTokenizer& t, const ModelSection& m, const model::ModelConfig& config) {
  const int64_t needed =
      std::max({t.tokenizer->vocab_size(), t.special_ids.eos + 1, t.special_ids.bos.value_or(0) + 1});
  if (needed <= config.vocab_size) return;
  const std::string ids = fmt::format("{} needs {} embedding rows (its ids, bos and eos)", t.name, needed);
  if (m.path)
    throw ConfigError("model.tokenizer", fmt::format("{}, but model.path {} has vocab_size {} (config.json)", ids,
                                                     *m.path, config.vocab_size));
  throw ConfigError("model.config.vocab_size",
                    fmt::format("{} is below what model.tokenizer needs: {}", config.vocab_size, ids));
}

}  // namespace rf::trainer

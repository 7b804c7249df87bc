// `rlforge tokenize --tokenizer DIR (--text T | --file F) [--decode] [--add-special-tokens]
//  [--skip-special-tokens]`: the Hugging Face tokenizer in DIR (tokenizer.json, tokenizer_config.json)
// from the command line.
//   --text T             prints the ids of T as one JSON array: [9707,11,1879]
//   --file F             F is JSONL, one JSON string per line; prints one array per line
//   --decode             the reverse: --text is one JSON array of ids and its text is printed as is;
//                        --file lines are arrays and each text is printed as a JSON string
//   --add-special-tokens Hugging Face's add_special_tokens=True (the post-processor: Llama-3's bos)
//   --skip-special-tokens with --decode: Hugging Face's skip_special_tokens=True
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "apps/rlforge/commands.h"
#include "core/error.h"
#include "core/input_file.h"
#include "data/jsonl_dataset.h"
#include "data/load_tokenizer.h"

namespace rf::apps {
namespace {

struct TokenizeOptions {
  std::string tokenizer, text, file;
  bool decode = false, add_special_tokens = false, skip_special_tokens = false;
};
enum class Input : uint8_t { text, file };

std::string ids_json(const std::vector<int64_t>& ids) { return fmt::format("[{}]", fmt::join(ids, ",")); }

// `what` says where the JSON came from ("--text", "the line"), for the error.
std::vector<int64_t> parse_ids(const std::string& json_text, const std::string& what) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{}: not valid JSON: {}", what, e.what()));
  }
  if (!j.is_array()) throw Error(fmt::format("{}: expected a JSON array of token ids, got {}", what, j.type_name()));
  std::vector<int64_t> ids;
  for (const nlohmann::json& id : j) {
    if (!id.is_number_integer() || (id.is_number_unsigned() && id.get<uint64_t>() > uint64_t(INT64_MAX)))
      // An array or object is named, not printed: dump() recurses, and a line can nest a million deep.
      throw Error(fmt::format("{}: {} is not a token id", what, id.is_structured() ? id.type_name() : id.dump()));
    ids.push_back(id.get<int64_t>());
  }
  return ids;
}

int run_tokenize(const TokenizeOptions& o, Input input) {
  // Either kind of tokenizer.json: Hugging Face byte-level BPE, or the built-in character tokenizer.
  const std::unique_ptr<data::Tokenizer> tokenizer = data::load_tokenizer(o.tokenizer);
  const data::Tokenizer& tok = *tokenizer;
  const auto add = o.add_special_tokens ? data::AddSpecialTokens::yes : data::AddSpecialTokens::no;
  const auto specials = o.skip_special_tokens ? data::SpecialTokens::skip : data::SpecialTokens::keep;
  if (input == Input::text) {
    if (o.decode)
      std::printf("%s\n", tok.decode(parse_ids(o.text, "--text"), specials).c_str());
    else
      std::printf("%s\n", ids_json(tok.encode(o.text, add)).c_str());
    return 0;
  }
  std::ifstream in = core::open_input_file(o.file, "lines to tokenize");
  // One line in, one line out: a JSON string -> its ids, or with --decode an array of ids -> its text.
  const auto convert = [&](const std::string& line) -> std::string {
    if (o.decode) return nlohmann::json(tok.decode(parse_ids(line, "the line"), specials)).dump();
    const nlohmann::json j = nlohmann::json::parse(line);
    if (!j.is_string()) throw Error(fmt::format("expected a JSON string, got {}", j.type_name()));
    return ids_json(tok.encode(j.get<std::string>(), add));
  };
  std::string line;
  for (int64_t line_number = 1; core::read_line(in, line, data::kMaxJsonlLineBytes, o.file, line_number); ++line_number) {
    try {
      std::printf("%s\n", convert(line).c_str());
    } catch (const std::exception& e) {  // rf::Error or a JSON parse error
      throw IoError(o.file, fmt::format("line {}: {}", line_number, e.what()));
    }
  }
  return 0;
}

}  // namespace

Command add_tokenize_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("tokenize", "encode text (or decode ids) with a Hugging Face tokenizer folder");
  auto o = std::make_shared<TokenizeOptions>();
  cmd->add_option("--tokenizer", o->tokenizer, "folder with tokenizer.json (and tokenizer_config.json)")->required();
  auto* text = cmd->add_option("--text", o->text, "the text to encode (with --decode: a JSON array of ids)");
  auto* file = cmd->add_option("--file", o->file, "JSONL of strings to encode, one per line (with --decode: arrays)");
  text->excludes(file);
  auto* decode = cmd->add_flag("--decode", o->decode, "decode ids into text");
  cmd->add_flag("--add-special-tokens", o->add_special_tokens, "apply the post-processor (Llama-3's bos)")
      ->excludes(decode);
  cmd->add_flag("--skip-special-tokens", o->skip_special_tokens, "leave special tokens out of decoded text")
      ->needs(decode);
  return [o, text, file] {
    if (text->count() + file->count() != 1) throw Error("tokenize: give the input with --text or --file");
    return run_tokenize(*o, text->count() > 0 ? Input::text : Input::file);
  };
}

}  // namespace rf::apps

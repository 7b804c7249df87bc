// BpeTokenizer against Hugging Face's own tokenizer (tokenizers 0.22.2, Rust, through its Python
// binding) on real tokenizer.json files: for every corpus string (tokenizer_parity/corpus.jsonl),
// identical ids with and without add_special_tokens, and identical decodes with and without
// skip_special_tokens, including a decode of the first half of the ids (often a partial UTF-8
// character, which HF decodes lossily). The expected data and how to regenerate it:
// tokenizer_parity/generate.py. Qwen3's tokenizer is vendored (tokenizer_parity/qwen3); Llama-3's is read
// from shared/reference beside the repository and checked against the manifest (llama3_tokenizer.h).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "data/bpe_tokenizer.h"
#include "data/normalizer.h"
#include "data/tokenizer_json.h"
#include "llama3_tokenizer.h"

namespace rf::data {
namespace {

using nlohmann::json;

const std::string kParityDir = RF_TOKENIZER_PARITY_DIR;

std::vector<json> read_jsonl(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in) << "cannot open " << path;
  std::vector<json> rows;
  for (std::string line; std::getline(in, line);) rows.push_back(json::parse(line));
  return rows;
}

const json& manifest() {
  static const json m = read_json_file(kParityDir + "/manifest.json");
  return m;
}

const std::vector<json>& corpus() {
  static const std::vector<json> lines = read_jsonl(kParityDir + "/corpus.jsonl");
  return lines;
}

// The corpus class of a line (corpus_index.json), for mismatch reports.
std::string class_of_line(size_t line) {
  static const json index = read_json_file(kParityDir + "/corpus_index.json");
  for (const auto& [cls, range] : index.items())
    if (line >= range[0].get<size_t>() && line < range[0].get<size_t>() + range[1].get<size_t>()) return cls;
  return "?";
}

json variant(const std::string& name) {
  for (const json& v : read_json_file(kParityDir + "/variants.json"))
    if (v.at("name") == name) return v;
  ADD_FAILURE() << "no variant " << name << " in variants.json";
  return json::object();
}

// The folder holding the base tokenizer's tokenizer.json (+ tokenizer_config.json).
std::string base_dir(const std::string& base) {
  return base == "qwen3" ? kParityDir + "/qwen3" : testing::checked_llama3_dir();
}

// Applies a variant's edits exactly as generate.py does.
json apply_variant(json j, const json& v) {
  if (v.contains("replace"))
    for (const auto& [key, value] : v.at("replace").items()) j[key] = value;
  if (v.contains("added_token_flags"))
    for (const auto& [content, flags] : v.at("added_token_flags").items())
      for (json& token : j.at("added_tokens"))
        if (token.at("content") == content) token.update(flags);
  return j;
}

std::string ids_text(const std::vector<int64_t>& ids) { return json(ids).dump(); }

// Compares every expected row; returns the number of strings with any mismatch, printing the first few.
size_t compare(const BpeTokenizer& tok, const std::string& name) {
  const std::vector<json> rows = read_jsonl(kParityDir + "/expected/" + name + ".jsonl");
  EXPECT_EQ(rows.size(), manifest().at("expected_strings").at(name).get<size_t>()) << name;
  size_t num_bad = 0;
  std::map<std::string, size_t> bad_fields;
  for (const json& row : rows) {
    const size_t line = row.at("line").get<size_t>();
    const std::string text = corpus().at(line).get<std::string>();
    std::vector<std::string> report;
    const auto check_ids = [&](const char* field, const std::vector<int64_t>& actual) {
      const auto expected = row.at(field).get<std::vector<int64_t>>();
      if (actual == expected) return;
      ++bad_fields[field];
      report.push_back(fmt::format("  {}: expected {}\n  {}    got      {}", field, ids_text(expected),
                                   std::string(std::strlen(field), ' '), ids_text(actual)));
    };
    const auto check_text = [&](const char* field, const std::string& actual) {
      const std::string expected = row.at(field).get<std::string>();
      if (actual == expected) return;
      ++bad_fields[field];
      report.push_back(fmt::format("  {}: expected {}\n  {}    got      {}", field, json(expected).dump(),
                                   std::string(std::strlen(field), ' '), json(actual).dump()));
    };
    const std::vector<int64_t> ids = tok.encode(text, AddSpecialTokens::no);
    const std::vector<int64_t> ids_special = tok.encode(text, AddSpecialTokens::yes);
    check_ids("ids", ids);
    check_ids("ids_special", ids_special);
    const auto expected_special = row.at("ids_special").get<std::vector<int64_t>>();
    const auto expected_ids = row.at("ids").get<std::vector<int64_t>>();
    check_text("decode", tok.decode(expected_special, SpecialTokens::keep));
    check_text("decode_skip", tok.decode(expected_special, SpecialTokens::skip));
    const std::vector<int64_t> prefix(expected_ids.begin(), expected_ids.begin() + (expected_ids.size() + 1) / 2);
    check_text("decode_prefix", tok.decode(prefix, SpecialTokens::keep));
    if (report.empty()) continue;
    if (++num_bad <= 5) {
      std::string message = fmt::format("{}: corpus line {} ({}): {}\n", name, line, class_of_line(line),
                                        json(text).dump().substr(0, 300));
      for (const std::string& r : report) message += r + "\n";
      ADD_FAILURE() << message;
    }
  }
  std::string by_field;
  for (const auto& [field, n] : bad_fields) by_field += fmt::format(" {}={}", field, n);
  std::printf("%s: %zu strings, %zu with a mismatch%s\n", name.c_str(), rows.size(), num_bad, by_field.c_str());
  return num_bad;
}

void expect_parity(const std::string& name) {
  const json v = variant(name);
  const std::string base = v.at("base").get<std::string>();
  const std::string dir = base_dir(base);
  // The published files load by folder, as a user loads them; a variant is built from the parsed JSON.
  if (!v.contains("replace") && !v.contains("added_token_flags")) {
    EXPECT_EQ(compare(BpeTokenizer::load(dir), name), 0u);
    return;
  }
  const json j = apply_variant(read_json_file(dir + "/tokenizer.json"), v);
  EXPECT_EQ(compare(BpeTokenizer(j, name + " (variant of " + base + ")", TokenizerConfig{}), name), 0u);
}

TEST(BpeTokenizerParity, EveryVariantHasATest) {
  const std::set<std::string> tested = {"qwen3",
                                        "llama3",
                                        "llama3_bos_template",
                                        "qwen3_template_both_ends",
                                        "qwen3_gpt2_byte_level",
                                        "qwen3_added_token_flags",
                                        "split_removed",
                                        "split_isolated_string",
                                        "split_merged_with_previous",
                                        "split_merged_with_next",
                                        "split_contiguous_inverted"};
  std::set<std::string> listed;
  for (const json& v : read_json_file(kParityDir + "/variants.json")) listed.insert(v.at("name").get<std::string>());
  EXPECT_EQ(listed, tested);
  EXPECT_GE(corpus().size(), 2000u);
}

TEST(BpeTokenizerParity, Qwen3) { expect_parity("qwen3"); }
TEST(BpeTokenizerParity, Llama3) { expect_parity("llama3"); }
TEST(BpeTokenizerParity, Llama3WithBosTemplate) { expect_parity("llama3_bos_template"); }
TEST(BpeTokenizerParity, TemplateWithTokensOnBothEnds) { expect_parity("qwen3_template_both_ends"); }
TEST(BpeTokenizerParity, Gpt2ByteLevelPreTokenizer) { expect_parity("qwen3_gpt2_byte_level"); }
TEST(BpeTokenizerParity, AddedTokenFlags) { expect_parity("qwen3_added_token_flags"); }
TEST(BpeTokenizerParity, SplitRemoved) { expect_parity("split_removed"); }
TEST(BpeTokenizerParity, SplitIsolatedString) { expect_parity("split_isolated_string"); }
TEST(BpeTokenizerParity, SplitMergedWithPrevious) { expect_parity("split_merged_with_previous"); }
TEST(BpeTokenizerParity, SplitMergedWithNext) { expect_parity("split_merged_with_next"); }
TEST(BpeTokenizerParity, SplitContiguousInverted) { expect_parity("split_contiguous_inverted"); }

// Encoding speed on ~1 MB of corpus text, as one string (catches anything quadratic in the text
// length) and line by line. The bound is loose (a shared 2-core machine); the rates are printed.
TEST(BpeTokenizerParity, EncodesAMegabyteQuickly) {
  const BpeTokenizer tok = BpeTokenizer::load(kParityDir + "/qwen3");
  std::string text;
  size_t num_lines = 0;
  while (text.size() < (1u << 20)) {
    text += corpus()[num_lines % corpus().size()].get<std::string>() + "\n";
    ++num_lines;
  }
  const auto time = [](auto&& fn) {
    const auto start = std::chrono::steady_clock::now();
    fn();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  std::vector<int64_t> ids;
  const double whole = time([&] { ids = tok.encode(text); });
  size_t num_line_ids = 0;
  const double by_line = time([&] {
    for (size_t i = 0; i < num_lines; ++i)
      num_line_ids += tok.encode(corpus()[i % corpus().size()].get<std::string>()).size();
  });
  std::printf("encode %.2f MB: %.1f MB/s as one string (%zu tokens), %.1f MB/s as %zu strings\n", text.size() / 1e6,
              text.size() / 1e6 / whole, ids.size(), text.size() / 1e6 / by_line, num_lines);
  EXPECT_LT(whole, 3.0);
  EXPECT_LT(by_line, 3.0);
  EXPECT_GT(num_line_ids, 0u);
  EXPECT_EQ(tok.decode(ids, SpecialTokens::keep), normalize_nfc(text));
}

}  // namespace
}  // namespace rf::data

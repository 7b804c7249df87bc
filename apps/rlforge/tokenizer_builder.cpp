#include "apps/rlforge/tokenizer_builder.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
#include <string_view>
#include <unordered_map>

#include "core/error.h"
#include "data/byte_level.h"
#include "data/pre_tokenizer.h"

namespace rf::apps {
namespace {

using ordered_json = nlohmann::ordered_json;

// The corpus the merges are learned from: plain prose, numbers and arithmetic, a chat turn and some
// code, so that common words, digits, operators and indentation get tokens of their own. Changing
// it changes every tokenizer init-model builds.
constexpr std::string_view kCorpus = R"corpus(The quick brown fox jumps over the lazy dog. The dog did not move; the fox ran on.
A model reads the text one token at a time and predicts the next token. Training makes the
predictions better, and the loss goes down as the model learns what comes next in the text.
Reinforcement learning from rewards trains the policy on its own answers: the model writes an
answer, a reward says how good it was, and the update makes good answers more likely than bad ones.
What is the answer? The answer is that there is more than one way to think about the question.
She said that they would come back in the morning, after the rain had stopped and the roads were dry.
We have seen this before, and we will see it again: the people who learn are the people who try.
Numbers: 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 25 30 42 50 64 99 100 128 256 512 1000 2024.
Arithmetic: 12 + 34 = 46. 7 * 8 = 56. 100 - 37 = 63. 81 / 9 = 9. 3 + 4 = 7. 15 - 6 = 9. 2 * 21 = 42.
What is 23 + 19? The answer is 42. What is 6 * 7? The answer is 42. What is 90 - 48? The answer is 42.
User: Can you help me with this problem?
Assistant: Of course. Let us work through it step by step, and then check the result together.
User: Thank you, that was very helpful.
Assistant: You are welcome. If you have another question, please ask.
def add(a, b):
    return a + b

for i in range(10):
    if i % 2 == 0:
        print("even", i)
    else:
        print("odd", i)

int main(int argc, char** argv) {
  for (int i = 0; i < argc; ++i) {
    printf("%s\n", argv[i]);
  }
  return 0;
}
{"name": "value", "list": [1, 2, 3], "nested": {"key": "value", "flag": true, "none": null}}
The end of the text is where the model stops, and the start of a new text is where it begins again.
)corpus";

// The Split regexes of Qwen2's and Llama-3's tokenizer.json: Llama-3 groups up to three digits,
// Qwen2 splits every digit.
constexpr const char* kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

constexpr const char* kChatmlTemplate =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + "
    "'\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
constexpr const char* kLlama3Template =
    "{{ bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + "
    "'<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}{% endfor %}{% if add_generation_prompt "
    "%}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}";

struct Family {
  std::vector<std::string> specials;
  std::optional<std::string> bos, pad;
  std::string eos;
  std::vector<std::string> generation_eos;
  std::optional<std::string> config_bos;  // config.json's bos_token_id (Qwen names <|endoftext|> there)
  const char* pattern;
  const char* chat_template;
  bool llama3;
};

Family family_of(model::Arch arch) {
  if (arch == model::Arch::llama)
    return {{"<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"},
            "<|begin_of_text|>",
            std::nullopt,
            "<|eot_id|>",
            {"<|end_of_text|>", "<|eot_id|>"},
            "<|begin_of_text|>",
            kLlama3Pattern,
            kLlama3Template,
            true};
  return {{"<|endoftext|>", "<|im_start|>", "<|im_end|>"},
          std::nullopt,
          "<|endoftext|>",
          "<|im_end|>",
          {"<|im_end|>", "<|endoftext|>"},
          "<|endoftext|>",
          kQwen2Pattern,
          kChatmlTemplate,
          false};
}

// A word as its byte-level characters (one or two UTF-8 bytes each).
std::vector<std::string> characters(std::string_view word) {
  std::vector<std::string> out;
  for (size_t i = 0; i < word.size();) {
    const size_t n = (uint8_t(word[i]) & 0x80) == 0 ? 1 : (uint8_t(word[i]) & 0xE0) == 0xC0 ? 2 : 3;
    out.emplace_back(word.substr(i, n));
    i += n;
  }
  return out;
}

// Plain BPE over the pre-tokenized corpus until `budget` new tokens exist or every word is one token.
// Returns the merges in rank order; merge i made the token left + right (which may already exist when
// two merge paths spell the same string: then no new id).
std::vector<std::pair<std::string, std::string>> learn_merges(const std::map<std::string, int64_t>& word_counts,
                                                              int64_t budget) {
  std::vector<std::pair<std::vector<std::string>, int64_t>> words;
  for (const auto& [word, count] : word_counts) words.emplace_back(characters(word), count);
  std::set<std::string> tokens;
  for (const auto& [symbols, count] : words) tokens.insert(symbols.begin(), symbols.end());
  std::vector<std::pair<std::string, std::string>> merges;
  int64_t new_tokens = 0;
  while (new_tokens < budget) {
    std::map<std::pair<std::string, std::string>, int64_t> pairs;  // ordered: ties go to the smallest pair
    for (const auto& [symbols, count] : words)
      for (size_t i = 0; i + 1 < symbols.size(); ++i) pairs[{symbols[i], symbols[i + 1]}] += count;
    const auto best = std::max_element(pairs.begin(), pairs.end(),
                                       [](const auto& a, const auto& b) { return a.second < b.second; });
    if (best == pairs.end()) break;  // every word is one token
    const auto [left, right] = best->first;
    merges.emplace_back(left, right);
    if (tokens.insert(left + right).second) ++new_tokens;
    for (auto& [symbols, count] : words) {
      std::vector<std::string> merged;
      for (size_t i = 0; i < symbols.size(); ++i) {
        if (i + 1 < symbols.size() && symbols[i] == left && symbols[i + 1] == right) {
          merged.push_back(left + right);
          ++i;
        } else {
          merged.push_back(symbols[i]);
        }
      }
      symbols = std::move(merged);
    }
  }
  return merges;
}

ordered_json added_token(int64_t id, const std::string& content) {
  return ordered_json{{"id", id},           {"content", content}, {"single_word", false}, {"lstrip", false},
                      {"rstrip", false},    {"normalized", false}, {"special", true}};
}

}  // namespace

int64_t num_special_tokens(model::Arch arch) { return int64_t(family_of(arch).specials.size()); }

BuiltTokenizer build_byte_level_tokenizer(model::Arch arch, int64_t max_ids, int64_t model_max_length) {
  const Family family = family_of(arch);
  const int64_t num_specials = int64_t(family.specials.size());
  if (max_ids < 256 + num_specials)
    throw Error(fmt::format("--vocab {}: a byte-level tokenizer for {} needs at least {} ids (256 bytes + {} special "
                            "tokens)",
                            max_ids, model::arch_name(arch), 256 + num_specials, num_specials));

  const data::SplitStep split{.pattern = family.pattern, .pattern_kind = data::PatternKind::regex,
                              .behavior = data::SplitBehavior::isolated, .invert = false,
                              .key = "pre_tokenizer.pretokenizers[0]"};
  const data::PreTokenizer pre_tokenizer({split, data::ByteLevelStep{.add_prefix_space = false, .use_regex = false}},
                                         "the built-in tokenizer");
  std::map<std::string, int64_t> word_counts;
  pre_tokenizer.split(kCorpus, [&](std::string_view word) { ++word_counts[std::string(word)]; });
  const auto merges = learn_merges(word_counts, max_ids - 256 - num_specials);

  ordered_json vocab = ordered_json::object();
  int64_t next_id = 0;
  for (int b = 0; b < 256; ++b) {
    std::string ch;
    data::append_byte_level(std::string(1, char(b)), ch);
    vocab[ch] = next_id++;
  }
  ordered_json merge_list = ordered_json::array();
  for (const auto& [left, right] : merges) {
    if (!vocab.contains(left + right)) vocab[left + right] = next_id++;
    merge_list.push_back(ordered_json::array({left, right}));
  }
  BuiltTokenizer built;
  std::map<std::string, int64_t> special_ids;
  ordered_json added = ordered_json::array();
  for (const std::string& s : family.specials) {
    special_ids[s] = next_id;
    added.push_back(added_token(next_id++, s));
  }
  built.num_ids = next_id;

  const ordered_json byte_level = {
      {"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", !family.llama3}, {"use_regex", false}};
  ordered_json pre = {{"type", "Sequence"},
                      {"pretokenizers",
                       ordered_json::array({ordered_json{{"type", "Split"},
                                                         {"pattern", {{"Regex", family.pattern}}},
                                                         {"behavior", "Isolated"},
                                                         {"invert", false}},
                                            byte_level})}};
  ordered_json post = byte_level;
  if (family.llama3) {
    const std::string& bos = *family.bos;
    const int64_t bos_id = special_ids.at(bos);
    const ordered_json bos_piece = {{"SpecialToken", {{"id", bos}, {"type_id", 0}}}};
    post = {{"type", "Sequence"},
            {"processors",
             ordered_json::array(
                 {ordered_json{{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", false},
                               {"use_regex", true}},
                  ordered_json{{"type", "TemplateProcessing"},
                               {"single", ordered_json::array({bos_piece, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
                               {"pair", ordered_json::array({bos_piece,
                                                             {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                                                             {{"SpecialToken", {{"id", bos}, {"type_id", 1}}}},
                                                             {{"Sequence", {{"id", "B"}, {"type_id", 1}}}}})},
                               {"special_tokens",
                                {{bos, {{"id", bos}, {"ids", ordered_json::array({bos_id})},
                                        {"tokens", ordered_json::array({bos})}}}}}}})}};
  }
  const ordered_json tokenizer = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer", family.llama3 ? ordered_json(nullptr) : ordered_json{{"type", "NFC"}}},
      {"pre_tokenizer", pre},
      {"post_processor", post},
      {"decoder", byte_level},
      {"model",
       {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", nullptr},
        {"end_of_word_suffix", nullptr}, {"fuse_unk", false}, {"byte_fallback", false},
        {"ignore_merges", family.llama3}, {"vocab", vocab}, {"merges", merge_list}}}};

  const auto token_or_null = [](const std::optional<std::string>& t) { return t ? ordered_json(*t) : ordered_json(nullptr); };
  const ordered_json config = {{"add_bos_token", family.llama3},
                               {"add_eos_token", false},
                               {"bos_token", token_or_null(family.bos)},
                               {"chat_template", family.chat_template},
                               {"clean_up_tokenization_spaces", false},
                               {"eos_token", family.eos},
                               {"model_max_length", model_max_length},
                               {"pad_token", token_or_null(family.pad)},
                               {"tokenizer_class", "PreTrainedTokenizerFast"}};
  ordered_json special_map = ordered_json::object();
  if (family.bos) special_map["bos_token"] = *family.bos;
  special_map["eos_token"] = family.eos;
  if (family.pad) special_map["pad_token"] = *family.pad;

  built.files["tokenizer.json"] = tokenizer.dump(2, ' ', true) + "\n";
  built.files["tokenizer_config.json"] = config.dump(2, ' ', true) + "\n";
  built.files["special_tokens_map.json"] = special_map.dump(2, ' ', true) + "\n";
  if (family.config_bos) built.bos_id = special_ids.at(*family.config_bos);
  built.eos_id = special_ids.at(family.eos);
  for (const std::string& s : family.generation_eos) built.generation_eos_ids.push_back(special_ids.at(s));
  if (family.pad) built.pad_id = special_ids.at(*family.pad);
  return built;
}

}  // namespace rf::apps

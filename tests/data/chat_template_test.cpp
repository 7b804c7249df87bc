// ChatTemplate against the real templates rendered by jinja2 the way transformers renders them
// (tokenizer_parity/expected/chat.jsonl, made by generate.py): Qwen3's (vendored), Qwen2.5's
// (tokenizer_parity/qwen2_5_chat_template.jinja) and Llama-3's (with the Llama-3 tokenizer in shared/reference,
// llama3_tokenizer.h). Then recognition and the errors: templates of no supported family, unsupported roles.
#include "data/chat_template.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "data/tokenizer_json.h"
#include "llama3_tokenizer.h"

namespace rf::data {
namespace {

using nlohmann::json;
const std::string kParityDir = RF_TOKENIZER_PARITY_DIR;

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Renders every expected row of `name` with `tmpl`; returns the number of rows checked.
size_t expect_renderings(const ChatTemplate& tmpl, const std::string& name) {
  std::ifstream in(kParityDir + "/expected/chat.jsonl");
  size_t num_rows = 0;
  for (std::string line; std::getline(in, line);) {
    const json row = json::parse(line);
    if (row.at("template") != name) continue;
    std::vector<ChatMessage> messages;
    for (const json& m : row.at("messages")) messages.push_back({m.at("role"), m.at("content")});
    const auto prompt = row.at("add_generation_prompt").get<bool>() ? GenerationPrompt::yes : GenerationPrompt::no;
    const auto thinking = row.contains("enable_thinking") ? Thinking::disabled : Thinking::template_default;
    EXPECT_EQ(tmpl.render(messages, prompt, thinking), row.at("text").get<std::string>())
        << name << ": " << row.at("messages").dump() << " add_generation_prompt=" << row.at("add_generation_prompt");
    ++num_rows;
  }
  return num_rows;
}

TEST(ChatTemplate, Qwen3MatchesTheRealTemplate) {
  const std::string path = kParityDir + "/qwen3/tokenizer_config.json";
  const ChatTemplate tmpl = ChatTemplate::from_config(read_tokenizer_config(path));
  EXPECT_EQ(tmpl.family(), ChatFamily::qwen3);
  EXPECT_EQ(expect_renderings(tmpl, "qwen3"), 48u);
  // Python's lstrip('\n') / strip('\n') (transformers) remove newlines only. The expected data has no
  // spaces next to the stripped newlines (it was first rendered by @huggingface/jinja, whose strip removed
  // them too), so this case is written by hand.
  const std::vector<ChatMessage> messages = {{"user", "q"}, {"assistant", "<think> r \n</think>\n x "}};
  EXPECT_EQ(tmpl.render(messages, GenerationPrompt::no),
            "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n<think>\n r \n</think>\n\n x <|im_end|>\n");
}

TEST(ChatTemplate, Qwen25MatchesTheRealTemplateWithItsDefaultSystemPrompt) {
  const ChatTemplate tmpl = ChatTemplate::recognise(read_text(kParityDir + "/qwen2_5_chat_template.jinja"),
                                                    "qwen2_5_chat_template.jinja", std::nullopt);
  EXPECT_EQ(tmpl.family(), ChatFamily::chatml);
  EXPECT_EQ(tmpl.default_system(), "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.");
  EXPECT_EQ(expect_renderings(tmpl, "qwen2_5"), 24u);
}

TEST(ChatTemplate, Llama3MatchesTheRealTemplate) {
  const std::string dir = testing::checked_llama3_dir();
  const ChatTemplate tmpl = ChatTemplate::from_config(read_tokenizer_config(dir + "/tokenizer_config.json"));
  EXPECT_EQ(tmpl.family(), ChatFamily::llama3);
  EXPECT_EQ(expect_renderings(tmpl, "llama3"), 24u);
}

TEST(ChatTemplate, PlainChatMlWithoutDefaultSystem) {
  const std::string chatml =
      "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + "
      "'\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
  const ChatTemplate tmpl = ChatTemplate::recognise(chatml, "chatml", std::nullopt);
  EXPECT_EQ(tmpl.default_system(), std::nullopt);
  const std::vector<ChatMessage> messages = {{"user", "hi"}};
  EXPECT_EQ(tmpl.render(messages, GenerationPrompt::yes), "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplate, UnsupportedTemplatesNameTheFileAndTheFamilies) {
  TokenizerConfig config;
  config.path = "/models/x/tokenizer_config.json";
  const auto expect_unsupported = [&](const std::optional<std::string>& source, std::vector<std::string> fragments) {
    config.chat_template = source;
    try {
      ChatTemplate::from_config(config);
      ADD_FAILURE() << "accepted: " << source.value_or("(none)");
    } catch (const IoError& e) {
      EXPECT_EQ(e.path(), config.path);
      for (const std::string& f : fragments)
        EXPECT_NE(std::string(e.what()).find(f), std::string::npos) << "'" << f << "' not in: " << e.what();
    }
  };
  expect_unsupported(std::nullopt, {"chat_template: missing", "Llama-3"});
  // Mistral's [INST] format, and a ChatML template that handles <think> its own way (QwQ).
  expect_unsupported("{{ bos_token }}{% for m in messages %}[INST] {{ m['content'] }} [/INST]{% endfor %}",
                     {"not a template rlforge can render", "Qwen3", "ChatML", "[INST]"});
  expect_unsupported(
      "{{'<|im_start|>' + message.content.split('</think>')[-1] + '<|im_end|>'}}"
      "{% if add_generation_prompt %}<|im_start|>assistant\n<think>{% endif %}",
      {"not a template rlforge can render"});
  expect_unsupported(
      "{{- bos_token }}<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: "
      "December 2023<|eot_id|>{{ content | trim }}",
      {"Llama-3.1", "not supported"});
}

TEST(ChatTemplate, RejectsRolesAndSwitchesItCannotRender) {
  const ChatTemplate qwen3 =
      ChatTemplate::from_config(read_tokenizer_config(kParityDir + "/qwen3/tokenizer_config.json"));
  const std::vector<ChatMessage> tool = {{"user", "x"}, {"tool", "{}"}};
  EXPECT_THROW(qwen3.render(tool, GenerationPrompt::yes), Error);
  EXPECT_THROW(qwen3.render(std::vector<ChatMessage>{}, GenerationPrompt::yes), Error);
  const ChatTemplate qwen25 =
      ChatTemplate::recognise(read_text(kParityDir + "/qwen2_5_chat_template.jinja"), "qwen2_5", std::nullopt);
  const std::vector<ChatMessage> user = {{"user", "x"}};
  EXPECT_THROW(qwen25.render(user, GenerationPrompt::yes, Thinking::disabled), Error);
}

}  // namespace
}  // namespace rf::data

#include "data/chat_template.h"

#include <fmt/format.h>

#include "core/error.h"
#include "data/utf8.h"

namespace rf::data {
namespace {

constexpr const char* kSupported =
    "supported: Qwen3's thinking ChatML, ChatML as in Qwen2/Qwen2.5, and Llama-3's header format; see "
    "src/data/chat_template.h for how each is recognised";

bool contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

// The default system turn of a chatml template: a complete string literal
// '<|im_start|>system\n...<|im_end|>\n' in the source, with Jinja's escapes decoded.
std::optional<std::string> find_default_system(std::string_view src) {
  constexpr std::string_view kHead = "<|im_start|>system\n", kTail = "<|im_end|>\n";
  for (size_t pos = src.find("<|im_start|>system"); pos != std::string_view::npos;
       pos = src.find("<|im_start|>system", pos + 1)) {
    const char quote = pos > 0 ? src[pos - 1] : '\0';
    if (quote != '\'' && quote != '"') continue;
    std::string value;
    for (size_t i = pos; i < src.size(); ++i) {
      const char c = src[i];
      if (c == quote) {
        if (value.size() >= kHead.size() + kTail.size() && value.starts_with(kHead) && value.ends_with(kTail))
          return value.substr(kHead.size(), value.size() - kHead.size() - kTail.size());
        break;
      }
      if (c == '\\' && i + 1 < src.size()) {
        const char e = src[++i];
        value += e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e;
      } else {
        value += c;
      }
    }
  }
  return std::nullopt;
}

// Python's str.strip(): Jinja's `trim` filter in transformers, over Python's whitespace (Unicode
// White_Space plus the separators U+001C..U+001F). @huggingface/jinja trims JavaScript's whitespace
// instead, which differs only for U+001C..U+001F, U+0085 and U+FEFF.
std::string python_strip(std::string_view s) {
  const auto is_space = [](char32_t c) { return is_unicode_white_space(c) || (c >= 0x1C && c <= 0x1F); };
  size_t begin = 0, end = s.size();
  while (begin < end) {
    size_t length = 0;
    if (!is_space(decode_utf8(s, begin, length))) break;
    begin += length;
  }
  while (end > begin) {
    const size_t start = last_code_point_start(s.substr(0, end));
    size_t length = 0;
    if (!is_space(decode_utf8(s, start, length))) break;
    end = start;
  }
  return std::string(s.substr(begin, end - begin));
}

// Python's str.lstrip / rstrip / strip with one character to strip.
std::string_view lstrip(std::string_view s, char c) {
  while (!s.empty() && s.front() == c) s.remove_prefix(1);
  return s;
}
std::string_view rstrip(std::string_view s, char c) {
  while (!s.empty() && s.back() == c) s.remove_suffix(1);
  return s;
}

// Python's s.split(sep)[0] and s.split(sep)[-1].
std::string_view before_first(std::string_view s, std::string_view sep) { return s.substr(0, s.find(sep)); }
std::string_view after_last(std::string_view s, std::string_view sep) {
  const size_t pos = s.rfind(sep);
  return pos == std::string_view::npos ? s : s.substr(pos + sep.size());
}

void check_messages(std::span<const ChatMessage> messages) {
  RF_CHECK(!messages.empty(), "a chat template needs at least one message");
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& role = messages[i].role;
    RF_CHECK(role == "system" || role == "user" || role == "assistant",
             "message {}: role \"{}\" is not supported (system, user, assistant)", i, role);
  }
}

}  // namespace

ChatTemplate ChatTemplate::from_config(const TokenizerConfig& config) {
  const std::string source = config.path.empty() ? std::string("tokenizer_config.json") : config.path;
  if (!config.chat_template) throw IoError(source, fmt::format("chat_template: missing ({})", kSupported));
  return recognise(*config.chat_template, source, config.bos_token);
}

ChatTemplate ChatTemplate::recognise(std::string_view src, const std::string& source,
                                     std::optional<std::string> bos_token) {
  ChatTemplate t;
  t.source_ = source;
  const bool chatml_markers = contains(src, "<|im_start|>") && contains(src, "<|im_end|>");
  if (chatml_markers && contains(src, "</think>") && contains(src, "reasoning_content")) {
    t.family_ = ChatFamily::qwen3;
    t.has_thinking_switch_ = contains(src, "enable_thinking");
    return t;
  }
  if (chatml_markers && contains(src, "<|im_start|>assistant") && contains(src, "add_generation_prompt") &&
      !contains(src, "think")) {
    t.family_ = ChatFamily::chatml;
    t.default_system_ = find_default_system(src);
    return t;
  }
  if (contains(src, "<|start_header_id|>") && contains(src, "<|end_header_id|>") && contains(src, "<|eot_id|>")) {
    if (contains(src, "Cutting Knowledge Date"))
      throw IoError(source, fmt::format("chat_template: Llama-3.1's template (tools, a dated system preamble) is not "
                                        "supported ({})",
                                        kSupported));
    if (contains(src, "bos_token") && contains(src, "| trim")) {
      t.family_ = ChatFamily::llama3;
      t.bos_token_ = bos_token.value_or("");  // Jinja renders an undefined bos_token as ""
      t.generation_prompt_always_ = !contains(src, "add_generation_prompt");
      return t;
    }
  }
  throw IoError(source, fmt::format("chat_template: not a template rlforge can render ({}); its start: {}", kSupported,
                                    src.substr(0, 120)));
}

std::string ChatTemplate::render(std::span<const ChatMessage> messages, GenerationPrompt generation_prompt,
                                 Thinking thinking) const {
  check_messages(messages);
  RF_CHECK(thinking == Thinking::template_default || has_thinking_switch_,
           "the chat template of {} has no enable_thinking switch: Thinking::disabled cannot be honoured", source_);
  switch (family_) {
    case ChatFamily::chatml:
      return render_chatml(messages, generation_prompt);
    case ChatFamily::qwen3:
      return render_qwen3(messages, generation_prompt, thinking);
    case ChatFamily::llama3:
      return render_llama3(messages, generation_prompt);
  }
  return {};
}

std::string ChatTemplate::render_chatml(std::span<const ChatMessage> messages,
                                        GenerationPrompt generation_prompt) const {
  std::string out;
  if (messages[0].role != "system" && default_system_)
    out += "<|im_start|>system\n" + *default_system_ + "<|im_end|>\n";
  for (const ChatMessage& m : messages) out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
  if (generation_prompt == GenerationPrompt::yes) out += "<|im_start|>assistant\n";
  return out;
}

std::string ChatTemplate::render_qwen3(std::span<const ChatMessage> messages, GenerationPrompt generation_prompt,
                                       Thinking thinking) const {
  // The last user turn that is not a tool response wrapped as a user message ("multi_step_tool" in
  // the template); assistant turns after it keep their reasoning.
  size_t last_query = messages.size() - 1;
  for (size_t i = messages.size(); i-- > 0;) {
    const std::string& c = messages[i].content;
    if (messages[i].role == "user" && !(c.starts_with("<tool_response>") && c.ends_with("</tool_response>"))) {
      last_query = i;
      break;
    }
  }
  std::string out;
  if (messages[0].role == "system") out += "<|im_start|>system\n" + messages[0].content + "<|im_end|>\n";
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "user" || (m.role == "system" && i > 0)) {
      out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
      continue;
    }
    if (m.role != "assistant") continue;  // the first system message, already rendered
    std::string_view content = m.content, reasoning;
    if (contains(m.content, "</think>")) {
      content = lstrip(after_last(m.content, "</think>"), '\n');
      reasoning = lstrip(after_last(rstrip(before_first(m.content, "</think>"), '\n'), "<think>"), '\n');
    }
    const bool keep_reasoning = i + 1 == messages.size() || !reasoning.empty();
    if (i > last_query && keep_reasoning)
      out += fmt::format("<|im_start|>assistant\n<think>\n{}\n</think>\n\n{}", rstrip(lstrip(reasoning, '\n'), '\n'),
                         lstrip(content, '\n'));
    else
      out += fmt::format("<|im_start|>assistant\n{}", content);
    out += "<|im_end|>\n";
  }
  if (generation_prompt == GenerationPrompt::yes) {
    out += "<|im_start|>assistant\n";
    if (thinking == Thinking::disabled) out += "<think>\n\n</think>\n\n";
  }
  return out;
}

std::string ChatTemplate::render_llama3(std::span<const ChatMessage> messages,
                                        GenerationPrompt generation_prompt) const {
  std::string out = bos_token_;
  for (const ChatMessage& m : messages)
    out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + python_strip(m.content) + "<|eot_id|>";
  if (generation_prompt == GenerationPrompt::yes || generation_prompt_always_)
    out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

}  // namespace rf::data

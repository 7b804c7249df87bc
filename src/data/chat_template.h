// ChatTemplate: turns a conversation into the text a chat model was trained on, rendering natively
// the chat_template families of tokenizer_config.json that rlforge's models use. There is no Jinja
// engine: a template is recognised by distinctive markers in its source, and rendered by code that
// mirrors it (checked against the real templates rendered by jinja2 the way transformers renders them,
// see tests/data/tokenizer_parity). Recognition, in this order:
//   qwen3   "<|im_start|>", "<|im_end|>", "</think>" and "reasoning_content" (Qwen3's thinking template):
//           an assistant turn after the last user query keeps its reasoning as "<think>\n...\n</think>\n\n",
//           earlier ones lose it; "enable_thinking" in the source enables Thinking::disabled.
//   chatml  "<|im_start|>", "<|im_end|>", "<|im_start|>assistant" and "add_generation_prompt", and no
//           "think" (Qwen2, Qwen2.5, plain ChatML): "<|im_start|>{role}\n{content}<|im_end|>\n" per message;
//           a string literal "<|im_start|>system\n...<|im_end|>\n" in the source is the default system
//           turn, rendered when the conversation does not start with a system message (Qwen2.5).
//   llama3  "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>", "bos_token" and "| trim", and no
//           "Cutting Knowledge Date" (that is Llama-3.1's, with tools and dates: not supported):
//           bos, then "<|start_header_id|>{role}<|end_header_id|>\n\n{content, stripped}<|eot_id|>" per
//           message; the assistant header closes the text when add_generation_prompt is set, or always
//           when the source never mentions add_generation_prompt (the base model's template does that).
// Anything else is an IoError naming the file and the supported families. Messages are plain text
// with roles system, user and assistant; tools, tool calls and multimodal content are not supported.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "data/tokenizer_config.h"

namespace rf::data {

struct ChatMessage {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};

// transformers' add_generation_prompt: end with the header of an assistant turn for the model to complete.
enum class GenerationPrompt : uint8_t { no, yes };
// Qwen3's enable_thinking=false: the generation prompt then carries an empty "<think>\n\n</think>\n\n".
enum class Thinking : uint8_t { template_default, disabled };

enum class ChatFamily : uint8_t { chatml, qwen3, llama3 };

class ChatTemplate {
 public:
  // The template of `config` (its chat_template and bos_token); IoError naming config.path when it
  // has none or it belongs to no supported family.
  static ChatTemplate from_config(const TokenizerConfig& config);
  // `source` names where the template came from, in errors.
  static ChatTemplate recognise(std::string_view template_source, const std::string& source,
                                std::optional<std::string> bos_token);

  // rf::Error for an empty conversation, a role other than system / user / assistant, or
  // Thinking::disabled with a template that has no such switch.
  std::string render(std::span<const ChatMessage> messages, GenerationPrompt generation_prompt,
                     Thinking thinking = Thinking::template_default) const;

  ChatFamily family() const { return family_; }
  // The default system message of a chatml template (Qwen2.5's "You are Qwen, ..."), if it has one.
  const std::optional<std::string>& default_system() const { return default_system_; }

 private:
  std::string render_chatml(std::span<const ChatMessage> messages, GenerationPrompt generation_prompt) const;
  std::string render_qwen3(std::span<const ChatMessage> messages, GenerationPrompt generation_prompt,
                           Thinking thinking) const;
  std::string render_llama3(std::span<const ChatMessage> messages, GenerationPrompt generation_prompt) const;

  ChatFamily family_ = ChatFamily::chatml;
  std::string source_;
  std::optional<std::string> default_system_;
  std::string bos_token_;
  bool has_thinking_switch_ = false;
  bool generation_prompt_always_ = false;
};

}  // namespace rf::data

// `rlforge generate --model DIR (--prompt TEXT | --prompts FILE.jsonl) [--chat] [--max-new-tokens N]
//  [--temperature T] [--top-k K] [--top-p P] [--seed S] [--n N] [--out FILE] [--dtype f32|bf16]`:
// samples completions from a Hugging Face model folder (config.json, weights, tokenizer.json,
// tokenizer_config.json; generation_config.json when present) on the rollout engine
// (engine/rollout/rollout_engine.h: paged KV cache, continuous batching, the n samples of a prompt
// sharing its KV; draws as engine/sampling.h says).
//   --prompt TEXT     prints each completion's text (with --n > 1, each after a "[sample j]" line)
//   --prompts FILE    JSONL: each line a JSON string, or an object whose "prompt" is a string or a list
//                     of chat messages [{"role": ..., "content": ...}] (verl's prompt column); writes one
//                     JSON line per (prompt, sample) to --out (default stdout): prompt_index,
//                     sample_index, prompt, response, response_ids, finish_reason, num_prompt_tokens
//   --chat            a text prompt becomes one user message; messages always go through the chat
//                     template of tokenizer_config.json (chat_template.h), with the generation prompt
// The tokenizer is the folder's tokenizer.json of either kind `rlforge sft` and `rlforge train` read
// (data/load_tokenizer.h): Hugging Face byte-level BPE, or the built-in character tokenizer that their
// exports on a built-in task carry (the arith checkpoints' huggingface/ folders).
// Plain text is encoded with the tokenizer's post-processor (Llama-3 prepends <|begin_of_text|>, as
// transformers' tokenizer(text) does); a rendered chat already carries what its template adds. The
// character tokenizer has none, so a prompt for a model SFT trained on [bos] prompt response eos starts
// with "<bos>" in its text, as it would in transformers.
// Generation stops at an eos id, taken as transformers' generate takes it: generation_config.json's
// eos_token_id (a number or a list), else config.json's, else the tokenizer's eos_token; or after
// --max-new-tokens. Ids the tokenizer has no text for (a model's padded vocabulary rows) are never drawn.
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>

#include "apps/rlforge/cli_numbers.h"
#include "apps/rlforge/commands.h"
#include "core/error.h"
#include "core/input_file.h"
#include "core/thread_pool.h"
#include "data/chat_template.h"
#include "data/jsonl_dataset.h"
#include "data/load_tokenizer.h"
#include "data/tokenizer_config.h"
#include "engine/rollout/rollout_engine.h"
#include "engine/sampling.h"
#include "formats/atomic_file.h"
#include "formats/json_input.h"
#include "model/hf_folder.h"
#include "model/hf_weights.h"

namespace rf::apps {
namespace {

namespace fs = std::filesystem;

// Far above any real use; keeps n x (prompt + new tokens), the KV cache sizing, far from overflow.
constexpr int64_t kMaxSamplesPerPrompt = int64_t(1) << 16;

struct GenerateOptions {
  std::string model, prompt, prompts, out, dtype = "f32";
  bool chat = false;
  int64_t max_new_tokens = 64, n = 1;
  engine::SamplingParams sampling;
  int threads = 0;
};

// One prompt as given: text, or chat messages.
struct Prompt {
  nlohmann::json source;  // as it appeared in the input, echoed in the output
  std::optional<std::string> text;
  std::vector<data::ChatMessage> messages;
  std::string where;  // "--prompt" or "<file>: line <k>", for errors
};

std::vector<data::ChatMessage> parse_messages(const nlohmann::json& list, const std::string& where) {
  std::vector<data::ChatMessage> messages;
  for (size_t i = 0; i < list.size(); ++i) {
    const nlohmann::json& m = list[i];
    if (!m.is_object() || !m.contains("role") || !m.contains("content") || !m["role"].is_string() ||
        !m["content"].is_string())
      throw Error(fmt::format("{}: message {}: expected {{\"role\": string, \"content\": string}}, got {}", where, i,
                              m.dump()));
    messages.push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
  }
  if (messages.empty()) throw Error(fmt::format("{}: the message list is empty", where));
  return messages;
}

std::vector<Prompt> read_prompts(const std::string& path) {
  std::ifstream in = core::open_input_file(path, "prompts");
  std::vector<Prompt> prompts;
  std::string line;
  for (int64_t line_number = 1; core::read_line(in, line, data::kMaxJsonlLineBytes, path, line_number); ++line_number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = fmt::format("line {}", line_number);
    formats::check_json_nesting(line, path, where + ": ");
    try {
      Prompt p;
      p.where = fmt::format("{}: {}", path, where);
      p.source = nlohmann::json::parse(line);
      const nlohmann::json& value = p.source.is_object() && p.source.contains("prompt") ? p.source["prompt"] : p.source;
      if (value.is_string()) {
        p.text = value.get<std::string>();
      } else if (value.is_array()) {
        p.messages = parse_messages(value, where);
      } else {
        throw Error(fmt::format("{}: expected a JSON string, or an object whose \"prompt\" is a string or a list of "
                                "chat messages, got {}",
                                where, p.source.dump().substr(0, 80)));
      }
      prompts.push_back(std::move(p));
    } catch (const nlohmann::json::exception& e) {
      throw IoError(path, fmt::format("{}: not valid JSON: {}", where, e.what()));
    } catch (const IoError&) {
      throw;
    } catch (const Error& e) {
      throw IoError(path, e.what());
    }
  }
  if (prompts.empty()) throw IoError(path, "no prompts (the file has no non-empty line)");
  return prompts;
}

// The chat template of folder `dir`'s tokenizer_config.json; an IoError naming that file when it is
// absent, has no chat_template, or one of no family rlforge renders (chat_template.h).
data::ChatTemplate chat_template_of(const std::string& dir) {
  const std::string path = (fs::path(dir) / "tokenizer_config.json").string();
  std::error_code ec;
  if (!fs::exists(path, ec)) throw IoError(path, "missing: chat prompts need the chat template it holds");
  return data::ChatTemplate::from_config(data::read_tokenizer_config(path));
}

// Room for every sequence at once when it fits in 1 GiB of KV cache (else continuous batching takes
// them in turns), and for at least the longest one.
engine::rollout::RolloutConfig rollout_config(const model::ModelConfig& config, DType dtype,
                                              const std::vector<std::vector<int64_t>>& prompt_ids,
                                              const GenerateOptions& o) {
  constexpr int64_t kMaxCacheBytes = int64_t(1) << 30;
  engine::rollout::RolloutConfig r;
  int64_t longest = 0, total_tokens = 0;
  for (const auto& ids : prompt_ids) {
    longest = std::max(longest, int64_t(ids.size()) + o.max_new_tokens);
    total_tokens += o.n * (int64_t(ids.size()) + o.max_new_tokens + r.block_size);
  }
  const engine::rollout::KvCacheSpec spec = engine::rollout::kv_cache_spec(config, 1, dtype, r.block_size);
  const int64_t wanted = spec.blocks_for_tokens(total_tokens) * spec.bytes_per_block();
  r.kv_cache_bytes = std::max(std::min(wanted, kMaxCacheBytes), spec.blocks_for_tokens(longest) * spec.bytes_per_block());
  r.limits.max_model_len = longest;
  r.limits.max_num_seqs = 256;
  r.limits.max_num_batched_tokens = std::max<int64_t>(2048, longest);
  return r;
}

int run_generate(const GenerateOptions& o, bool from_file) {
  o.sampling.validate();
  const ThreadPool pool(o.threads, "--threads");
  const std::string config_path = (fs::path(o.model) / "config.json").string();
  if (!fs::exists(config_path)) throw IoError(config_path, "missing: --model must be a folder with config.json");
  const model::HfModelFolder folder = model::HfModelFolder::open(o.model);
  const model::ModelConfig& config = folder.config;
  const std::unique_ptr<data::Tokenizer> tokenizer = data::load_tokenizer(o.model);
  // transformers' rule: generation_config.json's eos_token_id, else config.json's, else the tokenizer's.
  std::vector<int64_t> stop_ids = model::generation_eos_ids(folder, o.model);
  if (stop_ids.empty() && tokenizer->eos_id()) stop_ids = {*tokenizer->eos_id()};

  std::vector<Prompt> prompts;
  if (from_file) {
    prompts = read_prompts(o.prompts);
  } else {
    prompts.push_back(Prompt{nlohmann::json(o.prompt), o.prompt, {}, "--prompt"});
  }
  std::optional<data::ChatTemplate> chat_template;
  std::vector<std::vector<int64_t>> prompt_ids;
  for (size_t i = 0; i < prompts.size(); ++i) {
    Prompt& p = prompts[i];
    if (o.chat && p.text) p.messages = {{"user", *p.text}};
    if (!p.messages.empty() && !chat_template) chat_template = chat_template_of(o.model);
    std::vector<int64_t> ids;
    try {
      ids = p.messages.empty()
                ? tokenizer->encode(*p.text, data::AddSpecialTokens::yes)
                : tokenizer->encode(chat_template->render(p.messages, data::GenerationPrompt::yes),
                                    data::AddSpecialTokens::no);
    } catch (const Error& e) {  // a role the template cannot render, text that is not UTF-8
      throw Error(fmt::format("{}: {}", p.where, e.what()));
    }
    if (ids.empty()) throw Error(fmt::format("{}: no tokens (an empty prompt and no bos to start from)", p.where));
    for (int64_t id : ids)
      if (id >= config.vocab_size)
        throw Error(fmt::format("{}: token id {} is outside the model's vocabulary [0, {})", p.where, id,
                                config.vocab_size));
    if (int64_t(ids.size()) + o.max_new_tokens > config.max_position_embeddings)
      throw Error(fmt::format("{}: {} tokens + --max-new-tokens {} exceed max_position_embeddings {}", p.where,
                              ids.size(), o.max_new_tokens, config.max_position_embeddings));
    prompt_ids.push_back(std::move(ids));
  }

  const DType dtype = parse_dtype(o.dtype);
  const kernels::KernelRegistry kernels{kernels::KernelConfig{.batch_invariant = true}};
  dist::ParallelContext parallel = dist::ParallelContext::single_process();
  MemoryTracker tracker;
  const std::vector<engine::rollout::RolloutSample> results = [&] {
    model::ParamStore params(model::ParamLayout::for_model(config), dtype);
    model::load_hf_weights(params, o.model);
    const engine::rollout::RolloutConfig rollout = rollout_config(config, dtype, prompt_ids, o);
    engine::rollout::RolloutEngine engine(config, dtype, rollout, kernels, parallel, tracker);
    engine.update_weights(params);
    std::vector<engine::rollout::RolloutRequest> requests;
    for (size_t i = 0; i < prompt_ids.size(); ++i) requests.push_back({prompt_ids[i], uint64_t(i), 0});
    engine::rollout::RolloutSamplingParams sampling;
    sampling.temperature = o.sampling.temperature;
    sampling.do_sample = o.sampling.temperature > 0;
    sampling.top_k = o.sampling.top_k;
    sampling.top_p = o.sampling.top_p;
    sampling.seed = o.sampling.seed;
    sampling.n = o.n;
    sampling.max_tokens = o.max_new_tokens;
    return engine.generate(requests, sampling, stop_ids, std::min(config.vocab_size, tokenizer->vocab_size()));
  }();

  const auto response_text = [&](const engine::rollout::RolloutSample& s) {
    std::span<const int64_t> ids = s.token_ids;
    if (s.finish_reason == engine::FinishReason::stop) ids = ids.first(ids.size() - 1);
    return tokenizer->decode(ids, data::SpecialTokens::skip);
  };
  if (!from_file) {
    for (size_t k = 0; k < results.size(); ++k) {
      if (o.n > 1) std::printf("[sample %zu]\n", k);
      std::printf("%s\n", response_text(results[k]).c_str());
    }
    return 0;
  }
  std::string jsonl;
  for (const engine::rollout::RolloutSample& r : results) {
    jsonl += nlohmann::json{{"prompt_index", r.request_id},
                            {"sample_index", r.sample},
                            {"prompt", prompts[r.request_id].source},
                            {"response", response_text(r)},
                            {"response_ids", r.token_ids},
                            {"finish_reason", engine::finish_reason_name(r.finish_reason)},
                            {"num_prompt_tokens", prompt_ids[r.request_id].size()}}
                 .dump() +
             "\n";
  }
  if (o.out.empty())
    std::fputs(jsonl.c_str(), stdout);
  else
    formats::write_file_atomically(o.out, jsonl);
  return 0;
}

}  // namespace

Command add_generate_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("generate", "sample completions from a Hugging Face model folder");
  auto o = std::make_shared<GenerateOptions>();
  cmd->add_option("--model", o->model, "Hugging Face model folder with tokenizer.json")->required();
  auto* prompt = cmd->add_option("--prompt", o->prompt, "one prompt; its completions are printed");
  auto* prompts = cmd->add_option("--prompts", o->prompts, "JSONL of prompts (strings or {\"prompt\": ...})");
  prompt->excludes(prompts);
  cmd->add_flag("--chat", o->chat, "render text prompts as a user message with the chat template");
  // Bounded so that the KV-cache sizing (n x (prompt + new tokens)) cannot overflow.
  add_integer_option(*cmd, "--max-new-tokens", o->max_new_tokens, "tokens to generate at most", int64_t(1),
                     int64_t(std::numeric_limits<int32_t>::max()));
  add_number_option(*cmd, "--temperature", o->sampling.temperature, "logits are divided by it; 0: greedy");
  add_integer_option(*cmd, "--top-k", o->sampling.top_k, "keep the k most likely tokens (<= 0: all)",
                     std::numeric_limits<int64_t>::min());
  add_number_option(*cmd, "--top-p", o->sampling.top_p, "keep the most likely tokens up to this probability mass");
  add_integer_option(*cmd, "--seed", o->sampling.seed, "seed of the draws", uint64_t(0));
  add_integer_option(*cmd, "--n", o->n, "samples per prompt", int64_t(1), kMaxSamplesPerPrompt);
  cmd->add_option("--out", o->out, "with --prompts: the JSONL file to write (default: stdout)")->needs(prompts);
  cmd->add_option("--dtype", o->dtype, "compute dtype: f32 or bf16")->check(CLI::IsMember({"f32", "bf16"}));
  add_integer_option(*cmd, "--threads", o->threads, "OpenMP threads (0: one per core)", 0, ThreadPool::kMaxThreads);
  return [o, prompt, prompts] {
    if (prompt->count() + prompts->count() != 1) throw Error("generate: give the input with --prompt or --prompts");
    return run_generate(*o, prompts->count() > 0);
  };
}

}  // namespace rf::apps

// `rlforge logprobs --model DIR --input IN.json --out OUT.json [--dtype f32|f64] [--temperature T]
//  [--grads G.safetensors] [--max-tokens N] [--threads N]`: scores token sequences with a Hugging Face
// model folder. Needs only config.json and the weights (no tokenizer).
//   IN   {"sequences": [[ids...], ...]}: each sequence 2 to max_position_embeddings ids, each in [0, vocab_size).
//   OUT  {"logprobs": [[...]], "entropy": [[...]], "loss": x, "loss_token_mean": x, "loss_seq_mean": x,
//        "loss_seq_sum": x, "num_predicted_tokens": n}. logprobs[i][t] = log p(ids[t+1] | ids[0..t]) with
//        the logits divided by T (n-1 values per sequence); entropy[i][t] is the full-vocabulary entropy
//        (nats) of that same distribution. "loss" is the mean of -logprobs over every predicted token
//        (= loss_token_mean, as the top-level "loss" of the reference files); loss_seq_mean and
//        loss_seq_sum average / add each sequence's mean token cross-entropy.
//   --grads  the gradient of loss_seq_sum w.r.t. every parameter by HF name, in f32, plus a tensor
//        "loss" of shape [1] holding loss_seq_sum (a tied model has only model.embed_tokens.weight).
// f64 runs the ref kernels (the oracle path); f32 the fast kernels. Sequences are packed, whole, into
// forwards of up to --max-tokens tokens (a longer sequence gets a forward of its own); gradients
// accumulate over the forwards.
#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "apps/rlforge/cli_numbers.h"
#include "apps/rlforge/commands.h"
#include "core/element_access.h"
#include "core/error.h"
#include "core/input_file.h"
#include "core/thread_pool.h"
#include "formats/atomic_file.h"
#include "formats/json_input.h"
#include "formats/safetensors_writer.h"
#include "model/causal_lm.h"
#include "model/hf_folder.h"
#include "model/hf_weights.h"

namespace rf::apps {
namespace {

struct LogprobsOptions {
  std::string model, input, out, grads;
  std::string dtype = "f32";
  double temperature = 1.0;
  int64_t max_tokens = 1024;  // the logits of 1024 tokens of a 152k vocabulary: 0.6 GB in f32
  int threads = 0;
};

// Far above any batch of sequences worth one forward pass each; keeps a wrong path from filling memory.
constexpr uint64_t kMaxInputBytes = uint64_t(1) << 30;

std::vector<std::vector<int64_t>> read_sequences(const std::string& path, int64_t vocab_size,
                                                 int64_t max_position_embeddings) {
  const nlohmann::json j =
      formats::parse_json_input(core::read_input_file(path, kMaxInputBytes, "token sequences"), path);
  if (!j.is_object() || !j.contains("sequences"))
    throw IoError(path, "expected {\"sequences\": [[token ids...], ...]}: there is no \"sequences\" key");
  const nlohmann::json& list = j.at("sequences");
  if (!list.is_array() || list.empty())
    throw IoError(path, fmt::format("sequences: expected a non-empty array of token-id arrays, got {}",
                                    list.is_array() ? "an empty array" : list.type_name()));
  std::vector<std::vector<int64_t>> sequences;
  for (size_t i = 0; i < list.size(); ++i) {
    const nlohmann::json& s = list[i];
    if (!s.is_array()) throw IoError(path, fmt::format("sequences[{}]: expected an array of token ids, got {}", i, s.type_name()));
    if (s.size() < 2)
      throw IoError(path, fmt::format("sequences[{}]: {} token(s); at least 2 are needed to score one", i, s.size()));
    // Positions past the model's range have no trained rotary angle: refused, as generate refuses them.
    if (int64_t(s.size()) > max_position_embeddings)
      throw IoError(path, fmt::format("sequences[{}]: {} tokens exceed the model's max_position_embeddings {}", i,
                                      s.size(), max_position_embeddings));
    std::vector<int64_t> ids;
    for (size_t t = 0; t < s.size(); ++t) {
      const nlohmann::json& id = s[t];
      const bool in_range = id.is_number_unsigned() ? id.get<uint64_t>() < uint64_t(vocab_size)
                                                     : id.is_number_integer() && id.get<int64_t>() >= 0 &&
                                                           id.get<int64_t>() < vocab_size;
      if (!id.is_number_integer()) throw IoError(path, fmt::format("sequences[{}][{}]: {} is not a token id", i, t, id.dump()));
      if (!in_range)
        throw IoError(path, fmt::format("sequences[{}][{}]: token id {} is outside the model's vocabulary [0, {})", i,
                                        t, id.dump(), vocab_size));
      ids.push_back(id.get<int64_t>());
    }
    sequences.push_back(std::move(ids));
  }
  return sequences;
}

// Consecutive runs of sequences of at most `max_tokens` tokens in all (a longer one alone).
std::vector<std::pair<size_t, size_t>> forward_groups(const std::vector<std::vector<int64_t>>& sequences,
                                                      int64_t max_tokens) {
  std::vector<std::pair<size_t, size_t>> groups;
  size_t begin = 0;
  int64_t tokens = 0;
  for (size_t i = 0; i < sequences.size(); ++i) {
    const int64_t n = int64_t(sequences[i].size());
    if (i > begin && tokens + n > max_tokens) {
      groups.emplace_back(begin, i);
      begin = i;
      tokens = 0;
    }
    tokens += n;
  }
  groups.emplace_back(begin, sequences.size());
  return groups;
}

int run_logprobs(const LogprobsOptions& o) {
  if (!(o.temperature > 0)) throw Error(fmt::format("--temperature: must be a positive number, got {}", o.temperature));
  const ThreadPool pool(o.threads, "--threads");
  const DType dtype = o.dtype == "f64" ? DType::f64 : DType::f32;
  const std::string config_path = (std::filesystem::path(o.model) / "config.json").string();
  if (!std::filesystem::exists(config_path)) throw IoError(config_path, "missing: --model must be a folder with config.json");
  // Opened as a folder: config.json's dimensions are checked against the weights' headers before anything
  // of their size is allocated (a claimed hidden_size of 1e7 died allocating 109 GiB).
  const model::ModelConfig config = model::HfModelFolder::open(o.model).config;
  const auto sequences = read_sequences(o.input, config.vocab_size, config.max_position_embeddings);

  // f64 is the oracle: ref kernels throughout (the fast variants have no f64 and would fall back anyway).
  const kernels::KernelRegistry kernels(kernels::KernelConfig{.optimization_level = dtype == DType::f64 ? 0 : 1});
  dist::ParallelContext parallel = dist::ParallelContext::single_process();
  const model::ParamLayout layout = model::ParamLayout::for_model(config);
  model::ParamStore params(layout, dtype);
  model::load_hf_weights(params, o.model);
  std::optional<model::GradBuffer> grads;
  if (!o.grads.empty()) grads.emplace(layout, model::grad_dtype_for(dtype));
  model::CausalLm lm(config, params, grads ? &*grads : nullptr, kernels, parallel);
  int64_t longest = 0, total = 0;
  for (const auto& s : sequences) {
    longest = std::max(longest, int64_t(s.size()));
    total += int64_t(s.size());
  }
  lm.reserve(std::max(longest, std::min(o.max_tokens, total)));

  nlohmann::json logprobs = nlohmann::json::array(), entropy = nlohmann::json::array();
  double sum_nll = 0, loss_seq_sum = 0;
  int64_t num_predicted = 0;
  for (const auto& [first, last] : forward_groups(sequences, o.max_tokens)) {
    const std::vector<std::vector<int64_t>> group(sequences.begin() + int64_t(first), sequences.begin() + int64_t(last));
    const model::PackedSequences packed = model::pack_sequences(group);
    const model::ModelOutputs out = lm.forward(packed.inputs(o.temperature), model::EntropyOutput::compute);
    Tensor dlogp_N({packed.tokens_N.numel()}, model::stat_dtype_for(dtype));
    for (size_t s = 0; s < group.size(); ++s) {
      const int64_t begin = packed.cu_seqlens[s], end = packed.cu_seqlens[s + 1];
      nlohmann::json row_logp = nlohmann::json::array(), row_entropy = nlohmann::json::array();
      double seq_nll = 0;
      for (int64_t n = begin; n + 1 < end; ++n) {
        const double logp = load_f64(out.logp_N, n * out.logp_N.stride(0));
        row_logp.push_back(logp);
        row_entropy.push_back(load_f64(out.entropy_N, n * out.entropy_N.stride(0)));
        seq_nll -= logp;
        store_f64(dlogp_N, n, -1.0 / double(end - begin - 1));  // d(mean token CE of this sequence)/d logp
      }
      sum_nll += seq_nll;
      num_predicted += end - begin - 1;
      loss_seq_sum += seq_nll / double(end - begin - 1);
      logprobs.push_back(std::move(row_logp));
      entropy.push_back(std::move(row_entropy));
    }
    if (grads) lm.backward({.dlogp_N = dlogp_N});
  }

  const nlohmann::json result = {{"logprobs", std::move(logprobs)},
                                 {"entropy", std::move(entropy)},
                                 {"loss", sum_nll / double(num_predicted)},
                                 {"loss_token_mean", sum_nll / double(num_predicted)},
                                 {"loss_seq_mean", loss_seq_sum / double(sequences.size())},
                                 {"loss_seq_sum", loss_seq_sum},
                                 {"num_predicted_tokens", num_predicted},
                                 {"dtype", std::string(dtype_name(dtype))},
                                 {"temperature", o.temperature}};
  formats::write_file_atomically(o.out, result.dump() + "\n");
  if (grads) {
    std::vector<Tensor> owned;
    std::vector<std::pair<std::string, TensorView>> tensors;
    owned.reserve(layout.entries().size() + 1);
    for (const model::ParamEntry& e : layout.entries()) {
      owned.push_back(clone(grads->get(e.name), DType::f32));
      tensors.emplace_back(e.name, owned.back().view());
    }
    owned.emplace_back(Shape{1}, DType::f32);
    store_f64(owned.back(), 0, loss_seq_sum);
    tensors.emplace_back("loss", owned.back().view());
    formats::write_safetensors(o.grads, tensors, {{"format", "pt"}});
  }
  std::printf("logprobs: %zu sequences, %lld predicted tokens, loss %.6f (%s)%s%s\n", sequences.size(),
              (long long)num_predicted, sum_nll / double(num_predicted), o.out.c_str(), o.grads.empty() ? "" : "; grads: ",
              o.grads.c_str());
  return 0;
}

}  // namespace

Command add_logprobs_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("logprobs", "per-token log-probs, entropies and gradients of token sequences");
  auto o = std::make_shared<LogprobsOptions>();
  cmd->add_option("--model", o->model, "Hugging Face model folder (config.json and safetensors weights)")->required();
  cmd->add_option("--input", o->input, "JSON file {\"sequences\": [[ids...], ...]}")->required();
  cmd->add_option("--out", o->out, "JSON file to write: logprobs, entropy, loss")->required();
  cmd->add_option("--dtype", o->dtype, "compute dtype: f32 (fast kernels) or f64 (reference kernels)")
      ->check(CLI::IsMember({"f32", "f64"}));
  add_number_option(*cmd, "--temperature", o->temperature, "logits are divided by it before the softmax");
  cmd->add_option("--grads", o->grads, "also write the f32 gradient of loss_seq_sum here (safetensors)");
  add_integer_option(*cmd, "--max-tokens", o->max_tokens, "tokens per forward pass (sequences are never split)",
                     int64_t(1));
  add_integer_option(*cmd, "--threads", o->threads, "OpenMP threads (0: one per core)", 0, ThreadPool::kMaxThreads);
  return [o] { return run_logprobs(*o); };
}

}  // namespace rf::apps

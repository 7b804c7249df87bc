// `rlforge init-model --arch {llama,qwen2,qwen3,qwen2_moe,qwen3_moe} --out DIR --seed S [--vocab N --hidden C
//  --layers L --heads H --kv-heads K --head-dim D --ffn F --tie 0|1 --dtype f32|bf16 --tokenizer DIR
//  --head lm|value|score --experts E --top-k K --moe-ffn F --shared-ffn S --norm-topk-prob 0|1]`: a new Hugging Face
// model folder with random weights (HF's initialisation: N(0, 0.02) linear and embedding weights, RMSNorm gains 1,
// biases 0; param_init.h), config.json and generation_config.json, and a tokenizer: a copy of --tokenizer's files,
// or a byte-level BPE one built for the family (tokenizer_builder.h). The same arguments give the same bytes. DIR must not exist or be empty.
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>

#include "apps/rlforge/cli_numbers.h"
#include "apps/rlforge/command_util.h"
#include "apps/rlforge/commands.h"
#include "apps/rlforge/tokenizer_builder.h"
#include "core/error.h"
#include "data/load_tokenizer.h"
#include "core/memory_budget.h"
#include "model/hf_folder.h"
#include "model/memory_estimate.h"
#include "model/param_init.h"

namespace rf::apps {
namespace {

namespace fs = std::filesystem;

struct InitModelOptions {
  std::string arch, out, tokenizer, dtype = "f32", head = "lm";
  uint64_t seed = 0;
  int64_t vocab = 0;  // 0: the tokenizer's size (a copied one), or 1024 (a built one)
  int64_t hidden = 64, layers = 2, heads = 4, kv_heads = 2, head_dim = 0, ffn = 172;
  int tie = 1;
  int64_t max_position_embeddings = 4096;
  // MoE archs: every layer sparse; qwen2_moe's shared expert is gated (0: none).
  int64_t experts = 8, top_k = 2, moe_ffn = 64, shared_ffn = 128;
  int norm_topk_prob = 1;
};

model::Arch parse_arch(const std::string& name) {
  if (name == "llama") return model::Arch::llama;
  if (name == "qwen2") return model::Arch::qwen2;
  if (name == "qwen3") return model::Arch::qwen3;
  if (name == "qwen2_moe") return model::Arch::qwen2_moe;
  if (name == "qwen3_moe") return model::Arch::qwen3_moe;
  throw Error(fmt::format("--arch '{}': expected llama, qwen2, qwen3, qwen2_moe or qwen3_moe", name));
}

// The HF config.json of the new model: the fields ModelConfig uses plus what transformers writes for
// the family (Qwen2.5's sliding_window with use_sliding_window false, attention_dropout, use_cache).
nlohmann::json make_config_json(const InitModelOptions& o, model::Arch arch, int64_t vocab, std::optional<int64_t> bos,
                                int64_t eos, DType dtype) {
  const int64_t head_dim = o.head_dim > 0 ? o.head_dim : (o.heads > 0 ? o.hidden / o.heads : 0);
  nlohmann::json j = {
      {"architectures", {model::architecture_name(arch, model::HeadKind::lm)}},
      {"model_type", model::arch_name(arch)},
      {"vocab_size", vocab},
      {"hidden_size", o.hidden},
      {"intermediate_size", o.ffn},
      {"num_hidden_layers", o.layers},
      {"num_attention_heads", o.heads},
      {"num_key_value_heads", o.kv_heads},
      {"hidden_act", "silu"},
      {"rms_norm_eps", 1e-06},
      {"rope_theta", arch == model::Arch::llama ? 500000.0 : 1000000.0},
      {"rope_scaling", nullptr},
      {"max_position_embeddings", o.max_position_embeddings},
      {"tie_word_embeddings", o.tie != 0},
      {"initializer_range", 0.02},
      {"attention_dropout", 0.0},
      {"use_cache", true},
      {"eos_token_id", eos},
      {"torch_dtype", model::torch_dtype_name(dtype)},
  };
  if (bos) j["bos_token_id"] = *bos;
  // Qwen2 derives head_dim from hidden / heads and has no such field; Llama and Qwen3 state it.
  if (arch != model::Arch::qwen2 || o.head_dim > 0) j["head_dim"] = head_dim;
  if (arch == model::Arch::llama) {
    j["attention_bias"] = false;
    j["mlp_bias"] = false;
  } else {
    j["use_sliding_window"] = false;
    j["sliding_window"] = o.max_position_embeddings;
    j["max_window_layers"] = o.layers;
    if (arch == model::Arch::qwen3 || arch == model::Arch::qwen3_moe) j["attention_bias"] = false;
  }
  if (arch == model::Arch::qwen2_moe || arch == model::Arch::qwen3_moe) {
    j["num_experts"] = o.experts;
    j["num_experts_per_tok"] = o.top_k;
    j["moe_intermediate_size"] = o.moe_ffn;
    j["norm_topk_prob"] = o.norm_topk_prob != 0;
    j["decoder_sparse_step"] = 1;
    j["mlp_only_layers"] = nlohmann::json::array();
    j["router_aux_loss_coef"] = 0.001;
    j["output_router_logits"] = false;
    if (arch == model::Arch::qwen2_moe) j["shared_expert_intermediate_size"] = o.shared_ffn;
  }
  return j;
}

// The new model's config, its dimensions checked against this machine's memory before anything of their
// size is built (model/memory_estimate.h); a bad one names the option as well as the config.json field.
model::ModelConfig new_model_config(const nlohmann::json& config_json) {
  try {
    model::ModelConfig config = model::ModelConfig::from_json(config_json, "the new config.json");
    model::require_fits(config, model::weights_memory(config, DType::f32), machine_memory_budget(),
                        "hold its weights");
    return config;
  } catch (const ConfigError& e) {
    static const std::map<std::string, std::string> kOptionOf = {
        {"vocab_size", "--vocab"},          {"hidden_size", "--hidden"}, {"num_hidden_layers", "--layers"},
        {"num_attention_heads", "--heads"}, {"num_key_value_heads", "--kv-heads"}, {"head_dim", "--head-dim"},
        {"intermediate_size", "--ffn"},     {"num_experts", "--experts"}, {"num_experts_per_tok", "--top-k"},
        {"moe_intermediate_size", "--moe-ffn"}, {"shared_expert_intermediate_size", "--shared-ffn"}};
    const auto it = kOptionOf.find(e.key_path());
    throw Error(fmt::format("init-model: {} ({}): {}", it == kOptionOf.end() ? std::string("model shape") : it->second,
                            e.key_path(), e.detail()));
  }
}

int run_init_model(const InitModelOptions& o) {
  const model::Arch arch = parse_arch(o.arch);
  const DType dtype = parse_dtype(o.dtype);
  require_new_folder(o.out, "--out");

  std::map<std::string, std::string> tokenizer_files;
  int64_t vocab = o.vocab;
  std::optional<int64_t> bos;
  int64_t eos = 0;
  std::vector<int64_t> generation_eos;
  std::optional<int64_t> pad;
  if (!o.tokenizer.empty()) {
    // Either kind (a Hugging Face BPE, or the built-in character tokenizer an arith export carries);
    // loading it checks what is copied.
    const std::unique_ptr<data::Tokenizer> tokenizer = data::load_tokenizer(o.tokenizer);
    if (vocab == 0) vocab = tokenizer->vocab_size();
    if (vocab < tokenizer->vocab_size())
      throw Error(fmt::format("--vocab {} is smaller than the {} ids of the tokenizer in {}", vocab,
                              tokenizer->vocab_size(), o.tokenizer));
    if (!tokenizer->eos_id()) throw IoError(o.tokenizer, "the tokenizer has no eos_token (tokenizer_config.json)");
    bos = tokenizer->bos_id();
    eos = *tokenizer->eos_id();
    generation_eos = {eos};
    pad = tokenizer->pad_id();
    for (const char* name : model::kHfSideFiles) {
      const fs::path path = fs::path(o.tokenizer) / name;
      if (std::string_view(name) != "generation_config.json" && fs::exists(path))
        tokenizer_files[name] = model::read_file_bytes(path.string());
    }
  } else {
    if (vocab == 0) vocab = 1024;
    // A built tokenizer has `vocab` tokens: the shape is checked before it is built.
    new_model_config(make_config_json(o, arch, vocab, std::nullopt, 0, dtype));
    const BuiltTokenizer built = build_byte_level_tokenizer(arch, vocab, o.max_position_embeddings);
    tokenizer_files = built.files;
    bos = built.bos_id;
    eos = built.eos_id;
    generation_eos = built.generation_eos_ids;
    pad = built.pad_id;
  }

  nlohmann::json config_json = make_config_json(o, arch, vocab, bos, eos, dtype);
  // A critic (ForTokenClassification) or reward model (ForSequenceClassification) of one label.
  const std::map<std::string, model::HeadKind> kHeads = {
      {"lm", model::HeadKind::lm}, {"value", model::HeadKind::value}, {"score", model::HeadKind::score}};
  model::set_head_json(config_json, arch, kHeads.at(o.head), 1);
  model::HfModelFolder folder;
  folder.config = new_model_config(config_json);
  folder.config_json = config_json;
  folder.side_files = tokenizer_files;
  nlohmann::json generation = {{"eos_token_id", generation_eos.size() == 1 ? nlohmann::json(generation_eos[0])
                                                                           : nlohmann::json(generation_eos)}};
  if (bos) generation["bos_token_id"] = *bos;
  if (pad) generation["pad_token_id"] = *pad;
  folder.side_files["generation_config.json"] = model::hf_config_text(generation);
  folder.weight_metadata = {{"format", "pt"}};

  model::ParamStore params(model::ParamLayout::for_model(folder.config), DType::f32);
  model::init_params(params, folder.config, o.seed);
  model::write_hf_folder(o.out, folder, params, model::HfExportOptions{.dtype = dtype});
  std::printf("init-model: %s (%lld parameters, %s) -> %s\n", folder.config.describe().c_str(),
              (long long)params.layout().num_parameters(), std::string(dtype_name(dtype)).c_str(), o.out.c_str());
  return 0;
}

}  // namespace

Command add_init_model_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("init-model", "write a new Hugging Face model folder with random weights");
  auto o = std::make_shared<InitModelOptions>();
  cmd->add_option("--arch", o->arch, "llama, qwen2, qwen3, qwen2_moe or qwen3_moe")->required();
  cmd->add_option("--out", o->out, "the folder to create (must not exist or be empty)")->required();
  add_integer_option(*cmd, "--seed", o->seed, "seed of the weights", uint64_t(0))->required();
  // The sizes' own ranges; ModelConfig::validate checks how they fit together.
  constexpr int64_t kMaxSize = model::ModelConfig::kMaxSize;
  add_integer_option(*cmd, "--vocab", o->vocab, "vocab_size (default: the tokenizer's size, or 1024 for a built one)",
                     int64_t(0), kMaxSize);
  add_integer_option(*cmd, "--hidden", o->hidden, "hidden_size", int64_t(1), kMaxSize);
  add_integer_option(*cmd, "--layers", o->layers, "num_hidden_layers", int64_t(1), model::ModelConfig::kMaxLayers);
  add_integer_option(*cmd, "--heads", o->heads, "num_attention_heads", int64_t(1), kMaxSize);
  add_integer_option(*cmd, "--kv-heads", o->kv_heads, "num_key_value_heads", int64_t(1), kMaxSize);
  add_integer_option(*cmd, "--head-dim", o->head_dim, "head_dim (default hidden / heads)", int64_t(0), kMaxSize);
  add_integer_option(*cmd, "--ffn", o->ffn, "intermediate_size", int64_t(1), kMaxSize);
  add_integer_option(*cmd, "--tie", o->tie, "tie_word_embeddings: 1 (shared embedding and LM head) or 0", 0, 1);
  add_integer_option(*cmd, "--experts", o->experts, "num_experts (MoE archs)", int64_t(1), kMaxSize);
  add_integer_option(*cmd, "--top-k", o->top_k, "num_experts_per_tok (MoE archs)", int64_t(1), kMaxSize);
  add_integer_option(*cmd, "--moe-ffn", o->moe_ffn, "moe_intermediate_size (MoE archs)", int64_t(1), kMaxSize);
  add_integer_option(*cmd, "--shared-ffn", o->shared_ffn,
                     "shared_expert_intermediate_size (qwen2_moe; 0: no shared expert)", int64_t(0), kMaxSize);
  add_integer_option(*cmd, "--norm-topk-prob", o->norm_topk_prob,
                     "norm_topk_prob (MoE archs): 1 renormalises the top-k weights to sum 1", 0, 1);
  cmd->add_option("--dtype", o->dtype, "weights dtype: f32 or bf16")->check(CLI::IsMember({"f32", "bf16"}));
  add_integer_option(*cmd, "--max-position-embeddings", o->max_position_embeddings, "max_position_embeddings",
                     int64_t(1), kMaxSize);
  cmd->add_option("--tokenizer", o->tokenizer, "copy this folder's tokenizer files instead of building one");
  cmd->add_option("--head", o->head,
                  "lm (ForCausalLM), value (ForTokenClassification: a critic) or score (ForSequenceClassification: "
                  "a reward model)")
      ->check(CLI::IsMember({"lm", "value", "score"}));
  return [o] { return run_init_model(*o); };
}

}  // namespace rf::apps

#include "model/model_config.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "model/param_layout.h"
#include "support/test_support.h"

namespace rf::model {
namespace {

nlohmann::json llama_json() {
  return nlohmann::json{{"model_type", "llama"},      {"vocab_size", 32},        {"hidden_size", 16},
                        {"intermediate_size", 24},   {"num_hidden_layers", 2},  {"num_attention_heads", 4},
                        {"num_key_value_heads", 2},  {"rms_norm_eps", 1e-6},    {"tie_word_embeddings", false}};
}

// Expects from_json(json) to throw a ConfigError whose key_path is `key` and whose text has `fragment`.
void expect_config_error(const nlohmann::json& json, const std::string& key, const std::string& fragment) {
  try {
    ModelConfig::from_json(json, "test config.json");
    ADD_FAILURE() << "expected a ConfigError for " << key;
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key_path(), key) << e.what();
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(ModelConfig, ReadsLlamaDefaults) {
  const ModelConfig c = ModelConfig::from_json(llama_json(), "test");
  EXPECT_EQ(c.arch, Arch::llama);
  EXPECT_EQ(c.head_dim, 4);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_EQ(c.rope_theta, 10000.0);
}

TEST(ModelConfig, ReadsEveryReferenceModel) {
  for (const std::string& dir : testing::reference_model_dirs()) {
    const ModelConfig c = ModelConfig::from_file(dir + "/config.json");
    EXPECT_EQ(c.attention_bias, c.arch == Arch::qwen2) << dir;
    EXPECT_EQ(c.qk_norm, c.arch == Arch::qwen3) << dir;
    EXPECT_GT(c.head_dim, 0) << dir;
  }
}

TEST(ModelConfig, Qwen3KeepsAnExplicitHeadDim) {
  auto j = llama_json();
  j["model_type"] = "qwen3";
  j["head_dim"] = 6;
  const ModelConfig c = ModelConfig::from_json(j, "test");
  EXPECT_EQ(c.head_dim, 6);
  EXPECT_TRUE(c.qk_norm);
  const ParamLayout layout = ParamLayout::for_model(c);
  EXPECT_EQ(layout.entry("model.layers.1.self_attn.q_proj.weight").shape, (Shape{24, 16}));
  EXPECT_EQ(layout.entry("model.layers.0.self_attn.k_norm.weight").shape, (Shape{6}));
}

TEST(ModelConfig, BadFieldsNameTheField) {
  auto j = llama_json();
  j["hidden_size"] = 18;  // not divisible by 4 heads
  expect_config_error(j, "hidden_size", "not divisible by num_attention_heads=4");
  j = llama_json();
  j["num_key_value_heads"] = 3;
  expect_config_error(j, "num_key_value_heads", "does not divide num_attention_heads=4");
  j = llama_json();
  j["intermediate_size"] = -5;
  expect_config_error(j, "intermediate_size", "must be positive, got -5");
  j = llama_json();
  j["vocab_size"] = 0;
  expect_config_error(j, "vocab_size", "must be positive");
  j = llama_json();
  j["model_type"] = "gpt2";
  expect_config_error(j, "model_type", "unknown architecture 'gpt2'");
  j = llama_json();
  j.erase("num_hidden_layers");
  expect_config_error(j, "num_hidden_layers", "missing");
  j = llama_json();
  j["num_attention_heads"] = "four";
  expect_config_error(j, "num_attention_heads", "unexpected value");
  j = llama_json();
  j["hidden_act"] = "gelu";
  expect_config_error(j, "hidden_act", "not supported");
}

TEST(ParamLayout, TiedModelHasNoLmHeadAndOffsetsAreAligned) {
  auto j = llama_json();
  j["tie_word_embeddings"] = true;
  const ParamLayout layout = ParamLayout::for_model(ModelConfig::from_json(j, "test"));
  EXPECT_FALSE(layout.contains("lm_head.weight"));
  for (const auto& e : layout.entries()) EXPECT_EQ(e.offset % 32, 0) << e.name;
  // embed 32x16 + per layer (16 + 3 q/k/v + o + 16 + 3 mlp) + final norm 16
  const int64_t per_layer = 16 + 16 * 16 + 8 * 16 * 2 + 16 * 16 + 16 + 24 * 16 * 3;
  EXPECT_EQ(layout.num_parameters(), 32 * 16 + 2 * per_layer + 16);
}

TEST(ParamLayout, TpSplitsHeadsKvHeadsAndFfnEvenly) {
  auto j = llama_json();  // 4 heads, 2 kv heads, FFN 24
  const ModelConfig c = ModelConfig::from_json(j, "test");
  check_tp_divides(c, 2);
  auto expect_refused = [](const ModelConfig& config, int64_t tp, const std::string& fragment) {
    try {
      check_tp_divides(config, tp);
      ADD_FAILURE() << "expected a ConfigError for TP " << tp;
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.key_path(), "tensor_model_parallel_size") << e.what();
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  expect_refused(c, 3, "3 does not divide num_attention_heads = 4");
  expect_refused(c, 4, "4 does not divide num_key_value_heads = 2");
  j["intermediate_size"] = 25;
  expect_refused(ModelConfig::from_json(j, "test"), 2, "2 does not divide intermediate_size = 25");
  // The layout of one TP rank is refused the same way.
  EXPECT_THROW(ParamLayout::for_model(c, TensorParallelShard{.rank = 0, .size = 4}), ConfigError);
}

}  // namespace
}  // namespace rf::model

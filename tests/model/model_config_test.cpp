#include "model/model_config.h"

#include <gtest/gtest.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <limits>

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

// nlohmann's get<int64_t>() used to truncate 16.7 to 16, turn 1e30 into INT64_MIN (undefined behaviour),
// and wrap 2^63 to a negative size, so the error, if any, named a value the file does not hold.
TEST(ModelConfig, FieldsMustHaveTheirJsonType) {
  for (const nlohmann::json& bad : {nlohmann::json(16.7), nlohmann::json(1e30), nlohmann::json(uint64_t(1) << 63),
                                    nlohmann::json(true), nlohmann::json("16")}) {
    auto j = llama_json();
    j["hidden_size"] = bad;
    expect_config_error(j, "hidden_size", fmt::format("in test config.json: unexpected value {} (expected an integer)",
                                                      bad.dump()));
  }
  auto j = llama_json();
  j["tie_word_embeddings"] = 1;
  expect_config_error(j, "tie_word_embeddings", "unexpected value 1 (expected true or false)");
  j = llama_json();
  j["rope_theta"] = "1e4";
  expect_config_error(j, "rope_theta", "unexpected value \"1e4\" (expected a finite number)");
  j = llama_json();
  j["eos_token_id"] = 2.5;
  expect_config_error(j, "eos_token_id", "unexpected value 2.5 (expected an integer)");
  j = llama_json();
  j["eos_token_id"] = {1, 2};  // a list is generation_config.json's; not read here
  EXPECT_EQ(ModelConfig::from_json(j, "test").eos_token_id, -1);
  j = llama_json();
  j["rms_norm_eps"] = std::numeric_limits<double>::infinity();  // what a YAML model.config's 1e999 becomes
  expect_config_error(j, "rms_norm_eps", "unexpected value inf (expected a finite number)");
  j = llama_json();
  j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", std::numeric_limits<double>::infinity()}};
  expect_config_error(j, "rope_scaling.factor", "expected a positive finite number, got inf");
}

// Sizes a few thousand times past any real model used to pass, and to overflow the parameter offsets or
// loop for hours over 2^40 layers in ParamLayout.
TEST(ModelConfig, SizesAreBounded) {
  auto j = llama_json();
  j["num_hidden_layers"] = int64_t(1) << 40;
  expect_config_error(j, "num_hidden_layers", "1099511627776 is more than the 4096 rlforge supports");
  j = llama_json();
  j["vocab_size"] = int64_t(1) << 31;
  expect_config_error(j, "vocab_size", "2147483648 is more than the 2147483647 rlforge supports");
  j = llama_json();
  j["vocab_size"] = ModelConfig::kMaxSize;
  j["hidden_size"] = int64_t(1) << 30;
  j["num_attention_heads"] = 1;
  j["num_key_value_heads"] = 1;
  expect_config_error(j, "hidden_size", "parameters, more than the 1.13e+15 rlforge addresses");
}

TEST(ModelConfig, FromFileRefusesADeviceAtOnce) {
  try {
    ModelConfig::from_file("/dev/zero");
    ADD_FAILURE() << "read /dev/zero";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("/dev/zero: is a character device"), std::string::npos) << e.what();
  }
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
  check_tp_divides(c, TensorParallelShard{.size = 2});
  auto expect_refused = [](const ModelConfig& config, int64_t tp, const std::string& fragment) {
    try {
      check_tp_divides(config, TensorParallelShard{.size = tp});
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

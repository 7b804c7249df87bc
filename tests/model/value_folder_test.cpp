// Value and score models as Hugging Face folders: config.json's architectures and id2label read into
// ModelConfig's head and num_labels (and transformers' default of 2 labels without id2label); the
// layouts (score.weight, score.bias for the token classifier, no lm_head even when tied); import then
// export of ForTokenClassification and ForSequenceClassification folders byte for byte; and an LM
// folder turned into a critic's (HfModelFolder::set_head) exporting the critic's weights.
#include <gtest/gtest.h>

#include "core/philox.h"
#include "formats/safetensors_folder.h"
#include "model/hf_folder.h"
#include "model/hf_weights.h"
#include "model/param_layout.h"
#include "support/scratch_folder.h"
#include "support/test_support.h"

namespace rf::model {
namespace {

nlohmann::json qwen2_json(const std::string& architecture) {
  return nlohmann::json{{"architectures", {architecture}}, {"model_type", "qwen2"},      {"vocab_size", 32},
                        {"hidden_size", 16},                {"intermediate_size", 24},  {"num_hidden_layers", 2},
                        {"num_attention_heads", 4},         {"num_key_value_heads", 2}, {"tie_word_embeddings", true}};
}

TEST(ValueConfig, ArchitecturesNameTheHeadAndId2LabelTheLabels) {
  nlohmann::json j = qwen2_json("Qwen2ForTokenClassification");
  j["id2label"] = {{"0", "LABEL_0"}};
  ModelConfig c = ModelConfig::from_json(j, "test");
  EXPECT_EQ(c.head, HeadKind::value);
  EXPECT_EQ(c.num_labels, 1);
  j = qwen2_json("Qwen2ForSequenceClassification");  // no id2label: transformers' default, 2 labels
  c = ModelConfig::from_json(j, "test");
  EXPECT_EQ(c.head, HeadKind::score);
  EXPECT_EQ(c.num_labels, 2);
  j["num_labels"] = 1;
  EXPECT_EQ(ModelConfig::from_json(j, "test").num_labels, 1);
  EXPECT_EQ(ModelConfig::from_json(qwen2_json("Qwen2ForCausalLM"), "test").head, HeadKind::lm);
  j = qwen2_json("Qwen3ForTokenClassification");  // the family from the class when model_type is absent
  j.erase("model_type");
  c = ModelConfig::from_json(j, "test");
  EXPECT_EQ(c.arch, Arch::qwen3);
  EXPECT_EQ(c.head, HeadKind::value);

  try {
    ModelConfig::from_json(qwen2_json("Qwen2ForQuestionAnswering"), "test config.json");
    ADD_FAILURE() << "an unsupported head class should be refused";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key_path(), "architectures");
    EXPECT_NE(std::string(e.what()).find("'Qwen2ForQuestionAnswering' is not supported"), std::string::npos)
        << e.what();
  }
  j = qwen2_json("Qwen2ForSequenceClassification");
  j["id2label"] = nlohmann::json::object();
  try {
    ModelConfig::from_json(j, "test");
    ADD_FAILURE() << "a head without labels should be refused";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key_path(), "id2label");
  }
}

TEST(ValueConfig, ToJsonWritesTheClassAndLabelsAsTransformersDoes) {
  ModelConfig c = ModelConfig::from_json(qwen2_json("Qwen2ForCausalLM"), "test");
  c.head = HeadKind::value;
  c.num_labels = 1;
  const nlohmann::json j = c.to_json();
  EXPECT_EQ(j.at("architectures"), nlohmann::json({"Qwen2ForTokenClassification"}));
  EXPECT_EQ(j.at("id2label"), nlohmann::json({{"0", "LABEL_0"}}));
  EXPECT_EQ(j.at("label2id"), nlohmann::json({{"LABEL_0", 0}}));
  EXPECT_FALSE(j.contains("num_labels"));
  const ModelConfig back = ModelConfig::from_json(j, "test");
  EXPECT_EQ(back.head, HeadKind::value);
  EXPECT_EQ(back.num_labels, 1);
  c.head = HeadKind::lm;
  EXPECT_FALSE(c.to_json().contains("id2label"));
  EXPECT_EQ(architecture_name(Arch::llama, HeadKind::score), "LlamaForSequenceClassification");
}

TEST(ValueConfig, LayoutsReplaceTheLmHeadWithTheScore) {
  for (HeadKind head : {HeadKind::value, HeadKind::score}) {
    ModelConfig c = ModelConfig::from_json(qwen2_json("Qwen2ForCausalLM"), "test");  // tied
    c.head = head;
    c.num_labels = 1;
    const ParamLayout layout = ParamLayout::for_model(c, TensorParallelShard{.rank = 1, .size = 2});
    EXPECT_FALSE(layout.contains("lm_head.weight"));
    EXPECT_EQ(layout.entry("score.weight").shape, (Shape{1, 16}));
    EXPECT_EQ(layout.entry("score.weight").split, TpSplit::replicated);
    EXPECT_EQ(layout.contains("score.bias"), head == HeadKind::value);
    EXPECT_EQ(layout.entries().back().name, head == HeadKind::value ? "score.bias" : "score.weight");
  }
}

using rf::testing::folder_files;

class ValueFolder : public rf::testing::ScratchFolderTest {};

TEST_F(ValueFolder, ImportThenExportIsByteForByte) {
  for (HeadKind head : {HeadKind::value, HeadKind::score})
    for (DType dtype : {DType::f32, DType::bf16}) {
      const std::string tag = head_name(head) + "_" + std::string(dtype_name(dtype));
      SCOPED_TRACE(tag);
      nlohmann::json j = qwen2_json(architecture_name(Arch::qwen2, head));
      j["id2label"] = {{"0", "LABEL_0"}};
      j["label2id"] = {{"LABEL_0", 0}};
      j["pad_token_id"] = 0;  // carried, not read (model_config.h)
      HfModelFolder source = HfModelFolder::for_config(ModelConfig::from_json(j, "test"), dtype);
      source.config_json = j;
      source.config_json["torch_dtype"] = torch_dtype_name(dtype);
      ParamStore params(ParamLayout::for_model(source.config), DType::f32);
      fill_uniform(params.flat(), Philox(3, int(head)), -1.0, 1.0);
      write_hf_folder(path(tag + "_src"), source, params, HfExportOptions{.max_shard_bytes = 4000});

      const HfModelFolder opened = HfModelFolder::open(path(tag + "_src"));
      EXPECT_EQ(opened.config.head, head);
      EXPECT_EQ(opened.config.num_labels, 1);
      EXPECT_EQ(opened.weight_dtypes.at("score.weight"), dtype);
      EXPECT_EQ(formats::SafetensorsFolder(path(tag + "_src")).contains("score.bias"), head == HeadKind::value);
      ParamStore loaded(ParamLayout::for_model(opened.config), opened.exact_store_dtype());
      load_hf_weights(loaded, path(tag + "_src"));
      write_hf_folder(path(tag + "_out"), opened, loaded);
      EXPECT_EQ(folder_files(path(tag + "_src")), folder_files(path(tag + "_out")));
    }
}

// A critic's folder from the actor's: the LM folder's backbone under a fresh value head, exported as a
// Qwen2ForTokenClassification folder with everything else of the LM folder (fields, side files).
TEST_F(ValueFolder, AnLmFolderBecomesACriticsFolder) {
  nlohmann::json j = qwen2_json("Qwen2ForCausalLM");
  j["some_future_field"] = "kept";
  HfModelFolder lm = HfModelFolder::for_config(ModelConfig::from_json(j, "test"), DType::bf16);
  lm.config_json = j;
  lm.config_json["torch_dtype"] = "bfloat16";
  lm.side_files["tokenizer.json"] = "{\"copied\": true}\n";
  ParamStore lm_weights(ParamLayout::for_model(lm.config), DType::f32);
  fill_uniform(lm_weights.flat(), Philox(4, 0), -1.0, 1.0);
  write_hf_folder(path("actor"), lm, lm_weights);

  HfModelFolder critic = HfModelFolder::open(path("actor"));
  critic.set_head(HeadKind::value, 1);
  EXPECT_EQ(critic.config.head, HeadKind::value);
  EXPECT_FALSE(critic.weight_split.has_value());
  EXPECT_EQ(critic.weight_dtypes.at("score.bias"), DType::bf16);
  ParamStore weights(ParamLayout::for_model(critic.config), DType::f32);
  load_hf_backbone(weights, critic.config, path("actor"), 8);
  write_hf_folder(path("critic"), critic, weights);

  const HfModelFolder reopened = HfModelFolder::open(path("critic"));
  EXPECT_EQ(reopened.config_json.at("architectures"), nlohmann::json({"Qwen2ForTokenClassification"}));
  EXPECT_EQ(reopened.config_json.at("id2label"), nlohmann::json({{"0", "LABEL_0"}}));
  EXPECT_EQ(reopened.config_json.at("some_future_field"), "kept");
  EXPECT_EQ(reopened.side_files, lm.side_files);
  ParamStore back(ParamLayout::for_model(reopened.config), DType::f32);
  load_hf_weights(back, path("critic"));
  // The weights as bf16 holds them: the backbone's came from bf16, the fresh head's were drawn in f32.
  const Tensor as_stored = clone(clone(weights.flat(), DType::bf16), DType::f32);
  EXPECT_EQ(rf::testing::max_abs_diff(back.flat(), as_stored), 0.0);
  // And back to an LM: the head's weights go, the class and labels too.
  critic.set_head(HeadKind::lm, 1);
  EXPECT_EQ(critic.config_json.at("architectures"), nlohmann::json({"Qwen2ForCausalLM"}));
  EXPECT_FALSE(critic.config_json.contains("id2label"));
  EXPECT_FALSE(critic.weight_dtypes.count("score.weight"));
}

}  // namespace
}  // namespace rf::model

// `rlforge sft`'s layout check (trainer/sft_parallel.h) for the pipeline keys (issue #22 acceptance 5): a split
// that does not fit the model refused from the config alone, keyed as the user wrote it (megatron.<key>) and
// naming the model it read, at PP 1 too when a split key is set; an interleaved schedule refused against a
// step's micro-batch count; a config without pipeline keys not reading the model at all. The TP, DP and world
// rules are e2e.parallel_layout_errors'.
#include "trainer/sft_parallel.h"

#include <gtest/gtest.h>

#include <fstream>

#include "core/error.h"
#include "support/scratch_folder.h"
#include "support/test_support.h"

namespace rf::trainer {
namespace {

using rf::testing::expect_config_error;

// examples/sft_arith.yaml's model with `num_layers` layers and its batch: 128 examples in micro-batches of 64.
SftConfig sft_config(int64_t num_layers) {
  SftConfig config;
  config.model.config = YAML::Load(fmt::format(
      "{{architectures: [Qwen3ForCausalLM], hidden_size: 128, intermediate_size: 352, num_hidden_layers: {}, "
      "num_attention_heads: 4, num_key_value_heads: 2, head_dim: 32}}",
      num_layers));
  config.data.train_batch_size = 128;
  config.data.micro_batch_size_per_gpu = 64;
  return config;
}

TEST(SftParallel, ASplitThatDoesNotFitIsKeyedUnderMegatronAndNamesTheModel) {
  SftConfig config = sft_config(3);
  config.megatron.pipeline_model_parallel_size = 2;
  expect_config_error([&] { check_parallel_layout(config, 2); }, "megatron.pipeline_model_parallel_size",
                      "2 does not divide the 3 layers (noop_layers can pad them) in model.config");
  config.megatron.pipeline_split.noop_layers = {3};  // 3 + 1 noop divide over 2 stages
  check_parallel_layout(config, 2);
  const std::string split = pipeline_split(config).describe();
  EXPECT_EQ(split.substr(0, split.find('\n')), "pipeline split: 4 layers (3 + 1 noop) on PP 2 x VP 1");
  config.megatron.pipeline_split.noop_layers = {1, 7};
  expect_config_error([&] { check_parallel_layout(config, 2); }, "megatron.noop_layers",
                      "index 7 out of range [0, 5) (3 layers + 2 noop) in model.config");
}

TEST(SftParallel, SplitKeysAtOneStageAreCheckedToo) {
  // PP 1 builds one stage of every layer, but a split key set there is still checked against the model.
  SftConfig config = sft_config(2);
  config.megatron.pipeline_split.noop_layers = {9};
  expect_config_error([&] { check_parallel_layout(config, 1); }, "megatron.noop_layers",
                      "index 9 out of range [0, 3) (2 layers + 1 noop) in model.config");
  config = sft_config(2);
  config.megatron.pipeline_split.pipeline_model_parallel_layout = "Et|tL";
  expect_config_error([&] { check_parallel_layout(config, 1); }, "megatron.pipeline_model_parallel_layout",
                      "2 virtual stages need pipeline_model_parallel_size > 1");
  config = sft_config(2);
  config.megatron.pipeline_split.num_layers_in_first_pipeline_stage = 1;
  expect_config_error([&] { check_parallel_layout(config, 1); }, "megatron.num_layers_in_first_pipeline_stage",
                      "needs pipeline_model_parallel_size > 1");
}

TEST(SftParallel, WithoutPipelineKeysTheModelIsNotRead) {
  SftConfig config = sft_config(2);
  config.model.config = YAML::Load("not a map");  // the run refuses it later, with its own message
  check_parallel_layout(config, 2);
  config.megatron.pipeline_split.noop_layers = {2};
  expect_config_error([&] { check_parallel_layout(config, 1); }, "model.config", "expected a map");
}

using SftParallelFolder = rf::testing::ScratchFolderTest;

TEST_F(SftParallelFolder, AModelFolderIsNamedByItsConfigJson) {
  std::ofstream(path("config.json"))
      << R"({"model_type": "qwen3", "vocab_size": 32, "hidden_size": 16, "intermediate_size": 24,
             "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 4})";
  SftConfig config = sft_config(2);
  config.model.path = dir_.string();
  config.megatron.pipeline_model_parallel_size = 2;
  expect_config_error([&] { check_parallel_layout(config, 2); }, "megatron.pipeline_model_parallel_size",
                      "does not divide the 3 layers (noop_layers can pad them) in " + dir_.string() + "/config.json");
}

TEST(SftParallel, AStepsMicroBatchesAreItsShareInGroupsOfMicroBatchSize) {
  data::DataConfig data;
  data.train_batch_size = 128;
  data.micro_batch_size_per_gpu = 64;
  EXPECT_EQ(num_microbatches_per_step(data, 1), 2);
  EXPECT_EQ(num_microbatches_per_step(data, 2), 1);
  EXPECT_EQ(num_microbatches_per_step(data, 4), 1);  // a share of 32 in one micro-batch
  data.train_batch_size = 192;
  EXPECT_EQ(num_microbatches_per_step(data, 2), 2);  // 96 examples: 64 + 32
}

TEST(SftParallel, AnInterleavedScheduleIsCheckedAgainstAStepsMicroBatches) {
  SftConfig config = sft_config(4);
  config.megatron.pipeline_model_parallel_size = 2;
  config.megatron.pipeline_split.virtual_pipeline_model_parallel_size = 2;
  check_parallel_layout(config, 2);  // 2 micro-batches, N = P = 2
  expect_config_error([&] { check_parallel_layout(config, 4); }, "megatron.microbatch_group_size_per_vp_stage",
                      "2 must lie in [pipeline_model_parallel_size = 2, num_microbatches = 1]; a step has 1 "
                      "micro-batches per data-parallel rank (data.train_batch_size 128 over 2 data-parallel ranks, "
                      "data.micro_batch_size_per_gpu 64 each)");
  config.data.micro_batch_size_per_gpu = 32;  // 4 micro-batches
  config.megatron.microbatch_group_size_per_vp_stage = 3;
  expect_config_error([&] { check_parallel_layout(config, 2); }, "megatron.microbatch_group_size_per_vp_stage",
                      "num_microbatches = 4 leaves a last group of 1 micro-batches");
  config.megatron.microbatch_group_size_per_vp_stage = 4;
  check_parallel_layout(config, 2);
}

}  // namespace
}  // namespace rf::trainer

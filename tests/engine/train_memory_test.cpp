// TrainEngine's memory estimate (training_memory, train_engine.h): a lower bound of what the engine then
// holds, for LM and value models, f32 and bf16, with and without the distributed optimizer's share, the swap
// optimizer and bf16 parameter-copy reuse; an engine above its tracker's budget is refused by name before it
// allocates anything.
#include <gtest/gtest.h>

#include "engine/train_engine.h"
#include "engine_fixture.h"

namespace rf::engine {
namespace {

using engine_testing::adam;
using engine_testing::tiny_config;

TEST(TrainMemory, IsALowerBoundOfWhatTheEngineHolds) {
  for (const char* dtype : {"float32", "bfloat16"})
    for (model::HeadKind head : {model::HeadKind::lm, model::HeadKind::value})
      for (int64_t tokens : {int64_t(16), int64_t(512)})
        for (int memory_feature = 0; memory_feature < 3; ++memory_feature) {  // none, swap, swap + reuse (bf16)
          EngineConfig config = engine_testing::f32_engine();
          config.dtype = dtype;
          config.swap_optimizer = memory_feature >= 1;
          config.reuse_fp32_param = memory_feature == 2 && config.compute_dtype() == DType::bf16;
          const model::ModelConfig model_config = tiny_config(model::Arch::qwen3, head);
          engine_testing::EngineEnv env;
          const TrainEngine engine(config, adam(1e-3), model_config, env.kernels, env.parallel, env.tracker, tokens);
          const model::MemoryEstimate estimate = training_memory(model_config, config, 1, 1, tokens);
          SCOPED_TRACE(fmt::format("{} {} {} tokens, swap {} reuse {}: {}", dtype, model::head_name(head), tokens,
                                   config.swap_optimizer, config.reuse_fp32_param, estimate.describe()));
          const double held = double(env.tracker.current(MemoryTier::device));
          // The tracker counts tensors, not the layout's bookkeeping.
          EXPECT_LE(estimate.total() - estimate.layout, held);
          EXPECT_GT(estimate.total() - estimate.layout, 0.3 * held) << "a lower bound this loose refuses nothing";
        }
  // The distributed optimizer keeps 1/DP of the moments; TP 1/TP of everything weight-sized.
  const model::ModelConfig c = tiny_config();
  EngineConfig config = engine_testing::f32_engine();
  const model::MemoryEstimate one = training_memory(c, config, 1, 4, 64);
  config.use_distributed_optimizer = true;
  EXPECT_DOUBLE_EQ(training_memory(c, config, 1, 4, 64).optimizer, one.optimizer / 4);
  EXPECT_DOUBLE_EQ(training_memory(c, config, 2, 1, 64).params, one.params / 2);
}

TEST(TrainMemory, AnEngineAboveItsBudgetIsRefusedBeforeItAllocates) {
  engine_testing::EngineEnv env;
  env.tracker.set_budget(MemoryTier::device, 64 << 10);  // 64 KiB
  model::ModelConfig config = tiny_config();
  config.source = "tiny/config.json";
  try {
    const TrainEngine engine(engine_testing::f32_engine(), adam(1e-3), config, env.kernels, env.parallel, env.tracker,
                             4096);
    ADD_FAILURE() << "no error";
  } catch (const ConfigError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("in tiny/config.json: the model (llama: 2 layers"), std::string::npos) << message;
    EXPECT_NE(message.find("to train, more than the 64.0 KiB of the memory tracker's device budget"),
              std::string::npos)
        << message;
  }
  EXPECT_EQ(env.tracker.peak(MemoryTier::device), 0) << "something was allocated before the refusal";
}

}  // namespace
}  // namespace rf::engine

// Memory estimates from a ModelConfig alone (model/memory_estimate.h): the parameter count is
// ParamLayout's, for every architecture and head; a model above the budget is refused naming the most
// outsized dimension, the config's source, the estimate and the budget.
#include "model/memory_estimate.h"

#include <gtest/gtest.h>

#include "model/param_layout.h"
#include "model_fixture.h"

namespace rf::model {
namespace {

std::string error_of(const ModelConfig& config, const MemoryEstimate& estimate, const MemoryBudget& budget) {
  try {
    require_fits(config, estimate, budget, "train");
  } catch (const ConfigError& e) {
    return std::string(e.key_path()) + " | " + e.what();
  }
  return "";
}

TEST(MemoryEstimate, CountsTheParametersOfTheLayout) {
  for (Arch arch : {Arch::llama, Arch::qwen2, Arch::qwen3, Arch::qwen2_moe, Arch::qwen3_moe})
    for (bool tied : {false, true})
      for (HeadKind head : {HeadKind::lm, HeadKind::value, HeadKind::score}) {
        ModelConfig config = testing::micro_config(arch, tied, head);
        if (head != HeadKind::lm) config.num_labels = 3;
        SCOPED_TRACE(config.describe());
        EXPECT_EQ(count_parameters(config), double(ParamLayout::for_model(config).num_parameters()));
      }
}

TEST(MemoryEstimate, WeightsInTheirDtypePlusTheLayout) {
  const ModelConfig config = testing::micro_config(Arch::qwen3, false);
  const MemoryEstimate f32 = weights_memory(config, DType::f32), bf16 = weights_memory(config, DType::bf16);
  EXPECT_EQ(f32.params, 4 * count_parameters(config));
  EXPECT_EQ(bf16.params, 2 * count_parameters(config));
  EXPECT_GT(f32.layout, 0);
  EXPECT_EQ(f32.total(), f32.params + f32.layout);
}

TEST(MemoryEstimate, AModelAboveTheBudgetIsRefusedNamingItsMostOutsizedDimension) {
  ModelConfig config = testing::micro_config(Arch::qwen3, false);
  config.source = "/models/x/config.json";
  const MemoryBudget budget{1 << 30, "physical memory"};
  EXPECT_EQ(error_of(config, weights_memory(config, DType::f32), budget), "");  // fits

  config.num_hidden_layers = 1000000000;
  const std::string layers = error_of(config, weights_memory(config, DType::f32), budget);
  EXPECT_EQ(layers.substr(0, layers.find(" | ")), "num_hidden_layers");
  for (const char* part :
       {"num_hidden_layers: 1000000000 in /models/x/config.json: the model (qwen3: 1000000000 layers", "needs at least",
        "(params ", "layout ", "to train, more than the 1.0 GiB of physical memory"})
    EXPECT_NE(layers.find(part), std::string::npos) << part << " not in " << layers;

  config = testing::micro_config(Arch::qwen3, false);
  config.vocab_size = int64_t(1) << 40;
  const std::string vocab = error_of(config, weights_memory(config, DType::f32), budget);
  EXPECT_EQ(vocab.substr(0, vocab.find(" | ")), "vocab_size") << vocab;

  // head_dim follows hidden_size / heads unless stated: the hidden size is named, not the derived head_dim.
  config = testing::micro_config(Arch::llama, false);
  config.num_attention_heads = config.num_key_value_heads = 1;
  config.hidden_size = config.head_dim = 100000000;
  const std::string hidden = error_of(config, weights_memory(config, DType::f32), budget);
  EXPECT_EQ(hidden.substr(0, hidden.find(" | ")), "hidden_size") << hidden;
}

}  // namespace
}  // namespace rf::model

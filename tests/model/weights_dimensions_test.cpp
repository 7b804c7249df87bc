// config.json's dimensions against the weights' safetensors headers (model/weights_dimensions.h): a
// config that does not describe its weights is a ConfigError naming the key, config.json and the weights'
// file when the folder is opened, before a layout of its size is built.
#include "model/weights_dimensions.h"

#include <gtest/gtest.h>

#include <fstream>

#include "model/hf_folder.h"
#include "model/param_layout.h"
#include "model_fixture.h"
#include "support/scratch_folder.h"

namespace rf::model {
namespace {

class WeightsDimensions : public rf::testing::ScratchFolderTest {
 protected:
  // A folder of micro_config's model whose config.json then says `key`: `value`.
  std::string folder_claiming(const std::string& key, int64_t value) {
    const std::string dir = path(key);
    const HfModelFolder folder = HfModelFolder::for_config(testing::micro_config(Arch::qwen3, false), DType::f32);
    write_hf_folder(dir, folder, ParamStore(ParamLayout::for_model(folder.config), DType::f32));
    nlohmann::json config = folder.config_json;
    config[key] = value;
    std::ofstream(dir + "/config.json") << config.dump();
    return dir;
  }
  // The ConfigError's key and message opening `dir`.
  static std::pair<std::string, std::string> error_opening(const std::string& dir) {
    try {
      HfModelFolder::open(dir);
    } catch (const ConfigError& e) {
      return {e.key_path(), e.what()};
    }
    return {"", ""};
  }
};

TEST_F(WeightsDimensions, ConfigThatDoesNotDescribeItsWeightsIsNamed) {
  // 4096 layers, the most config.json may claim (1e9 is refused as out of range before the weights are read).
  const std::string layers = folder_claiming("num_hidden_layers", 4096);
  auto [key, message] = error_opening(layers);
  EXPECT_EQ(key, "num_hidden_layers");
  EXPECT_NE(message.find("num_hidden_layers: 4096 in " + layers + "/config.json, but the weights in " + layers +
                         " hold 2 (model.layers.0 to model.layers.1)"),
            std::string::npos)
      << message;

  const std::string hidden = folder_claiming("hidden_size", 10000000);
  std::tie(key, message) = error_opening(hidden);
  EXPECT_EQ(key, "hidden_size");
  EXPECT_NE(message.find("hidden_size: 10000000 in " + hidden + "/config.json, but " + hidden +
                         "/model.safetensors holds model.embed_tokens.weight of shape"),
            std::string::npos)
      << message;

  for (const auto& [dimension, value] : {std::pair{"vocab_size", 1 << 20}, std::pair{"intermediate_size", 1 << 20},
                                          std::pair{"num_key_value_heads", 4}}) {
    const std::string dir = folder_claiming(dimension, value);
    EXPECT_EQ(error_opening(dir).first, dimension) << error_opening(dir).second;
  }
  const std::string heads = folder_claiming("head_dim", 1 << 20);
  EXPECT_EQ(error_opening(heads).first, "num_attention_heads");
  EXPECT_NE(error_opening(heads).second.find("(x head_dim 1048576 = 4194304 rows)"), std::string::npos)
      << error_opening(heads).second;

  // The unchanged folder opens.
  const std::string good = folder_claiming("initializer_range", 0);
  EXPECT_NO_THROW(HfModelFolder::open(good));
}

}  // namespace
}  // namespace rf::model

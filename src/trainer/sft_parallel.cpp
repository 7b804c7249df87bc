#include "trainer/sft_parallel.h"

#include <fmt/format.h>

#include <filesystem>
#include <iterator>

#include "config/yaml_json.h"
#include "core/error.h"
#include "engine/parallel_setup.h"
#include "model/param_layout.h"

namespace rf::trainer {
namespace {

void check_batch_splits(int64_t num_examples, int64_t num_dp_ranks) {
  if (num_examples % num_dp_ranks != 0)
    throw ConfigError("data.train_batch_size", fmt::format("{} examples do not split over {} data-parallel ranks",
                                                           num_examples, num_dp_ranks));
}

// The layer checks key their errors by the megatron block's own keys; the user wrote them under
// `megatron.`. `where` says which model a TP check looked at.
[[noreturn]] void rethrow_under_megatron(const ConfigError& error, const std::string& where = "") {
  throw ConfigError("megatron." + error.key_path(), error.detail() + where);
}

}  // namespace

// A bad model.config is keyed as the run keys it (model.config.<field>).
model::ModelConfig model_shape(const ModelSection& m) {
  if (m.path) return model::ModelConfig::from_file((std::filesystem::path(*m.path) / "config.json").string());
  nlohmann::json json = config::yaml_to_json(m.config);
  if (!json.is_object()) throw ConfigError("model.config", "expected a map of HF config.json fields");
  if (!json.contains("vocab_size")) json["vocab_size"] = 1;
  try {
    return model::ModelConfig::from_json(json, "model.config");
  } catch (const ConfigError& e) {
    throw ConfigError("model.config." + e.key_path(), e.detail());
  }
}

void check_parallel_layout(const SftConfig& config, int world_size) {
  const engine::EngineConfig& megatron = config.megatron;
  int64_t num_dp_ranks = 0;
  try {
    num_dp_ranks = dist::RankLayout(engine::parallel_dims(megatron, world_size)).data_parallel_size();
  } catch (const ConfigError& e) {
    rethrow_under_megatron(e);
  }
  if (megatron.tensor_model_parallel_size > 1 || megatron.pipeline_model_parallel_size > 1) {
    const model::ModelConfig shape = model_shape(config.model);
    const std::string where =
        config.model.path ? fmt::format(" in {}/config.json", *config.model.path) : std::string(" in model.config");
    try {
      model::check_tp_divides(shape, megatron.tensor_model_parallel_size);
    } catch (const ConfigError& e) {
      rethrow_under_megatron(e, where);
    }
    try {
      (void)megatron.pipeline_layout(shape.num_hidden_layers);
    } catch (const ConfigError& e) {
      rethrow_under_megatron(e, where);
    }
  }
  check_batch_splits(config.data.train_batch_size, num_dp_ranks);
}

std::vector<data::Example> dp_share(std::vector<data::Example> global_batch, const dist::ProcessGroup& dp) {
  check_batch_splits(int64_t(global_batch.size()), dp.size());
  const int64_t share = int64_t(global_batch.size()) / dp.size(), first = dp.rank() * share;
  return {std::make_move_iterator(global_batch.begin() + first),
          std::make_move_iterator(global_batch.begin() + first + share)};
}

}  // namespace rf::trainer

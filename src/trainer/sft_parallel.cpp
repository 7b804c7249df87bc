#include "trainer/sft_parallel.h"

#include <fmt/format.h>

#include <filesystem>
#include <iterator>
#include <optional>

#include "config/yaml_json.h"
#include "core/error.h"
#include "engine/parallel_setup.h"
#include "engine/pipeline_stage.h"
#include "model/param_layout.h"

namespace rf::trainer {
namespace {

void check_batch_splits(int64_t num_examples, int64_t num_dp_ranks) {
  if (num_examples % num_dp_ranks != 0)
    throw ConfigError("data.train_batch_size", fmt::format("{} examples do not split over {} data-parallel ranks",
                                                           num_examples, num_dp_ranks));
}

// The layer checks key their errors by the megatron block's own keys; the user wrote them under
// `megatron.`. `context` says which model a check looked at, or which count.
[[noreturn]] void rethrow_under_megatron(const ConfigError& error, const std::string& context = "") {
  throw ConfigError("megatron." + error.key_path(), error.detail() + context);
}

std::string model_source(const ModelSection& m) {
  return m.path ? fmt::format(" in {}/config.json", *m.path) : std::string(" in model.config");
}

// The shape of the model the run will build, before the tokenizer is read (its vocab_size may be a
// stand-in: no layout rule reads it). A bad model.config is keyed as the run keys it (model.config.<field>).
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

model::PipelineSplit split_of(const SftConfig& config, const model::ModelConfig& shape) {
  try {
    return config.megatron.pipeline_layout(shape.num_hidden_layers);
  } catch (const ConfigError& e) {
    rethrow_under_megatron(e, model_source(config.model));
  }
}

// An interleaved schedule takes only some micro-batch counts (ScheduleShape::validate); a step's count is
// known here, so a config the engine would refuse at its first step is refused before the run.
void check_step_schedule(const SftConfig& config, const model::PipelineSplit& split, int64_t num_dp_ranks) {
  const int64_t num_microbatches = num_microbatches_per_step(config.data, num_dp_ranks);
  try {
    config.megatron.schedule_shape(split, num_microbatches).validate();
  } catch (const ConfigError& e) {
    rethrow_under_megatron(e, fmt::format("; a step has {} micro-batches per data-parallel rank (data.train_batch_size "
                                          "{} over {} data-parallel ranks, data.micro_batch_size_per_gpu {} each)",
                                          num_microbatches, config.data.train_batch_size, num_dp_ranks,
                                          config.data.micro_batch_size_per_gpu));
  }
}

}  // namespace

model::PipelineSplit pipeline_split(const SftConfig& config) { return split_of(config, model_shape(config.model)); }

int64_t num_microbatches_per_step(const data::DataConfig& data, int64_t num_dp_ranks) {
  const int64_t share = data.train_batch_size / num_dp_ranks;
  return (share + data.micro_batch_size_per_gpu - 1) / data.micro_batch_size_per_gpu;
}

void check_parallel_layout(const SftConfig& config, int world_size) {
  const engine::EngineConfig& megatron = config.megatron;
  int64_t num_dp_ranks = 0;
  try {
    num_dp_ranks = dist::RankLayout(engine::parallel_dims(megatron, world_size)).data_parallel_size();
  } catch (const ConfigError& e) {
    rethrow_under_megatron(e);
  }
  std::optional<model::PipelineSplit> split;
  if (megatron.tensor_model_parallel_size > 1 || megatron.splits_layers() || megatron.context_parallel_size > 1 ||
      megatron.expert_model_parallel_size > 1) {
    const model::ModelConfig shape = model_shape(config.model);
    try {
      model::check_tp_divides(shape, megatron.tp_shard(0));
      engine::check_context_parallel(megatron, shape);
      engine::check_expert_parallel(megatron, shape);
      engine::check_moe_training(megatron, shape);
    } catch (const ConfigError& e) {
      rethrow_under_megatron(e, model_source(config.model));
    }
    if (megatron.splits_layers()) split = split_of(config, shape);
  }
  check_batch_splits(config.data.train_batch_size, num_dp_ranks);
  if (split) check_step_schedule(config, *split, num_dp_ranks);
}

std::vector<data::Example> dp_share(std::vector<data::Example> global_batch, const dist::ProcessGroup& dp) {
  check_batch_splits(int64_t(global_batch.size()), dp.size());
  const int64_t share = int64_t(global_batch.size()) / dp.size(), first = dp.rank() * share;
  return {std::make_move_iterator(global_batch.begin() + first),
          std::make_move_iterator(global_batch.begin() + first + share)};
}

}  // namespace rf::trainer

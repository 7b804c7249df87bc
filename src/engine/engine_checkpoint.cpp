// TrainEngine's checkpoint: what makes a resumed run continue bit for bit.
#include <nlohmann/json.hpp>

#include "engine/train_engine.h"

namespace rf::engine {
namespace {

std::vector<checkpoint::ShardedTensor> by_name(const model::ParamLayout& layout, TensorView flat,
                                              const std::string& prefix) {
  std::vector<checkpoint::ShardedTensor> shards;
  for (const model::ParamEntry& e : layout.entries())
    shards.push_back(checkpoint::whole_tensor(prefix + e.name, flat.slice(0, e.offset, e.shape.numel()).reshape(e.shape)));
  return shards;
}

// The optimizer state is stored laid out like the parameters; a distributed optimizer holds only its
// DP shard of it, which needs the sharded checkpoint format (issue #6) to be written and read back.
void check_unsharded(const optim::BucketPlan& plan, const char* what) {
  if (plan.sharded())
    throw ConfigError("use_distributed_optimizer",
                      fmt::format("{} a checkpoint of an optimizer sharded over {} DP ranks is not supported yet",
                                  what, plan.num_shards()));
}

void read_by_name(const checkpoint::CheckpointReader& reader, const std::string& component,
                  const model::ParamLayout& layout, TensorView flat, const std::string& prefix) {
  for (const model::ParamEntry& e : layout.entries())
    reader.read_tensor(component, prefix + e.name, flat.slice(0, e.offset, e.shape.numel()).reshape(e.shape));
}

}  // namespace

void TrainEngine::save_checkpoint(checkpoint::CheckpointWriter& writer, const std::string& component) const {
  check_unsharded(bucket_plan_, "saving");
  const model::ParamLayout& layout = master_.layout();
  writer.add_tensors(component, "model", by_name(layout, master_.flat(), ""));
  auto moments = by_name(layout, optimizer_.exp_avg(), "exp_avg.");
  auto second = by_name(layout, optimizer_.exp_avg_sq(), "exp_avg_sq.");
  moments.insert(moments.end(), second.begin(), second.end());
  writer.add_tensors(component, "optimizer", moments);
  writer.add_json(component, "engine_state",
                  nlohmann::json{{"optimizer_steps", optimizer_.num_steps()},
                                 {"scheduler_steps", scheduler_.num_steps()},
                                 {"model_config", model_config_.to_json()}});
}

void TrainEngine::load_checkpoint(const checkpoint::CheckpointReader& reader, const std::string& component) {
  check_unsharded(bucket_plan_, "loading");
  const model::ParamLayout& layout = master_.layout();
  read_by_name(reader, component, layout, master_.flat(), "");
  read_by_name(reader, component, layout, optimizer_.exp_avg(), "exp_avg.");
  read_by_name(reader, component, layout, optimizer_.exp_avg_sq(), "exp_avg_sq.");
  const nlohmann::json state = reader.read_json(component, "engine_state");
  try {
    optimizer_.set_num_steps(state.at("optimizer_steps").get<int64_t>());
    scheduler_.set_num_steps(state.at("scheduler_steps").get<int64_t>());
  } catch (const nlohmann::json::exception& e) {
    throw IoError(reader.step_dir(), fmt::format("{}/engine_state: {}", component, e.what()));
  }
  sync_compute_weights();
  grads_.zero();
  grad_reducer_.reset();
  grads_zeroed_ = true;
  grads_reduced_ = false;
}

}  // namespace rf::engine

// TrainEngine's checkpoint: what makes a resumed run continue bit for bit, at any parallel layout
// (checkpoint_shards.h says which rank saves and reads which boxes).
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "engine/checkpoint_shards.h"
#include "engine/train_engine.h"

namespace rf::engine {
namespace {

// "model" on one rank; "model-tp1", "optimizer-pp1-tp0-dp3", ... when several ranks each write a part.
std::string file_stem(const char* what, const dist::ProcessGroup& pp, const dist::ProcessGroup& tp,
                      const dist::ProcessGroup* dp) {
  std::string stem = what;
  if (pp.size() > 1) stem += fmt::format("-pp{}", pp.rank());
  if (tp.size() > 1) stem += fmt::format("-tp{}", tp.rank());
  if (dp && dp->size() > 1) stem += fmt::format("-dp{}", dp->rank());
  return stem;
}

void add_nonempty(checkpoint::CheckpointWriter& writer, const std::string& component, const std::string& stem,
                  const std::vector<checkpoint::ShardedTensor>& shards) {
  if (!shards.empty()) writer.add_tensors(component, stem, shards);
}

void read_all(const checkpoint::CheckpointReader& reader, const std::string& component,
              const std::vector<checkpoint::ShardedTensor>& shards) {
  for (const checkpoint::ShardedTensor& s : shards) reader.read_tensor(component, s.name, s.local, s.global_offset);
}

void expect_all(const checkpoint::CheckpointReader& reader, const std::string& component,
                const std::vector<checkpoint::ShardedTensor>& shards) {
  for (const checkpoint::ShardedTensor& s : shards)
    reader.expect_tensor(component, s.name, s.global_shape, s.local.dtype());
}

// The saved model's config.json fields that differ from the run's, as "key saved -> run" (empty: none).
std::string model_config_changes(const nlohmann::json& saved, const nlohmann::json& run) {
  std::string changes;
  for (const auto& [key, value] : run.items())
    if (!saved.contains(key) || saved.at(key) != value)
      changes += fmt::format("{}{} {} -> {}", changes.empty() ? "" : ", ", key,
                             saved.contains(key) ? saved.at(key).dump() : "(absent)", value.dump());
  return changes;
}

}  // namespace

void TrainEngine::save_checkpoint(checkpoint::CheckpointWriter& writer, const std::string& component) const {
  // The writer may span more ranks than the engine (an RL step saved by the world, each role adding its
  // parts), never fewer.
  RF_CHECK(writer.num_writers() >= parallel_.role().size(),
           "saving {}: the checkpoint writer has {} ranks but the engine runs on {}: every rank of the engine "
           "writes its part of the step",
           component, writer.num_writers(), parallel_.role().size());
  onload_for({.params = true, .optimizer = true});
  complete_param_gather(master_.layout().total_numel());
  cache_master();
  const model::ParamLayout& layout = master_.layout();
  const std::string what = fmt::format("saving {} to {}/global_step_{}", component, writer.root_dir(), writer.step());
  refuse_non_finite(entry_parts(layout, master_.flat()), layout, "", parallel_.role(), what);
  for (const auto& [moment, prefix] : {std::pair{optimizer_.exp_avg(), "exp_avg."},
                                       std::pair{optimizer_.exp_avg_sq(), "exp_avg_sq."}})
    refuse_non_finite(fragment_parts(bucket_plan_, moment, FragmentIn::shard), layout, prefix, parallel_.role(), what);
  const bool first_dp = parallel_.dp_cp().rank() == 0;  // CP ranks are replicas too
  const Held replicas = parallel_.tp().rank() == 0 ? Held::saved_by_tp_rank0 : Held::saved_by_other_tp_rank;
  if (first_dp) add_nonempty(writer, component, file_stem("model", parallel_.pp(), parallel_.tp(), nullptr),
                             param_shards(layout, master_.flat(), "", replicas));
  if (first_dp || bucket_plan_.sharded()) {
    const dist::ProcessGroup* dp = bucket_plan_.sharded() ? &parallel_.dp_cp() : nullptr;
    auto moments = optimizer_shards(layout, bucket_plan_, optimizer_.exp_avg(), "exp_avg.", replicas);
    const auto second = optimizer_shards(layout, bucket_plan_, optimizer_.exp_avg_sq(), "exp_avg_sq.", replicas);
    moments.insert(moments.end(), second.begin(), second.end());
    add_nonempty(writer, component, file_stem("optimizer", parallel_.pp(), parallel_.tp(), dp), moments);
  }
  if (parallel_.role().rank() == 0) {
    const dist::RankLayout& ranks = parallel_.layout();
    writer.add_json(component, "engine_state",
                    nlohmann::json{{"optimizer_steps", optimizer_.num_steps()},
                                   {"scheduler_steps", scheduler_.num_steps()},
                                   {"skipped_steps", num_skipped_steps_},
                                   {"model_config", model_config_.to_json()},
                                   // For people reading the folder: any layout loads it.
                                   {"saved_by", {{"tensor_model_parallel_size", parallel_.tp().size()},
                                                 {"pipeline_model_parallel_size", parallel_.pp().size()},
                                                 {"data_parallel_size", parallel_.dp().size()},
                                                 {"context_parallel_size", parallel_.cp().size()},
                                                 {"use_distributed_optimizer", bucket_plan_.sharded()},
                                                 {"world_size", ranks.dims().world_size}}}});
  }
}

void TrainEngine::load_checkpoint(const checkpoint::CheckpointReader& reader, const std::string& component) {
  onload_for(OffloadSet::all());  // it writes every part (the gradients are zeroed)
  complete_param_gather(master_.layout().total_numel());  // nothing may land on the loaded weights later
  cache_master();  // reuse_fp32_param: the weights of a refused checkpoint stay as they were
  const model::ParamLayout& layout = master_.layout();
  const auto params = param_shards(layout, master_.flat(), "", Held::all);
  const auto exp_avg = optimizer_shards(layout, bucket_plan_, optimizer_.exp_avg(), "exp_avg.", Held::all);
  const auto exp_avg_sq =
      optimizer_shards(layout, bucket_plan_, optimizer_.exp_avg_sq(), "exp_avg_sq.", Held::all);
  // Everything is checked before anything is read, so a refused checkpoint leaves the engine as it was.
  const nlohmann::json state = reader.read_json(component, "engine_state");
  try {
    expect_all(reader, component, params);
  } catch (const IoError& error) {
    // Say which model keys differ when the saved config says so: the likely cause, in the user's terms.
    const std::string changes =
        state.contains("model_config") ? model_config_changes(state.at("model_config"), model_config_.to_json()) : "";
    if (changes.empty()) throw;
    throw IoError(reader.step_dir(), fmt::format("{} (model config saved -> run: {})", error.detail(), changes));
  }
  expect_all(reader, component, exp_avg);
  expect_all(reader, component, exp_avg_sq);
  read_all(reader, component, params);
  read_all(reader, component, exp_avg);
  read_all(reader, component, exp_avg_sq);
  try {
    optimizer_.set_num_steps(state.at("optimizer_steps").get<int64_t>());
    scheduler_.set_num_steps(state.at("scheduler_steps").get<int64_t>());
    num_skipped_steps_ = state.value("skipped_steps", int64_t(0));  // absent before nan_policy existed
  } catch (const nlohmann::json::exception& e) {
    throw IoError(reader.step_dir(), fmt::format("{}/engine_state: {}", component, e.what()));
  }
  sync_compute_weights();
  zero_step_gradients();
}

}  // namespace rf::engine

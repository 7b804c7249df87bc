#include "rl/trainer/hybrid_engine.h"

#include <fmt/format.h>

#include <algorithm>

#include "engine/offload_set.h"
#include "engine/parallel_setup.h"
#include "kernels/gemm_choice.h"
#include "model/hf_folder.h"

namespace rf::rl {
namespace {

// The rollout's own layout: its TP size over its ranks, no sequence parallel.
engine::EngineConfig rollout_layout(const RolloutSection& rollout) {
  engine::EngineConfig layout;
  layout.tensor_model_parallel_size = rollout.tensor_model_parallel_size;
  layout.dtype = rollout.dtype;
  return layout;
}

engine::rollout::RolloutConfig rollout_config(const RlConfig& config) {
  engine::rollout::RolloutConfig c = config.actor_rollout_ref.rollout.engine;
  c.device_memory_bytes = int64_t(config.resources.device_memory_gb * double(int64_t(1) << 30));
  c.limits.max_model_len = config.prompt_length() + config.response_length();
  return c;
}

// A role's parallel context over its ranks; the others build no engine for it and get the single-process
// context.
dist::ParallelContext role_context(const engine::EngineConfig& layout, RoleRanks& role) {
  if (!role.member()) return dist::ParallelContext::single_process();
  return engine::make_parallel_context(layout, role.group());
}

optim::OptimConfig with_total_steps(optim::OptimConfig optim, const RlConfig& config) {
  optim.total_training_steps = config.trainer.total_training_steps;
  return optim;
}

}  // namespace

RoleRanks::RoleRanks(dist::ProcessGroup& world, const std::vector<int>& ranks, const std::string& name)
    : world_(world), member_(true), root_(0) {
  const bool all = ranks.empty() || int(ranks.size()) == world.size();
  if (all) return;  // no sub-communicator: the role is the world
  ranks_ = ranks;
  member_ = std::find(ranks.begin(), ranks.end(), world.rank()) != ranks.end();
  root_ = ranks.front();
  own_ = world.split(member_ ? 0 : -1, world.rank(), name);
}

bool RoleRanks::contains(const RoleRanks& other) const {
  if (ranks_.empty()) return true;
  if (other.ranks_.empty()) return false;
  return std::includes(ranks_.begin(), ranks_.end(), other.ranks_.begin(), other.ranks_.end());
}

model::HfModelFolder critic_hf_folder(const RlConfig& config) {
  const std::string dir = config.critic_model_path();
  model::HfModelFolder folder = model::HfModelFolder::open(dir);
  const model::ModelConfig& c = folder.config;
  if (c.head == model::HeadKind::score || (c.head == model::HeadKind::value && c.num_labels != 1))
    throw ConfigError("critic.model.path",
                      fmt::format("'{}' is a {} model with {} labels: expected an LM, or a value model "
                                  "(*ForTokenClassification) with one label",
                                  dir, model::head_name(c.head), c.num_labels));
  if (c.head == model::HeadKind::lm) folder.set_head(model::HeadKind::value, 1);
  return folder;
}

HybridEngine::HybridEngine(const RlConfig& config, const model::ModelConfig& model_config, dist::ProcessGroup& world,
                           MemoryTracker& tracker, const RolePlacement& placement, const Capacities& capacities)
    : config_(config),
      world_(world),
      // Deterministic mode: every path batch-invariant (the rollout's always is).
      kernels_(kernels::run_kernel_config(config.trainer.deterministic)),
      rollout_kernels_(kernels::run_kernel_config(true)),
      weight_sync_(world, placement.actor, placement.rollout,
                   config.actor_rollout_ref.rollout.checkpoint_engine.update_weights_bucket_megabytes << 20) {
  const auto follows_actor = [&](const std::vector<int>& ranks) { return ranks.empty() ? placement.actor : ranks; };
  ranks_.push_back(std::make_unique<RoleRanks>(world, placement.actor, "actor"));
  ranks_.push_back(std::make_unique<RoleRanks>(world, placement.rollout, "rollout"));
  ranks_.push_back(std::make_unique<RoleRanks>(world, follows_actor(placement.ref), "ref"));
  ranks_.push_back(std::make_unique<RoleRanks>(world, follows_actor(placement.critic), "critic"));
  ranks_.push_back(std::make_unique<RoleRanks>(world, follows_actor(placement.reward_model), "reward_model"));
  // The contexts are filled once, before any engine keeps a reference to one.
  const ActorSection& a = config.actor_rollout_ref.actor;
  const RolloutSection& r = config.actor_rollout_ref.rollout;
  parallel_.reserve(5);
  parallel_.push_back(role_context(a.megatron, ranks(Role::actor)));
  parallel_.push_back(role_context(rollout_layout(r), ranks(Role::rollout)));
  parallel_.push_back(role_context(config.actor_rollout_ref.ref.megatron, ranks(Role::ref)));
  parallel_.push_back(config.uses_critic() ? role_context(config.critic.megatron, ranks(Role::critic))
                                           : dist::ParallelContext::single_process());
  parallel_.push_back(config.reward_model.enable ? role_context(config.reward_model.megatron, ranks(Role::reward_model))
                                                 : dist::ParallelContext::single_process());

  if (ranks(Role::actor).member())
    actor_ = std::make_unique<engine::TrainEngine>(a.megatron, with_total_steps(a.optim, config), model_config,
                                                   kernels_, parallel(Role::actor), tracker, capacities.actor);
  // The rollout is the actor's ranks with the actor's TP and compute dtype, and the actor holds the whole
  // model (no pipeline stages): it reads the actor's weights in place, so the sync copies nothing and no
  // second copy is resident. With actor PP the rollout gets its own whole copy, and the pipeline's stages are
  // rollout replicas (MEGATRON_PP_AS_DP_PROTO). Decided from the config alone, the
  // same on every rank (the trainer's sync decision is collective).
  const DType rollout_dtype = engine::EngineConfig{.dtype = r.dtype}.compute_dtype();
  const bool shares_actor_weights = ranks(Role::actor).contains(ranks(Role::rollout)) &&
                                    ranks(Role::rollout).contains(ranks(Role::actor)) &&
                                    r.tensor_model_parallel_size == a.megatron.tensor_model_parallel_size &&
                                    a.megatron.pipeline_model_parallel_size == 1 &&
                                    rollout_dtype == a.megatron.compute_dtype();
  drops_rollout_copy_ = !shares_actor_weights && weight_sync_.colocated() && r.free_cache_engine;
  if (ranks(Role::rollout).member()) {
    rollout_ = std::make_unique<engine::rollout::RolloutEngine>(
        model_config, rollout_dtype, rollout_config(config), rollout_kernels_, parallel(Role::rollout), tracker,
        shares_actor_weights ? &actor_->compute_weights() : nullptr);
    // Colocated with training, the KV cache exists only while generating (enter_generate): released
    // before the other roles' engines take their memory.
    if (r.free_cache_engine) rollout_->release();
  }
  if (config.uses_reference() && ranks(Role::ref).member())
    ref_ = std::make_unique<engine::InferEngine>(config.actor_rollout_ref.ref.megatron, model_config, kernels_,
                                                 parallel(Role::ref), tracker, capacities.ref);
  const RewardModelSection& rm = config.reward_model;
  if (rm.enable && ranks(Role::reward_model).member())
    reward_model_ = std::make_unique<engine::InferEngine>(rm.megatron, model::HfModelFolder::open(*rm.model.path).config,
                                                          kernels_, parallel(Role::reward_model), tracker,
                                                          capacities.reward_model);
  if (config.uses_critic() && ranks(Role::critic).member())
    critic_ = std::make_unique<engine::TrainEngine>(config.critic.megatron, with_total_steps(config.critic.optim, config),
                                                    critic_hf_folder(config).config, kernels_, parallel(Role::critic),
                                                    tracker, capacities.critic);
}

HybridEngine::~HybridEngine() = default;

bool HybridEngine::runs(Role role) const {
  switch (role) {
    case Role::actor: return actor_ != nullptr;
    case Role::rollout: return rollout_ != nullptr;
    case Role::ref: return ref_ != nullptr;
    case Role::critic: return critic_ != nullptr;
    case Role::reward_model: return reward_model_ != nullptr;
  }
  return false;
}

void HybridEngine::enter_generate() {
  if (!rollout_) return;
  // Checked before the KV cache comes back, so a refused generation leaves the engine as it was.
  if (rollout_->weights_dropped())
    throw Error("rollout: generate on dropped weights (training dropped the rollout's own copy; sync_weights "
                "rebuilds it)");
  // Weights read in place must be on the device and complete (the actor may have offloaded them).
  if (rollout_->shares_weights()) (void)actor_->compute_weights();
  if (config_.actor_rollout_ref.rollout.free_cache_engine) rollout_->resume();
}

void HybridEngine::leave_generate() {
  if (rollout_ && config_.actor_rollout_ref.rollout.free_cache_engine) rollout_->release();
}

void HybridEngine::leave_log_prob() {
  const engine::EngineConfig& actor = config_.actor_rollout_ref.actor.megatron;
  if (actor_) actor_->offload({.params = actor.param_offload, .activations = actor.release_activations});
}

void HybridEngine::leave_ref() {
  if (ref_) ref_->offload(engine::configured_offload(config_.actor_rollout_ref.ref.megatron));
}

void HybridEngine::leave_reward_model() {
  if (reward_model_) reward_model_->offload(engine::configured_offload(config_.reward_model.megatron));
}

void HybridEngine::leave_values() {
  const engine::EngineConfig& critic = config_.critic.megatron;
  if (critic_)
    critic_->offload({.params = critic.param_offload, .activations = critic.release_activations});
}

void HybridEngine::leave_update_critic() {
  if (critic_) critic_->offload(engine::configured_offload(config_.critic.megatron));
}

void HybridEngine::enter_training() {
  if (drops_rollout_copy_ && rollout_ && !rollout_->weights_dropped()) rollout_->drop_weights();
}

Metrics HybridEngine::sync_weights() {
  engine::TrainEngine* actor = actor_.get();
  engine::rollout::RolloutEngine* rollout = rollout_.get();
  const WeightSync::Export export_actor = [&](const WeightSync::Sink& sink) { actor->export_weights(sink); };
  // A rollout that reads the actor's weights in place has them already: the sync only checksums the export.
  const WeightSync::Sink load_rollout = [&](const std::string& name, TensorView full) {
    if (!rollout->shares_weights()) rollout->update_weights(name, full);
  };
  const WeightSync::Report report =
      weight_sync_.sync(actor ? &export_actor : nullptr, rollout ? &load_rollout : nullptr);
  if (actor) actor->offload(engine::configured_offload(config_.actor_rollout_ref.actor.megatron));
  const double bytes = world_.all_reduce_scalar(double(report.bytes_received), dist::ReduceOp::sum);
  // The checksum's low 48 bits: an integer a double holds exactly, enough to tell two syncs apart.
  return {{"perf/update_weights_bytes", bytes},
          {"rollout/weights_checksum", double(report.checksum & ((uint64_t(1) << 48) - 1))}};
}

}  // namespace rf::rl

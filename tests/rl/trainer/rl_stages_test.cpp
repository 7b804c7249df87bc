// Every stage of RlRoles in one process, without the binary, each checked against something it does not
// compute itself: generate against the prompts generated one at a time and against the actor's log-probs;
// compute_ref against the actor's old log-probs (both start from one HF folder); compute_values and
// compute_rm_scores against an InferEngine over the same folder (a *ForTokenClassification and a one-label
// *ForSequenceClassification one) run response by response; update_actor and update_critic against the
// losses known by hand at the first step (ratio 1; values one below the returns) and the direction the
// step moves the log-probs and values; sync_weights against the checksum of the actor's export, and the
// rollout's log-probs after an update (reading the actor's weights in place, or a bf16 copy of its own).
// The same stages under mpirun against one process: rl_stages_mpi_test.cpp.
#include <gtest/gtest.h>

#include <cmath>

#include "rl/trainer/rl_roles.h"
#include "rl/trainer/weight_sync.h"
#include "dist/process_group.h"
#include "engine/infer_engine.h"
#include "kernels/gemm_choice.h"
#include "rl_roles_fixture.h"
#include "support/test_support.h"
#include "support/scratch_folder.h"

namespace rf::rl {
namespace {

using testing::eight_responses;
using testing::four_prompts;
using testing::grpo_config;
using testing::kEos;
using testing::kNumCandidates;
using testing::sampling;
using testing::set_advantages;
using testing::tiny_model;
using testing::weight_values;
using testing::write_tiny_folder;

class RlStages : public rf::testing::ScratchFolderTest {
 protected:
  dist::SingleProcessGroup world_{"world"};
  MemoryTracker tracker_;
};

// Token-mean of the advantages: -pg_loss at ratio 1.
double mean_advantage(const RlBatch& batch) {
  double sum = 0, tokens = 0;
  for (const RlResponse& r : batch)
    for (const float a : r.advantages) sum += a, tokens += 1;
  return sum / tokens;
}

double max_abs_difference(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double d = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) d = std::max(d, std::abs(double(a[i]) - double(b[i])));
  return d;
}

// A one-response micro-batch's per-position "values" from `engine`: one per token of prompt + response.
std::vector<float> values_of_one(engine::InferEngine& engine, const RlBatch& batch, int64_t i) {
  std::vector<engine::TensorMap> mbs;
  mbs.push_back(make_micro_batch(batch, {i}, LossColumns::none, false));
  const std::vector<engine::TensorMap> out = engine.compute_values(mbs);
  const TensorView values_N = out[0].get("values");
  const RlResponse& r = batch[size_t(i)];
  EXPECT_EQ(values_N.numel(), int64_t(r.prompt.size() + r.response.size()));
  return {values_N.data<float>(), values_N.data<float>() + values_N.numel()};
}

// A critic's values at the response's tokens: token t's at the position predicting it, prompt + t - 1
// (verl's values[:, -response_length - 1:-1]).
std::vector<float> response_values(const std::vector<float>& values, const RlResponse& r) {
  const auto first = values.begin() + std::ptrdiff_t(r.prompt.size()) - 1;
  return {first, first + std::ptrdiff_t(r.response.size())};
}

// An InferEngine over the HF folder `dir` in f32 with batch-invariant kernels, as the roles run theirs.
struct DirectEngine {
  kernels::KernelRegistry kernels{kernels::run_kernel_config(true)};
  dist::ParallelContext parallel = dist::ParallelContext::single_process();
  MemoryTracker tracker;
  engine::InferEngine engine;
  DirectEngine(const std::string& dir, const model::ModelConfig& config)
      : engine(engine::EngineConfig{.dtype = "float32"}, config, kernels, parallel, tracker, 64) {
    engine.load_hf_weights(dir);
  }
};

TEST_F(RlStages, GenerateGivesNResponsesPerPromptOrderedByPromptThenSample) {
  const RlConfig config = grpo_config();
  RlRoles roles(config, tiny_model(), world_, tracker_);
  roles.actor().init_random_weights(3);
  const std::vector<RlPrompt> prompts = four_prompts();
  const int64_t eos[] = {kEos};
  RlBatch batch = roles.generate(prompts, 100, sampling(config), eos, kNumCandidates);

  ASSERT_EQ(batch.size(), 8u);  // 4 prompts x n = 2
  bool samples_differ = false;
  for (size_t i = 0; i < batch.size(); ++i) {
    const RlResponse& r = batch[i];
    SCOPED_TRACE(::testing::Message() << "response " << i);
    EXPECT_EQ(r.group, int64_t(i / 2));
    EXPECT_EQ(r.prompt, prompts[i / 2].tokens);
    ASSERT_GE(r.response.size(), 1u);
    EXPECT_LE(int64_t(r.response.size()), config.response_length());
    for (size_t t = 0; t < r.response.size(); ++t) {
      EXPECT_LT(r.response[t], kNumCandidates);
      if (t + 1 < r.response.size()) {
        EXPECT_NE(r.response[t], kEos) << "eos before the end";
      }
    }
    // Stopped by eos, or truncated at the length limit.
    if (r.truncated) {
      EXPECT_EQ(int64_t(r.response.size()), config.response_length());
    } else {
      EXPECT_EQ(r.response.back(), kEos);
    }
    EXPECT_EQ(r.rollout_log_probs.size(), r.response.size());
    if (i % 2 == 1 && r.response != batch[i - 1].response) samples_differ = true;
  }
  EXPECT_TRUE(samples_differ) << "the two samples of every prompt are the same: the sample index keys nothing";

  // Each prompt alone, numbered as in the step, gives the same two responses: the order is prompt, then sample.
  for (size_t p = 0; p < prompts.size(); ++p) {
    const RlBatch alone = roles.generate(std::span(prompts).subspan(p, 1), 100 + p, sampling(config), eos, kNumCandidates);
    ASSERT_EQ(alone.size(), 2u);
    for (size_t s = 0; s < 2; ++s) {
      EXPECT_EQ(alone[s].response, batch[2 * p + s].response) << "prompt " << p << " sample " << s;
      EXPECT_EQ(alone[s].group, 0);
    }
  }

  // The rollout sampled from the actor's weights: the actor's log-probs of the samples are the rollout's
  // (another engine, other kernels: to rounding).
  roles.compute_log_prob(batch);
  for (size_t i = 0; i < batch.size(); ++i)
    EXPECT_LT(max_abs_difference(batch[i].old_log_probs, batch[i].rollout_log_probs), 1e-4) << "response " << i;
}

TEST_F(RlStages, TheReferenceFromTheActorsFolderGivesTheActorsLogProbs) {
  EXPECT_FALSE(RlRoles(grpo_config(), tiny_model(), world_, tracker_).has_ref());  // no KL term, no reference
  RlConfig config = grpo_config();
  config.actor_rollout_ref.actor.loss.use_kl_loss = true;
  config.actor_rollout_ref.actor.optim.lr = 1e-3;
  write_tiny_folder(path("lm"), model::HeadKind::lm, 5);
  RlRoles roles(config, tiny_model(), world_, tracker_);
  ASSERT_TRUE(roles.has_ref());
  roles.load_initial_weights(path("lm"));
  RlBatch batch = eight_responses();
  roles.compute_log_prob(batch);
  roles.compute_ref(batch);
  EXPECT_NE(batch[0].ref_log_prob[0], batch[0].ref_log_prob[1]);  // the folder's weights, not uniform ones
  for (size_t i = 0; i < batch.size(); ++i) {
    ASSERT_EQ(batch[i].ref_log_prob.size(), batch[i].response.size());
    EXPECT_EQ(batch[i].ref_log_prob, batch[i].old_log_probs) << "response " << i;
  }

  // The reference is its own copy: an actor update moves the actor's log-probs, not the reference's.
  const RlBatch before = batch;
  set_advantages(batch);
  roles.update_actor(batch, 0);
  roles.compute_log_prob(batch);
  roles.compute_ref(batch);
  for (size_t i = 0; i < batch.size(); ++i) {
    EXPECT_EQ(batch[i].ref_log_prob, before[i].ref_log_prob) << "response " << i;
    EXPECT_NE(batch[i].old_log_probs, before[i].old_log_probs) << "response " << i;
  }
}

TEST_F(RlStages, ValuesAreTheValueModelsAtEachResponseToken) {
  RlConfig config = grpo_config();
  config.algorithm.adv_estimator = "gae";
  config.critic.model.path = path("critic");
  write_tiny_folder(path("lm"), model::HeadKind::lm, 5);
  const model::ModelConfig critic_model = write_tiny_folder(path("critic"), model::HeadKind::value, 6);
  RlRoles roles(config, tiny_model(), world_, tracker_);
  ASSERT_TRUE(roles.has_critic());
  roles.load_initial_weights(path("lm"));
  RlBatch batch = eight_responses();
  roles.compute_values(batch);

  DirectEngine direct(path("critic"), critic_model);
  for (size_t i = 0; i < batch.size(); ++i) {
    ASSERT_EQ(batch[i].values.size(), batch[i].response.size());
    EXPECT_EQ(batch[i].values, response_values(values_of_one(direct.engine, batch, int64_t(i)), batch[i]))
        << "response " << i;
  }
  EXPECT_NE(batch[0].values[0], batch[0].values[1]);
}

TEST_F(RlStages, RewardModelScoresAreItsOutputAtTheLastToken) {
  RlConfig config = grpo_config();
  config.reward_model.enable = true;
  config.reward_model.model.path = path("rm");
  write_tiny_folder(path("lm"), model::HeadKind::lm, 5);
  const model::ModelConfig rm_model = write_tiny_folder(path("rm"), model::HeadKind::score, 7);
  ASSERT_EQ(model::HfModelFolder::open(path("rm")).config_json["architectures"][0], "Qwen3ForSequenceClassification");
  RlRoles roles(config, tiny_model(), world_, tracker_);
  ASSERT_TRUE(roles.has_reward_model());
  roles.load_initial_weights(path("lm"));
  RlBatch batch = eight_responses();
  for (RlResponse& r : batch) {
    r.score = 5;  // the reward function's, replaced
    r.reward_extra["acc"] = 1;
  }
  const RlBatch sequences = batch;
  roles.compute_rm_scores(batch, sequences);

  DirectEngine direct(path("rm"), rm_model);
  for (size_t i = 0; i < batch.size(); ++i) {
    // The last token's (the response's last, eos or not): HF's sequence classifiers read it.
    EXPECT_EQ(float(batch[i].score), values_of_one(direct.engine, batch, int64_t(i)).back()) << "response " << i;
    EXPECT_TRUE(batch[i].reward_extra.empty()) << "response " << i;
  }
  EXPECT_NE(batch[0].score, batch[1].score);
}

TEST_F(RlStages, AnActorUpdateMovesTheLogProbsTheAdvantagesFavour) {
  RlConfig config = grpo_config();
  config.actor_rollout_ref.actor.optim.lr = 1e-3;
  RlRoles roles(config, tiny_model(), world_, tracker_);
  roles.actor().init_random_weights(3);
  RlBatch batch = eight_responses();
  roles.compute_log_prob(batch);
  set_advantages(batch);
  const std::vector<float> weights_before = weight_values(roles.actor().master_weights());
  const Metrics m = roles.update_actor(batch, 0);

  for (const char* key : {"actor/pg_loss", "actor/pg_clipfrac", "actor/grad_norm", "actor/lr"}) {
    ASSERT_TRUE(m.contains(key)) << key;
    EXPECT_TRUE(std::isfinite(m.at(key))) << key;
  }
  // The first step of the first update: the log-probs are the old ones (ratio 1), so the PPO loss is
  // -(token-mean advantage) and nothing is clipped.
  EXPECT_NEAR(m.at("actor/pg_loss"), -mean_advantage(batch), 1e-6);
  EXPECT_EQ(m.at("actor/pg_clipfrac"), 0.0);
  EXPECT_GT(m.at("actor/grad_norm"), 0.0);
  EXPECT_DOUBLE_EQ(m.at("actor/lr"), 1e-3);
  EXPECT_NE(weight_values(roles.actor().master_weights()), weights_before);

  // A descent step: the favoured responses' log-probs rise against the others'.
  const RlBatch old = batch;
  roles.compute_log_prob(batch);
  double gain = 0;
  for (size_t i = 0; i < batch.size(); ++i)
    for (size_t t = 0; t < batch[i].response.size(); ++t)
      gain += batch[i].advantages[t] * (batch[i].old_log_probs[t] - old[i].old_log_probs[t]);
  EXPECT_GT(gain, 0.0);
}

TEST_F(RlStages, ACriticUpdateMovesTheValuesTowardTheReturns) {
  RlConfig config = grpo_config();
  config.algorithm.adv_estimator = "gae";
  config.critic.model.path = path("critic");
  config.critic.optim.lr = 1e-3;
  write_tiny_folder(path("lm"), model::HeadKind::lm, 5);
  write_tiny_folder(path("critic"), model::HeadKind::value, 6);
  RlRoles roles(config, tiny_model(), world_, tracker_);
  roles.load_initial_weights(path("lm"));
  RlBatch batch = eight_responses();
  roles.compute_values(batch);
  double value_sum = 0, tokens = 0;
  for (RlResponse& r : batch) {
    r.returns.clear();
    for (const float v : r.values) r.returns.push_back(v + 1.0f), value_sum += v, tokens += 1;
  }
  const std::vector<float> weights_before = weight_values(roles.critic().master_weights());
  const Metrics m = roles.update_critic(batch, 0);

  for (const char* key : {"critic/vf_loss", "critic/vf_clipfrac", "critic/vpred_mean", "critic/grad_norm", "critic/lr"}) {
    ASSERT_TRUE(m.contains(key)) << key;
    EXPECT_TRUE(std::isfinite(m.at(key))) << key;
  }
  // Every prediction is its old value, one below the return: 0.5 * 1^2, unclipped, the values' mean.
  EXPECT_NEAR(m.at("critic/vf_loss"), 0.5, 1e-5);
  EXPECT_EQ(m.at("critic/vf_clipfrac"), 0.0);
  EXPECT_NEAR(m.at("critic/vpred_mean"), value_sum / tokens, 1e-6);
  EXPECT_GT(m.at("critic/grad_norm"), 0.0);
  EXPECT_DOUBLE_EQ(m.at("critic/lr"), 1e-3);
  EXPECT_NE(weight_values(roles.critic().master_weights()), weights_before);

  const RlBatch old = batch;
  roles.compute_values(batch);
  double rise = 0;
  for (size_t i = 0; i < batch.size(); ++i)
    for (size_t t = 0; t < batch[i].values.size(); ++t) rise += batch[i].values[t] - old[i].values[t];
  EXPECT_GT(rise / tokens, 0.0);
}

// The checksum the sync reports, computed here from the actor's export.
double export_checksum(engine::TrainEngine& actor) {
  uint64_t hash = kFnvOffset;
  actor.export_weights([&](const std::string& name, TensorView full) { hash = weight_checksum(hash, name, full); });
  return double(hash & ((uint64_t(1) << 48) - 1));
}

TEST_F(RlStages, AfterAnUpdateAndASyncTheRolloutSamplesFromTheNewWeights) {
  RlConfig config = grpo_config();
  config.actor_rollout_ref.actor.optim.lr = 1e-2;
  RlRoles roles(config, tiny_model(), world_, tracker_);
  roles.actor().init_random_weights(3);
  const Metrics first = roles.sync_weights();
  ASSERT_TRUE(first.contains("perf/update_weights_bytes"));
  ASSERT_TRUE(first.contains("rollout/weights_checksum"));
  EXPECT_EQ(first.at("perf/update_weights_bytes"), 0.0);  // one process: nothing crosses the network
  EXPECT_EQ(first.at("rollout/weights_checksum"), export_checksum(roles.actor()));

  const std::vector<RlPrompt> prompts = four_prompts();
  const int64_t eos[] = {kEos};
  RlBatch stale = roles.generate(prompts, 100, sampling(config), eos, kNumCandidates);
  RlBatch batch = eight_responses();
  roles.compute_log_prob(batch);
  set_advantages(batch);
  roles.update_actor(batch, 0);
  const Metrics second = roles.sync_weights();
  EXPECT_NE(second.at("rollout/weights_checksum"), first.at("rollout/weights_checksum"));
  EXPECT_EQ(second.at("rollout/weights_checksum"), export_checksum(roles.actor()));

  // The samples drawn before the update no longer have the actor's log-probs; those drawn after it do.
  roles.compute_log_prob(stale);
  double stale_gap = 0;
  for (const RlResponse& r : stale) stale_gap = std::max(stale_gap, max_abs_difference(r.old_log_probs, r.rollout_log_probs));
  EXPECT_GT(stale_gap, 1e-3);
  RlBatch fresh = roles.generate(prompts, 100, sampling(config), eos, kNumCandidates);
  roles.compute_log_prob(fresh);
  for (size_t i = 0; i < fresh.size(); ++i)
    EXPECT_LT(max_abs_difference(fresh[i].old_log_probs, fresh[i].rollout_log_probs), 1e-4) << "response " << i;
}

// The largest |actor's log-prob - rollout's| over a batch's tokens, the actor's computed now.
double rollout_gap(RlRoles& roles, RlBatch batch) {
  roles.compute_log_prob(batch);
  double gap = 0;
  for (const RlResponse& r : batch) gap = std::max(gap, max_abs_difference(r.old_log_probs, r.rollout_log_probs));
  return gap;
}

// A bf16 rollout keeps its own copy of the weights, which the sync rewrites: after it the rollout's
// log-probs are the updated actor's to bf16's rounding, far closer than those of the samples drawn before.
TEST_F(RlStages, ARolloutWithItsOwnWeightsSamplesFromTheNewOnesAfterTheSync) {
  RlConfig config = grpo_config();
  config.actor_rollout_ref.rollout.dtype = "bfloat16";
  config.actor_rollout_ref.actor.optim.lr = 1e-2;
  RlRoles roles(config, tiny_model(), world_, tracker_);
  ASSERT_FALSE(roles.rollout_shares_actor_weights());
  roles.actor().init_random_weights(3);
  const Metrics first = roles.sync_weights();
  EXPECT_EQ(first.at("rollout/weights_checksum"), export_checksum(roles.actor()));
  EXPECT_EQ(first.at("perf/update_weights_bytes"), 0.0);  // colocated: copied within the process

  const std::vector<RlPrompt> prompts = four_prompts();
  const int64_t eos[] = {kEos};
  const RlBatch before = roles.generate(prompts, 100, sampling(config), eos, kNumCandidates);
  const double initial_gap = rollout_gap(roles, before);  // bf16's rounding
  RlBatch batch = eight_responses();
  roles.compute_log_prob(batch);
  set_advantages(batch);
  roles.update_actor(batch, 0);
  const double stale_gap = rollout_gap(roles, before);

  const Metrics second = roles.sync_weights();
  EXPECT_NE(second.at("rollout/weights_checksum"), first.at("rollout/weights_checksum"));
  EXPECT_EQ(second.at("rollout/weights_checksum"), export_checksum(roles.actor()));
  const RlBatch synced = roles.generate(prompts, 100, sampling(config), eos, kNumCandidates);
  const double synced_gap = rollout_gap(roles, synced);
  EXPECT_LT(synced_gap, 2 * initial_gap);
  EXPECT_LT(synced_gap, stale_gap / 4);
}

// Colocated, a rollout with its own (bf16) copy drops it at the first stage after generation, not only
// for the actor's update: its device bytes go back for every training-side pass, generation is refused
// until a sync rebuilds the copy, and the trainer syncs in critic-warmup steps too (drops_rollout_copy).
TEST_F(RlStages, ARolloutsOwnCopyIsDroppedFromTheFirstTrainingStageUntilTheSync) {
  RlConfig config = grpo_config();
  config.actor_rollout_ref.rollout.dtype = "bfloat16";
  RlRoles roles(config, tiny_model(), world_, tracker_);
  ASSERT_TRUE(roles.drops_rollout_copy());
  roles.actor().init_random_weights(3);
  roles.sync_weights();
  const std::vector<RlPrompt> prompts = four_prompts();
  const int64_t eos[] = {kEos};
  (void)roles.generate(prompts, 100, sampling(config), eos, kNumCandidates);
  const int64_t with_copy = tracker_.current(MemoryTier::device, MemoryCategory::params);
  RlBatch batch = eight_responses();
  roles.compute_log_prob(batch);
  const int64_t rollout_copy_bytes = 2 * roles.actor().compute_weights().layout().total_numel();  // bf16
  EXPECT_EQ(with_copy - tracker_.current(MemoryTier::device, MemoryCategory::params), rollout_copy_bytes);
  rf::testing::expect_error_containing(
      [&] { (void)roles.generate(prompts, 100, sampling(config), eos, kNumCandidates); }, "generate on dropped weights");
  roles.sync_weights();
  EXPECT_EQ(tracker_.current(MemoryTier::device, MemoryCategory::params), with_copy);
  (void)roles.generate(prompts, 100, sampling(config), eos, kNumCandidates);

  // Reading the actor's weights in place (f32, the actor's TP), nothing is dropped and no sync is forced.
  RlConfig in_place = grpo_config();
  RlRoles sharing(in_place, tiny_model(), world_, tracker_);
  EXPECT_FALSE(sharing.drops_rollout_copy());
}

}  // namespace
}  // namespace rf::rl

// Every stage of RlRoles under mpirun against one process: each rank runs the stage over the world and over
// a SingleProcessGroup of its own, and compares. With every role on every rank (DP = the world) the forward
// stages (generate, compute_ref, compute_values, compute_rm_scores) give the one-process bits on every rank
// (deterministic mode's batch-invariant kernels). The updates give every rank the same metrics and the
// one-process ones to DP's rounding only: a DP rank's gradient is summed over its share of the tokens and
// then over the ranks, another order of the same sum (tests/parallel/dp_equivalence_mpi_test.cpp holds the
// engine to the same bound); so after a DP update the weight sync's checksum is the same on every rank and
// the export's, not one process's. With the actor on one rank and the rollout on the others, the sync
// streams the weights and every checksum and sample is one process's, bit for bit. Also RoleDispatch over a
// TP=2 layout.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "rl/trainer/rl_roles.h"
#include "rl/trainer/role_dispatch.h"
#include "rl/trainer/weight_sync.h"
#include "engine/parallel_setup.h"
#include "mpi_test_world.h"
#include "rl_roles_fixture.h"
#include "support/scratch_folder.h"

namespace rf::rl {
namespace {

using dist::testing::world;
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

// DP's rounding on the updates: ||a - b|| <= kDpTolerance ||b|| (+ 1e-8), as the engine's DP test.
constexpr double kDpTolerance = 1e-5;

class RlStagesMpi : public rf::testing::ScratchFolderTest {};

// Collective: `value` is the same on every rank.
void expect_same_on_every_rank(double value, const std::string& what) {
  const double low = world().all_reduce_scalar(value, dist::ReduceOp::min);
  const double high = world().all_reduce_scalar(value, dist::ReduceOp::max);
  EXPECT_EQ(low, high) << what << " differs between ranks";
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double diff = 0, norm = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    diff += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    norm += double(want[i]) * want[i];
  }
  EXPECT_LE(std::sqrt(diff), kDpTolerance * std::sqrt(norm) + 1e-8) << what << " on rank " << world().rank();
}

// Collective: the metrics over the world are the one-process metrics (to DP's rounding), the same on every rank.
void expect_metrics_match(const Metrics& many, const Metrics& one) {
  ASSERT_EQ(many.size(), one.size());
  for (const auto& [name, value] : one) {
    ASSERT_TRUE(many.contains(name)) << name;
    EXPECT_TRUE(std::isfinite(many.at(name))) << name;
    EXPECT_NEAR(many.at(name), value, kDpTolerance * std::abs(value) + 1e-8) << name << " on rank " << world().rank();
    expect_same_on_every_rank(many.at(name), name);
  }
}

RlBatch generate(dist::ProcessGroup& group) {
  const RlConfig config = grpo_config();
  MemoryTracker tracker;
  RlRoles roles(config, tiny_model(), group, tracker);
  roles.actor().init_random_weights(3);
  const int64_t eos[] = {kEos};
  return roles.generate(four_prompts(), 100, sampling(config), eos, kNumCandidates);
}

TEST_F(RlStagesMpi, GeneratedResponsesOverTheWorldAreOneProcesssOnEveryRank) {
  dist::SingleProcessGroup alone("alone");
  const RlBatch one = generate(alone);
  const RlBatch many = generate(world());
  ASSERT_EQ(one.size(), 8u);  // 4 prompts x n = 2
  ASSERT_EQ(many.size(), one.size());
  for (size_t i = 0; i < one.size(); ++i) {
    SCOPED_TRACE(::testing::Message() << "response " << i << " on rank " << world().rank());
    EXPECT_EQ(many[i].group, int64_t(i / 2));
    EXPECT_EQ(many[i].prompt, four_prompts()[i / 2].tokens);
    EXPECT_LE(int64_t(many[i].response.size()), grpo_config().response_length());
    EXPECT_EQ(many[i].response, one[i].response);
    EXPECT_EQ(many[i].truncated, one[i].truncated);
    EXPECT_EQ(many[i].rollout_log_probs, one[i].rollout_log_probs);
  }
  // And so the same tokens on every rank (a weighted sum of them, compared over the world).
  double tokens = 0;
  for (size_t i = 0; i < many.size(); ++i)
    for (size_t t = 0; t < many[i].response.size(); ++t) tokens += double(many[i].response[t]) * double(i * 7 + t + 1);
  expect_same_on_every_rank(tokens, "the generated tokens");
}

// The stages that read an HF folder: the roles built over `group` from `config`, loaded from `lm`.
struct Loaded {
  MemoryTracker tracker;
  RlRoles roles;
  Loaded(const RlConfig& config, dist::ProcessGroup& group, const std::string& lm)
      : roles(config, tiny_model(), group, tracker) {
    roles.load_initial_weights(lm);
  }
};

TEST_F(RlStagesMpi, ReferenceLogProbsOverTheWorldAreOneProcesss) {
  RlConfig config = grpo_config();
  config.actor_rollout_ref.actor.loss.use_kl_loss = true;
  write_tiny_folder(path("lm"), model::HeadKind::lm, 5);
  dist::SingleProcessGroup alone("alone");
  RlBatch one = eight_responses(), many = eight_responses();
  Loaded(config, alone, path("lm")).roles.compute_ref(one);
  Loaded(config, world(), path("lm")).roles.compute_ref(many);
  Loaded actor(config, alone, path("lm"));
  RlBatch old = eight_responses();
  actor.roles.compute_log_prob(old);
  for (size_t i = 0; i < one.size(); ++i) {
    ASSERT_EQ(one[i].ref_log_prob.size(), one[i].response.size());
    EXPECT_EQ(many[i].ref_log_prob, one[i].ref_log_prob) << "response " << i << " on rank " << world().rank();
    EXPECT_EQ(many[i].ref_log_prob, old[i].old_log_probs) << "response " << i << " on rank " << world().rank();
  }
}

TEST_F(RlStagesMpi, ValuesOverTheWorldAreOneProcesss) {
  RlConfig config = grpo_config();
  config.algorithm.adv_estimator = "gae";
  config.critic.model.path = path("critic");
  write_tiny_folder(path("lm"), model::HeadKind::lm, 5);
  write_tiny_folder(path("critic"), model::HeadKind::value, 6);
  dist::SingleProcessGroup alone("alone");
  RlBatch one = eight_responses(), many = eight_responses();
  Loaded(config, alone, path("lm")).roles.compute_values(one);
  Loaded(config, world(), path("lm")).roles.compute_values(many);
  EXPECT_NE(one[0].values[0], one[0].values[1]);
  for (size_t i = 0; i < one.size(); ++i) {
    ASSERT_EQ(one[i].values.size(), one[i].response.size());
    EXPECT_EQ(many[i].values, one[i].values) << "response " << i << " on rank " << world().rank();
  }
}

TEST_F(RlStagesMpi, RewardModelScoresOverTheWorldAreOneProcesss) {
  RlConfig config = grpo_config();
  config.reward_model.enable = true;
  config.reward_model.model.path = path("rm");
  write_tiny_folder(path("lm"), model::HeadKind::lm, 5);
  write_tiny_folder(path("rm"), model::HeadKind::score, 7);
  dist::SingleProcessGroup alone("alone");
  RlBatch one = eight_responses(), many = eight_responses();
  for (RlResponse& r : many) r.reward_extra["acc"] = 1;
  Loaded(config, alone, path("lm")).roles.compute_rm_scores(one, eight_responses());
  Loaded(config, world(), path("lm")).roles.compute_rm_scores(many, eight_responses());
  EXPECT_NE(one[0].score, one[1].score);
  for (size_t i = 0; i < one.size(); ++i) {
    EXPECT_EQ(many[i].score, one[i].score) << "response " << i << " on rank " << world().rank();
    EXPECT_TRUE(many[i].reward_extra.empty()) << "response " << i;
  }
}

// One actor update over `group`: its metrics and the weights before and after.
struct ActorUpdate {
  Metrics metrics;
  std::vector<float> before, after;
};

ActorUpdate update_actor(dist::ProcessGroup& group) {
  RlConfig config = grpo_config();
  config.actor_rollout_ref.actor.optim.lr = 1e-3;
  MemoryTracker tracker;
  RlRoles roles(config, tiny_model(), group, tracker);
  roles.actor().init_random_weights(3);
  RlBatch batch = eight_responses();
  roles.compute_log_prob(batch);
  set_advantages(batch);
  ActorUpdate u;
  u.before = weight_values(roles.actor().master_weights());
  u.metrics = roles.update_actor(batch, 0);
  u.after = weight_values(roles.actor().master_weights());
  return u;
}

TEST_F(RlStagesMpi, AnActorUpdateOverTheWorldIsOneProcesssOnEveryRank) {
  dist::SingleProcessGroup alone("alone");
  const ActorUpdate one = update_actor(alone);
  const ActorUpdate many = update_actor(world());
  for (const char* key : {"actor/pg_loss", "actor/grad_norm", "actor/lr"}) ASSERT_TRUE(one.metrics.contains(key)) << key;
  EXPECT_GT(one.metrics.at("actor/grad_norm"), 0.0);
  expect_metrics_match(many.metrics, one.metrics);
  EXPECT_EQ(many.before, one.before);
  EXPECT_NE(many.after, many.before);
  expect_close(many.after, one.after, "the actor's weights after the update");
}

TEST_F(RlStagesMpi, ACriticUpdateOverTheWorldIsOneProcesssOnEveryRank) {
  RlConfig config = grpo_config();
  config.algorithm.adv_estimator = "gae";
  config.critic.model.path = path("critic");
  config.critic.optim.lr = 1e-3;
  write_tiny_folder(path("lm"), model::HeadKind::lm, 5);
  write_tiny_folder(path("critic"), model::HeadKind::value, 6);
  const auto update = [&](dist::ProcessGroup& group, Metrics& metrics, std::vector<float>& before) {
    Loaded loaded(config, group, path("lm"));
    RlBatch batch = eight_responses();
    loaded.roles.compute_values(batch);
    for (RlResponse& r : batch) {
      r.returns.clear();
      for (const float v : r.values) r.returns.push_back(v + 1.0f);
    }
    before = weight_values(loaded.roles.critic().master_weights());
    metrics = loaded.roles.update_critic(batch, 0);
    return weight_values(loaded.roles.critic().master_weights());
  };
  dist::SingleProcessGroup alone("alone");
  Metrics one, many;
  std::vector<float> one_before, many_before;
  const std::vector<float> one_after = update(alone, one, one_before);
  const std::vector<float> many_after = update(world(), many, many_before);
  for (const char* key : {"critic/vf_loss", "critic/grad_norm", "critic/lr"}) ASSERT_TRUE(one.contains(key)) << key;
  EXPECT_NEAR(one.at("critic/vf_loss"), 0.5, 1e-5);  // every value one below its return
  expect_metrics_match(many, one);
  EXPECT_EQ(many_before, one_before);
  EXPECT_NE(many_after, many_before);
  expect_close(many_after, one_after, "the critic's weights after the update");
}

// The weight sync before and after an actor update over `group`, and what the rollout samples after it.
struct Synced {
  Metrics first, second;
  double export_checksum = 0;  // of the updated actor's export, computed here
  RlBatch fresh;  // sampled after the second sync, with the actor's log-probs
};

Synced sync_around_an_update(dist::ProcessGroup& group) {
  RlConfig config = grpo_config();
  config.actor_rollout_ref.actor.optim.lr = 1e-2;
  MemoryTracker tracker;
  RlRoles roles(config, tiny_model(), group, tracker);
  roles.actor().init_random_weights(3);
  Synced s;
  s.first = roles.sync_weights();
  RlBatch batch = eight_responses();
  roles.compute_log_prob(batch);
  set_advantages(batch);
  roles.update_actor(batch, 0);
  s.second = roles.sync_weights();
  uint64_t hash = kFnvOffset;
  roles.actor().export_weights([&](const std::string& name, TensorView full) { hash = weight_checksum(hash, name, full); });
  s.export_checksum = double(hash & ((uint64_t(1) << 48) - 1));
  const int64_t eos[] = {kEos};
  s.fresh = roles.generate(four_prompts(), 100, sampling(config), eos, kNumCandidates);
  roles.compute_log_prob(s.fresh);
  return s;
}

TEST_F(RlStagesMpi, AfterAnUpdateEveryRanksRolloutSamplesFromTheNewWeights) {
  dist::SingleProcessGroup alone("alone");
  const Synced one = sync_around_an_update(alone);
  const Synced many = sync_around_an_update(world());
  const char* checksum = "rollout/weights_checksum";
  ASSERT_TRUE(many.first.contains(checksum));
  ASSERT_TRUE(many.first.contains("perf/update_weights_bytes"));
  // Colocated on every rank: nothing crosses the network.
  EXPECT_EQ(many.first.at("perf/update_weights_bytes"), 0.0);
  EXPECT_EQ(many.second.at("perf/update_weights_bytes"), 0.0);
  // Before the update the weights are the one-process ones, bit for bit.
  EXPECT_EQ(many.first.at(checksum), one.first.at(checksum));
  EXPECT_NE(many.second.at(checksum), many.first.at(checksum));
  expect_same_on_every_rank(many.second.at(checksum), checksum);
  EXPECT_EQ(many.second.at(checksum), many.export_checksum);
  EXPECT_EQ(one.second.at(checksum), one.export_checksum);
  // Not the one-process checksum: the update is DP's rounding away from one process (the updates' test above),
  // and a checksum tells any bit apart.
  // The rollout's log-probs of what it sampled are the updated actor's.
  ASSERT_EQ(many.fresh.size(), 8u);
  for (size_t i = 0; i < many.fresh.size(); ++i) {
    const RlResponse& r = many.fresh[i];
    ASSERT_EQ(r.rollout_log_probs.size(), r.old_log_probs.size());
    for (size_t t = 0; t < r.old_log_probs.size(); ++t)
      EXPECT_NEAR(r.rollout_log_probs[t], r.old_log_probs[t], 1e-4) << "response " << i << " token " << t;
  }
}

// The actor on rank 0 alone and the rollout on every other rank: the sync streams the weights over the
// network. What one process does, over `group` with `placement` (empty: every role on its one rank).
struct Streamed {
  Metrics first, second;
  int64_t export_bytes = 0;  // of the actor's export (on the actor's rank)
  int64_t table_bound = 0;   // what describing its tensors may take at most: name + 64 bytes each
  RlBatch fresh;             // sampled after the second sync
};

Streamed stream_around_an_update(dist::ProcessGroup& group, const RolePlacement& placement) {
  RlConfig config = grpo_config();
  config.actor_rollout_ref.actor.optim.lr = 1e-2;
  MemoryTracker tracker;
  RlRoles roles(config, tiny_model(), group, tracker, placement);
  Streamed s;
  if (roles.in_actor()) {
    roles.actor().init_random_weights(3);
    roles.actor().export_weights([&](const std::string& name, TensorView full) {
      s.export_bytes += int64_t(full.nbytes());
      s.table_bound += int64_t(name.size()) + 64;
    });
  }
  s.first = roles.sync_weights();
  RlBatch batch = eight_responses();
  roles.compute_log_prob(batch);
  set_advantages(batch);
  roles.update_actor(batch, 0);
  s.second = roles.sync_weights();
  const int64_t eos[] = {kEos};
  s.fresh = roles.generate(four_prompts(), 100, sampling(config), eos, kNumCandidates);
  return s;
}

TEST_F(RlStagesMpi, StreamedToTheOtherRanksTheRolloutGetsTheUpdatedActorsWeights) {
  dist::SingleProcessGroup alone("alone");
  const Streamed one = stream_around_an_update(alone, {});
  RolePlacement placement;
  placement.actor = {0};
  for (int r = 1; r < world().size(); ++r) placement.rollout.push_back(r);
  const Streamed many = stream_around_an_update(world(), placement);
  const char* checksum = "rollout/weights_checksum";
  const char* bytes = "perf/update_weights_bytes";
  // Every rollout rank received every byte of the export and the tables naming its tensors (names, dtypes,
  // shapes); one process receives nothing.
  EXPECT_EQ(one.first.at(bytes), 0.0);
  const double receivers = double(world().size() - 1);
  EXPECT_GT(many.first.at(bytes), receivers * double(one.export_bytes));
  EXPECT_LT(many.first.at(bytes), receivers * double(one.export_bytes + one.table_bound));
  EXPECT_EQ(many.second.at(bytes), many.first.at(bytes));
  // One actor rank: its update is the one-process update, bit for bit, and so is what every rank syncs.
  EXPECT_EQ(many.first.at(checksum), one.first.at(checksum));
  EXPECT_NE(many.second.at(checksum), many.first.at(checksum));
  EXPECT_EQ(many.second.at(checksum), one.second.at(checksum));
  expect_same_on_every_rank(many.second.at(checksum), checksum);
  // And the rollout's ranks sample what one process samples from the updated weights.
  ASSERT_EQ(many.fresh.size(), one.fresh.size());
  for (size_t i = 0; i < one.fresh.size(); ++i) {
    EXPECT_EQ(many.fresh[i].response, one.fresh[i].response) << "response " << i << " on rank " << world().rank();
    EXPECT_EQ(many.fresh[i].rollout_log_probs, one.fresh[i].rollout_log_probs) << "response " << i;
  }
}

// RoleDispatch over TP=2 (TP fastest: world rank r is tp r % 2 of DP replica r / 2): both ranks of a TP group
// get the same chunk and only tp rank 0 collects it.
TEST(RoleDispatchMpi, RanksOfOneTpGroupShareAChunkThatTpRankZeroCollects) {
  const int size = world().size();
  if (size != 2 && size != 4) GTEST_SKIP() << "a TP=2 layout over 2 or 4 ranks, not " << size;
  engine::EngineConfig megatron;
  megatron.tensor_model_parallel_size = 2;
  const dist::ParallelContext parallel = engine::make_parallel_context(megatron, world());
  const int rank = world().rank(), tp = rank % 2, dp = rank / 2, dp_size = size / 2;
  ASSERT_EQ(parallel.tp().rank(), tp);
  ASSERT_EQ(parallel.dp().rank(), dp);

  const RlBatch batch = eight_responses();
  const std::vector<int64_t> all = {0, 1, 2, 3, 4, 5, 6, 7};
  const RoleDispatch compute(DispatchMode::megatron_compute_proto, parallel, true);
  EXPECT_EQ(compute.num_chunks(), dp_size);
  std::vector<int64_t> expected;  // replica dp's contiguous run of 8 / dp_size
  for (int64_t i = dp * 8 / dp_size; i < (dp + 1) * 8 / dp_size; ++i) expected.push_back(i);
  EXPECT_EQ(compute.chunk(batch, all, false), expected);
  EXPECT_EQ(compute.collects(), tp == 0);

  // Balanced shares too: every response is computed by the TP size's ranks and collected exactly once.
  const std::vector<int64_t> balanced = compute.chunk(batch, all, true);
  for (const int64_t i : all) {
    const bool mine = std::find(balanced.begin(), balanced.end(), i) != balanced.end();
    EXPECT_EQ(world().all_reduce_scalar(mine ? 1.0 : 0.0, dist::ReduceOp::sum), 2.0) << "response " << i;
    EXPECT_EQ(world().all_reduce_scalar(mine && compute.collects() ? 1.0 : 0.0, dist::ReduceOp::sum), 1.0)
        << "response " << i;
  }

  // The rollout's prompts: replica dp's contiguous run of the 4.
  const RoleDispatch gen(DispatchMode::megatron_pp_as_dp_proto, parallel, true);
  EXPECT_EQ(gen.num_chunks(), dp_size);
  std::vector<int64_t> prompts;
  for (int64_t i = dp * 4 / dp_size; i < (dp + 1) * 4 / dp_size; ++i) prompts.push_back(i);
  EXPECT_EQ(gen.contiguous_chunk(4), prompts);
  EXPECT_EQ(gen.collects(), tp == 0);

  // ONE_TO_ALL: every rank the whole batch, rank 0's outputs.
  const RoleDispatch update(DispatchMode::one_to_all, parallel, true);
  EXPECT_EQ(update.chunk(batch, all, false), all);
  EXPECT_EQ(update.collects(), rank == 0);
}

}  // namespace
}  // namespace rf::rl

// The RL controller's transfers between ranks (apps/rlforge/rl_transfer.h) under mpirun, each against
// what one rank holds: responses gathered from the rollout's replicas, per-token columns and scores
// gathered from a role's DP shares (uneven ones included), scores, errors and metrics broadcast, and the
// actor's weights streamed to ranks without them.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <optional>

#include "apps/rlforge/rl_transfer.h"
#include "core/error.h"
#include "mpi_test_world.h"

namespace rf::apps {
namespace {

using dist::testing::world;

// Response i of a batch of `count`: its own lengths and values, the same on every rank.
RlResponse response(int64_t i) {
  RlResponse r;
  r.group = i / 2;
  r.prompt.assign(size_t(1 + i % 3), 7 + i);
  r.response.assign(size_t(2 + i % 4), 11 + i);
  r.truncated = i % 5 == 0;
  r.rollout_log_probs.assign(r.response.size(), -0.25f * float(i));
  return r;
}

RlBatch batch_of(int64_t count) {
  RlBatch batch;
  for (int64_t i = 0; i < count; ++i) batch.push_back(response(i));
  return batch;
}

// Responses [first, last) of `count` for `rank` of `size`, the first count % size ranks one more.
std::vector<int64_t> share(int64_t count, int rank, int size) {
  const int64_t base = count / size, extra = count % size;
  const int64_t first = rank * base + std::min<int64_t>(rank, extra);
  std::vector<int64_t> mine(size_t(base + (rank < extra ? 1 : 0)));
  std::iota(mine.begin(), mine.end(), first);
  return mine;
}

float column_value(int64_t i, size_t t, int column) { return float(i) * 100.0f + float(t) + 0.5f * float(column); }

TEST(RlTransfer, GatherResponsesGivesEveryRankTheWholeBatchInPromptOrder) {
  const int64_t count = 11;  // uneven over 2 and 4 ranks
  const RlBatch all = batch_of(count);
  RlBatch mine;
  for (const int64_t i : share(count, world().rank(), world().size())) mine.push_back(all[size_t(i)]);
  const RlBatch gathered = gather_responses(mine, world());
  ASSERT_EQ(gathered.size(), all.size());
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(gathered[i].group, all[i].group) << i;
    EXPECT_EQ(gathered[i].prompt, all[i].prompt) << i;
    EXPECT_EQ(gathered[i].response, all[i].response) << i;
    EXPECT_EQ(gathered[i].truncated, all[i].truncated) << i;
    EXPECT_EQ(gathered[i].rollout_log_probs, all[i].rollout_log_probs) << i;
  }
}

TEST(RlTransfer, GatherColumnsAndScoresFromDpSharesAndFromTpReplicas) {
  const int64_t count = 9;
  // Two layouts: every rank a DP replica; and (4 ranks) two replicas of two TP ranks each, where only a
  // replica's first TP rank sends.
  for (const int tp : {1, 2}) {
    if (world().size() % tp != 0 || world().size() / tp < 1) continue;
    SCOPED_TRACE(tp);
    const int replicas = world().size() / tp, replica = world().rank() / tp;
    const bool sends = world().rank() % tp == 0;
    RlBatch batch = batch_of(count);
    const std::vector<int64_t> mine = share(count, replica, replicas);
    for (const int64_t i : mine) {
      RlResponse& r = batch[size_t(i)];
      for (size_t t = 0; t < r.response.size(); ++t) {
        r.old_log_probs.push_back(column_value(i, t, 0));
        r.entropy.push_back(column_value(i, t, 1));
      }
      r.score = double(float(0.125 * double(i) - 0.3));
      r.reward_extra["acc"] = 1;  // cleared by gather_scores
    }
    const std::vector<int64_t> none;
    gather_columns(batch, sends ? mine : none, {&RlResponse::old_log_probs, &RlResponse::entropy}, world());
    gather_scores(batch, sends ? mine : none, world());
    for (int64_t i = 0; i < count; ++i) {
      const RlResponse& r = batch[size_t(i)];
      ASSERT_EQ(r.old_log_probs.size(), r.response.size()) << i;
      ASSERT_EQ(r.entropy.size(), r.response.size()) << i;
      for (size_t t = 0; t < r.response.size(); ++t) {
        EXPECT_EQ(r.old_log_probs[t], column_value(i, t, 0)) << i << " " << t;
        EXPECT_EQ(r.entropy[t], column_value(i, t, 1)) << i << " " << t;
      }
      EXPECT_EQ(r.score, double(float(0.125 * double(i) - 0.3))) << i;
      EXPECT_TRUE(r.reward_extra.empty()) << i;
    }
  }
}

TEST(RlTransfer, AResponseNoRankSentIsAnError) {
  RlBatch batch = batch_of(3);
  // Every rank sends response 0's columns only: the others come from nobody, and 0 comes several times.
  const std::vector<int64_t> only_first = {0};
  for (RlResponse& r : batch) r.values.assign(r.response.size(), 1.0f);
  const std::vector<int64_t> sent = world().rank() == 0 ? only_first : std::vector<int64_t>();
  try {
    gather_columns(batch, sent, {&RlResponse::values}, world());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("computed by no rank"), std::string::npos) << e.what();
  }
}

TEST(RlTransfer, ScoresMetricsAndTheScoringErrorReachEveryRank) {
  RlBatch batch = batch_of(5);
  const int root = world().size() - 1;
  if (world().rank() == root)
    for (size_t i = 0; i < batch.size(); ++i) {
      batch[i].score = 0.1 * double(i) + 1.0 / 3.0;  // doubles, exactly
      batch[i].reward_extra["acc"] = double(i % 2);
    }
  broadcast_scores(batch, std::nullopt, world(), root);
  for (size_t i = 0; i < batch.size(); ++i) {
    EXPECT_EQ(batch[i].score, 0.1 * double(i) + 1.0 / 3.0) << i;
    EXPECT_EQ(batch[i].reward_extra.at("acc"), double(i % 2)) << i;
  }
  const std::optional<std::string> error =
      world().rank() == root ? std::optional<std::string>("reward.py: sample 3: ZeroDivisionError") : std::nullopt;
  try {
    broadcast_scores(batch, error, world(), root);
    FAIL() << "expected the root's scoring error on every rank";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ZeroDivisionError"), std::string::npos) << e.what();
  }
  Metrics metrics;
  if (world().rank() == root) metrics = {{"critic/vf_loss", 0.1 + 0.2}, {"critic/grad_norm", 3.5}};
  broadcast_metrics(metrics, world(), root);
  EXPECT_EQ(metrics, (Metrics{{"critic/vf_loss", 0.1 + 0.2}, {"critic/grad_norm", 3.5}}));
}

TEST(RlTransfer, WeightStreamDeliversEveryTensorWholeInOrder) {
  const int root = 0;
  std::vector<std::pair<std::string, Tensor>> weights;
  for (int k = 0; k < 3; ++k) {
    Tensor t({2, 3 + k}, k == 1 ? DType::i64 : DType::f32);  // any dtype travels as bytes
    for (int64_t i = 0; i < t.numel(); ++i)
      if (k == 1)
        t.data<int64_t>()[i] = (int64_t(1) << 53) + 1 + i;  // beyond a double's integers
      else
        t.data<float>()[i] = float(k * 100 + i) + 0.25f;
    weights.emplace_back("model.layers." + std::to_string(k) + ".w", std::move(t));
  }
  WeightStream stream(world(), root);
  if (world().rank() == root) {
    for (const auto& [name, t] : weights) stream.send(name, t);
    stream.finish();
    return;
  }
  size_t received = 0;
  stream.receive([&](const std::string& name, TensorView full) {
    ASSERT_LT(received, weights.size());
    const auto& [expected_name, expected] = weights[received++];
    EXPECT_EQ(name, expected_name);
    ASSERT_EQ(full.shape(), expected.shape()) << name;
    ASSERT_EQ(full.dtype(), expected.dtype()) << name;
    EXPECT_EQ(std::memcmp(full.raw(), expected.view().raw(), full.nbytes()), 0) << name;
  });
  EXPECT_EQ(received, weights.size());
}

}  // namespace
}  // namespace rf::apps

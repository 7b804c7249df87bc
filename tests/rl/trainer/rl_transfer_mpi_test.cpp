// The RL controller's transfers between ranks (rl/trainer/rl_transfer.h) under mpirun, each against
// what one rank holds: responses gathered from the rollout's replicas, per-token columns and scores
// gathered from a role's DP shares (uneven ones included), scores, errors and metrics broadcast, and the
// actor's weights synced into the rollout (colocated, and streamed in buckets to its ranks only).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <optional>

#include "rl/trainer/rl_transfer.h"
#include "rl/trainer/weight_sync.h"
#include "core/error.h"
#include "mpi_test_world.h"

namespace rf::rl {
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

// Three tensors of any dtype (an i64 one beyond a double's integers), the same on every rank.
std::vector<std::pair<std::string, Tensor>> some_weights() {
  std::vector<std::pair<std::string, Tensor>> weights;
  for (int k = 0; k < 3; ++k) {
    Tensor t({2, 3 + k}, k == 1 ? DType::i64 : DType::f32);
    for (int64_t i = 0; i < t.numel(); ++i)
      if (k == 1)
        t.data<int64_t>()[i] = (int64_t(1) << 53) + 1 + i;
      else
        t.data<float>()[i] = float(k * 100 + i) + 0.25f;
    weights.emplace_back("model.layers." + std::to_string(k) + ".w", std::move(t));
  }
  return weights;
}

// What a rank's rollout received, and the sync's report there.
struct Received {
  std::vector<std::pair<std::string, std::vector<uint8_t>>> tensors;
  WeightSync::Report report;
};

// One sync with the actor on `actor_ranks` and the rollout on `rollout_ranks` (empty: all), buckets of
// `bucket_bytes`.
Received sync_once(const std::vector<int>& actor_ranks, const std::vector<int>& rollout_ranks, int64_t bucket_bytes) {
  const auto weights = some_weights();
  const auto on = [](const std::vector<int>& ranks) {
    return ranks.empty() || std::find(ranks.begin(), ranks.end(), world().rank()) != ranks.end();
  };
  WeightSync sync(world(), actor_ranks, rollout_ranks, bucket_bytes);
  Received received;
  const WeightSync::Export exporter = [&](const WeightSync::Sink& sink) {
    for (const auto& [name, t] : weights) sink(name, t);
  };
  const WeightSync::Sink loader = [&](const std::string& name, TensorView full) {
    const auto* bytes = static_cast<const uint8_t*>(full.raw());
    received.tensors.emplace_back(name, std::vector<uint8_t>(bytes, bytes + full.nbytes()));
  };
  received.report = sync.sync(on(actor_ranks) ? &exporter : nullptr, on(rollout_ranks) ? &loader : nullptr);
  return received;
}

void expect_every_tensor(const Received& received) {
  const auto weights = some_weights();
  ASSERT_EQ(received.tensors.size(), weights.size());
  uint64_t checksum = kFnvOffset;
  for (size_t k = 0; k < weights.size(); ++k) {
    EXPECT_EQ(received.tensors[k].first, weights[k].first);
    const TensorView expected = weights[k].second.view();
    ASSERT_EQ(received.tensors[k].second.size(), size_t(expected.nbytes()));
    EXPECT_EQ(std::memcmp(received.tensors[k].second.data(), expected.raw(), expected.nbytes()), 0);
    checksum = weight_checksum(checksum, weights[k].first, expected);
  }
  EXPECT_EQ(received.report.checksum, checksum);
}

TEST(WeightSync, ColocatedFeedsEachRolloutFromItsOwnActorWithNoTraffic) {
  const Received received = sync_once({}, {}, 1 << 20);
  expect_every_tensor(received);
  EXPECT_EQ(received.report.bytes_received, 0);
}

TEST(WeightSync, StreamedReachesOnlyTheRolloutRanksInBuckets) {
  // The actor on rank 0 alone, the rollout on the last rank: the ranks between hold neither.
  const int last = world().size() - 1;
  constexpr int64_t kTensorBytes[] = {2 * 3 * 4, 2 * 4 * 8, 2 * 5 * 4};  // f32, i64, f32
  const Received received = sync_once({0}, {last}, /*bucket_bytes=*/64);
  if (world().rank() == last) {
    expect_every_tensor(received);
    // Buckets of <= 64 bytes: {24} then 64 alone, then {40}: three, with their tables.
    EXPECT_EQ(received.report.buckets, 3);
    EXPECT_GT(received.report.bytes_received, kTensorBytes[0] + kTensorBytes[1] + kTensorBytes[2]);
  } else {
    EXPECT_TRUE(received.tensors.empty());
    EXPECT_EQ(received.report.bytes_received, 0) << "rank " << world().rank() << " holds no rollout";
  }
}

TEST(WeightSync, ActorRanksWithARolloutFollowTheStream) {
  // Four ranks: the actor on 0 and 1, the rollout on 1 and 2: rank 1, an actor rank beside the sender, feeds
  // its rollout from its own export and follows the buckets; rank 3 holds neither. Two ranks: the sender
  // itself holds a rollout, beside a rollout-only rank.
  const bool wide = world().size() >= 3;
  const std::vector<int> actor = wide ? std::vector<int>{0, 1} : std::vector<int>{0};
  const std::vector<int> rollout = wide ? std::vector<int>{1, 2} : std::vector<int>{0, 1};
  const Received received = sync_once(actor, rollout, /*bucket_bytes=*/64);
  const int rank = world().rank();
  if (std::find(rollout.begin(), rollout.end(), rank) != rollout.end()) {
    expect_every_tensor(received);
  } else {
    EXPECT_TRUE(received.tensors.empty());
    EXPECT_EQ(received.report.bytes_received, 0);
  }
}

TEST(WeightSync, ActorRanksThatExportDifferentWeightsFailEverywhere) {
  // Colocated, each rank's actor exports a tensor of its own rank: the checksums disagree, and every rank
  // gets the error (none goes on sampling from weights the others do not have).
  WeightSync sync(world(), {}, {}, 1 << 20);
  Tensor t({4}, DType::f32);
  for (int64_t i = 0; i < 4; ++i) t.data<float>()[i] = float(world().rank());
  const WeightSync::Export exporter = [&](const WeightSync::Sink& sink) { sink("w", t); };
  const WeightSync::Sink loader = [](const std::string&, TensorView) {};
  try {
    sync.sync(&exporter, &loader);
    FAIL() << "different weights on the actor's ranks were accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("exported different weights"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace rf::rl

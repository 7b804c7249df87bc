// RlRoles' stages without the binary: the old-log-prob pass cuts its micro-batches by
// rollout.log_prob_micro_batch_size_per_gpu (verl; ROLL's actor_train.infer_batch_size), not by the
// training micro-batch (issue #20, defect 1), and in deterministic mode gives the same bits whatever the
// cut. (The engine reserves activations for its largest micro-batch up front, so memory does not show
// the cut.)
#include <gtest/gtest.h>

#include "rl/trainer/rl_roles.h"
#include "dist/process_group.h"
#include "rl_roles_fixture.h"

namespace rf::rl {
namespace {

RlBatch old_log_probs(std::optional<int64_t> log_prob_micro_batch) {
  dist::SingleProcessGroup world("world");
  return testing::old_log_probs(world, log_prob_micro_batch);
}

TEST(RlRoles, TheOldLogProbPassCutsByTheLogProbMicroBatch) {
  RolloutSection rollout;
  const MicroBatching training{.responses = 8, .max_tokens = 0};
  EXPECT_EQ(old_log_prob_batching(rollout, training).responses, 8);  // null: the training micro-batch
  rollout.log_prob_micro_batch_size_per_gpu = 2;
  EXPECT_EQ(old_log_prob_batching(rollout, training).responses, 2);
  EXPECT_EQ(old_log_prob_batching(rollout, {.responses = 8, .max_tokens = 512}).max_tokens, 512);
}

TEST(RlRoles, OldLogProbsAreTheSameBitsWhateverTheCut) {
  const RlBatch whole = old_log_probs(std::nullopt);  // the training micro-batch: all 8 at once
  const RlBatch by_two = old_log_probs(2);
  // Random weights: the log-probs differ from token to token (not the uniform -log 20 of zero weights).
  EXPECT_NE(whole[0].old_log_probs[0], whole[0].old_log_probs[1]);
  for (size_t i = 0; i < whole.size(); ++i) {
    ASSERT_EQ(whole[i].old_log_probs.size(), whole[i].response.size());
    EXPECT_EQ(by_two[i].old_log_probs, whole[i].old_log_probs) << "response " << i;
    EXPECT_EQ(by_two[i].entropy, whole[i].entropy) << "response " << i;
  }
}

}  // namespace
}  // namespace rf::rl

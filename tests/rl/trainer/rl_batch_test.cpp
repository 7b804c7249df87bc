// RlBatch's packing (rl/trainer/rl_batch.h) against the convention rl/actor_loss.h reads: response
// token t of a document with P prompt tokens sits at position P + t - 1 (its label), with the loss
// mask and the per-token columns (the actor's, or the critic's values and returns) there and nowhere
// else; read_token_column reads the same positions back; the (B, T) matrices pad with zeros.
#include "rl/trainer/rl_batch.h"
#include "rl/trainer/rl_metrics.h"

#include <gtest/gtest.h>

#include "core/error.h"

#include <algorithm>
#include <stdexcept>

namespace rf::rl {
namespace {

RlBatch two_responses() {
  RlBatch batch(2);
  batch[0].prompt = {1, 2, 3};
  batch[0].response = {7, 8};
  batch[0].old_log_probs = {-0.5f, -0.25f};
  batch[0].advantages = {1.0f, 1.0f};
  batch[0].ref_log_prob = {-0.75f, -0.125f};
  batch[1].group = 1;
  batch[1].prompt = {4};
  batch[1].response = {9, 10, 11};
  batch[1].old_log_probs = {-1.0f, -2.0f, -3.0f};
  batch[1].advantages = {-1.0f, -1.0f, -1.0f};
  batch[1].ref_log_prob = {-4.0f, -5.0f, -6.0f};
  return batch;
}

std::vector<double> values(TensorView t) {
  std::vector<double> v;
  for (int64_t i = 0; i < t.numel(); ++i)
    v.push_back(t.dtype() == DType::f32 ? double(t.data<float>()[i])
                                        : t.dtype() == DType::i64 ? double(t.data<int64_t>()[i])
                                                                  : double(t.data<int32_t>()[i]));
  return v;
}

TEST(RlBatch, PacksResponsesWithTheirColumnsAtTheLabelPositions) {
  const RlBatch batch = two_responses();
  const engine::TensorMap mb = make_micro_batch(batch, {1, 0}, LossColumns::actor, /*with_ref=*/true);
  // Document 0 is response 1 (prompt 4, response 9 10 11), then response 0.
  EXPECT_EQ(values(mb.get("input_ids")), (std::vector<double>{4, 9, 10, 11, 1, 2, 3, 7, 8}));
  EXPECT_EQ(values(mb.get("position_ids")), (std::vector<double>{0, 1, 2, 3, 0, 1, 2, 3, 4}));
  EXPECT_EQ(values(mb.get("labels")), (std::vector<double>{9, 10, 11, -100, 2, 3, 7, 8, -100}));
  EXPECT_EQ(values(mb.get("loss_mask")), (std::vector<double>{1, 1, 1, 0, 0, 0, 1, 1, 0}));
  EXPECT_EQ(values(mb.get("old_log_probs")), (std::vector<double>{-1, -2, -3, 0, 0, 0, -0.5, -0.25, 0}));
  EXPECT_EQ(values(mb.get("advantages")), (std::vector<double>{-1, -1, -1, 0, 0, 0, 1, 1, 0}));
  EXPECT_EQ(values(mb.get("ref_log_prob")), (std::vector<double>{-4, -5, -6, 0, 0, 0, -0.75, -0.125, 0}));
  EXPECT_EQ(values(mb.get("cu_seqlens")), (std::vector<double>{0, 4, 9}));
  EXPECT_FALSE(make_micro_batch(batch, {0}, LossColumns::none, false).contains("advantages"));
}

TEST(RlBatch, PacksTheCriticsValuesAndReturnsAtTheLabelPositions) {
  RlBatch batch = two_responses();
  batch[0].values = {0.5f, 0.25f};
  batch[0].returns = {1.0f, 1.0f};
  batch[1].values = {-0.5f, -1.5f, 2.0f};
  batch[1].returns = {0.0f, 0.75f, 3.0f};
  const engine::TensorMap mb = make_micro_batch(batch, {1, 0}, LossColumns::critic, /*with_ref=*/false);
  // rl/critic_loss.h reads values and returns where the loss mask is, response token t at P + t - 1.
  EXPECT_EQ(values(mb.get("loss_mask")), (std::vector<double>{1, 1, 1, 0, 0, 0, 1, 1, 0}));
  EXPECT_EQ(values(mb.get("values")), (std::vector<double>{-0.5, -1.5, 2, 0, 0, 0, 0.5, 0.25, 0}));
  EXPECT_EQ(values(mb.get("returns")), (std::vector<double>{0, 0.75, 3, 0, 0, 0, 1, 1, 0}));
  EXPECT_EQ(values(mb.get("cu_seqlens")), (std::vector<double>{0, 4, 9}));
  for (const char* actor_column : {"old_log_probs", "advantages", "ref_log_prob"})
    EXPECT_FALSE(mb.contains(actor_column)) << actor_column;
  EXPECT_FALSE(make_micro_batch(batch, {0}, LossColumns::actor, true).contains("values"));
  batch[0].returns.pop_back();  // a column shorter than its response is an error, not a silent zero
  EXPECT_THROW(make_micro_batch(batch, {0}, LossColumns::critic, false), std::out_of_range);
}

TEST(RlBatch, ReadsPerPositionOutputsBackIntoResponseColumns) {
  RlBatch batch = two_responses();
  // Outputs that name their own position: response token t of document d reads position P + t - 1.
  Tensor out({9}, DType::f32);
  for (int64_t n = 0; n < 9; ++n) out.data<float>()[n] = float(n);
  read_token_column(batch, {1, 0}, out, &RlResponse::entropy);
  EXPECT_EQ(batch[1].entropy, (std::vector<float>{0, 1, 2}));
  EXPECT_EQ(batch[0].entropy, (std::vector<float>{6, 7}));
  Tensor short_out({8}, DType::f32);
  EXPECT_THROW(read_token_column(batch, {1, 0}, short_out, &RlResponse::entropy), Error);
}

TEST(RlBatch, MatricesPadWithZerosAndStoreBack) {
  RlBatch batch = two_responses();
  const Tensor mask = response_mask_matrix(batch);
  EXPECT_EQ(values(mask), (std::vector<double>{1, 1, 0, 1, 1, 1}));
  const Tensor adv = column_matrix(batch, &RlResponse::advantages);
  EXPECT_EQ(values(adv), (std::vector<double>{1, 1, 0, -1, -1, -1}));
  store_column(batch, adv, &RlResponse::returns);
  EXPECT_EQ(batch[0].returns, (std::vector<float>{1, 1}));
  EXPECT_EQ(batch[1].returns, (std::vector<float>{-1, -1, -1}));
}

TEST(RlBatch, SplitsMicroBatchesByCountOrByTokens) {
  const RlBatch batch = two_responses();  // 5 and 4 tokens
  dist::SingleProcessGroup dp("dp");
  EXPECT_EQ(split_micro_batches(batch, {0, 1}, 1, 0, 1, dp), (std::vector<std::vector<int64_t>>{{0}, {1}}));
  EXPECT_EQ(split_micro_batches(batch, {0, 1}, 2, 0, 1, dp), (std::vector<std::vector<int64_t>>{{0, 1}}));
  EXPECT_EQ(split_micro_batches(batch, {1, 0}, 1, 0, 1, dp), (std::vector<std::vector<int64_t>>{{1}, {0}}));
  // By tokens (use_dynamic_bsz): 9 tokens fit a budget of 9 in one; under 8, two micro-batches in verl's
  // order: heaviest first, then the even-ranked reversed ({0}) followed by the odd-ranked ({1}).
  EXPECT_EQ(split_micro_batches(batch, {0, 1}, 0, 9, 1, dp), (std::vector<std::vector<int64_t>>{{0, 1}}));
  EXPECT_EQ(split_micro_batches(batch, {1, 0}, 0, 8, 1, dp), (std::vector<std::vector<int64_t>>{{0}, {1}}));
  // Context parallel 2: the budget is per rank (x 2), each response padded to a multiple of 4 (8 and 4 tokens):
  // 12 fit a budget of 6 x 2; 5 x 2 = 10 does not.
  EXPECT_EQ(split_micro_batches(batch, {0, 1}, 0, 6, 2, dp), (std::vector<std::vector<int64_t>>{{0, 1}}));
  EXPECT_EQ(split_micro_batches(batch, {0, 1}, 0, 5, 2, dp).size(), 2u);
}

// Responses of 1 + `lengths[i]` tokens (a one-token prompt).
RlBatch of_lengths(const std::vector<int64_t>& lengths) {
  RlBatch batch;
  for (const int64_t length : lengths) {
    RlResponse r;
    r.prompt = {1};
    r.response.assign(size_t(length), 2);
    batch.push_back(std::move(r));
  }
  return batch;
}

int64_t tokens_of(const RlBatch& batch, const std::vector<int64_t>& share) {
  int64_t tokens = 0;
  for (const int64_t i : share) tokens += num_tokens(batch[size_t(i)]);
  return tokens;
}

TEST(RlBatch, DpSharesAreContiguousUnlessBalanced) {
  const RlBatch batch = of_lengths({1, 2, 3, 4, 5, 6});
  const std::vector<int64_t> all = {0, 1, 2, 3, 4, 5};
  EXPECT_EQ(dp_shares(batch, all, 2, false), (std::vector<std::vector<int64_t>>{{0, 1, 2}, {3, 4, 5}}));
  EXPECT_EQ(dp_shares(batch, all, 4, false), (std::vector<std::vector<int64_t>>{{0, 1}, {2, 3}, {4}, {5}}));
  EXPECT_EQ(dp_shares(batch, all, 1, true), (std::vector<std::vector<int64_t>>{all}));
  // 6 does not split into 4 equal shares: contiguous, as without balancing.
  EXPECT_EQ(dp_shares(batch, all, 4, true), dp_shares(batch, all, 4, false));
}

TEST(RlBatch, BalancedDpSharesHaveEqualCountsAndEvenTokens) {
  // Contiguous halves hold 2+3+4+5 = 14 and 7+8+9+20 = 44 tokens (one-token prompts included).
  const RlBatch batch = of_lengths({1, 2, 3, 4, 6, 7, 8, 19});
  const std::vector<int64_t> indices = {0, 1, 2, 3, 4, 5, 6, 7};
  const std::vector<std::vector<int64_t>> shares = dp_shares(batch, indices, 2, true);
  ASSERT_EQ(shares.size(), 2u);
  std::vector<int64_t> seen;
  for (const std::vector<int64_t>& share : shares) {
    EXPECT_EQ(share.size(), 4u);
    EXPECT_TRUE(std::is_sorted(share.begin(), share.end()));
    seen.insert(seen.end(), share.begin(), share.end());
  }
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, indices);
  // Contiguous halves: 14 and 44 tokens. Karmarkar-Karp pairs the sorted workloads and merges the widest
  // spreads first: {20, 7, 4, 2} and {9, 8, 5, 3} = 33 and 25.
  const int64_t first = tokens_of(batch, shares[0]), second = tokens_of(batch, shares[1]);
  EXPECT_EQ(std::min(first, second), 25);
  EXPECT_EQ(std::max(first, second), 33);
  // A mini-batch in shuffled order: its own indices, each share in the mini-batch's order. Tokens 9, 20, 2, 3:
  // the longest goes with the shortest.
  const std::vector<std::vector<int64_t>> mini = dp_shares(batch, std::vector<int64_t>{6, 7, 0, 1}, 2, true);
  std::vector<std::vector<int64_t>> sorted_shares = mini;
  std::sort(sorted_shares.begin(), sorted_shares.end());
  EXPECT_EQ(sorted_shares, (std::vector<std::vector<int64_t>>{{6, 1}, {7, 0}}));
}

TEST(RlMetrics, SeqlenBalanceMetricsCompareContiguousAndBalancedShares) {
  const RlBatch batch = of_lengths({1, 2, 3, 4, 6, 7, 8, 19});
  const Metrics m = seqlen_balance_metrics(batch, 2);
  EXPECT_EQ(m.at("global_seqlen/min"), 14);
  EXPECT_EQ(m.at("global_seqlen/max"), 44);
  EXPECT_EQ(m.at("global_seqlen/minmax_diff"), 30);
  EXPECT_EQ(m.at("global_seqlen/balanced_min"), 25);
  EXPECT_EQ(m.at("global_seqlen/balanced_max"), 33);
  EXPECT_EQ(m.at("global_seqlen/mean"), 29);
}

// Router replay's columns: each response's [T, L, k] rows packed in document order ("replay_experts"), a record
// filled with -1 for the forward ("record_experts"), read back per response.
TEST(RlBatch, RoutingColumnsPackAndReadBackByDocument) {
  RlBatch batch = two_responses();  // 5 and 4 tokens
  const int64_t L = 2, k = 1;
  for (size_t b = 0; b < batch.size(); ++b)
    for (int64_t t = 0; t < num_tokens(batch[b]) * L * k; ++t) batch[b].rollout_experts.push_back(int32_t(10 * b + t));
  engine::TensorMap mb = make_micro_batch(batch, {1, 0}, LossColumns::none, false);
  add_replay_experts(mb, batch, {1, 0}, &RlResponse::rollout_experts, L, k);
  const TensorView replay = mb.get("replay_experts");
  ASSERT_EQ(replay.shape(), Shape({9, L, k}));
  std::vector<double> want;
  for (const size_t b : {1, 0})
    for (const int32_t e : batch[b].rollout_experts) want.push_back(e);
  EXPECT_EQ(values(replay), want);
  add_record_experts(mb, L, k);
  EXPECT_EQ(values(mb.get("record_experts")), std::vector<double>(18, -1.0));
  std::copy_n(replay.data<int32_t>(), 18, mb.get("record_experts").data<int32_t>());
  read_recorded_experts(batch, {1, 0}, mb, &RlResponse::old_experts);
  EXPECT_EQ(batch[0].old_experts, batch[0].rollout_experts);
  EXPECT_EQ(batch[1].old_experts, batch[1].rollout_experts);
  batch[0].rollout_experts.pop_back();
  EXPECT_THROW(add_replay_experts(mb, batch, {1, 0}, &RlResponse::rollout_experts, L, k), Error);
}

// moe_routing_metrics by hand: 2 MoE layers, top 1 of 2 experts.
TEST(RlMetrics, RoutingAgreementAndExpertLoadByHand) {
  RlBatch batch(1);
  batch[0].prompt = {1, 2};
  batch[0].response = {3};
  // Tokens (layer 0, layer 1): rollout (0,1) (1,1) (-1,-1: the last token); old (0,1) (1,0) (0,0).
  batch[0].rollout_experts = {0, 1, 1, 1, -1, -1};
  batch[0].old_experts = {0, 1, 1, 0, 0, 0};
  const RoutingShape shape{.num_moe_layers = 2, .top_k = 1, .num_experts = 2};
  Metrics m = moe_routing_metrics(batch, shape, false, true);
  EXPECT_EQ(m.at("moe/routing_agreement"), 0.5);  // token 0 agrees in both layers, token 1 not; token 2 unrecorded
  EXPECT_EQ(m.count("moe/replay_routing_match"), 0u);
  // Old: layer 0 experts {0: 2, 1: 1}, layer 1 {0: 2, 1: 1}: max / mean = 2 / 1.5 in each.
  EXPECT_DOUBLE_EQ(m.at("moe/load_imbalance"), 2.0 / 1.5);
  EXPECT_EQ(m.at("moe/tokens_per_expert/min"), 1.0);
  EXPECT_EQ(m.at("moe/tokens_per_expert/max"), 2.0);
  EXPECT_EQ(m.at("moe/dropped_tokens"), 0.0);  // dropless: nothing dropped
  RoutingShape with_capacity = shape;
  with_capacity.actor_dropless = false;  // then the actor update's engine counts them
  EXPECT_EQ(moe_routing_metrics(batch, with_capacity, false, true).count("moe/dropped_tokens"), 0u);
  // Rollout: layer 0 {0: 1, 1: 1} (1.0), layer 1 {0: 0, 1: 2} (2.0).
  EXPECT_DOUBLE_EQ(m.at("rollout/moe/load_imbalance"), 1.5);
  EXPECT_EQ(m.at("rollout/moe/tokens_per_expert/min"), 0.0);
  m = moe_routing_metrics(batch, shape, true, false);
  EXPECT_EQ(m.at("moe/replay_routing_match"), 0.5);
  EXPECT_EQ(m.count("moe/routing_agreement"), 0u);
  EXPECT_TRUE(moe_routing_metrics(batch, RoutingShape{}, true, true).empty());  // a dense model
}

}  // namespace
}  // namespace rf::rl

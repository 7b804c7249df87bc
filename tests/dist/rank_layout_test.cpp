// RankLayout against Megatron: the worked example of megatron.md §1.4 (W=16, TP=2, CP=2, DP=2, PP=2,
// experts ETP=1, EP=4, EDP=2) group by group, the examples in the docstring of Megatron's
// generate_masked_orthogonal_rank_groups (other orders), properties every layout must have, and the
// errors for layouts that cannot be built, each naming its key. No MPI.
#include "dist/rank_layout.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "core/error.h"
#include "support/test_support.h"

namespace rf::dist {
namespace {

using Groups = std::vector<std::vector<int>>;

ParallelDims dims(int world, int tp, int cp, int pp, int ep = 1, int etp = 0, std::string order = "tp-cp-ep-dp-pp") {
  ParallelDims d;
  d.world_size = world;
  d.tensor_model_parallel_size = tp;
  d.context_parallel_size = cp;
  d.pipeline_model_parallel_size = pp;
  d.expert_model_parallel_size = ep;
  d.expert_tensor_parallel_size = etp;
  d.order = std::move(order);
  return d;
}

TEST(RankLayout, MegatronWorkedExample) {
  const RankLayout layout(dims(16, /*tp=*/2, /*cp=*/2, /*pp=*/2, /*ep=*/4, /*etp=*/1));
  EXPECT_EQ(layout.data_parallel_size(), 2);
  EXPECT_EQ(layout.expert_data_parallel_size(), 2);
  EXPECT_EQ(layout.groups(GroupKind::tp), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13}, {14, 15}}));
  EXPECT_EQ(layout.groups(GroupKind::cp), (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}, {8, 10}, {9, 11}, {12, 14}, {13, 15}}));
  EXPECT_EQ(layout.groups(GroupKind::dp), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}, {8, 12}, {9, 13}, {10, 14}, {11, 15}}));
  EXPECT_EQ(layout.groups(GroupKind::dp_cp), (Groups{{0, 2, 4, 6}, {1, 3, 5, 7}, {8, 10, 12, 14}, {9, 11, 13, 15}}));
  EXPECT_EQ(layout.groups(GroupKind::pp), (Groups{{0, 8}, {1, 9}, {2, 10}, {3, 11}, {4, 12}, {5, 13}, {6, 14}, {7, 15}}));
  EXPECT_EQ(layout.groups(GroupKind::mp), (Groups{{0, 1, 8, 9}, {2, 3, 10, 11}, {4, 5, 12, 13}, {6, 7, 14, 15}}));
  EXPECT_EQ(layout.groups(GroupKind::tp_cp), (Groups{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9, 10, 11}, {12, 13, 14, 15}}));
  EXPECT_EQ(layout.groups(GroupKind::tp_dp), (Groups{{0, 1, 4, 5}, {2, 3, 6, 7}, {8, 9, 12, 13}, {10, 11, 14, 15}}));
  EXPECT_EQ(layout.groups(GroupKind::tp_dp_cp), (Groups{{0, 1, 2, 3, 4, 5, 6, 7}, {8, 9, 10, 11, 12, 13, 14, 15}}));
  EXPECT_EQ(layout.groups(GroupKind::embedding), layout.groups(GroupKind::pp));  // PP=2: first and last stage
  EXPECT_EQ(layout.groups(GroupKind::position_embedding), (Groups{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}}));
  EXPECT_EQ(layout.groups(GroupKind::ep), (Groups{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9, 10, 11}, {12, 13, 14, 15}}));
  EXPECT_EQ(layout.groups(GroupKind::edp), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}, {8, 12}, {9, 13}, {10, 14}, {11, 15}}));
  Groups singletons;
  for (int r = 0; r < 16; ++r) singletons.push_back({r});
  EXPECT_EQ(layout.groups(GroupKind::etp), singletons);  // ETP=1
  EXPECT_EQ(layout.groups(GroupKind::tp_ep), layout.groups(GroupKind::ep));
  EXPECT_EQ(layout.groups(GroupKind::tp_ep_pp), (Groups{{0, 1, 2, 3, 8, 9, 10, 11}, {4, 5, 6, 7, 12, 13, 14, 15}}));
}

TEST(RankLayout, MembershipIsColourAndPositionInTheGroupList) {
  const RankLayout layout(dims(16, 2, 2, 2, 4, 1));
  const GroupMembership m = layout.membership(GroupKind::dp_cp, 10);
  EXPECT_EQ(m.color, 2);
  EXPECT_EQ(m.index, 1);
  EXPECT_EQ(m.ranks, (std::vector<int>{8, 10, 12, 14}));
  EXPECT_TRUE(m.member());
  EXPECT_EQ(layout.membership(GroupKind::edp, 13).index, 1);
  EXPECT_EQ(layout.label(13), "rank 13 tp=1 cp=0 dp=1 pp=1");
  EXPECT_THROW(layout.membership(GroupKind::tp, 16), Error);
}

TEST(RankLayout, MiddlePipelineStagesAreInNoEmbeddingGroup) {
  const RankLayout layout(dims(8, 2, 1, 4));  // DP=1: pipelines {0,2,4,6} and {1,3,5,7}
  EXPECT_EQ(layout.groups(GroupKind::pp), (Groups{{0, 2, 4, 6}, {1, 3, 5, 7}}));
  EXPECT_EQ(layout.groups(GroupKind::embedding), (Groups{{0, 6}, {1, 7}}));
  EXPECT_EQ(layout.groups(GroupKind::position_embedding), (Groups{{0}, {1}}));
  EXPECT_FALSE(layout.membership(GroupKind::embedding, 2).member());
  EXPECT_EQ(layout.membership(GroupKind::embedding, 2).index, -1);
  EXPECT_EQ(layout.membership(GroupKind::embedding, 7).index, 1);
  EXPECT_FALSE(layout.membership(GroupKind::position_embedding, 6).member());
  // Without pipelining each rank is its own (one-stage) embedding group.
  EXPECT_EQ(RankLayout(dims(2, 1, 1, 1)).groups(GroupKind::embedding), (Groups{{0}, {1}}));
}

// The examples in the docstring of Megatron's generate_masked_orthogonal_rank_groups.
TEST(RankLayout, OtherOrdersAsMegatronDocumentsThem) {
  // "if the gpu size is 8 and order is 'tp-pp-dp', size is '2-2-2', the dp_group here is [[0, 4], [1, 5], [2, 6], [3, 7]]"
  const RankLayout tp_pp_dp(dims(8, 2, 1, 2, 1, 0, "tp-pp-dp"));
  EXPECT_EQ(tp_pp_dp.groups(GroupKind::dp), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(tp_pp_dp.groups(GroupKind::pp), (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  // parallel_size = [tp, dp, pp] = [2, 3, 4]: dp_group[0] = [0, 2, 4], [1] = [1, 3, 5], ..., [7] = [19, 21, 23]
  const RankLayout tp_dp_pp(dims(24, 2, 1, 4, 1, 0, "tp-dp-pp"));
  const Groups dp = tp_dp_pp.groups(GroupKind::dp);
  ASSERT_EQ(dp.size(), 8u);
  EXPECT_EQ(dp[0], (std::vector<int>{0, 2, 4}));
  EXPECT_EQ(dp[1], (std::vector<int>{1, 3, 5}));
  EXPECT_EQ(dp[7], (std::vector<int>{19, 21, 23}));
  // Megatron's use_tp_pp_dp_mapping order: DP slowest. With PP > 1 it needs EDP = DP, which ETP=TP,
  // EP=1 gives.
  const RankLayout pp_before_dp(dims(8, 2, 1, 2, 1, 0, "tp-cp-ep-pp-dp"));
  EXPECT_EQ(pp_before_dp.groups(GroupKind::dp), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(pp_before_dp.groups(GroupKind::edp), pp_before_dp.groups(GroupKind::dp));
}

// Every kind partitions the world (except the embedding groups, which skip middle stages), each group
// has the product of its axes' sizes, and membership agrees with the lists.
void expect_consistent(const RankLayout& layout) {
  const ParallelDims& d = layout.dims();
  const int tp = d.tensor_model_parallel_size, cp = d.context_parallel_size, pp = d.pipeline_model_parallel_size;
  const int dp = layout.data_parallel_size(), ep = d.expert_model_parallel_size, etp = d.expert_tensor_size();
  const int edp = layout.expert_data_parallel_size();
  EXPECT_EQ(tp * cp * dp * pp, layout.world_size());
  EXPECT_EQ(etp * ep * edp * pp, layout.world_size());
  const std::pair<GroupKind, int> sizes[] = {
      {GroupKind::tp, tp},          {GroupKind::cp, cp},         {GroupKind::dp, dp},
      {GroupKind::dp_cp, dp * cp},  {GroupKind::pp, pp},         {GroupKind::mp, tp * pp},
      {GroupKind::tp_cp, tp * cp},  {GroupKind::tp_dp, tp * dp}, {GroupKind::tp_dp_cp, tp * dp * cp},
      {GroupKind::ep, ep},          {GroupKind::etp, etp},       {GroupKind::edp, edp},
      {GroupKind::tp_ep, etp * ep}, {GroupKind::tp_ep_pp, etp * ep * pp}};
  for (const auto& [kind, size] : sizes) {
    std::multiset<int> seen;
    const Groups groups = layout.groups(kind);
    for (const std::vector<int>& group : groups) {
      EXPECT_EQ(int(group.size()), size) << group_name(kind);
      seen.insert(group.begin(), group.end());
    }
    EXPECT_EQ(int(seen.size()), layout.world_size()) << group_name(kind);
    for (int r = 0; r < layout.world_size(); ++r) {
      EXPECT_EQ(seen.count(r), 1u) << group_name(kind) << " rank " << r;
      const GroupMembership m = layout.membership(kind, r);
      ASSERT_TRUE(m.member());
      EXPECT_EQ(m.ranks, groups[size_t(m.color)]);
      EXPECT_EQ(m.ranks[size_t(m.index)], r);
    }
  }
  // A TP group is TP consecutive ranks under the default order (TP fastest).
  if (d.order == "tp-cp-ep-dp-pp") {
    for (const std::vector<int>& group : layout.groups(GroupKind::tp))
      for (size_t i = 1; i < group.size(); ++i) EXPECT_EQ(group[i], group[0] + int(i));
  }
}

TEST(RankLayout, EveryLayoutOfUpToSixteenRanksIsConsistent) {
  int num_layouts = 0;
  for (int world : {1, 2, 3, 4, 6, 8, 12, 16})
    for (int tp = 1; tp <= world; ++tp)
      for (int cp = 1; cp <= world; ++cp)
        for (int pp = 1; pp <= world; ++pp)
          for (int ep = 1; ep <= world; ep *= 2)
            for (int etp : {0, 1, 2}) {
              if (world % (tp * cp * pp) != 0 || world % ((etp == 0 ? tp : etp) * ep * pp) != 0) continue;
              SCOPED_TRACE(::testing::Message() << "W=" << world << " tp=" << tp << " cp=" << cp << " pp=" << pp
                                                << " ep=" << ep << " etp=" << etp);
              expect_consistent(RankLayout(dims(world, tp, cp, pp, ep, etp)));
              ++num_layouts;
            }
  EXPECT_GT(num_layouts, 200);
}

using testing::expect_config_error;

TEST(RankLayout, WrongLayoutsNameTheirKey) {
  expect_config_error([] { RankLayout(dims(8, 0, 1, 1)); }, "tensor_model_parallel_size", "must be >= 1, got 0");
  expect_config_error([] { RankLayout(dims(8, 1, -1, 1)); }, "context_parallel_size", "got -1");
  expect_config_error([] { RankLayout(dims(8, 1, 1, 0)); }, "pipeline_model_parallel_size", "got 0");
  expect_config_error([] { RankLayout(dims(8, 1, 1, 1, 0)); }, "expert_model_parallel_size", "got 0");
  expect_config_error([] { RankLayout(dims(8, 1, 1, 1, 1, -2)); }, "expert_tensor_parallel_size", "got -2");
  expect_config_error([] { RankLayout(dims(0, 1, 1, 1)); }, "world_size", "got 0");
  expect_config_error([] { RankLayout(dims(6, 4, 1, 1)); }, "tensor_model_parallel_size",
                      "tensor_model_parallel_size x context_parallel_size x pipeline_model_parallel_size = 4 x 1 x 1 "
                      "= 4 does not divide the world size 6");
  expect_config_error([] { RankLayout(dims(6, 1, 1, 4)); }, "pipeline_model_parallel_size", "= 1 x 1 x 4 = 4");
  expect_config_error([] { RankLayout(dims(8, 2, 1, 1, 3)); }, "expert_tensor_parallel_size",
                      "expert_tensor_parallel_size x expert_model_parallel_size x pipeline_model_parallel_size = "
                      "2 x 3 x 1 = 6 does not divide the world size 8");
  expect_config_error([] { RankLayout(dims(4, 2, 1, 1, 1, 0, "tp-xp-dp-pp")); }, "order", "unknown token 'xp'");
  expect_config_error([] { RankLayout(dims(4, 2, 1, 1, 1, 0, "tp-dp-tp-pp")); }, "order", "'tp' appears twice");
  expect_config_error([] { RankLayout(dims(4, 2, 1, 1, 1, 0, "tp--dp")); }, "order", "unknown token ''");
  expect_config_error([] { RankLayout(dims(4, 2, 1, 1, 1, 0, "TP-DP")); }, "order", "unknown token 'TP'");
  expect_config_error([] { RankLayout(dims(4, 2, 1, 1, 1, 0, "tp-pp")); }, "order", "leaves out dp, whose size is 2");
  expect_config_error([] { RankLayout(dims(8, 1, 1, 2, 4, 0, "tp-cp-ep-dp")); }, "order", "leaves out pp");
  // PP > 1 and the order does not end in pp: Megatron requires EDP = DP (here 4 vs 1).
  expect_config_error([] { RankLayout(dims(8, 1, 1, 2, 4, 1, "tp-cp-ep-pp-dp")); }, "order",
                      "the expert data-parallel size (1) must equal the data-parallel size (4)");
  // Axes of size 1 may be left out of the order.
  EXPECT_EQ(RankLayout(dims(4, 2, 1, 1, 1, 0, "tp-dp")).groups(GroupKind::dp), (Groups{{0, 2}, {1, 3}}));
}

}  // namespace
}  // namespace rf::dist

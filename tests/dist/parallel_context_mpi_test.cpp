// ParallelContext::create on the MPI world against RankLayout: for every layout the world size allows,
// each group's communicator holds exactly the ranks the layout lists, in the listed order (checked by
// gathering world ranks over the group); ranks outside every embedding group get none. Then the same
// for a role that is a sub-group of the world.
#include "dist/parallel_context.h"

#include <gtest/gtest.h>

#include "mpi_test_world.h"

namespace rf::dist {
namespace {

using testing::world;

// Every layout of `world_size` ranks (expert sizes included), default order.
std::vector<ParallelDims> all_layouts(int world_size) {
  std::vector<ParallelDims> layouts;
  for (int tp = 1; tp <= world_size; ++tp)
    for (int cp = 1; cp <= world_size; ++cp)
      for (int pp = 1; pp <= world_size; ++pp)
        for (int ep = 1; ep <= world_size; ++ep)
          for (int etp : {0, 1}) {
            const int e = etp == 0 ? tp : etp;
            if (world_size % (tp * cp * pp) != 0 || world_size % (e * ep * pp) != 0) continue;
            layouts.push_back({.world_size = world_size,
                               .tensor_model_parallel_size = tp,
                               .context_parallel_size = cp,
                               .pipeline_model_parallel_size = pp,
                               .expert_model_parallel_size = ep,
                               .expert_tensor_parallel_size = etp});
          }
  return layouts;
}

// `ctx` was created over `role`; role rank r is world rank world_of_role[r].
void expect_groups_match_layout(const ParallelContext& ctx, const ProcessGroup& role,
                                const std::vector<int>& world_of_role) {
  const RankLayout& layout = ctx.layout();
  for (GroupKind kind : kAllGroupKinds) {
    SCOPED_TRACE(group_name(kind));
    const GroupMembership m = layout.membership(kind, role.rank());
    ASSERT_EQ(ctx.in_group(kind), m.member());
    if (!m.member()) {
      EXPECT_THROW(ctx.group(kind), Error);
      continue;
    }
    ProcessGroup& group = ctx.group(kind);
    EXPECT_EQ(group.name(), group_name(kind));
    EXPECT_EQ(group.size(), int(m.ranks.size()));
    EXPECT_EQ(group.rank(), m.index);
    Tensor me(Shape{1}, DType::i32), members(Shape{group.size()}, DType::i32);
    me.data<int32_t>()[0] = world().rank();
    group.all_gather(me, members);
    for (int i = 0; i < group.size(); ++i)
      EXPECT_EQ(members.data<int32_t>()[i], world_of_role[size_t(m.ranks[size_t(i)])]) << "member " << i;
  }
  EXPECT_EQ(&ctx.tp(), &ctx.group(GroupKind::tp));
  EXPECT_EQ(&ctx.dp(), &ctx.group(GroupKind::dp));
  EXPECT_EQ(&ctx.pp(), &ctx.group(GroupKind::pp));
  EXPECT_EQ(&ctx.cp(), &ctx.group(GroupKind::cp));
  EXPECT_EQ(ctx.role().size(), role.size());
  EXPECT_EQ(ctx.role().rank(), role.rank());
}

TEST(ParallelContext, EveryLayoutOfTheWorldMatchesRankLayout) {
  ProcessGroup& g = world();
  std::vector<int> identity(size_t(g.size()));
  for (int r = 0; r < g.size(); ++r) identity[size_t(r)] = r;
  int num_layouts = 0;
  for (const ParallelDims& dims : all_layouts(g.size())) {
    SCOPED_TRACE(::testing::Message() << "tp=" << dims.tensor_model_parallel_size << " cp="
                                      << dims.context_parallel_size << " pp=" << dims.pipeline_model_parallel_size
                                      << " ep=" << dims.expert_model_parallel_size
                                      << " etp=" << dims.expert_tensor_parallel_size);
    const ParallelContext ctx = ParallelContext::create(RankLayout(dims), g, /*sequence_parallel=*/true);
    EXPECT_TRUE(ctx.sequence_parallel());
    expect_groups_match_layout(ctx, g, identity);
    ++num_layouts;
  }
  EXPECT_GE(num_layouts, g.size());
}

// Two roles on disjoint halves of the world (as device_mapping places them), each with its own layout.
TEST(ParallelContext, RoleOnASubGroupOfTheWorld) {
  ProcessGroup& g = world();
  if (g.size() % 2 != 0) GTEST_SKIP() << "needs an even world";
  const int half = g.size() / 2, which = g.rank() / half;
  const std::unique_ptr<ProcessGroup> role = g.split(which, g.rank(), "actor");
  ASSERT_EQ(role->size(), half);
  std::vector<int> world_of_role;
  for (int r = 0; r < half; ++r) world_of_role.push_back(which * half + r);
  ParallelDims dims;
  dims.world_size = half;
  dims.tensor_model_parallel_size = half;  // TP over the whole role
  const ParallelContext ctx = ParallelContext::create(RankLayout(dims), *role, false);
  expect_groups_match_layout(ctx, *role, world_of_role);
}

TEST(ParallelContext, LayoutForAnotherWorldSizeIsRefused) {
  ParallelDims dims;
  dims.world_size = world().size() + 1;
  EXPECT_THROW(ParallelContext::create(RankLayout(dims), world(), false), Error);
}

}  // namespace
}  // namespace rf::dist

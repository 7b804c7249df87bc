// Dispatch modes on fake layouts, without MPI: for every mode and many layouts (from RankLayout with
// several order strings, and hand-written ones whose rank numbering follows no order string), each
// rank receives the chunk the mode's rule (written out again here, from verl's decorator.py) names, and
// each chunk is collected from the one rank the rule names. The RL step applies the plans to its batch in
// rl/trainer/role_dispatch.h (tests/rl/trainer).
#include "rl/dispatch_mode.h"

#include <gtest/gtest.h>

#include "support/test_support.h"

namespace rf::testing {
namespace {

using rl::DispatchLayout;
using rl::DispatchMode;

constexpr std::array<DispatchMode, 4> kModes{DispatchMode::one_to_all, DispatchMode::dp_compute_proto,
                                             DispatchMode::megatron_compute_proto,
                                             DispatchMode::megatron_pp_as_dp_proto};

// verl's rules, per rank.
int64_t expected_chunk(DispatchMode mode, const DispatchLayout& layout, int rank) {
  const rl::RankCoords& c = layout.ranks[size_t(rank)];
  switch (mode) {
    case DispatchMode::one_to_all: return 0;
    case DispatchMode::dp_compute_proto: return rank;
    case DispatchMode::megatron_compute_proto: return c.dp;
    case DispatchMode::megatron_pp_as_dp_proto: return (c.cp * layout.dp_size + c.dp) * layout.pp_size + c.pp;
  }
  return -1;
}
bool expected_collect(DispatchMode mode, const DispatchLayout& layout, int rank) {
  const rl::RankCoords& c = layout.ranks[size_t(rank)];
  switch (mode) {
    case DispatchMode::one_to_all: return rank == 0;
    case DispatchMode::dp_compute_proto: return true;
    case DispatchMode::megatron_compute_proto: return c.tp == 0 && c.pp == layout.pp_size - 1 && c.cp == 0;
    case DispatchMode::megatron_pp_as_dp_proto: return c.tp == 0;
  }
  return false;
}

std::vector<DispatchLayout> fake_layouts() {
  std::vector<DispatchLayout> layouts;
  for (const auto& [world, tp, cp, pp, order] : std::vector<std::tuple<int, int, int, int, std::string>>{
           {1, 1, 1, 1, "tp-cp-ep-dp-pp"},
           {4, 1, 1, 1, "tp-cp-ep-dp-pp"},
           {4, 2, 1, 1, "tp-cp-ep-dp-pp"},
           {4, 1, 1, 2, "tp-cp-ep-dp-pp"},
           {8, 2, 1, 2, "tp-cp-ep-dp-pp"},
           {8, 2, 2, 1, "tp-cp-ep-dp-pp"},
           {8, 1, 2, 2, "tp-cp-ep-dp-pp"},
           {8, 2, 2, 2, "tp-cp-ep-dp-pp"},
           {12, 2, 1, 3, "tp-cp-ep-dp-pp"},
           {8, 2, 1, 2, "tp-pp-dp"},
           {8, 2, 2, 1, "cp-dp-tp-pp"},
           {8, 1, 1, 2, "dp-pp-tp"}}) {
    layouts.push_back(DispatchLayout::from_rank_layout(dist::RankLayout({.world_size = world,
                                                                         .tensor_model_parallel_size = tp,
                                                                         .context_parallel_size = cp,
                                                                         .pipeline_model_parallel_size = pp,
                                                                         .order = order})));
  }
  // Hand-written: tp=2 x dp=2 x pp=2 with the ranks numbered in a scrambled order.
  DispatchLayout scrambled{.tp_size = 2, .cp_size = 1, .dp_size = 2, .pp_size = 2, .ranks = {}};
  for (int r : {5, 2, 7, 0, 3, 6, 1, 4})
    scrambled.ranks.push_back({.tp = r % 2, .cp = 0, .dp = (r / 2) % 2, .pp = r / 4});
  layouts.push_back(scrambled);
  return layouts;
}

std::string describe(const DispatchLayout& layout) {
  return "tp=" + std::to_string(layout.tp_size) + " cp=" + std::to_string(layout.cp_size) +
         " dp=" + std::to_string(layout.dp_size) + " pp=" + std::to_string(layout.pp_size);
}

TEST(DispatchMode, PlansFollowVerlsRules) {
  for (const DispatchLayout& layout : fake_layouts()) {
    for (DispatchMode mode : kModes) {
      SCOPED_TRACE(std::string(rl::dispatch_mode_name(mode)) + " " + describe(layout));
      const rl::DispatchPlan plan = rl::make_dispatch_plan(mode, layout);
      ASSERT_EQ(plan.chunk_of_rank.size(), layout.ranks.size());
      std::vector<int> collectors(size_t(plan.num_chunks), 0);
      for (int r = 0; r < layout.world_size(); ++r) {
        EXPECT_EQ(plan.chunk_of_rank[size_t(r)], expected_chunk(mode, layout, r)) << "rank " << r;
        if (expected_collect(mode, layout, r)) {
          EXPECT_EQ(plan.collect_rank_of_chunk[size_t(expected_chunk(mode, layout, r))], r);
          ++collectors[size_t(expected_chunk(mode, layout, r))];
        }
      }
      for (int count : collectors) EXPECT_EQ(count, 1);  // one collect rank per chunk
    }
  }
}

TEST(DispatchMode, LayoutErrorsNameTheRankOrSize) {
  DispatchLayout layout{.tp_size = 2, .cp_size = 1, .dp_size = 1, .pp_size = 1, .ranks = {{.tp = 0}, {.tp = 0}}};
  expect_error_containing([&] { (void)rl::make_dispatch_plan(DispatchMode::dp_compute_proto, layout); },
                          "ranks 0 and 1 both sit at tp=0");
  layout.ranks[1].tp = 2;
  expect_error_containing([&] { layout.validate(); }, "rank 1 at tp=2 cp=0 dp=0 pp=0 is outside");
  layout.ranks.pop_back();
  expect_error_containing([&] { layout.validate(); }, "ranks: expected tp*cp*dp*pp = 2, got 1");
  layout.dp_size = 0;
  expect_error_containing([&] { layout.validate(); }, "expected each >= 1");
}

}  // namespace
}  // namespace rf::testing

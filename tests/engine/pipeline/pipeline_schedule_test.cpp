// engine/pipeline: the schedule builders against §3.5-§3.7 (the virtual-id table, warmup counts, the
// lists of a small 1F1B pipeline written out by hand, the interleaved ring wrap, the N constraints), every
// table of a grid of shapes through check_schedule_tables, broken tables that it must refuse, and the text
// table behind --dump-schedule.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/error.h"
#include "engine/pipeline/pipeline_schedule.h"
#include "engine/pipeline/pipeline_schedule_table.h"
#include "support/test_support.h"

namespace rf::engine::pipeline {
namespace {

std::vector<std::string> labels(const StageActions& actions) {
  std::vector<std::string> out;
  for (const PipelineAction& a : actions) out.push_back(action_label(a));
  return out;
}

// Forwards before the first backward.
int64_t forwards_before_first_backward(const StageActions& actions) {
  int64_t n = 0;
  for (const PipelineAction& a : actions) {
    if (a.kind == ActionKind::backward) break;
    n += a.kind == ActionKind::forward ? 1 : 0;
  }
  return n;
}

std::vector<VirtualStep> computes_of(const StageActions& actions, ActionKind kind) {
  std::vector<VirtualStep> out;
  for (const PipelineAction& a : actions) {
    if (a.kind == kind) out.push_back(VirtualStep{a.microbatch, a.chunk});
  }
  return out;
}

TEST(PipelineSchedule, VirtualStepTableMatchesTheSpecExample) {
  // §3.7: P=2, M=5, N=3, V=2 -> mb 0 1 2 0 1 2 3 4 3 4, chunk 0 0 0 1 1 1 0 0 1 1.
  const std::vector<VirtualStep> table = make_virtual_step_table(5, 2, 3);
  const std::vector<int64_t> mb = {0, 1, 2, 0, 1, 2, 3, 4, 3, 4};
  const std::vector<int64_t> chunk = {0, 0, 0, 1, 1, 1, 0, 0, 1, 1};
  ASSERT_EQ(table.size(), 10u);
  for (size_t k = 0; k < table.size(); ++k) {
    EXPECT_EQ(table[k].microbatch, mb[k]) << "k=" << k;
    EXPECT_EQ(table[k].chunk, chunk[k]) << "k=" << k;
  }
}

TEST(PipelineSchedule, OneFOneBListsOfTwoStagesByHand) {
  // P=2, M=3. Stage 0: warmup 1, steady 2, cooldown 1; stage 1: warmup 0, steady 3.
  EXPECT_EQ(labels(make_1f1b_schedule(2, 0, 3, PipelinePass::forward_backward)),
            (std::vector<std::string>{"ag0", "F0.0", ">a0.0",                 // warmup
                                      "F1.0", ">a1.0+<g0.0", "B0.0",           // steady 0
                                      "F2.0", ">a2.0+<g1.0", "B1.0",           // steady 1 (last: send_backward, a no-op here)
                                      "es0", "<g2.0", "B2.0", "rs0"}));        // cooldown
  EXPECT_EQ(labels(make_1f1b_schedule(2, 1, 3, PipelinePass::forward_backward)),
            (std::vector<std::string>{"ag0", "<a0.0",                          // recv before the steady state
                                      "F0.0", "B0.0", ">g0.0+<a1.0",          // send_backward_recv_forward
                                      "F1.0", "B1.0", ">g1.0+<a2.0",          //
                                      "F2.0", "es0", "B2.0", ">g2.0", "rs0"}));  // last: send_backward
  // Forward-only: recv, forward, send for every micro-batch, no backward and no grad sync.
  EXPECT_EQ(labels(make_1f1b_schedule(2, 1, 2, PipelinePass::forward_only)),
            (std::vector<std::string>{"ag0", "<a0.0", "F0.0", "<a1.0", "F1.0"}));
  EXPECT_EQ(labels(make_no_pipelining_schedule(2, PipelinePass::forward_backward)),
            (std::vector<std::string>{"ag0", "F0.0", "B0.0", "es0", "F1.0", "B1.0", "rs0"}));
}

TEST(PipelineSchedule, OneFOneBWarmupIsTheSpecFormula) {
  // §3.6 example P=4, M=8: stage 0 warmup 3 / steady 5 / cooldown 3; stage 3: 0/8/0.
  const ScheduleShape shape{.num_stages = 4, .num_chunks = 1, .num_microbatches = 8};
  const PipelineSchedule schedule = make_pipeline_schedule(shape);
  for (int64_t p = 0; p < 4; ++p) {
    EXPECT_EQ(num_warmup_steps(shape, p), 3 - p);
    // The first backward comes right after the first steady forward.
    EXPECT_EQ(forwards_before_first_backward(schedule.stages[size_t(p)]), 3 - p + 1) << "stage " << p;
  }
  // Fewer micro-batches than stages: the warmup is capped at M.
  EXPECT_EQ(num_warmup_steps(ScheduleShape{.num_stages = 4, .num_chunks = 1, .num_microbatches = 2}, 0), 2);
}

TEST(PipelineSchedule, InterleavedFollowsTheVirtualTableAndRingWrap) {
  const ScheduleShape shape{.num_stages = 2, .num_chunks = 2, .num_microbatches = 5, .microbatch_group_size = 3};
  const PipelineSchedule schedule = make_pipeline_schedule(shape);
  const std::vector<VirtualStep> table = make_virtual_step_table(5, 2, 3);
  for (int64_t p = 0; p < 2; ++p) {
    const StageActions& actions = schedule.stages[size_t(p)];
    // Warmup 2(P-p-1) + (V-1)N: 5 on stage 0, 3 on stage 1.
    EXPECT_EQ(num_warmup_steps(shape, p), 2 * (2 - p - 1) + 3);
    EXPECT_EQ(forwards_before_first_backward(actions), num_warmup_steps(shape, p) + 1);
    // Forwards in table order; backwards in table order with the chunk reversed.
    EXPECT_EQ(computes_of(actions, ActionKind::forward), table);
    std::vector<VirtualStep> reversed = table;
    for (VirtualStep& s : reversed) s.chunk = 1 - s.chunk;
    EXPECT_EQ(computes_of(actions, ActionKind::backward), reversed);
  }
  // The ring wrap: stage 0 receives chunk 1's input from stage 1 (its chunk 0 output), and stage 1 receives
  // chunk 0's output gradient from stage 0 (its chunk 1 input gradient).
  auto has_transfer = [&](int64_t stage, Transfer wanted) {
    for (const PipelineAction& a : schedule.stages[size_t(stage)]) {
      if (std::find(a.transfers.begin(), a.transfers.end(), wanted) != a.transfers.end()) return true;
    }
    return false;
  };
  EXPECT_TRUE(has_transfer(0, Transfer{TransferDirection::recv, TransferTensor::activation, 1, 2, 1}));
  EXPECT_TRUE(has_transfer(1, Transfer{TransferDirection::send, TransferTensor::activation, 0, 2, 0}));
  EXPECT_TRUE(has_transfer(1, Transfer{TransferDirection::recv, TransferTensor::grad, 0, 4, 0}));
  EXPECT_TRUE(has_transfer(0, Transfer{TransferDirection::send, TransferTensor::grad, 1, 4, 1}));
  // Nothing leaves the pipeline's ends: stage 1 never sends chunk 1's output, stage 0 never chunk 0's gradient.
  for (int64_t mb = 0; mb < 5; ++mb) {
    EXPECT_FALSE(has_transfer(1, Transfer{TransferDirection::send, TransferTensor::activation, 0, mb, 1}));
    EXPECT_FALSE(has_transfer(0, Transfer{TransferDirection::send, TransferTensor::grad, 1, mb, 0}));
  }
  check_schedule_tables(schedule);
}

TEST(PipelineSchedule, InterleavedGroupSizeConstraintsNameTheKey) {
  auto expect_config_error = [](ScheduleShape shape, const std::string& fragment) {
    try {
      make_pipeline_schedule(shape);
      ADD_FAILURE() << "no error for P=" << shape.num_stages << " V=" << shape.num_chunks << " M="
                    << shape.num_microbatches << " N=" << shape.microbatch_group_size;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  // N < P, N > M, and a last group shorter than P (M=6, N=4: 6 % 4 = 2 < P=4).
  expect_config_error({.num_stages = 4, .num_chunks = 2, .num_microbatches = 8, .microbatch_group_size = 3},
                      "microbatch_group_size_per_vp_stage: 3 must lie in [pipeline_model_parallel_size = 4");
  expect_config_error({.num_stages = 2, .num_chunks = 2, .num_microbatches = 4, .microbatch_group_size = 5},
                      "microbatch_group_size_per_vp_stage: 5 must lie in");
  expect_config_error({.num_stages = 4, .num_chunks = 2, .num_microbatches = 6, .microbatch_group_size = 4},
                      "microbatch_group_size_per_vp_stage: num_microbatches = 6 leaves a last group of 2");
  // The default N = P needs M >= P.
  expect_config_error({.num_stages = 4, .num_chunks = 2, .num_microbatches = 2},
                      "microbatch_group_size_per_vp_stage: 4 must lie in");
  expect_config_error({.num_stages = 1, .num_chunks = 2, .num_microbatches = 4},
                      "virtual_pipeline_model_parallel_size: 2 model chunks per stage need");
  // M % N >= P is allowed: P=2, M=5, N=3 leaves 2.
  EXPECT_NO_THROW(make_pipeline_schedule({.num_stages = 2, .num_chunks = 2, .num_microbatches = 5,
                                          .microbatch_group_size = 3}));
  testing::expect_error_containing(
      [] { make_interleaved_1f1b_schedule(2, 0, 1, 4, 2, PipelinePass::forward_backward); },
      "virtual_pipeline_model_parallel_size: the interleaved schedule needs at least 2");
}

TEST(PipelineSchedule, EveryTableOfAGridChecks) {
  int64_t checked = 0;
  for (PipelinePass pass : {PipelinePass::forward_backward, PipelinePass::forward_only}) {
    for (int64_t p = 1; p <= 5; ++p) {
      for (int64_t v = 1; v <= (p == 1 ? 1 : 3); ++v) {
        for (int64_t m = 1; m <= 12; ++m) {
          for (int64_t n = (v == 1 ? 0 : p); n <= (v == 1 ? 0 : m); ++n) {
            const ScheduleShape shape{p, v, m, n, pass};
            if (v > 1 && m % n != 0 && m % n < p) continue;  // refused, tested above
            SCOPED_TRACE(::testing::Message() << "P=" << p << " V=" << v << " M=" << m << " N=" << n
                                              << (pass == PipelinePass::forward_only ? " forward-only" : ""));
            const PipelineSchedule schedule = make_pipeline_schedule(shape);
            ASSERT_NO_THROW(check_schedule_tables(schedule));
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 300);
}

size_t index_of(const StageActions& actions, const std::string& label) {
  for (size_t i = 0; i < actions.size(); ++i) {
    if (action_label(actions[i]) == label) return i;
  }
  ADD_FAILURE() << "no action " << label;
  return 0;
}

TEST(PipelineSchedule, BrokenTablesAreRefused) {
  const PipelineSchedule good = make_pipeline_schedule({.num_stages = 2, .num_chunks = 1, .num_microbatches = 3});
  ASSERT_NO_THROW(check_schedule_tables(good));

  // Two forwards swapped on stage 1: B0.0 now comes before F0.0.
  PipelineSchedule swapped = good;
  StageActions& s1 = swapped.stages[1];
  std::swap(s1[index_of(s1, "F0.0")], s1[index_of(s1, "F1.0")]);
  testing::expect_error_containing([&] { check_schedule_tables(swapped); },
                                   "stage 1 action 3 (B0.0): backward before its forward");

  // Two exchanges of stage 0 swapped: the sends of activations 1.0 and 2.0 cross.
  PipelineSchedule crossed = make_pipeline_schedule({.num_stages = 2, .num_chunks = 1, .num_microbatches = 3,
                                                     .pass = PipelinePass::forward_only});
  StageActions& c0 = crossed.stages[0];
  std::swap(c0[index_of(c0, ">a1.0")], c0[index_of(c0, ">a2.0")]);
  testing::expect_error_containing([&] { check_schedule_tables(crossed); }, "before the compute");
  std::swap(c0[index_of(c0, "F1.0")], c0[index_of(c0, "F2.0")]);  // forwards follow: now only the order is off
  testing::expect_error_containing([&] { check_schedule_tables(crossed); },
                                   "activation receive #1 from stage 0 expects 1.0, but stage 0 sends 2.0");

  // A combined exchange split into its halves in the wrong order on both sides: stage 0 waits for gradient 0.0
  // before sending activation 1.0, stage 1 waits for activation 1.0 before sending gradient 0.0. Every send
  // still pairs with its receive; only the replay sees the deadlock.
  PipelineSchedule split = good;
  auto split_exchange = [](StageActions& actions, const std::string& label, TransferDirection first_direction) {
    const size_t i = index_of(actions, label);
    PipelineAction recv_half = actions[i];
    PipelineAction send_half = actions[i];
    std::erase_if(recv_half.transfers, [](const Transfer& t) { return t.direction == TransferDirection::send; });
    std::erase_if(send_half.transfers, [](const Transfer& t) { return t.direction == TransferDirection::recv; });
    const bool recv_first = first_direction == TransferDirection::recv;
    actions[i] = recv_first ? recv_half : send_half;
    actions.insert(actions.begin() + std::ptrdiff_t(i) + 1, recv_first ? send_half : recv_half);
  };
  split_exchange(split.stages[0], ">a1.0+<g0.0", TransferDirection::recv);
  split_exchange(split.stages[1], ">g0.0+<a1.0", TransferDirection::recv);
  testing::expect_error_containing([&] { check_schedule_tables(split); },
                                   "deadlocks; stage 0 waits in action 4 (<g0.0); stage 1 waits in action 4 (<a1.0)");

  // Grad sync enabled too early (before the chunk's second-to-last backward).
  PipelineSchedule early = good;
  StageActions& e0 = early.stages[0];
  const PipelineAction enable = e0[index_of(e0, "es0")];
  e0.erase(e0.begin() + std::ptrdiff_t(index_of(e0, "es0")));
  e0.insert(e0.begin() + std::ptrdiff_t(index_of(e0, "B0.0")), enable);
  testing::expect_error_containing([&] { check_schedule_tables(early); },
                                   "enable_grad_sync must sit between the chunk's last two backwards");

  // A backward dropped: the micro-batch is never backwarded and its gradient is never sent.
  PipelineSchedule dropped = good;
  dropped.stages[1].erase(dropped.stages[1].begin() + std::ptrdiff_t(index_of(dropped.stages[1], "B1.0")));
  testing::expect_error_containing([&] { check_schedule_tables(dropped); }, "stage 1 action -1 (-): never backwards 1.0");

  // An activation sent to the wrong neighbour in a three-stage ring.
  PipelineSchedule misrouted = make_pipeline_schedule({.num_stages = 3, .num_chunks = 1, .num_microbatches = 2});
  for (PipelineAction& a : misrouted.stages[0]) {
    for (Transfer& t : a.transfers) t.peer = 2;
  }
  testing::expect_error_containing([&] { check_schedule_tables(misrouted); },
                                   "send of activation 0.0 with stage 2, expected stage 1");
}

TEST(PipelineSchedule, TableTextOfTwoStages) {
  const std::string text =
      format_schedule_table(make_pipeline_schedule({.num_stages = 2, .num_chunks = 1, .num_microbatches = 2}));
  // One slot per forward or backward; stage 1 starts a slot late and stage 0 waits for the gradients.
  const std::string expected_rows =
      "slot | stage 0          | stage 1\n"
      "   0 | ag0 F0.0 >a0.0   | ag0 <a0.0\n"
      "   1 | F1.0 >a1.0+<g0.0 | F0.0\n"
      "   2 |                  | B0.0 >g0.0+<a1.0\n"
      "   3 | B0.0 es0 <g1.0   | F1.0 es0\n"
      "   4 |                  | B1.0 >g1.0 rs0\n"
      "   5 | B1.0 rs0         |\n";
  EXPECT_EQ(text.substr(text.find('\n') + 1), expected_rows) << text;
  EXPECT_EQ(text.rfind("# pipeline schedule P=2 V=1 M=2: F", 0), 0u) << text;
}

}  // namespace
}  // namespace rf::engine::pipeline

#include "engine/pipeline/pipeline_schedule_table.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <tuple>

#include "core/error.h"
#include "engine/pipeline/pipeline_simulator.h"

namespace rf::engine::pipeline {
namespace {

constexpr int64_t kNone = -1;

// Action indices of one stage's list, by (micro-batch, chunk).
class IndexGrid {
 public:
  IndexGrid(int64_t num_microbatches, int64_t num_chunks)
      : num_chunks_(num_chunks), index_(size_t(num_microbatches * num_chunks), kNone) {}
  int64_t& at(int64_t mb, int64_t chunk) { return index_[size_t(mb * num_chunks_ + chunk)]; }
  int64_t at(int64_t mb, int64_t chunk) const { return index_[size_t(mb * num_chunks_ + chunk)]; }

 private:
  int64_t num_chunks_;
  std::vector<int64_t> index_;
};

// Where each kind of action sits in one stage's list.
struct StageIndex {
  IndexGrid forward, backward, send_activation, recv_activation, send_grad, recv_grad;
  std::vector<std::vector<int64_t>> markers;  // [param_gather, enable_grad_sync, launch_grad_sync][chunk] -> indices
};

size_t marker_slot(ActionKind kind) {
  return kind == ActionKind::param_gather ? 0 : kind == ActionKind::enable_grad_sync ? 1 : 2;
}

struct TensorName {
  int64_t microbatch = 0;
  int64_t chunk = 0;
};

class TableChecker {
 public:
  explicit TableChecker(const PipelineSchedule& schedule)
      : schedule_(schedule),
        p_size_(schedule.shape.num_stages),
        v_size_(schedule.shape.num_chunks),
        m_(schedule.shape.num_microbatches),
        train_(schedule.shape.pass == PipelinePass::forward_backward) {}

  void run() {
    schedule_.shape.validate();
    RF_CHECK(int64_t(schedule_.stages.size()) == p_size_, "the schedule has {} stage lists for {} stages",
             schedule_.stages.size(), p_size_);
    for (int64_t p = 0; p < p_size_; ++p) {
      index_stage(p);
      check_computes(p);
      check_transfers(p);
      check_markers(p);
    }
    check_channels();
    check_timing();
  }

 private:
  [[noreturn]] void fail(int64_t stage, int64_t action, const std::string& what) const {
    const std::string label =
        action == kNone ? std::string("-") : action_label(schedule_.stages[size_t(stage)][size_t(action)]);
    core::throw_check_failure(__FILE__, __LINE__, "check_schedule_tables",
                              fmt::format("pipeline schedule: stage {} action {} ({}): {}", stage, action, label, what));
  }

  void check_range(int64_t stage, int64_t action, int64_t mb, int64_t chunk) const {
    if (mb < 0 || mb >= m_ || chunk < 0 || chunk >= v_size_) {
      fail(stage, action, fmt::format("micro-batch {} chunk {} outside M={} V={}", mb, chunk, m_, v_size_));
    }
  }

  static void set_once(IndexGrid& grid, int64_t mb, int64_t chunk, int64_t action, const auto& on_repeat) {
    if (grid.at(mb, chunk) != kNone) on_repeat();
    grid.at(mb, chunk) = action;
  }

  void index_stage(int64_t p) {
    StageIndex idx{IndexGrid(m_, v_size_), IndexGrid(m_, v_size_), IndexGrid(m_, v_size_), IndexGrid(m_, v_size_),
                   IndexGrid(m_, v_size_), IndexGrid(m_, v_size_),
                   std::vector<std::vector<int64_t>>(3, std::vector<int64_t>())};
    for (auto& per_chunk : idx.markers) per_chunk.assign(size_t(v_size_), kNone);
    const StageActions& actions = schedule_.stages[size_t(p)];
    for (int64_t i = 0; i < int64_t(actions.size()); ++i) {
      const PipelineAction& a = actions[size_t(i)];
      switch (a.kind) {
        case ActionKind::forward:
        case ActionKind::backward: {
          check_range(p, i, a.microbatch, a.chunk);
          const bool fwd = a.kind == ActionKind::forward;
          if (!fwd && !train_) fail(p, i, "a backward in a forward-only schedule");
          set_once(fwd ? idx.forward : idx.backward, a.microbatch, a.chunk, i,
                   [&] { fail(p, i, fwd ? "forwarded twice" : "backwarded twice"); });
          break;
        }
        case ActionKind::param_gather:
        case ActionKind::enable_grad_sync:
        case ActionKind::launch_grad_sync: {
          check_range(p, i, 0, a.chunk);
          if (!train_ && a.kind != ActionKind::param_gather) fail(p, i, "grad sync in a forward-only schedule");
          int64_t& slot = idx.markers[marker_slot(a.kind)][size_t(a.chunk)];
          if (slot != kNone) fail(p, i, "the chunk's marker appears twice");
          slot = i;
          break;
        }
        case ActionKind::communicate: {
          if (a.transfers.empty()) fail(p, i, "a communicate with no transfer");
          for (const Transfer& t : a.transfers) index_transfer(p, i, t, idx);
          break;
        }
      }
    }
    stages_.push_back(std::move(idx));
  }

  void index_transfer(int64_t p, int64_t i, const Transfer& t, StageIndex& idx) const {
    check_range(p, i, t.microbatch, t.chunk);
    const bool send = t.direction == TransferDirection::send;
    const bool act = t.tensor == TransferTensor::activation;
    if (!act && !train_) fail(p, i, "a gradient transfer in a forward-only schedule");
    // Activations flow to the next stage, gradients to the previous one.
    const int64_t expected_peer = (send == act) ? next_stage(p, p_size_) : prev_stage(p, p_size_);
    if (t.peer != expected_peer) {
      fail(p, i, fmt::format("{} of {} {}.{} with stage {}, expected stage {}", send ? "send" : "receive",
                             act ? "activation" : "gradient", t.microbatch, t.chunk, t.peer, expected_peer));
    }
    IndexGrid& grid = act ? (send ? idx.send_activation : idx.recv_activation) : (send ? idx.send_grad : idx.recv_grad);
    set_once(grid, t.microbatch, t.chunk, i, [&] {
      fail(p, i, fmt::format("{}s {} {}.{} twice", send ? "send" : "receive", act ? "activation" : "gradient",
                             t.microbatch, t.chunk));
    });
  }

  void check_computes(int64_t p) const {
    const StageIndex& idx = stages_[size_t(p)];
    for (int64_t mb = 0; mb < m_; ++mb) {
      for (int64_t c = 0; c < v_size_; ++c) {
        if (idx.forward.at(mb, c) == kNone) fail(p, kNone, fmt::format("never forwards {}.{}", mb, c));
        if (!train_) continue;
        const int64_t b = idx.backward.at(mb, c);
        if (b == kNone) fail(p, kNone, fmt::format("never backwards {}.{}", mb, c));
        if (b < idx.forward.at(mb, c)) fail(p, b, "backward before its forward");
      }
    }
  }

  // `needed`: the stage must hold this transfer; it then sits before (`before` = true) or after `anchor`.
  void check_transfer_at(int64_t p, const IndexGrid& grid, int64_t mb, int64_t c, bool needed, int64_t anchor,
                         bool before, const char* what) const {
    const int64_t at = grid.at(mb, c);
    if (!needed) {
      if (at != kNone) fail(p, at, fmt::format("{} {}.{} that nothing uses", what, mb, c));
      return;
    }
    if (at == kNone) fail(p, anchor, fmt::format("no {} {}.{}", what, mb, c));
    if (before ? at > anchor : at < anchor) {
      fail(p, at, fmt::format("{} {}.{} {} the compute at action {}", what, mb, c, before ? "after" : "before", anchor));
    }
  }

  void check_transfers(int64_t p) const {
    const StageIndex& idx = stages_[size_t(p)];
    const bool first = p == 0;
    const bool last = p == p_size_ - 1;
    for (int64_t mb = 0; mb < m_; ++mb) {
      for (int64_t c = 0; c < v_size_; ++c) {
        const int64_t f = idx.forward.at(mb, c);
        check_transfer_at(p, idx.recv_activation, mb, c, !(first && c == 0), f, true, "receive of activation");
        check_transfer_at(p, idx.send_activation, mb, c, !(last && c == v_size_ - 1), f, false, "send of activation");
        if (!train_) continue;
        const int64_t b = idx.backward.at(mb, c);
        check_transfer_at(p, idx.recv_grad, mb, c, !(last && c == v_size_ - 1), b, true, "receive of gradient");
        check_transfer_at(p, idx.send_grad, mb, c, !(first && c == 0), b, false, "send of gradient");
      }
    }
  }

  void check_markers(int64_t p) const {
    const StageIndex& idx = stages_[size_t(p)];
    for (int64_t c = 0; c < v_size_; ++c) {
      int64_t first_forward = std::numeric_limits<int64_t>::max();
      for (int64_t mb = 0; mb < m_; ++mb) first_forward = std::min(first_forward, idx.forward.at(mb, c));
      const int64_t gather = idx.markers[0][size_t(c)];
      if (gather == kNone) fail(p, kNone, fmt::format("no param_gather of chunk {}", c));
      if (gather > first_forward) fail(p, gather, "param_gather after the chunk's first forward");
      if (!train_) continue;
      std::vector<int64_t> backwards;
      for (int64_t mb = 0; mb < m_; ++mb) backwards.push_back(idx.backward.at(mb, c));
      std::sort(backwards.begin(), backwards.end());
      const int64_t last_backward = backwards.back();
      const int64_t before_last = backwards.size() > 1 ? backwards[backwards.size() - 2] : kNone;
      const int64_t enable = idx.markers[1][size_t(c)];
      const int64_t launch = idx.markers[2][size_t(c)];
      if (enable == kNone) fail(p, kNone, fmt::format("no enable_grad_sync of chunk {}", c));
      if (enable > last_backward || enable < before_last) {
        fail(p, enable, "enable_grad_sync must sit between the chunk's last two backwards");
      }
      if (launch == kNone) fail(p, kNone, fmt::format("no launch_grad_sync of chunk {}", c));
      if (launch < last_backward) fail(p, launch, "launch_grad_sync before the chunk's last backward");
    }
  }

  // The tensor a send names, as its receiver names it: one chunk on where the ring wraps.
  TensorName as_received(int64_t sender, int64_t receiver, TransferTensor tensor, TensorName sent) const {
    if (tensor == TransferTensor::activation && sender == p_size_ - 1 && receiver == 0) ++sent.chunk;
    if (tensor == TransferTensor::grad && sender == 0 && receiver == p_size_ - 1) --sent.chunk;
    return sent;
  }

  void check_channels() const {
    // (sender, receiver, tensor) -> the sends in the sender's order, the receives in the receiver's.
    std::map<std::tuple<int64_t, int64_t, int>, std::array<std::vector<std::pair<TensorName, int64_t>>, 2>> channels;
    for (int64_t p = 0; p < p_size_; ++p) {
      const StageActions& actions = schedule_.stages[size_t(p)];
      for (int64_t i = 0; i < int64_t(actions.size()); ++i) {
        for (const Transfer& t : actions[size_t(i)].transfers) {
          const bool send = t.direction == TransferDirection::send;
          const auto key = std::make_tuple(send ? p : t.peer, send ? t.peer : p, int(t.tensor));
          channels[key][send ? 0 : 1].push_back({TensorName{t.microbatch, t.chunk}, i});
        }
      }
    }
    for (const auto& [key, ends] : channels) {
      const auto& [sender, receiver, tensor_int] = key;
      const auto tensor = TransferTensor(tensor_int);
      const char* what = tensor == TransferTensor::activation ? "activation" : "gradient";
      const auto& sends = ends[0];
      const auto& recvs = ends[1];
      for (size_t k = 0; k < std::min(sends.size(), recvs.size()); ++k) {
        const TensorName expected = as_received(sender, receiver, tensor, sends[k].first);
        const TensorName got = recvs[k].first;
        if (expected.microbatch != got.microbatch || expected.chunk != got.chunk) {
          fail(receiver, recvs[k].second,
               fmt::format("{} receive #{} from stage {} expects {}.{}, but stage {} sends {}.{} (action {}) as #{}",
                           what, k, sender, got.microbatch, got.chunk, sender, sends[k].first.microbatch,
                           sends[k].first.chunk, sends[k].second, k));
        }
      }
      if (sends.size() != recvs.size()) {
        fail(sender, kNone, fmt::format("sends {} {}s to stage {}, which receives {}", sends.size(), what, receiver,
                                        recvs.size()));
      }
    }
  }

  void check_timing() const {
    // Unit compute, free transfers: a deadlock throws here, naming where each stuck stage waits.
    const SimulationReport report = simulate_pipeline(schedule_, uniform_costs(p_size_, v_size_, 1.0, 1.0));
    auto start = [&](int64_t p, const IndexGrid& grid, int64_t mb, int64_t c) {
      return report.timings[size_t(p)][size_t(grid.at(mb, c))].start;
    };
    auto end = [&](int64_t p, const IndexGrid& grid, int64_t mb, int64_t c) {
      return report.timings[size_t(p)][size_t(grid.at(mb, c))].end;
    };
    for (int64_t p = 0; p < p_size_; ++p) {
      const StageIndex& idx = stages_[size_t(p)];
      for (int64_t mb = 0; mb < m_; ++mb) {
        for (int64_t c = 0; c < v_size_; ++c) {
          // The forward feeding (mb, c) on stage p, and the backward whose gradient it receives.
          const int64_t fwd_from = p > 0 ? p - 1 : p_size_ - 1;
          const int64_t fwd_chunk = p > 0 ? c : c - 1;
          if (fwd_chunk >= 0 && start(p, idx.forward, mb, c) < end(fwd_from, stages_[size_t(fwd_from)].forward, mb, fwd_chunk)) {
            fail(p, idx.forward.at(mb, c), fmt::format("starts before stage {}'s forward of {}.{} ends", fwd_from, mb,
                                                       fwd_chunk));
          }
          if (!train_) continue;
          const int64_t bwd_from = p < p_size_ - 1 ? p + 1 : 0;
          const int64_t bwd_chunk = p < p_size_ - 1 ? c : c + 1;
          if (bwd_chunk < v_size_ &&
              start(p, idx.backward, mb, c) < end(bwd_from, stages_[size_t(bwd_from)].backward, mb, bwd_chunk)) {
            fail(p, idx.backward.at(mb, c), fmt::format("starts before stage {}'s backward of {}.{} ends", bwd_from,
                                                        mb, bwd_chunk));
          }
        }
      }
    }
  }

  const PipelineSchedule& schedule_;
  int64_t p_size_;
  int64_t v_size_;
  int64_t m_;
  bool train_;
  std::vector<StageIndex> stages_;
};

}  // namespace

void check_schedule_tables(const PipelineSchedule& schedule) { TableChecker(schedule).run(); }

std::string format_schedule_table(const PipelineSchedule& schedule) {
  const int64_t num_stages = int64_t(schedule.stages.size());
  const SimulationReport report =
      simulate_pipeline(schedule, uniform_costs(num_stages, schedule.shape.num_chunks, 1.0, 1.0));
  const auto num_slots = size_t(std::llround(report.step_seconds));
  std::vector<std::vector<std::string>> cells(std::max<size_t>(num_slots, 1), std::vector<std::string>(size_t(num_stages)));
  for (int64_t p = 0; p < num_stages; ++p) {
    const StageActions& actions = schedule.stages[size_t(p)];
    size_t row = 0;  // actions before the first compute head row 0
    for (size_t i = 0; i < actions.size(); ++i) {
      const bool compute = actions[i].kind == ActionKind::forward || actions[i].kind == ActionKind::backward;
      if (compute) row = size_t(std::llround(report.timings[size_t(p)][i].start));
      std::string& cell = cells[row][size_t(p)];
      if (!cell.empty()) cell += ' ';
      cell += action_label(actions[i]);
    }
  }
  size_t width = 0;
  for (const auto& row : cells) {
    for (const std::string& cell : row) width = std::max(width, cell.size());
  }
  width = std::max<size_t>(width, 8);
  const ScheduleShape& s = schedule.shape;
  std::string out = fmt::format(
      "# pipeline schedule P={} V={} M={}{}{}: Fm.c / Bm.c forward / backward of micro-batch m on chunk c, one slot each; "
      ">a / <a send / receive an activation, >g / <g a gradient (+ joins transfers posted together); "
      "ag all-gather params, es enable grad sync, rs launch grad reduction (of chunk)\n",
      s.num_stages, s.num_chunks, s.num_microbatches, s.num_chunks > 1 ? fmt::format(" N={}", s.group_size()) : "",
      s.pass == PipelinePass::forward_only ? " forward-only" : "");
  auto add_row = [&](std::string line, const std::vector<std::string>& row) {
    for (const std::string& cell : row) line += fmt::format(" | {:<{}}", cell, width);
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + '\n';
  };
  std::vector<std::string> header;
  for (int64_t p = 0; p < num_stages; ++p) header.push_back(fmt::format("stage {}", p));
  add_row("slot", header);
  for (size_t r = 0; r < cells.size(); ++r) add_row(fmt::format("{:>4}", r), cells[r]);
  return out;
}

}  // namespace rf::engine::pipeline

#include "engine/pipeline/pipeline_simulator.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "core/error.h"

namespace rf::engine::pipeline {
namespace {

// Post times of the sends and receives of one channel (sender, receiver, tensor kind), in posting order:
// the k-th send pairs with the k-th receive.
struct Channel {
  std::vector<double> send_posts;
  std::vector<double> recv_posts;
};

struct StageState {
  size_t next_action = 0;
  double now = 0.0;
  bool posted = false;              // the current communicate's transfers are posted
  std::vector<size_t> post_index;   // per transfer of the current communicate: its place in its channel
  int64_t in_flight = 0;
  int64_t in_flight_bytes = 0;
};

enum class Step : uint8_t { advanced, posted, blocked };

class Replay {
 public:
  Replay(const PipelineSchedule& schedule, const PipelineCosts& costs)
      : schedule_(schedule),
        costs_(costs),
        num_stages_(int64_t(schedule.stages.size())),
        transfer_seconds_(costs.transfer_seconds()),
        channels_(size_t(num_stages_ * num_stages_ * 2)),
        states_(size_t(num_stages_)) {
    RF_CHECK(num_stages_ == schedule.shape.num_stages, "the schedule has {} stage lists for {} stages",
             num_stages_, schedule.shape.num_stages);
    check_cost_table(costs.forward_seconds, "forward_seconds");
    check_cost_table(costs.backward_seconds, "backward_seconds");
    if (!costs.activation_bytes.empty()) check_cost_table(costs.activation_bytes, "activation_bytes");
    report_.stages.resize(size_t(num_stages_));
    report_.timings.resize(size_t(num_stages_));
    for (int64_t p = 0; p < num_stages_; ++p) report_.timings[size_t(p)].resize(schedule.stages[size_t(p)].size());
  }

  SimulationReport run() {
    bool progress = true;
    while (progress) {
      progress = false;
      for (int64_t p = 0; p < num_stages_; ++p) {
        for (Step s = step(p); s != Step::blocked; s = step(p)) {
          progress = true;
          if (s == Step::posted) break;  // waits for its peers
        }
      }
    }
    std::string stuck;
    for (int64_t p = 0; p < num_stages_; ++p) {
      const StageActions& actions = schedule_.stages[size_t(p)];
      const size_t at = states_[size_t(p)].next_action;
      if (at < actions.size()) {
        stuck += fmt::format("; stage {} waits in action {} ({})", p, at, action_label(actions[at]));
      }
    }
    RF_CHECK(stuck.empty(), "pipeline schedule deadlocks{}", stuck);
    finish_report();
    return std::move(report_);
  }

 private:
  template <typename T>
  void check_cost_table(const std::vector<std::vector<T>>& table, const char* name) const {
    RF_CHECK(int64_t(table.size()) == num_stages_, "PipelineCosts.{}: {} stages, the schedule has {}", name,
             table.size(), num_stages_);
    for (const auto& row : table) {
      RF_CHECK(int64_t(row.size()) == schedule_.shape.num_chunks, "PipelineCosts.{}: {} chunks, the schedule has {}",
               name, row.size(), schedule_.shape.num_chunks);
    }
  }

  void check_chunk(int64_t stage, int64_t chunk) const {
    RF_CHECK(chunk >= 0 && chunk < schedule_.shape.num_chunks, "stage {}: chunk {} outside [0, {})", stage, chunk,
             schedule_.shape.num_chunks);
  }

  Channel& channel_of(int64_t stage, const Transfer& t) {
    RF_CHECK(t.peer >= 0 && t.peer < num_stages_, "stage {}: transfer peer {} outside [0, {})", stage, t.peer,
             num_stages_);
    const int64_t sender = t.direction == TransferDirection::send ? stage : t.peer;
    const int64_t receiver = t.direction == TransferDirection::send ? t.peer : stage;
    return channels_[size_t((sender * num_stages_ + receiver) * 2 + (t.tensor == TransferTensor::grad ? 1 : 0))];
  }

  Step step(int64_t p) {
    StageState& st = states_[size_t(p)];
    const StageActions& actions = schedule_.stages[size_t(p)];
    if (st.next_action == actions.size()) return Step::blocked;
    const PipelineAction& a = actions[st.next_action];
    ActionTiming& timing = report_.timings[size_t(p)][st.next_action];
    StageReport& stage_report = report_.stages[size_t(p)];
    const bool holds_activations = schedule_.shape.pass == PipelinePass::forward_backward;
    switch (a.kind) {
      case ActionKind::forward:
      case ActionKind::backward: {
        check_chunk(p, a.chunk);
        const bool fwd = a.kind == ActionKind::forward;
        const double seconds = (fwd ? costs_.forward_seconds : costs_.backward_seconds)[size_t(p)][size_t(a.chunk)];
        timing = {st.now, st.now + seconds};
        st.now = timing.end;
        stage_report.busy_seconds += seconds;
        if (holds_activations) {
          const int64_t bytes =
              costs_.activation_bytes.empty() ? 0 : costs_.activation_bytes[size_t(p)][size_t(a.chunk)];
          st.in_flight += fwd ? 1 : -1;
          st.in_flight_bytes += fwd ? bytes : -bytes;
          stage_report.peak_in_flight = std::max(stage_report.peak_in_flight, st.in_flight);
          stage_report.peak_activation_bytes = std::max(stage_report.peak_activation_bytes, st.in_flight_bytes);
        }
        break;
      }
      case ActionKind::param_gather:
      case ActionKind::enable_grad_sync:
      case ActionKind::launch_grad_sync:
        timing = {st.now, st.now};
        break;
      case ActionKind::communicate: {
        bool just_posted = false;
        if (!st.posted) {
          st.post_index.clear();
          for (const Transfer& t : a.transfers) {
            std::vector<double>& mine =
                t.direction == TransferDirection::send ? channel_of(p, t).send_posts : channel_of(p, t).recv_posts;
            st.post_index.push_back(mine.size());
            mine.push_back(st.now);
          }
          st.posted = true;
          just_posted = true;
          timing.start = st.now;
        }
        double end = st.now;
        for (size_t i = 0; i < a.transfers.size(); ++i) {
          const Transfer& t = a.transfers[i];
          const Channel& c = channel_of(p, t);
          const std::vector<double>& theirs = t.direction == TransferDirection::send ? c.recv_posts : c.send_posts;
          if (theirs.size() <= st.post_index[i]) return just_posted ? Step::posted : Step::blocked;
          end = std::max(end, std::max(timing.start, theirs[st.post_index[i]]) + transfer_seconds_);
        }
        timing.end = end;
        st.now = end;
        st.posted = false;
        break;
      }
    }
    ++st.next_action;
    return Step::advanced;
  }

  void finish_report() {
    double max_busy = 0.0;
    for (int64_t p = 0; p < num_stages_; ++p) {
      StageReport& s = report_.stages[size_t(p)];
      s.end_seconds = states_[size_t(p)].now;
      report_.step_seconds = std::max(report_.step_seconds, s.end_seconds);
      max_busy = std::max(max_busy, s.busy_seconds);
    }
    for (StageReport& s : report_.stages) s.idle_seconds = report_.step_seconds - s.busy_seconds;
    report_.bubble_fraction = max_busy > 0.0 ? (report_.step_seconds - max_busy) / max_busy : 0.0;
  }

  const PipelineSchedule& schedule_;
  const PipelineCosts& costs_;
  int64_t num_stages_;
  double transfer_seconds_;
  std::vector<Channel> channels_;  // [(sender * P + receiver) * 2 + (grad ? 1 : 0)]
  std::vector<StageState> states_;
  SimulationReport report_;
};

}  // namespace

double PipelineCosts::transfer_seconds() const {
  RF_CHECK(p2p_latency_seconds >= 0.0 && p2p_bytes_per_second > 0.0 && p2p_message_bytes >= 0,
           "PipelineCosts: latency {} s, bandwidth {} B/s, message {} B", p2p_latency_seconds, p2p_bytes_per_second,
           p2p_message_bytes);
  return p2p_latency_seconds + double(p2p_message_bytes) / p2p_bytes_per_second;
}

PipelineCosts uniform_costs(int64_t num_stages, int64_t num_chunks, double forward_seconds, double backward_seconds) {
  PipelineCosts costs;
  costs.forward_seconds.assign(size_t(num_stages), std::vector<double>(size_t(num_chunks), forward_seconds));
  costs.backward_seconds.assign(size_t(num_stages), std::vector<double>(size_t(num_chunks), backward_seconds));
  return costs;
}

SimulationReport simulate_pipeline(const PipelineSchedule& schedule, const PipelineCosts& costs) {
  return Replay(schedule, costs).run();
}

}  // namespace rf::engine::pipeline

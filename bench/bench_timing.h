// Wall-clock timing the kernel benchmarks share: one call's seconds, and the median (and spread) of repeated
// calls after a warm-up call (absolute times are noise on a shared machine; the medians feed ratios).
#pragma once

#include <algorithm>
#include <functional>
#include <vector>

#include "core/stopwatch.h"

namespace rf::bench {

inline double seconds_of(const std::function<void()>& fn) {
  const rf::Stopwatch clock;
  fn();
  return clock.seconds();
}

// How many calls a median takes: as many as fill about target_seconds (judged by the warm-up call),
// clamped to [min_reps, max_reps]; target_seconds = 0 takes min_reps.
struct Repetitions {
  int min_reps = 5;
  int max_reps = 5;
  double target_seconds = 0.0;
};

// The median wall time of repeated calls and their spread, (slowest - fastest) / median: a wide spread
// means the machine was disturbed during the round.
struct Timing {
  double median = 0.0;
  double spread = 0.0;
};

// Timing of `fn` after one warm-up call.
inline Timing time_calls(const std::function<void()>& fn, const Repetitions& policy) {
  const double first = seconds_of(fn);
  const int reps = std::clamp(int(policy.target_seconds / std::max(first, 1e-6)), policy.min_reps, policy.max_reps);
  std::vector<double> times;
  for (int i = 0; i < reps; ++i) times.push_back(seconds_of(fn));
  std::sort(times.begin(), times.end());
  const double median = times[size_t(reps / 2)];
  return {median, (times.back() - times.front()) / median};
}

// Median wall time of `fn` after one warm-up call.
inline double median_seconds(const std::function<void()>& fn, const Repetitions& policy) {
  return time_calls(fn, policy).median;
}

}  // namespace rf::bench

// The Python source of one reward worker, run as `python3 -u -B -c <source>` by PythonRewardFunction
// (python_reward_pool.h), so a reward file works with nothing of rlforge's installed.
//
// Its protocol, one JSON object per line over the socket on its fd 3:
//   in : {"path", "function_name", "reward_kwargs"}     once, first
//   out: {"ready": true} | {"ready": false, "key": "path"|"name", "error"}     then exits on false
//   in : {"id", "data_source", "solution_str", "ground_truth", "extra_info"}   one at a time
//   out: {"id", "score", "extra": {name: number}} | {"id", "error", "traceback"?}
// It exits when its input ends, and within a second of the trainer's death even while a scorer hangs
// (a thread watches its parent pid), so a killed rank leaves no worker behind. The checks of a result
// (a finite number, or a dict with one under `score`) are made in Python, where the value's type is
// still known.
#pragma once

#include <string_view>

namespace rf::rl {

std::string_view python_reward_worker_source();

}  // namespace rf::rl

// ROLL's `device_mapping` (spec roll.md §1.2): the ranks a role runs on. ROLL evaluates the value as
// Python; rlforge reads only the forms ROLL's examples use, a YAML list of ranks or the string
// `list(range(a, b))` / `list(range(a, b, step))` (a list in a string, "[0, 1]", too), and refuses any
// other expression rather than evaluating it. rlforge's own placement keys (role_placement.h) take the
// same forms.
// A ROLL file's placement becomes rlforge's device_mapping keys, and role_placement.h checks it against
// the job's world (each role on its ranks with its own sub-communicator, every rank with a role).
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace rf::rl {

// The ranks of each ROLL role that has them (actor_train, actor_infer, reference, critic), sorted.
struct RollDeviceMapping {
  std::map<std::string, std::vector<int64_t>> ranks_by_role;
};

// The sorted ranks of one `device_mapping` value. ConfigError at `key` for anything but the forms
// above, a negative rank or a repeated one.
std::vector<int64_t> parse_device_mapping(const YAML::Node& value, const std::string& key);

}  // namespace rf::rl

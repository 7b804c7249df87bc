// ROLL-style configs for `rlforge train` (issue #10, spec roll.md §1.2): a YAML file in the shape of
// ROLL's rlvr_config.yaml (top-level loop and algorithm keys, then per-role actor_train / actor_infer /
// reference / critic blocks of model_args, training_args, generating_args, strategy_args, device_mapping,
// infer_batch_size, and `rewards` domains) is translated into verl's key tree, the one rlforge binds.
// Everything after the translation is a verl config's path: rlforge's defaults, the dotted command-line
// overrides (verl keys), the verl key policy and validation are shared, and `--check-config` prints the
// verl keys a ROLL file became.
// One table (roll_config_keys.h) lists every ROLL key rlforge reads, what it becomes and what it means;
// a key not in it is an error naming the ROLL path and the file (with a "did you mean"), as is a listed
// key at a value rlforge cannot honour. ROLL's `${key}` references to other keys of the same file are
// resolved first (a whole-value reference keeps the referenced value's type); OmegaConf's other
// resolvers are refused. Not here: the ranks against the job's world (rl/trainer/role_placement.h checks the
// placement keys the ranks become).
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>

#include "rl/trainer/roll_device_mapping.h"

namespace rf::apps {

struct RollConfig {
  YAML::Node verl_tree;              // verl's keys the file sets (rlforge's defaults not merged yet)
  rl::RollDeviceMapping device_mapping;  // each role's ranks (also in verl_tree's device_mapping keys but the
                                     // critic's, which are actor_train's)
};

// A ROLL file: its top level has actor_train or actor_infer (verl's has actor_rollout_ref).
bool is_roll_config(const YAML::Node& root);

// `source` names the file in errors. ConfigError keyed by the ROLL path for any key or value the table
// does not accept.
RollConfig translate_roll_config(const YAML::Node& roll, const std::string& source);

// Markdown for docs/config.md: how a ROLL file is read, and the table.
std::string document_roll_config();

}  // namespace rf::apps

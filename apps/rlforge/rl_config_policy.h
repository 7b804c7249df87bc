// What `rlforge train` does with verl's keys it does not implement (ppo_megatron_trainer.yaml, spec
// verl.md §4): a listed key at verl's default is accepted with a warning and dropped before bind (it
// would change nothing); at any other value it is a ConfigError, since silently ignoring it would run
// something other than what the user asked for. A key neither rlforge nor this table knows stays in
// the tree for bind, which reports it with a "did you mean"; inside a section only verl has
// (critic, reward_model, ...) this file reports it, with the section named.
// Hydra's `_target_` keys (dataclass hints in verl's generated YAML) are dropped with a warning.
// Not here: keys whose verl default is an interpolation of another key (ref.log_prob_use_dynamic_bsz,
// critic.ppo_epochs, ...); they are unknown keys.
#pragma once

#include <string>
#include <vector>

#include "config/config_tree.h"

namespace rf::apps {

struct UnimplementedVerlKey {
  std::string key;           // full dotted path
  std::string verl_default;  // YAML flow text: 8, null, false, [model, optimizer, extra], {}
};

// The table, by section in verl's order.
const std::vector<UnimplementedVerlKey>& unimplemented_verl_keys();

// verl's YAML lists every key, so there a plain `data.dataloader_num_workers=4` reaches it; ours does
// not, so plain overrides of listed keys become add-or-replace (`++`). Other overrides pass unchanged.
std::vector<std::string> reach_unimplemented_verl_keys(const std::vector<std::string>& overrides);

// Runs on the tree after the file and the overrides, before bind: see the top of this file.
void apply_verl_key_policy(config::ConfigTree& tree);

// Markdown for docs/config.md: the listed keys and the one value each accepts.
std::string document_unimplemented_verl_keys();

}  // namespace rf::apps

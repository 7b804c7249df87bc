// verl's second spelling of the megatron block's pipeline and recompute keys: `<role>.megatron.override_transformer_config.<key>`
// (spec verl.md §3.6: verl hands those TransformerConfig fields to Megatron-Core; MindSpeed's noop_layers goes the
// same way). rlforge reads them in the megatron block itself (engine/engine_config.h), so `rlforge train` moves
// them there before binding, for the actor, the reference, the critic and the reward model:
// - in the file, each override_transformer_config.<key> becomes <role>.megatron.<key>; a key given both ways with
//   different values is a ConfigError naming both;
// - an override in either spelling sets <role>.megatron.<key>, replacing the file's value whichever spelling the
//   file used; two overrides of one key in the two spellings with different values are a ConfigError naming both.
// Not here: override_transformer_config's other keys (rl_config_policy.h accepts them at verl's default only).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "config/config_tree.h"

namespace rf::apps {

// Moves the file's spellings into the megatron blocks. Runs on the file's tree, before rlforge's defaults fill
// the blocks (so a key the file did not set is told from one it set).
void move_transformer_config_keys(config::ConfigTree& tree);

// The overrides with each override_transformer_config spelling rewritten to `++<role>.megatron.<key>=<value>`
// (add or replace: verl's own YAML has no such key, so its users write them with '+'); the others unchanged.
std::vector<std::string> move_transformer_config_overrides(const std::vector<std::string>& overrides);

// Markdown for docs/config.md: the keys read under both spellings.
std::string document_transformer_config_keys();

}  // namespace rf::apps

// rlforge's own block in a ROLL file, `rlforge:` at the top level: verl keys, in verl's tree (the
// `rlforge train` reference in docs/config.md), for what no ROLL key says. That is rlforge's built-in
// task (data.task, data.task_kwargs, data.val_size, data.seed) and its CPU and run knobs
// (trainer.deterministic, trainer.time_budget_s, trainer.project_name, resources.device_memory_gb, ...).
// Why a verl-shaped block and not a ROLL-style data_args form: ROLL's data_args describe dataset files
// in ROLL's own columns, which rlforge does not read, and rlforge's own settings have no ROLL spelling
// at all; verl's tree already names, types and documents every one of them, so the block reuses it
// instead of inventing a third vocabulary. A key that some ROLL key sets is refused in the block, so
// every setting has one spelling in a ROLL file.
#pragma once

#include <string>

namespace rf::apps {

class RollTranslator;

// The converter of the table's `rlforge` row: checks the block against rlforge's train config, merges
// it into the translated tree, then checks that the `rewards` domains (when given) cover the built-in
// task's data_source.
void merge_rlforge_block(RollTranslator& translator, const std::string& key);

}  // namespace rf::apps

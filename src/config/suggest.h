// suggest_nearest: the "did you mean" of config errors (unknown keys in the binder, missing paths in
// overrides, unknown enum names). Edit distance is optimal string alignment (insert, delete,
// substitute, swap two adjacent characters), so the usual typos (`lrr`, `total_epoch`, `bteas`)
// are each one edit away.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace rf::config {

// The entry of `known` closest to `key`, if it is close enough to be a plausible typo: at most
// max(1, longer length / 3) edits. Ties go to the earlier entry.
std::optional<std::string> suggest_nearest(const std::string& key, const std::vector<std::string>& known);

}  // namespace rf::config

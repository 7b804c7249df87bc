// The ROLL key table: every ROLL key `rlforge train` reads, what it becomes in verl's key tree and
// what it means here. One table drives the translation (roll_config.cpp runs each row's converter),
// the unknown-key check (a key no row names is an error) and the generated docs (document_roll_config).
// Rows follow ROLL's layout: the run, sizes, the algorithm, then each role, validation, rewards, and
// rlforge's own extension block last (it may only set what no row sets).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace rf::apps {

class RollTranslator;

struct RollKey {
  std::string_view key;           // dotted ROLL path; a `*` segment is any name (a reward domain)
  std::string_view verl_keys;     // the verl keys the row may set, space-separated ("" none)
  std::string_view roll_default;  // ROLL's default (YAML flow) where a converter needs it or it differs from
                                  // verl's; applied when the file lacks the key ("" none)
  // Runs once per row (per matching key for `*` rows), whether or not the file has the key: it reads
  // translator.value(key) (the default when absent) and writes verl keys.
  void (*convert)(RollTranslator& translator, const std::string& key);
  std::string_view meaning;  // for docs/config.md
};

std::span<const RollKey> roll_keys();

// The row's verl_keys, one per element.
std::vector<std::string_view> verl_keys_of(const RollKey& row);

// How a ROLL key, split at its dots, stands to a row's `key` (`*` matching any one segment): off its
// path, a section on the way to it, or the row's key itself.
enum class KeyMatch : uint8_t { none, section, whole };
KeyMatch match_roll_key(std::string_view row_key, const std::vector<std::string>& parts);

// The row whose `key` matches the dotted ROLL key, or nullptr.
const RollKey* find_roll_key(const std::string& key);

}  // namespace rf::apps

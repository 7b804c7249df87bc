// The one way the rl layer turns a config string into a choice, be it an enum value (agg mode, KL
// estimator) or a registry entry (advantage estimator, policy loss): look the name up in a constant
// table. An unknown name is a ConfigError under the verl key that holds it, listing the known names
// and suggesting the nearest one.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace rf::rl {

template <class Enum>
struct NamedValue {
  std::string_view name;
  Enum value;
};

[[noreturn]] void throw_unknown_name(std::string_view key, std::string_view name,
                                     const std::vector<std::string>& known);

// `Table` is a range of entries with a `name` member (NamedValue, AdvantageEstimator, PolicyLoss).
template <class Table>
const typename Table::value_type& find_named(const Table& table, std::string_view name, std::string_view key) {
  for (const auto& entry : table)
    if (entry.name == name) return entry;
  std::vector<std::string> known;
  for (const auto& entry : table) known.emplace_back(entry.name);
  throw_unknown_name(key, name, known);
}

// The first name of `value` in a table of NamedValue (tables list a canonical name before its aliases).
template <class Table, class Enum>
std::string_view name_of(const Table& table, Enum value) {
  for (const auto& entry : table)
    if (entry.value == value) return entry.name;
  return "?";
}

}  // namespace rf::rl

// The one way the rl layer turns a name into a choice, be it an enum value (agg mode, KL estimator: the
// enum_names(E) table the config binds it by) or a registry entry (advantage estimator, policy loss): look
// the name up in a constant table. An unknown name is a ConfigError under the verl key that holds it, listing the known names
// and suggesting the nearest one.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace rf::rl {

[[noreturn]] void throw_unknown_name(std::string_view key, std::string_view name,
                                     const std::vector<std::string>& known);

// `Table` is a range of entries with a `name` member (AdvantageEstimator, PolicyLoss).
template <class Table>
const typename Table::value_type& find_named(const Table& table, std::string_view name, std::string_view key) {
  for (const auto& entry : table)
    if (entry.name == name) return entry;
  std::vector<std::string> known;
  for (const auto& entry : table) known.emplace_back(entry.name);
  throw_unknown_name(key, name, known);
}

// An enum's value by one of the names its enum_names(E) lists (the table the config binds it by, canonical
// names before their aliases).
template <class Enum>
Enum find_enum_name(std::string_view name, std::string_view key) {
  for (const auto& [value, candidate] : enum_names(Enum{}))
    if (candidate == name) return value;
  std::vector<std::string> known;
  for (const auto& entry : enum_names(Enum{})) known.emplace_back(entry.second);
  throw_unknown_name(key, name, known);
}

// The canonical name of an enum value.
template <class Enum>
std::string_view enum_name(Enum value) {
  for (const auto& [candidate, name] : enum_names(Enum{}))
    if (candidate == value) return name;
  return "?";
}

}  // namespace rf::rl

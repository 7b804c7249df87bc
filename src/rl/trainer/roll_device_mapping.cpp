#include "rl/trainer/roll_device_mapping.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <optional>
#include <string_view>

#include "config/bind.h"
#include "config/yaml_util.h"
#include "core/error.h"

namespace rf::rl {
namespace {

constexpr std::string_view kForms =
    "expected a list of ranks ([0, 1]) or the string list(range(a, b)) / list(range(a, b, step))";

std::string without_spaces(std::string_view text) {
  std::string out;
  for (const char c : text)
    if (c != ' ' && c != '\t') out += c;
  return out;
}

std::optional<int64_t> whole_number(std::string_view text) {
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// The ranks of `list(range(a,b))` or `list(range(a,b,step))` (spaces removed), as Python computes them.
std::optional<std::vector<int64_t>> python_range(const std::string& text) {
  constexpr std::string_view open = "list(range(", close = "))";
  if (!text.starts_with(open) || !text.ends_with(close) || text.size() < open.size() + close.size())
    return std::nullopt;
  const std::string_view inside = std::string_view(text).substr(open.size(), text.size() - open.size() - close.size());
  std::vector<int64_t> args;
  size_t start = 0;
  while (true) {
    const size_t comma = inside.find(',', start);
    const std::optional<int64_t> arg = whole_number(inside.substr(start, comma - start));
    if (!arg) return std::nullopt;
    args.push_back(*arg);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  if (args.size() < 2 || args.size() > 3) return std::nullopt;
  const int64_t first = args[0], end = args[1], step = args.size() == 3 ? args[2] : 1;
  if (step <= 0) return std::nullopt;
  std::vector<int64_t> ranks;
  for (int64_t rank = first; rank < end; rank += step) ranks.push_back(rank);
  return ranks;
}

std::vector<int64_t> rank_list(const YAML::Node& list, const std::string& key) {
  std::vector<int64_t> ranks;
  for (size_t i = 0; i < list.size(); ++i)
    ranks.push_back(config::bind<int64_t>(list[i], fmt::format("{}[{}]", key, i)));
  return ranks;
}

}  // namespace

std::vector<int64_t> parse_device_mapping(const YAML::Node& value, const std::string& key) {
  std::vector<int64_t> ranks;
  if (value.IsSequence()) {
    ranks = rank_list(value, key);
  } else if (value.IsScalar()) {
    const std::string text = without_spaces(value.Scalar());
    if (text.starts_with('[')) {
      YAML::Node list;
      try {
        list.reset(YAML::Load(text));
      } catch (const YAML::Exception&) {
      }
      if (!list.IsSequence()) throw ConfigError(key, fmt::format("{}, got {}", kForms, config::describe_node(value)));
      ranks = rank_list(list, key);
    } else if (const auto range = python_range(text)) {
      ranks = *range;
    } else {
      throw ConfigError(key, fmt::format("{}, got {} (rlforge does not evaluate other Python)", kForms,
                                         config::describe_node(value)));
    }
  } else {
    throw ConfigError(key, fmt::format("{}, got {} (ROLL's null means a CPU-only worker; rlforge's roles run on "
                                       "ranks)",
                                       kForms, config::describe_node(value)));
  }
  if (ranks.empty()) throw ConfigError(key, fmt::format("names no rank: {}", kForms));
  std::ranges::sort(ranks);
  if (ranks.front() < 0) throw ConfigError(key, fmt::format("rank {} is negative", ranks.front()));
  if (const auto repeated = std::ranges::adjacent_find(ranks); repeated != ranks.end())
    throw ConfigError(key, fmt::format("rank {} is listed twice", *repeated));
  return ranks;
}

}  // namespace rf::rl

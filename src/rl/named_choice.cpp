#include "rl/named_choice.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "config/suggest.h"
#include "core/error.h"

namespace rf::rl {

void throw_unknown_name(std::string_view key, std::string_view name, const std::vector<std::string>& known) {
  const std::optional<std::string> nearest = config::suggest_nearest(std::string(name), known);
  throw ConfigError(std::string(key),
                    fmt::format("unknown name '{}'{}; known names: {}", name,
                                nearest ? fmt::format(" (did you mean '{}'?)", *nearest) : "", fmt::join(known, ", ")));
}

}  // namespace rf::rl

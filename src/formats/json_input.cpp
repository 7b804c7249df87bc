#include "formats/json_input.h"

#include <fmt/format.h>

#include "core/error.h"

namespace rf::formats {
namespace {

// The deepest nesting of arrays and objects in `text`, or more than `limit` once that is known;
// brackets inside strings do not count. Malformed text is nlohmann's to report.
size_t nesting_depth(std::string_view text, size_t limit) {
  size_t depth = 0, deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size() && deepest <= limit; ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;  // the escaped character, a quote included
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

}  // namespace

void check_json_nesting(std::string_view text, const std::string& path, std::string_view where) {
  if (nesting_depth(text, kMaxJsonDepth) > kMaxJsonDepth)
    throw IoError(path, fmt::format("{}nests arrays and objects deeper than {} levels", where, kMaxJsonDepth));
}

nlohmann::json parse_json_input(std::string_view text, const std::string& path) {
  check_json_nesting(text, path);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw IoError(path, fmt::format("not valid JSON: {}", e.what()));
  }
}

}  // namespace rf::formats

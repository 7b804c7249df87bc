// JSON from input files (tokenizer.json, config.json, JSONL rows), parsed with a bound on nesting.
// nlohmann's parser is iterative and so is its destructor, but dump(), operator== and every walk of
// the result recurse: a document of a few megabytes of '[' would overflow the stack long after it
// parsed, in whatever code first printed it in an error message. Nothing rlforge reads nests deeper
// than a handful of levels.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace rf::formats {

inline constexpr size_t kMaxJsonDepth = 512;

// IoError naming `path`, its message prefixed by `where` ("line 3: "), when `text` nests arrays and
// objects deeper than kMaxJsonDepth (brackets inside strings do not count).
void check_json_nesting(std::string_view text, const std::string& path, std::string_view where = "");
// check_json_nesting, then the parse: IoError naming `path` for either problem ("not valid JSON: ...").
nlohmann::json parse_json_input(std::string_view text, const std::string& path);

}  // namespace rf::formats

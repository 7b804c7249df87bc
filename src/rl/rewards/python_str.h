// The few Python `str` operations verl's rule scorers are written in, on UTF-8 text, so that the
// scorers can follow verl's code line by line. Python indexes and counts code points, not bytes:
// `s[-300:]`, `len(s)`, `s[0]` and `s[1:]` are code-point operations here too. Every function expects
// valid UTF-8 (`to_valid_utf8` first); python_replace and python_split, given ASCII patterns, are exact
// on bytes because no byte of a multi-byte UTF-8 sequence is ASCII.
// Not here: regular expressions (each scorer scans for its one pattern by hand and says which).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace rf::rl {

// `text` with every ill-formed UTF-8 subpart replaced by U+FFFD, as Hugging Face's decode leaves a
// response before verl's scorer sees it; valid text is returned unchanged.
std::string to_valid_utf8(std::string_view text);

// Python's `s.replace(old, new)` (left to right, non-overlapping); `old` is not empty.
std::string python_replace(std::string_view s, std::string_view old, std::string_view replacement);
// Python's `s.split(sep)`; `sep` is not empty.
std::vector<std::string_view> python_split(std::string_view s, std::string_view sep);

// Python's `len(s)`.
size_t num_code_points(std::string_view s);
// Byte length of the code point that starts at byte `pos` (Python's `s[i]` is s.substr(pos, this)).
size_t code_point_length(std::string_view s, size_t pos);
// Python's `s[-n:]`.
std::string_view last_code_points(std::string_view s, size_t n);
// Python's `s.strip()`: drops leading and trailing characters for which `str.isspace()` holds.
std::string_view python_strip(std::string_view s);

}  // namespace rf::rl

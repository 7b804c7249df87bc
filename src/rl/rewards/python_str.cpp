#include "rl/rewards/python_str.h"

#include "data/utf8.h"

namespace rf::rl {
namespace {

// Python's `str.isspace()`: Unicode White_Space plus the four ASCII separators U+001C..U+001F.
bool is_python_space(char32_t c) { return data::is_unicode_white_space(c) || (c >= 0x1C && c <= 0x1F); }

bool is_continuation_byte(char byte) { return (uint8_t(byte) & 0xC0) == 0x80; }

}  // namespace

std::string to_valid_utf8(std::string_view text) {
  return data::find_invalid_utf8(text) ? data::utf8_lossy(text) : std::string(text);
}

std::string python_replace(std::string_view s, std::string_view old, std::string_view replacement) {
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  for (size_t hit = s.find(old); hit != std::string_view::npos; hit = s.find(old, pos)) {
    out.append(s, pos, hit - pos).append(replacement);
    pos = hit + old.size();
  }
  return out.append(s, pos);
}

std::vector<std::string_view> python_split(std::string_view s, std::string_view sep) {
  std::vector<std::string_view> parts;
  size_t pos = 0;
  for (size_t hit = s.find(sep); hit != std::string_view::npos; hit = s.find(sep, pos)) {
    parts.push_back(s.substr(pos, hit - pos));
    pos = hit + sep.size();
  }
  parts.push_back(s.substr(pos));
  return parts;
}

size_t num_code_points(std::string_view s) {
  size_t n = 0;
  for (char byte : s) n += !is_continuation_byte(byte);
  return n;
}

size_t code_point_length(std::string_view s, size_t pos) {
  size_t length = 1;
  while (pos + length < s.size() && is_continuation_byte(s[pos + length])) ++length;
  return length;
}

std::string_view last_code_points(std::string_view s, size_t n) {
  size_t begin = s.size();
  for (size_t taken = 0; taken < n && begin > 0; ++taken) {
    do --begin;
    while (begin > 0 && is_continuation_byte(s[begin]));
  }
  return s.substr(begin);
}

std::string_view python_strip(std::string_view s) {
  size_t begin = 0, end = s.size();
  size_t length = 0;
  while (begin < end && is_python_space(data::decode_utf8(s, begin, length))) begin += length;
  while (end > begin) {
    const size_t last = begin + data::last_code_point_start(s.substr(begin, end - begin));
    if (!is_python_space(data::decode_utf8(s, last, length))) break;
    end = last;
  }
  return s.substr(begin, end - begin);
}

}  // namespace rf::rl

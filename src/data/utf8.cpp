#include "data/utf8.h"

namespace rf::data {
namespace {

constexpr char kReplacement[] = "\xEF\xBF\xBD";  // U+FFFD

// Length of the longest prefix of bytes[pos..] that can start a well-formed sequence (1..4), and
// whether it is a complete one. Follows Table 3-7: the second byte's range depends on the lead.
struct Prefix {
  size_t length;
  bool complete;
};

Prefix well_formed_prefix(std::string_view bytes, size_t pos) {
  const auto b0 = uint8_t(bytes[pos]);
  if (b0 < 0x80) return {1, true};
  size_t need = 0;
  uint8_t lo = 0x80, hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 1;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 2;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;  // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 3;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    return {1, false};  // 0x80..0xC1, 0xF5..0xFF never start a sequence
  }
  size_t length = 1;
  for (size_t k = 0; k < need; ++k) {
    if (pos + length >= bytes.size()) return {length, false};
    const auto b = uint8_t(bytes[pos + length]);
    if (b < (k == 0 ? lo : 0x80) || b > (k == 0 ? hi : 0xBF)) return {length, false};
    ++length;
  }
  return {length, true};
}

}  // namespace

std::optional<size_t> find_invalid_utf8(std::string_view text) {
  for (size_t pos = 0; pos < text.size();) {
    if (uint8_t(text[pos]) < 0x80) {
      ++pos;
      continue;
    }
    const Prefix p = well_formed_prefix(text, pos);
    if (!p.complete) return pos;
    pos += p.length;
  }
  return std::nullopt;
}

std::string utf8_lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (size_t pos = 0; pos < bytes.size();) {
    const Prefix p = well_formed_prefix(bytes, pos);
    if (p.complete)
      out.append(bytes.substr(pos, p.length));
    else
      out += kReplacement;
    pos += p.length;
  }
  return out;
}

char32_t decode_utf8(std::string_view text, size_t pos, size_t& length) {
  const auto b0 = uint8_t(text[pos]);
  if (b0 < 0x80) {
    length = 1;
    return b0;
  }
  length = b0 >= 0xF0 ? 4 : b0 >= 0xE0 ? 3 : 2;
  char32_t c = b0 & (0x7F >> length);
  for (size_t k = 1; k < length; ++k) c = (c << 6) | (uint8_t(text[pos + k]) & 0x3F);
  return c;
}

size_t last_code_point_start(std::string_view text) {
  size_t pos = text.size() - 1;
  while (pos > 0 && (uint8_t(text[pos]) & 0xC0) == 0x80) --pos;
  return pos;
}

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += char(c);
  } else if (c < 0x800) {
    out += char(0xC0 | (c >> 6));
    out += char(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += char(0xE0 | (c >> 12));
    out += char(0x80 | ((c >> 6) & 0x3F));
    out += char(0x80 | (c & 0x3F));
  } else {
    out += char(0xF0 | (c >> 18));
    out += char(0x80 | ((c >> 12) & 0x3F));
    out += char(0x80 | ((c >> 6) & 0x3F));
    out += char(0x80 | (c & 0x3F));
  }
}

bool is_unicode_white_space(char32_t c) {
  // PropList.txt's White_Space, unchanged since Unicode 6.3.
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

}  // namespace rf::data

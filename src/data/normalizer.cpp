#include "data/normalizer.h"

#include <utf8proc.h>

#include <algorithm>
#include <cstdlib>
#include <memory>

#include "core/error.h"
#include "data/utf8.h"

namespace rf::data {
namespace {

// Characters that are their own NFC form and never combine with what precedes them
// (NFC_Quick_Check=Yes, canonical combining class 0): everything below U+0300, the CJK unified
// ideographs and the Hangul syllables. NFC(a + b) = NFC(a) + NFC(b) when b starts with one of them
// (UAX #15's safe split point), so text is normalized in pieces cut before them, and the pieces made
// of them alone are copied as they are.
bool is_stable(char32_t c) { return c < 0x300 || (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0xAC00 && c <= 0xD7A3); }

void append_utf8proc_nfc(std::string_view text, std::string& out) {
  utf8proc_uint8_t* nfc = nullptr;
  const utf8proc_ssize_t length =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()), utf8proc_ssize_t(text.size()), &nfc,
                   utf8proc_option_t(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  const std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owned(nfc, &std::free);
  RF_CHECK(length >= 0, "NFC normalization failed: {}", utf8proc_errmsg(length));
  out.append(reinterpret_cast<const char*>(nfc), size_t(length));
}

}  // namespace

std::string normalize_nfc(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t copied = 0;       // text[0, copied) is in `out`
  size_t last_stable = 0;  // where the last stable character seen starts
  for (size_t pos = 0; pos < text.size();) {
    size_t length = 1;
    const char32_t c = uint8_t(text[pos]) < 0x80 ? char32_t(text[pos]) : decode_utf8(text, pos, length);
    if (is_stable(c)) {
      last_stable = pos;
      pos += length;
      continue;
    }
    // A character that may change or combine: normalize from the stable character before it (its
    // possible base) up to the next stable character.
    const size_t start = std::max(copied, last_stable);
    size_t end = pos + length;
    while (end < text.size()) {
      size_t next_length = 1;
      const char32_t next = uint8_t(text[end]) < 0x80 ? char32_t(text[end]) : decode_utf8(text, end, next_length);
      if (is_stable(next)) break;
      end += next_length;
    }
    out.append(text.substr(copied, start - copied));
    append_utf8proc_nfc(text.substr(start, end - start), out);
    copied = last_stable = pos = end;
  }
  out.append(text.substr(copied));
  return out;
}

}  // namespace rf::data

// UTF-8 helpers for the tokenizers: validation (encode() refuses ill-formed input), the lossy
// conversion Hugging Face's byte-level decoder ends with, and code-point iteration.
// Not here: normalization (normalizer.h) and character classes (unicode_regex.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace rf::data {

// Byte offset of the first byte that does not belong to a well-formed UTF-8 sequence (Unicode
// Table 3-7: no overlongs, no surrogates, nothing above U+10FFFF), or nullopt when `text` is valid.
std::optional<size_t> find_invalid_utf8(std::string_view text);

// `bytes` as valid UTF-8: every maximal ill-formed subpart becomes one U+FFFD (Unicode's
// "substitution of maximal subparts"), exactly as Rust's String::from_utf8_lossy, which Hugging
// Face's ByteLevel decoder applies to the concatenated token bytes.
std::string utf8_lossy(std::string_view bytes);

// Code point at `pos` of valid UTF-8 `text`; `length` receives its byte length.
char32_t decode_utf8(std::string_view text, size_t pos, size_t& length);
// Byte offset where the last code point of valid, non-empty UTF-8 `text` starts.
size_t last_code_point_start(std::string_view text);
void append_utf8(std::string& out, char32_t code_point);

// Unicode's White_Space property (what `\s` means in Oniguruma and in Rust's regex crate).
bool is_unicode_white_space(char32_t c);

}  // namespace rf::data

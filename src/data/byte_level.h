// GPT-2's byte-level alphabet: a reversible map from the 256 byte values to printable Unicode
// characters (openai/gpt-2 encoder.py's bytes_to_unicode), so a BPE vocabulary of visible strings
// covers every byte sequence. Printable Latin-1 bytes map to themselves; the other 68 bytes (controls,
// space, 0x7F..0xA0, 0xAD) map to U+0100.. in byte order, so ' ' is 'Ġ' (U+0120) and '\n' is 'Ċ'.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace rf::data {

// Appends each byte of `bytes` as its alphabet character (UTF-8, one or two bytes each).
void append_byte_level(std::string_view bytes, std::string& out);

// The bytes a token of alphabet characters stands for, or nullopt if some character of `token` is
// outside the alphabet (Hugging Face's ByteLevel decoder then keeps such a token's own UTF-8 bytes).
std::optional<std::string> bytes_of_byte_level(std::string_view token);

}  // namespace rf::data

#include "data/byte_level.h"

#include <array>
#include <cstdint>

#include "data/utf8.h"

namespace rf::data {
namespace {

constexpr bool maps_to_itself(int b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE); }

constexpr std::array<char32_t, 256> make_char_of_byte() {
  std::array<char32_t, 256> table{};
  char32_t next = 0x100;
  for (int b = 0; b < 256; ++b) table[size_t(b)] = maps_to_itself(b) ? char32_t(b) : next++;
  return table;
}

constexpr std::array<char32_t, 256> kCharOfByte = make_char_of_byte();
constexpr char32_t kLastChar = 0x100 + 68 - 1;  // the alphabet lies in [0x21, 0x143]

constexpr std::array<int16_t, kLastChar + 1> make_byte_of_char() {
  std::array<int16_t, kLastChar + 1> table{};
  for (auto& b : table) b = -1;
  for (int b = 0; b < 256; ++b) table[kCharOfByte[size_t(b)]] = int16_t(b);
  return table;
}

constexpr std::array<int16_t, kLastChar + 1> kByteOfChar = make_byte_of_char();

}  // namespace

void append_byte_level(std::string_view bytes, std::string& out) {
  for (const char byte : bytes) append_utf8(out, kCharOfByte[uint8_t(byte)]);
}

std::optional<std::string> bytes_of_byte_level(std::string_view token) {
  std::string bytes;
  bytes.reserve(token.size());
  for (size_t pos = 0; pos < token.size();) {
    size_t length = 0;
    const char32_t c = decode_utf8(token, pos, length);
    if (c > kLastChar || kByteOfChar[c] < 0) return std::nullopt;
    bytes += char(kByteOfChar[c]);
    pos += length;
  }
  return bytes;
}

}  // namespace rf::data

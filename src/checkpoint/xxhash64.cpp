#include "checkpoint/xxhash64.h"

#include <bit>
#include <cstring>

namespace rf::checkpoint {
namespace {

constexpr uint64_t kPrime1 = 0x9E3779B185EBCA87ull;
constexpr uint64_t kPrime2 = 0xC2B2AE3D27D4EB4Full;
constexpr uint64_t kPrime3 = 0x165667B19E3779F9ull;
constexpr uint64_t kPrime4 = 0x85EBCA77C2B2AE63ull;
constexpr uint64_t kPrime5 = 0x27D4EB2F165667C5ull;

// The specification reads input words as little-endian.
static_assert(std::endian::native == std::endian::little, "xxhash64 reads words in host order");

uint64_t read64(const unsigned char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

uint32_t read32(const unsigned char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

uint64_t round(uint64_t acc, uint64_t lane) {
  acc += lane * kPrime2;
  return std::rotl(acc, 31) * kPrime1;
}

uint64_t merge_accumulator(uint64_t acc, uint64_t lane_acc) {
  acc ^= round(0, lane_acc);
  return acc * kPrime1 + kPrime4;
}

}  // namespace

uint64_t xxhash64(const void* data, size_t size, uint64_t seed) {
  const auto* p = static_cast<const unsigned char*>(data);
  const unsigned char* const end = p + size;
  uint64_t acc;
  if (size >= 32) {
    // Four independent lanes over 32-byte stripes: the speed comes from their parallel multiplies.
    uint64_t v1 = seed + kPrime1 + kPrime2, v2 = seed + kPrime2, v3 = seed, v4 = seed - kPrime1;
    for (; end - p >= 32; p += 32) {
      v1 = round(v1, read64(p));
      v2 = round(v2, read64(p + 8));
      v3 = round(v3, read64(p + 16));
      v4 = round(v4, read64(p + 24));
    }
    acc = std::rotl(v1, 1) + std::rotl(v2, 7) + std::rotl(v3, 12) + std::rotl(v4, 18);
    acc = merge_accumulator(acc, v1);
    acc = merge_accumulator(acc, v2);
    acc = merge_accumulator(acc, v3);
    acc = merge_accumulator(acc, v4);
  } else {
    acc = seed + kPrime5;
  }
  acc += uint64_t(size);
  for (; end - p >= 8; p += 8) acc = std::rotl(acc ^ round(0, read64(p)), 27) * kPrime1 + kPrime4;
  if (end - p >= 4) {
    acc = std::rotl(acc ^ uint64_t(read32(p)) * kPrime1, 23) * kPrime2 + kPrime3;
    p += 4;
  }
  for (; p < end; ++p) acc = std::rotl(acc ^ uint64_t(*p) * kPrime5, 11) * kPrime1;
  // Final avalanche: every input bit affects every output bit.
  acc ^= acc >> 33;
  acc *= kPrime2;
  acc ^= acc >> 29;
  acc *= kPrime3;
  acc ^= acc >> 32;
  return acc;
}

}  // namespace rf::checkpoint

// XXH64, the 64-bit xxHash of Yann Collet, written from the published specification
// (github.com/Cyan4973/xxHash, doc/xxhash_spec.md): the checksum a checkpoint records for every
// file. It hashes about 13 GB/s on one core of the development machine, so verifying a checkpoint
// costs less than reading it from disk, and its values match `xxhsum -H64` and every other XXH64
// implementation, so a file can be checked with standard tools. It detects corruption, not
// tampering: it is not a cryptographic hash.
#pragma once

#include <cstddef>
#include <cstdint>

namespace rf::checkpoint {

uint64_t xxhash64(const void* data, size_t size, uint64_t seed = 0);

}  // namespace rf::checkpoint

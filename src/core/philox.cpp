#include "core/philox.h"

#include <cmath>
#include <numbers>

#include "core/element_access.h"

namespace rf {
namespace {

constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;

double to_unit_interval(uint32_t hi, uint32_t lo) {
  const uint64_t bits53 = ((uint64_t(hi) << 32) | lo) >> 11;
  return double(bits53) * 0x1.0p-53;
}

template <class Draw>
void fill_with(TensorView out, Draw draw, uint64_t first_offset) {
  RF_CHECK(is_floating(out.dtype()), "random fill of a {} tensor: expected a floating dtype",
           dtype_name(out.dtype()));
  int64_t i = 0;
  // Row-major element index i -> counter first_offset + i, whatever the strides.
  for_each_offset(out.shape(), out.strides(), out.strides(), [&](int64_t offset, int64_t) {
    store_f64(out, offset, draw(first_offset + uint64_t(i++)));
  });
}

}  // namespace

std::array<uint32_t, 4> Philox::block(std::array<uint32_t, 4> c, std::array<uint32_t, 2> k) {
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = uint64_t(kMul0) * c[0];
    const uint64_t p1 = uint64_t(kMul1) * c[2];
    c = {uint32_t(p1 >> 32) ^ c[1] ^ k[0], uint32_t(p1), uint32_t(p0 >> 32) ^ c[3] ^ k[1], uint32_t(p0)};
    k[0] += kWeyl0;
    k[1] += kWeyl1;
  }
  return c;
}

std::array<uint32_t, 4> Philox::block_at(uint64_t offset) const {
  return block({uint32_t(offset), uint32_t(offset >> 32), uint32_t(stream_), uint32_t(stream_ >> 32)},
               {uint32_t(seed_), uint32_t(seed_ >> 32)});
}

double Philox::uniform(uint64_t offset) const {
  const auto r = block_at(offset);
  return to_unit_interval(r[0], r[1]);
}

double Philox::normal(uint64_t offset) const {
  const auto r = block_at(offset);
  const double u1 = 1.0 - to_unit_interval(r[0], r[1]);  // (0, 1]: log is finite
  const double u2 = to_unit_interval(r[2], r[3]);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

void fill_uniform(TensorView out, const Philox& rng, double low, double high, uint64_t first_offset) {
  fill_with(out, [&](uint64_t o) { return low + (high - low) * rng.uniform(o); }, first_offset);
}

void fill_normal(TensorView out, const Philox& rng, double mean, double stddev, uint64_t first_offset) {
  fill_with(out, [&](uint64_t o) { return mean + stddev * rng.normal(o); }, first_offset);
}

}  // namespace rf

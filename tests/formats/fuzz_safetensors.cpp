// libFuzzer target for the safetensors reader: parse_safetensors on arbitrary bytes, the code path
// SafetensorsReader takes on a mapped file. A bad file may only raise IoError; a file it accepts must
// keep the promises the loaders rely on (the tensors tile the data section, each byte range is its
// shape x dtype size), and every tensor is then copied out as stored, into a strided destination
// and, for floats, converted to f64, so that the sanitizers see every byte the loaders could touch.
// libFuzzer hands over a heap buffer of exactly `size` bytes, so a read past the file is reported.
// Built with clang by cmake/Fuzzing.cmake; seeds in fuzz_corpus/, tokens in fuzz_safetensors.dict.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>

#include "core/element_access.h"
#include "core/tensor.h"
#include "formats/safetensors_format.h"

namespace {

using rf::formats::SafetensorsEntry;
using rf::formats::SafetensorsLayout;

// A broken promise is a bug like a crash: abort, so that libFuzzer saves the input.
void expect(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz_safetensors: broken promise: %s\n", what);
  std::abort();
}

void check_layout(const SafetensorsLayout& layout, size_t file_size) {
  expect(layout.data_start >= 8 && layout.data_start <= file_size, "the data section starts inside the file");
  std::vector<const SafetensorsEntry*> order;
  for (const auto& [name, e] : layout.entries) {
    expect(e.begin <= e.end, "begin <= end");
    expect(size_t(e.shape.numel()) * rf::dtype_size(e.dtype) == e.end - e.begin, "bytes = shape x dtype size");
    order.push_back(&e);
  }
  std::sort(order.begin(), order.end(), [](const SafetensorsEntry* a, const SafetensorsEntry* b) {
    return std::pair(a->begin, a->end) < std::pair(b->begin, b->end);
  });
  size_t covered = 0;
  for (const SafetensorsEntry* e : order) {
    expect(e->begin == covered, "no hole and no overlap");
    covered = std::max(covered, e->end);
  }
  expect(covered == file_size - layout.data_start, "the tensors cover the data section exactly");
}

void copy_out(const std::string& name, const SafetensorsEntry& e, const std::byte* data_section) {
  const std::string path = "fuzz-input";
  const rf::Tensor stored(e.shape, e.dtype);
  rf::formats::copy_safetensors_entry(path, name, e, data_section, stored);
  if (e.end > e.begin)
    expect(std::memcmp(stored.view().raw(), data_section + e.begin, e.end - e.begin) == 0, "a copy holds the bytes");
  if (e.end > e.begin && e.shape.rank() > 0) {
    // The first half of each row of a buffer twice as wide: the element-wise (and, unaligned, staged)
    // path. Only for non-empty tensors, whose extents are bounded by the file size, so doubling one
    // cannot overflow.
    rf::Shape wide_shape = e.shape;
    wide_shape[e.shape.rank() - 1] *= 2;
    const rf::Tensor wide(wide_shape, e.dtype);
    rf::formats::copy_safetensors_entry(path, name, e, data_section,
                                        wide.view().slice(e.shape.rank() - 1, 0, e.shape[e.shape.rank() - 1]));
  }
  if (rf::is_floating(e.dtype)) {
    const rf::Tensor f64(e.shape, rf::DType::f64);
    rf::formats::copy_safetensors_entry(path, name, e, data_section, f64);
    for (int64_t i = 0; i < e.shape.numel(); ++i) {
      const double x = f64.data<double>()[i], y = rf::load_f64(stored, i);
      expect(x == y || (x != x && y != y), "f64 conversion matches the stored value");
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const std::byte> file(reinterpret_cast<const std::byte*>(data), size);
  SafetensorsLayout layout;
  try {
    layout = rf::formats::parse_safetensors("fuzz-input", file);
  } catch (const rf::IoError&) {
    return 0;  // refused with a message: what a bad file should get
  }
  check_layout(layout, size);
  for (const auto& [name, e] : layout.entries) copy_out(name, e, file.data() + layout.data_start);
  return 0;
}

#include "checkpoint/flat_range_boxes.h"

#include <algorithm>

#include "core/error.h"

namespace rf::checkpoint {
namespace {

// Adds the boxes of [begin, end) of the sub-tensor shape[d:] whose leading indices are `prefix`.
void add_boxes(const Shape& shape, int d, int64_t begin, int64_t end, Shape prefix, std::vector<Box>& out) {
  if (begin >= end) return;
  const int rank = shape.rank();
  int64_t inner = 1;  // elements of one index of dim d
  for (int k = d + 1; k < rank; ++k) inner *= shape[k];
  auto box = [&](int64_t first, int64_t count) {
    Box b{prefix, prefix};
    for (int k = 0; k < d; ++k) b.extent[k] = 1;
    b.offset.push_back(first);
    b.extent.push_back(count);
    for (int k = d + 1; k < rank; ++k) {
      b.offset.push_back(0);
      b.extent.push_back(shape[k]);
    }
    out.push_back(std::move(b));
  };
  if (begin % inner != 0) {  // a partial first index
    const int64_t index = begin / inner, index_end = (index + 1) * inner;
    Shape head = prefix;
    head.push_back(index);
    add_boxes(shape, d + 1, begin - index * inner, std::min(end, index_end) - index * inner, head, out);
    begin = index_end;
    if (begin >= end) return;
  }
  const int64_t whole_first = begin / inner, whole_end = end / inner;
  if (whole_end > whole_first) box(whole_first, whole_end - whole_first);
  if (end % inner != 0) {  // a partial last index
    Shape tail = prefix;
    tail.push_back(whole_end);
    add_boxes(shape, d + 1, 0, end - whole_end * inner, tail, out);
  }
}

}  // namespace

std::vector<Box> flat_range_boxes(const Shape& shape, int64_t begin, int64_t end) {
  RF_CHECK(0 <= begin && begin <= end && end <= shape.numel(), "flat range [{}, {}) of a tensor of shape {}", begin,
           end, shape.to_string());
  std::vector<Box> boxes;
  if (shape.rank() == 0) {
    if (begin < end) boxes.push_back(Box{});
    return boxes;
  }
  add_boxes(shape, 0, begin, end, Shape{}, boxes);
  return boxes;
}

int64_t flat_index(const Shape& shape, const Shape& index) {
  int64_t flat = 0;
  for (int d = 0; d < shape.rank(); ++d) flat = flat * shape[d] + index[d];
  return flat;
}

}  // namespace rf::checkpoint

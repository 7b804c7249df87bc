// A contiguous range of a row-major tensor's elements as boxes. The distributed optimizer owns a flat
// range of each parameter (optim/bucket_plan.h), which need not be a box of it (it may start and end
// mid-row); the checkpoint stores boxes of the global tensor, so that any layout can read any region.
// Each box returned is itself contiguous in the range's memory, so it is a plain reshape of a slice.
#pragma once

#include <vector>

#include "core/shape.h"

namespace rf::checkpoint {

// The elements [offset, offset + extent) per dim.
struct Box {
  Shape offset, extent;
  int64_t numel() const { return extent.numel(); }
};

// The elements [begin, end) (flat row-major indices) of a tensor of `shape`, as boxes in memory order,
// at most 2 x rank - 1 of them: a partial row, whole rows, a partial row, recursively.
std::vector<Box> flat_range_boxes(const Shape& shape, int64_t begin, int64_t end);

// The flat row-major index of the element at `index` in a tensor of `shape`.
int64_t flat_index(const Shape& shape, const Shape& index);

}  // namespace rf::checkpoint

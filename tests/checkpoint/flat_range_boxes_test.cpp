// flat_range_boxes against brute force: for every range of several shapes, the boxes cover exactly
// the range's elements, in memory order, each box contiguous, and no more than 2 x rank - 1 of them.
#include "checkpoint/flat_range_boxes.h"

#include <gtest/gtest.h>

#include "checkpoint/manifest.h"
#include "core/error.h"

namespace rf::checkpoint {
namespace {

// The flat indices of a box's elements in row-major order of the box.
std::vector<int64_t> box_indices(const Shape& shape, const Box& box) {
  std::vector<int64_t> out;
  Shape index = box.offset;
  for (int64_t n = 0; n < box.numel(); ++n) {
    out.push_back(flat_index(shape, index));
    for (int d = shape.rank() - 1; d >= 0; --d) {  // odometer over the box
      if (++index[d] < box.offset[d] + box.extent[d]) break;
      index[d] = box.offset[d];
    }
  }
  return out;
}

TEST(FlatRangeBoxes, CoverEveryRangeExactlyInOrder) {
  for (const Shape& shape : {Shape{7}, Shape{3, 5}, Shape{4, 1, 3}, Shape{2, 3, 2, 3}, Shape{1, 6}}) {
    const int64_t n = shape.numel();
    for (int64_t begin = 0; begin <= n; ++begin)
      for (int64_t end = begin; end <= n; ++end) {
        SCOPED_TRACE(shape.to_string() + " [" + std::to_string(begin) + ", " + std::to_string(end) + ")");
        const std::vector<Box> boxes = flat_range_boxes(shape, begin, end);
        EXPECT_LE(int(boxes.size()), std::max(0, 2 * shape.rank() - 1));
        int64_t next = begin;
        for (const Box& box : boxes) {
          ASSERT_GT(box.numel(), 0);
          for (int64_t index : box_indices(shape, box)) EXPECT_EQ(index, next++) << "not contiguous or out of order";
        }
        EXPECT_EQ(next, end);
      }
  }
}

TEST(FlatRangeBoxes, RejectsARangeOutsideTheTensor) {
  EXPECT_THROW(flat_range_boxes(Shape{2, 3}, 2, 7), Error);
  EXPECT_THROW(flat_range_boxes(Shape{2, 3}, 4, 3), Error);
}

// A collective save merges every rank's part of the manifest on rank 0: shards of one tensor from
// several ranks join; the same file, JSON document or a disagreeing global shape is an error.
TEST(MergeManifest, JoinsRanksPartsAndRejectsClashes) {
  auto part = [](const std::string& file, Shape offset) {
    Manifest m;
    ComponentRecord& actor = m.components["actor"];
    actor.files[file] = FileRecord{100, 7};
    actor.tensors["w"] = TensorRecord{Shape{4, 2}, {ShardRecord{file, "w", DType::f32, offset, Shape{2, 2}}}};
    return m;
  };
  Manifest whole;
  merge_manifest(whole, part("model-tp0.safetensors", Shape{0, 0}), 0);
  merge_manifest(whole, part("model-tp1.safetensors", Shape{2, 0}), 1);
  const ComponentRecord& actor = whole.components.at("actor");
  EXPECT_EQ(actor.files.size(), 2u);
  ASSERT_EQ(actor.tensors.at("w").shards.size(), 2u);
  EXPECT_EQ(actor.tensors.at("w").shards[1].global_offset, (Shape{2, 0}));

  EXPECT_THROW(merge_manifest(whole, part("model-tp1.safetensors", Shape{0, 0}), 2), Error);
  Manifest other_shape = part("model-tp2.safetensors", Shape{0, 0});
  other_shape.components["actor"].tensors["w"].global_shape = Shape{8, 2};
  EXPECT_THROW(merge_manifest(whole, other_shape, 2), Error);
  Manifest doc;
  doc.components["actor"].json_files["state"] = "state.json";
  merge_manifest(whole, doc, 0);
  EXPECT_THROW(merge_manifest(whole, doc, 1), Error);
}

}  // namespace
}  // namespace rf::checkpoint

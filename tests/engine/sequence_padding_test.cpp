#include "engine/sequence_padding.h"

#include <gtest/gtest.h>

#include "core/element_access.h"

namespace rf::engine {
namespace {

TEST(SequencePadding, AppendsOnePaddingDocumentWithoutTargets) {
  const model::PackedSequences packed = model::pack_sequences({{5, 6, 7}, {8, 9}});  // N = 5
  const model::PackedSequences padded = pad_to_multiple(packed.inputs(), 4);
  ASSERT_EQ(padded.tokens_N.numel(), 8);
  EXPECT_EQ(padded.cu_seqlens, (std::vector<int32_t>{0, 3, 5, 8}));
  for (int64_t n = 0; n < 5; ++n) {
    EXPECT_EQ(padded.tokens_N.data<int64_t>()[n], packed.tokens_N.data<int64_t>()[n]);
    EXPECT_EQ(padded.positions_N.data<int64_t>()[n], packed.positions_N.data<int64_t>()[n]);
    EXPECT_EQ(padded.targets_N.data<int64_t>()[n], packed.targets_N.data<int64_t>()[n]);
  }
  for (int64_t n = 5; n < 8; ++n) {
    EXPECT_EQ(padded.tokens_N.data<int64_t>()[n], 0);
    EXPECT_EQ(padded.positions_N.data<int64_t>()[n], n - 5);
    EXPECT_EQ(padded.targets_N.data<int64_t>()[n], -100);  // no loss, no gradient
  }
  const model::ModelInputs in = padded.inputs(0.5);
  EXPECT_EQ(in.seq_len, 8);
  EXPECT_EQ(in.temperature, 0.5);
}

TEST(SequencePadding, LeavesADividingBatchAsItIs) {
  const model::PackedSequences packed = model::pack_sequences({{5, 6, 7, 8}});
  const model::PackedSequences padded = pad_to_multiple(packed.inputs(), 2);
  EXPECT_EQ(padded.tokens_N.numel(), 4);
  EXPECT_EQ(padded.cu_seqlens, (std::vector<int32_t>{0, 4}));
}

}  // namespace
}  // namespace rf::engine

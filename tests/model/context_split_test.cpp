// ContextSplit (megatron.md §5.1): the zig-zag chunks each CP rank keeps, per document of a packed row, the
// padding, the positions, the spans of the ring's blocks, and that gathering every rank's rows gives the
// micro-batch back.
#include "model/context_split.h"

#include <gtest/gtest.h>

#include <numeric>
#include <set>

#include "core/element_access.h"
#include "core/tensor.h"

namespace rf::model {
namespace {

std::vector<int64_t> sources(const ContextSplit& split, int rank) {
  std::vector<int64_t> out;
  for (int64_t t = 0; t < split.local_tokens(); ++t) out.push_back(split.source_token(rank, t));
  return out;
}

TEST(ContextSplit, OneDocumentZigZagsOverTwoRanks) {
  // 8 tokens, CP 2: chunks of 2; rank 0 keeps chunks 0 and 3, rank 1 chunks 1 and 2 (Megatron's example).
  const std::vector<int32_t> cu = {0, 8};
  const ContextSplit rank0(cu, 8, 2, 0, 1), rank1(cu, 8, 2, 1, 1);
  EXPECT_EQ(sources(rank0, 0), (std::vector<int64_t>{0, 1, 6, 7}));
  EXPECT_EQ(sources(rank1, 1), (std::vector<int64_t>{2, 3, 4, 5}));
  EXPECT_EQ(rank0.local_cu_seqlens(), (std::vector<int32_t>{0, 4}));
  // From an earlier rank every query sees the early half; from a later one the late half sees everything.
  ASSERT_EQ(rank1.earlier_rank_spans().size(), 1u);
  const kernels::AttentionSpan lower = rank1.earlier_rank_spans()[0], upper = rank0.later_rank_spans()[0];
  EXPECT_EQ(std::vector<int64_t>({lower.q_begin, lower.q_end, lower.k_begin, lower.k_end}),
            (std::vector<int64_t>{0, 4, 0, 2}));
  EXPECT_EQ(std::vector<int64_t>({upper.q_begin, upper.q_end, upper.k_begin, upper.k_end}),
            (std::vector<int64_t>{2, 4, 0, 4}));
}

TEST(ContextSplit, PadsEachDocumentToAMultipleOfTwiceCp) {
  // Documents of 5, 1 and 9 tokens at CP 2: padded to 8, 4 and 12 (chunks of 2, 1 and 3).
  const std::vector<int32_t> cu = {0, 5, 6, 15};
  const ContextSplit split(cu, 15, 2, 0, 1);
  EXPECT_EQ(split.num_documents(), 3);
  EXPECT_EQ(split.local_tokens(), 2 * (2 + 1 + 3));
  EXPECT_EQ(split.padded_tokens(), 24);
  EXPECT_EQ(split.local_cu_seqlens(), (std::vector<int32_t>{0, 4, 6, 12}));
  EXPECT_EQ(split.padded_cu_seqlens(), (std::vector<int32_t>{0, 8, 12, 24}));
  // Rank 0: doc 0 chunks 0 {0,1} and 3 {6,7 = padding}; doc 1 chunks 0 {5} and 3 (padding); doc 2 chunks 0
  // {6,7,8} and 3 {15,16,17 = padding beyond 9}.
  EXPECT_EQ(sources(split, 0), (std::vector<int64_t>{0, 1, -1, -1, 5, -1, 6, 7, 8, -1, -1, -1}));
  EXPECT_EQ(sources(split, 1), (std::vector<int64_t>{2, 3, 4, -1, -1, -1, 9, 10, 11, 12, 13, 14}));
}

TEST(ContextSplit, EveryTokenIsOnExactlyOneRankAndGathersBack) {
  const std::vector<int32_t> cu = {0, 3, 3, 20, 21, 37};  // an empty and a one-token document among others
  for (int cp : {2, 3, 4}) {
    SCOPED_TRACE(cp);
    std::multiset<int64_t> seen;
    Tensor values({37}, DType::f32), gathered({37}, DType::f32);
    for (int64_t n = 0; n < 37; ++n) values.data<float>()[n] = float(n) + 0.5f;
    std::vector<ContextSplit> splits;
    for (int r = 0; r < cp; ++r) splits.emplace_back(cu, 37, cp, r, 1);
    Tensor all({splits[0].padded_tokens()}, DType::f32);
    for (int r = 0; r < cp; ++r) {
      for (int64_t n : sources(splits[size_t(r)], r))
        if (n >= 0) seen.insert(n);
      splits[size_t(r)].take_local(values, all.view().slice(0, r * splits[0].local_tokens(), splits[0].local_tokens()),
                                   -1.0);
    }
    std::vector<int64_t> expected(37);
    std::iota(expected.begin(), expected.end(), 0);
    EXPECT_EQ(std::vector<int64_t>(seen.begin(), seen.end()), expected);
    splits[0].put_gathered(all, gathered);
    for (int64_t n = 0; n < 37; ++n) EXPECT_EQ(gathered.data<float>()[n], values.data<float>()[n]) << n;
    // The padded natural order is a permutation of every rank's rows.
    std::set<int64_t> positions;
    for (int r = 0; r < cp; ++r)
      for (int64_t t = 0; t < splits[0].local_tokens(); ++t) positions.insert(splits[size_t(r)].padded_position(r, t));
    EXPECT_EQ(int64_t(positions.size()), splits[0].padded_tokens());
    EXPECT_EQ(*positions.rbegin(), splits[0].padded_tokens() - 1);
  }
}

TEST(ContextSplit, PositionsAreTheOriginalOnesContinuedThroughPadding) {
  const std::vector<int32_t> cu = {0, 3, 8};
  Tensor positions({8}, DType::i64);
  const int64_t original[] = {0, 1, 2, 0, 1, 2, 3, 4};
  std::copy(std::begin(original), std::end(original), positions.data<int64_t>());
  const ContextSplit split(cu, 8, 2, 1, 1);  // doc 0 padded to 4 (chunk 1), doc 1 to 8 (chunk 2)
  Tensor local({split.local_tokens()}, DType::i64);
  split.take_local_positions(positions, local);
  // Rank 1: doc 0 chunks 1 {1} and 2 {2}; doc 1 chunks 1 {2, 3} and 2 {4, padding -> 5}.
  EXPECT_EQ(std::vector<int64_t>(local.data<int64_t>(), local.data<int64_t>() + local.numel()),
            (std::vector<int64_t>{1, 2, 2, 3, 4, 5}));
}

TEST(ContextSplit, AppendsAPaddingDocumentForSequenceParallel) {
  // One 4-token document at CP 2: 2 local tokens; with TP 4 under SP the local rows must divide by 4.
  const std::vector<int32_t> cu = {0, 4};
  const ContextSplit split(cu, 4, 2, 0, 4);
  EXPECT_EQ(split.local_tokens(), 4);
  EXPECT_EQ(split.num_documents(), 2);
  EXPECT_EQ(sources(split, 0), (std::vector<int64_t>{0, 3, -1, -1}));
}

TEST(ContextSplit, RefusesBadBoundaries) {
  const std::vector<int32_t> short_cu = {0, 5};
  EXPECT_THROW(ContextSplit(short_cu, 6, 2, 0, 1), Error);
  EXPECT_THROW(ContextSplit({}, 6, 2, 2, 1), Error);  // rank outside the group
}

}  // namespace
}  // namespace rf::model

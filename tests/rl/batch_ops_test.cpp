// Properties of the batch operations over many sizes: chunk then concat is the identity, split covers
// the batch in order, repeat puts sample i's copies where verl does, pad then unpad is the identity
// with the padding verl appends, and the mini-batch iterator visits every sample once per epoch,
// reproducibly from its seed.
//
// Dimension legend: B batch (samples).
#include "rl/batch_ops.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "batch_test_data.h"
#include "rl/mini_batch_iterator.h"
#include "support/test_support.h"

namespace rf::testing {
namespace {

using rl::Batch;

std::vector<int64_t> iota(int64_t n, int64_t first = 0) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), first);
  return v;
}

TEST(BatchOps, ChunkThenConcatIsTheIdentity) {
  for (int64_t B : {0, 1, 6, 12, 30}) {
    const Batch batch = make_test_batch(B);
    for (int64_t num_chunks : {1, 2, 3, 6}) {
      if (B % num_chunks != 0) continue;
      const std::vector<Batch> chunks = rl::chunk(batch, num_chunks);
      ASSERT_EQ(int64_t(chunks.size()), num_chunks);
      for (int64_t c = 0; c < num_chunks; ++c) {
        EXPECT_EQ(sample_ids(chunks[size_t(c)]), iota(B / num_chunks, c * (B / num_chunks)));
        EXPECT_EQ(chunks[size_t(c)].meta(), batch.meta());
      }
      expect_batches_equal(Batch::concat(chunks), batch);
    }
  }
  expect_error_containing([] { (void)rl::chunk(make_test_batch(10), 3); },
                          "chunk: num_chunks=3 does not divide the batch's 10 samples");
  expect_error_containing([] { (void)rl::chunk(make_test_batch(10), 0); }, "chunk: num_chunks: expected >= 1");
}

TEST(BatchOps, SplitCutsConsecutivePiecesAndConcatRestores) {
  const Batch batch = make_test_batch(11);
  for (int64_t size : {1, 3, 4, 11, 20}) {
    const std::vector<Batch> pieces = rl::split(batch, size);
    ASSERT_EQ(int64_t(pieces.size()), (11 + size - 1) / size);
    for (size_t p = 0; p < pieces.size(); ++p)
      EXPECT_EQ(sample_ids(pieces[p]), iota(std::min<int64_t>(size, 11 - int64_t(p) * size), int64_t(p) * size));
    expect_batches_equal(Batch::concat(pieces), batch);
  }
  expect_error_containing([&] { (void)rl::split(batch, 0); }, "split: chunk_size: expected >= 1");
}

TEST(BatchOps, RepeatInterleavesCopiesOfASampleOrTilesTheBatch) {
  const Batch batch = make_test_batch(5);
  for (int64_t n : {1, 2, 4}) {
    const Batch interleaved = rl::repeat(batch, n, rl::RepeatMode::interleave);
    const Batch tiled = rl::repeat(batch, n, rl::RepeatMode::tile);
    ASSERT_EQ(interleaved.size(), 5 * n);
    ASSERT_EQ(tiled.size(), 5 * n);
    for (int64_t i = 0; i < 5; ++i) {
      for (int64_t copy = 0; copy < n; ++copy) {
        // Sample i's copies sit together at [i n, (i + 1) n) (verl: the n responses of a prompt) ...
        const auto at = size_t(i * n + copy);
        EXPECT_EQ(sample_ids(interleaved)[at], i);
        EXPECT_EQ(interleaved.column("uid")[at], batch.column("uid")[size_t(i)]);
        // ... and tiling repeats the whole batch.
        EXPECT_EQ(sample_ids(tiled)[size_t(copy * 5 + i)], i);
      }
    }
    expect_batches_equal(rl::chunk(tiled, n)[size_t(n - 1)], batch);
    EXPECT_EQ(interleaved.meta(), batch.meta());
  }
  expect_error_containing([&] { (void)rl::repeat(batch, 0, rl::RepeatMode::tile); }, "repeat: times: expected >= 1");
}

TEST(BatchOps, PadThenUnpadIsTheIdentity) {
  for (int64_t B : {0, 1, 3, 7, 8, 13}) {
    const Batch batch = make_test_batch(B);
    for (int64_t divisor : {1, 2, 4, 5, 16}) {
      for (rl::PadFill fill : {rl::PadFill::leading_samples, rl::PadFill::last_sample}) {
        const rl::PaddedBatch padded = rl::pad_to_divisor(batch, divisor, fill);
        const int64_t expected_pad = B == 0 ? 0 : (divisor - B % divisor) % divisor;
        ASSERT_EQ(padded.pad_size, expected_pad) << "B=" << B << " divisor=" << divisor;
        ASSERT_EQ(padded.batch.size() % divisor, 0);
        const std::vector<int64_t> ids = sample_ids(padded.batch);
        for (int64_t k = 0; k < expected_pad; ++k) {
          // verl: pad_dataproto_to_divisor cycles through the leading samples; the dispatcher repeats the last.
          const int64_t source = fill == rl::PadFill::leading_samples ? k % B : B - 1;
          EXPECT_EQ(ids[size_t(B + k)], source) << "pad " << k << " B=" << B << " divisor=" << divisor;
        }
        expect_batches_equal(rl::unpad(padded.batch, padded.pad_size), batch);
      }
    }
  }
  expect_error_containing([] { (void)rl::unpad(make_test_batch(3), 4); }, "unpad: pad_size: expected in [0, 3]");
  expect_error_containing([] { (void)rl::pad_to_divisor(make_test_batch(3), 0, rl::PadFill::last_sample); },
                          "pad_to_divisor: divisor: expected >= 1");
}

// Every mini-batch of an iterator, as lists of sample ids.
std::vector<std::vector<int64_t>> drain(rl::MiniBatchIterator& it, const Batch& batch) {
  std::vector<std::vector<int64_t>> out;
  while (std::optional<Batch> mini = it.next()) {
    EXPECT_EQ(mini->meta(), batch.meta());
    out.push_back(sample_ids(*mini));
  }
  return out;
}

TEST(MiniBatchIterator, VisitsEverySampleOncePerEpoch) {
  const Batch batch = make_test_batch(12);
  for (rl::Shuffle shuffle : {rl::Shuffle::no, rl::Shuffle::yes}) {
    rl::MiniBatchIterator it(batch, 4, 3, shuffle, 123);
    EXPECT_EQ(it.num_mini_batches(), 9);
    const std::vector<std::vector<int64_t>> minis = drain(it, batch);
    ASSERT_EQ(minis.size(), 9u);
    for (int64_t epoch = 0; epoch < 3; ++epoch) {
      std::vector<int64_t> seen;
      for (int64_t m = 0; m < 3; ++m) {
        const std::vector<int64_t>& ids = minis[size_t(epoch * 3 + m)];
        EXPECT_EQ(ids.size(), 4u);
        seen.insert(seen.end(), ids.begin(), ids.end());
      }
      if (shuffle == rl::Shuffle::no) {
        EXPECT_EQ(seen, iota(12));
      }
      std::sort(seen.begin(), seen.end());
      EXPECT_EQ(seen, iota(12)) << "epoch " << epoch;
    }
    if (shuffle == rl::Shuffle::yes) {
      // A fresh order each epoch, none of them the identity (for this seed).
      EXPECT_NE(minis[0], minis[3]);
      EXPECT_NE(minis[0], iota(4));
    }
    EXPECT_FALSE(it.next().has_value());
  }
}

TEST(MiniBatchIterator, IsAFunctionOfTheSeed) {
  const Batch batch = make_test_batch(16);
  rl::MiniBatchIterator a(batch, 8, 2, rl::Shuffle::yes, 7), b(batch, 8, 2, rl::Shuffle::yes, 7),
      c(batch, 8, 2, rl::Shuffle::yes, 8);
  const auto minis_a = drain(a, batch), minis_b = drain(b, batch), minis_c = drain(c, batch);
  EXPECT_EQ(minis_a, minis_b);
  EXPECT_NE(minis_a, minis_c);
}

TEST(MiniBatchIterator, RejectsAMiniBatchSizeThatDoesNotDivide) {
  const Batch batch = make_test_batch(10);
  expect_error_containing([&] { rl::MiniBatchIterator(batch, 4, 1, rl::Shuffle::no, 0); },
                          "mini_batch_size: 4 does not divide the batch's 10 samples");
  expect_error_containing([&] { rl::MiniBatchIterator(batch, 5, 0, rl::Shuffle::no, 0); }, "epochs: expected >= 1");
}

}  // namespace
}  // namespace rf::testing

// The MPI group's reduce-scatter, a ring of point-to-point messages (src/dist/mpi_ring_reduce_scatter.h):
// results against the sum of every rank's input computed on each rank, for chunk sizes that are not
// powers of two (and past MPI's eager limit), completed by test() alone; several in flight at once,
// finished in another order than they started, between other collectives and point-to-point messages of
// the same group; on a split group. Integer-valued inputs make every summation order exact; random inputs
// check the tolerance and that results repeat, blocking or not.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "core/element_access.h"
#include "mpi_test_world.h"
#include "support/test_support.h"

namespace rf::dist {
namespace {

using testing::rank_tensor;
using testing::value;
using testing::world;

// 0 and 1 (edge cases), odd sizes, and 33333 f32 (130 KB) chunks, above Open MPI's eager message limits.
constexpr int64_t kChunkNumels[] = {0, 1, 7, 1000, 33333};

// Completes `handle` by test() alone: a ring that only advanced in wait() would spin here until the
// test's time limit.
void poll_until_done(CommHandle& handle) {
  while (!handle.test()) {
  }
}

// Element `index` of the sum over ranks of rank_tensor(...) (exact in every dtype: small integers).
double sum_over_ranks(int64_t index) {
  double sum = 0;
  for (int r = 0; r < world().size(); ++r) sum += value(r, index);
  return sum;
}

// `out` is this rank's chunk of the sum of rank_tensor(..., first) over ranks.
void expect_reduce_scatter_result(const Tensor& out, int64_t first, const std::string& what) {
  const int64_t chunk_start = first + world().rank() * out.numel();
  for (int64_t i = 0; i < out.numel(); ++i)
    ASSERT_EQ(load_f64(out, i), sum_over_ranks(chunk_start + i)) << what << " element " << i;
}

TEST(MpiRingReduceScatter, PolledToCompletion) {
  ProcessGroup& g = world();
  for (DType dtype : {DType::f32, DType::bf16, DType::f64, DType::i32, DType::i64})
    for (int64_t n : kChunkNumels) {
      const Tensor in = rank_tensor(Shape{g.size() * n}, dtype, g.rank());
      Tensor out(Shape{n}, dtype);
      CommHandle handle = g.ireduce_scatter(in, out);
      poll_until_done(handle);
      expect_reduce_scatter_result(out, 0, fmt::format("{} chunk {}", dtype_name(dtype), n));
    }
}

TEST(MpiRingReduceScatter, Blocking) {
  ProcessGroup& g = world();
  for (DType dtype : {DType::f32, DType::bf16})
    for (int64_t n : kChunkNumels) {
      const Tensor in = rank_tensor(Shape{g.size() * n}, dtype, g.rank(), 5);
      Tensor out(Shape{n}, dtype);
      g.reduce_scatter(in, out);
      expect_reduce_scatter_result(out, 5, fmt::format("{} chunk {}", dtype_name(dtype), n));
    }
}

// Random inputs: each rank's input is random_tensor(seed 100 + rank), which every rank can make. The
// ring adds a chunk's terms in an order of its own, so f32 results are within p rounding steps of the
// f64 sum, and bf16 ones within one bf16 rounding of that (bf16 is summed in f32 and rounded once). The
// order is fixed: the same call gives the same bits every time, blocking or not.
TEST(MpiRingReduceScatter, RandomDataIsCloseAndRepeats) {
  ProcessGroup& g = world();
  constexpr int64_t kChunk = 4099;
  for (DType dtype : {DType::f32, DType::bf16}) {
    std::vector<Tensor> inputs;
    for (int r = 0; r < g.size(); ++r)
      inputs.push_back(rf::testing::random_tensor(Shape{g.size() * kChunk}, dtype, uint64_t(100 + r)));
    Tensor polled(Shape{kChunk}, dtype), waited(Shape{kChunk}, dtype), blocking(Shape{kChunk}, dtype);
    CommHandle handle = g.ireduce_scatter(inputs[size_t(g.rank())], polled);
    poll_until_done(handle);
    g.ireduce_scatter(inputs[size_t(g.rank())], waited).wait();
    g.reduce_scatter(inputs[size_t(g.rank())], blocking);

    const double rounding = dtype == DType::f32 ? std::ldexp(1.0, -24) : std::ldexp(1.0, -8);
    for (int64_t i = 0; i < kChunk; ++i) {
      double sum = 0, sum_abs = 0;
      for (const Tensor& in : inputs) {
        const double x = load_f64(in, g.rank() * kChunk + i);
        sum += x;
        sum_abs += std::abs(x);
      }
      const double tolerance = g.size() * std::ldexp(1.0, -24) * sum_abs + rounding * std::abs(sum);
      ASSERT_NEAR(load_f64(polled, i), sum, tolerance) << dtype_name(dtype) << " element " << i;
      ASSERT_EQ(load_f64(waited, i), load_f64(polled, i)) << dtype_name(dtype) << " element " << i;
      ASSERT_EQ(load_f64(blocking, i), load_f64(polled, i)) << dtype_name(dtype) << " element " << i;
    }
  }
}

// Four reduce-scatters and two all-gathers in flight at once (as the gradient buckets of a backward
// are), with a blocking all-reduce and all-gather, a non-blocking all-reduce and a ring of
// point-to-point messages on the group's own tags 0..3 in between; the second reduce-scatter is waited
// for first, the others are polled in turn until all are done.
TEST(MpiRingReduceScatter, OperationsInFlightFinishInAnyOrder) {
  ProcessGroup& g = world();
  const DType dtypes[] = {DType::f32, DType::bf16, DType::f32, DType::f64};
  const int64_t chunk_numels[] = {1001, 333, 33333, 7};
  std::vector<Tensor> ins, outs;
  std::vector<CommHandle> handles;
  for (int op = 0; op < 4; ++op) {
    ins.push_back(rank_tensor(Shape{g.size() * chunk_numels[op]}, dtypes[op], g.rank(), 10 * op));
    outs.emplace_back(Shape{chunk_numels[op]}, dtypes[op]);
    handles.push_back(g.ireduce_scatter(ins.back(), outs.back()));
  }
  const Tensor mine = rank_tensor(Shape{3, 5}, DType::bf16, g.rank(), 40);
  Tensor gathered(Shape{g.size() * 3, 5}, DType::bf16), gathered_again(Shape{g.size() * 3, 5}, DType::bf16);
  handles.push_back(g.iall_gather(mine, gathered));

  const Tensor summed_now = rank_tensor(Shape{6}, DType::f32, g.rank(), 50);
  g.all_reduce(summed_now, ReduceOp::sum);
  const Tensor summed_later = rank_tensor(Shape{6}, DType::i64, g.rank(), 60);
  CommHandle reducing = g.iall_reduce(summed_later, ReduceOp::sum);
  g.all_gather(mine, gathered_again);
  Tensor gathered_columns(Shape{g.size() * 9}, DType::bf16);
  handles.push_back(g.iall_gather(mine.view().slice(1, 1, 3), gathered_columns));
  const int next = (g.rank() + 1) % g.size(), prev = (g.rank() + g.size() - 1) % g.size();
  std::vector<Tensor> sent, received;
  std::vector<CommHandle> messages;
  if (g.size() > 1)
    for (int tag = 0; tag < 4; ++tag) {
      received.emplace_back(Shape{2}, DType::f32);
      messages.push_back(g.irecv(received.back(), prev, tag));
      sent.push_back(rank_tensor(Shape{2}, DType::f32, g.rank(), 70 + tag));
      messages.push_back(g.isend(sent.back(), next, tag));
    }

  handles[1].wait();
  EXPECT_TRUE(handles[1].done());
  for (bool all_done = false; !all_done;) {
    all_done = true;
    for (size_t h = handles.size(); h-- > 0;) all_done = handles[h].test() && all_done;
  }
  reducing.wait();
  for (CommHandle& m : messages) m.wait();

  for (int op = 0; op < 4; ++op)
    expect_reduce_scatter_result(outs[size_t(op)], 10 * op, fmt::format("reduce-scatter {}", op));
  for (int r = 0; r < g.size(); ++r)
    for (int64_t i = 0; i < 15; ++i) {
      ASSERT_EQ(load_f64(gathered, r * 15 + i), value(r, 40 + i)) << "rank " << r;
      ASSERT_EQ(load_f64(gathered_again, r * 15 + i), value(r, 40 + i)) << "rank " << r;
      if (i % 5 >= 1 && i % 5 < 4) {  // columns 1..3 of the 3 x 5 rows
        ASSERT_EQ(load_f64(gathered_columns, r * 9 + i / 5 * 3 + i % 5 - 1), value(r, 40 + i)) << "rank " << r;
      }
    }
  for (int64_t i = 0; i < 6; ++i) {
    ASSERT_EQ(load_f64(summed_now, i), sum_over_ranks(50 + i));
    ASSERT_EQ(load_f64(summed_later, i), sum_over_ranks(60 + i));
  }
  for (size_t tag = 0; tag < received.size(); ++tag)
    for (int64_t i = 0; i < 2; ++i) ASSERT_EQ(load_f64(received[tag], i), value(prev, 70 + int64_t(tag) + i));
}

// On a split group the ring runs over the group's own ranks: even and odd world ranks reduce at once.
TEST(MpiRingReduceScatter, OnASplitGroup) {
  ProcessGroup& g = world();
  const std::unique_ptr<ProcessGroup> half = g.split(g.rank() % 2, g.rank(), "half");
  constexpr int64_t kChunk = 1001;
  const Tensor in = rank_tensor(Shape{half->size() * kChunk}, DType::f32, g.rank());
  Tensor out(Shape{kChunk}, DType::f32);
  CommHandle handle = half->ireduce_scatter(in, out);
  poll_until_done(handle);
  for (int64_t i = 0; i < kChunk; ++i) {
    double sum = 0;
    for (int r = g.rank() % 2; r < g.size(); r += 2) sum += value(r, half->rank() * kChunk + i);
    ASSERT_EQ(out.at<float>({i}), sum) << "element " << i;
  }
}

}  // namespace
}  // namespace rf::dist

// Every collective of the MPI ProcessGroup, blocking and non-blocking, in every dtype, against the result
// each rank computes from every rank's inputs; bf16 reductions accumulate in f32; MPI's own errors and
// bad arguments become rf::Error naming the group and the operation; split.
#include <gtest/gtest.h>

#include <numeric>
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

constexpr DType kDtypes[] = {DType::f32, DType::f64, DType::i32, DType::i64, DType::bf16};
enum class Mode : uint8_t { blocking, wait, poll };
constexpr Mode kModes[] = {Mode::blocking, Mode::wait, Mode::poll};

// Completes a non-blocking call by wait() or by polling test() (which is what drives MPI's progress).
void finish(CommHandle handle, Mode mode) {
  if (mode == Mode::poll)
    while (!handle.test()) {
    }
  handle.wait();
  EXPECT_TRUE(handle.done());
}

double reduce(ReduceOp op, int64_t i) {
  double r = value(0, i);
  for (int rank = 1; rank < world().size(); ++rank) {
    const double v = value(rank, i);
    r = op == ReduceOp::sum ? r + v : op == ReduceOp::max ? std::max(r, v) : std::min(r, v);
  }
  return r;
}

std::string what(DType dtype, Mode mode) {
  return fmt::format("{} {}", dtype_name(dtype), mode == Mode::blocking ? "blocking" : mode == Mode::wait ? "wait" : "poll");
}

TEST(MpiProcessGroup, AllReduceEveryDtypeOpAndMode) {
  ProcessGroup& g = world();
  for (DType dtype : kDtypes)
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::max, ReduceOp::min})
      for (Mode mode : kModes) {
        const Tensor x = rank_tensor(Shape{5, 7}, dtype, g.rank());
        if (mode == Mode::blocking) g.all_reduce(x, op);
        else finish(g.iall_reduce(x, op), mode);
        for (int64_t i = 0; i < x.numel(); ++i)
          ASSERT_EQ(load_f64(x, i), reduce(op, i)) << what(dtype, mode) << " op " << int(op) << " element " << i;
      }
}

// 256 on rank 0 and 1 on every other rank. Summed in bf16 one rank at a time, 256 + 1 rounds back to
// 256 every step; summed in f32 and rounded once, W ranks give bf16(255 + W) (260 for W = 4).
TEST(MpiProcessGroup, Bf16ReductionsAccumulateInF32) {
  ProcessGroup& g = world();
  const float expected = to_f32(to_bf16(255.0f + float(g.size())));
  for (Mode mode : kModes) {
    Tensor x(Shape{3}, DType::bf16);
    for (int64_t i = 0; i < 3; ++i) x.data<bf16>()[i] = to_bf16(g.rank() == 0 ? 256.0f : 1.0f);
    if (mode == Mode::blocking) g.all_reduce(x, ReduceOp::sum);
    else finish(g.iall_reduce(x, ReduceOp::sum), mode);
    for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(to_f32(x.data<bf16>()[i]), expected) << what(DType::bf16, mode);

    Tensor in(Shape{g.size() * 2}, DType::bf16), out(Shape{2}, DType::bf16);
    for (int64_t i = 0; i < in.numel(); ++i) in.data<bf16>()[i] = to_bf16(g.rank() == 0 ? 256.0f : 1.0f);
    if (mode == Mode::blocking) g.reduce_scatter(in, out);
    else finish(g.ireduce_scatter(in, out), mode);
    for (int64_t i = 0; i < 2; ++i) EXPECT_EQ(to_f32(out.data<bf16>()[i]), expected) << what(DType::bf16, mode);
  }
  if (g.size() == 4) {
    EXPECT_EQ(expected, 260.0f);
  }
}

TEST(MpiProcessGroup, AllReduceScalar) {
  ProcessGroup& g = world();
  const double n = g.size();
  EXPECT_EQ(g.all_reduce_scalar(g.rank() + 0.5, ReduceOp::sum), n * n / 2);
  EXPECT_EQ(g.all_reduce_scalar(g.rank() + 0.5, ReduceOp::max), n - 0.5);
  EXPECT_EQ(g.all_reduce_scalar(g.rank() + 0.5, ReduceOp::min), 0.5);
}

TEST(MpiProcessGroup, AllGatherStacksRanksInOrder) {
  ProcessGroup& g = world();
  for (DType dtype : kDtypes)
    for (Mode mode : kModes) {
      const Tensor x = rank_tensor(Shape{2, 3}, dtype, g.rank());
      Tensor out(Shape{g.size() * 2, 3}, dtype);
      if (mode == Mode::blocking) g.all_gather(x, out);
      else finish(g.iall_gather(x, out), mode);
      for (int r = 0; r < g.size(); ++r)
        for (int64_t i = 0; i < 6; ++i) ASSERT_EQ(load_f64(out, r * 6 + i), value(r, i)) << what(dtype, mode);
    }
  // A strided input (every other column) is sent in row-major order.
  const Tensor wide = rank_tensor(Shape{3, 4}, DType::f32, g.rank());
  Tensor out(Shape{g.size() * 3}, DType::f32);
  g.all_gather(wide.view().slice(1, 2, 1), out);
  for (int r = 0; r < g.size(); ++r)
    for (int64_t row = 0; row < 3; ++row) EXPECT_EQ(out.at<float>({r * 3 + row}), value(r, row * 4 + 2));
}

TEST(MpiProcessGroup, AllGatherVTakesEachRanksCount) {
  ProcessGroup& g = world();
  std::vector<int64_t> counts;
  for (int r = 0; r < g.size(); ++r) counts.push_back(r == 1 ? 0 : r + 2);  // rank 1 sends nothing
  const int64_t total = std::accumulate(counts.begin(), counts.end(), int64_t{0});
  for (DType dtype : kDtypes)
    for (Mode mode : kModes) {
      const Tensor x = rank_tensor(Shape{counts[size_t(g.rank())]}, dtype, g.rank());
      Tensor out(Shape{total}, dtype);
      if (mode == Mode::blocking) g.all_gather_v(x, out, counts);
      else finish(g.iall_gather_v(x, out, counts), mode);
      int64_t offset = 0;
      for (int r = 0; r < g.size(); ++r)
        for (int64_t i = 0; i < counts[size_t(r)]; ++i)
          ASSERT_EQ(load_f64(out, offset++), value(r, i)) << what(dtype, mode) << " from rank " << r;
    }
}

TEST(MpiProcessGroup, ReduceScatterGivesEachRankItsChunkOfTheSum) {
  ProcessGroup& g = world();
  constexpr int64_t kChunk = 6;
  for (DType dtype : kDtypes)
    for (Mode mode : kModes) {
      const Tensor in = rank_tensor(Shape{g.size() * kChunk}, dtype, g.rank());
      Tensor out(Shape{2, kChunk / 2}, dtype);
      if (mode == Mode::blocking) g.reduce_scatter(in, out);
      else finish(g.ireduce_scatter(in, out), mode);
      for (int64_t i = 0; i < kChunk; ++i)
        ASSERT_EQ(load_f64(out, i), reduce(ReduceOp::sum, g.rank() * kChunk + i)) << what(dtype, mode);
    }
  // A strided (transposed) input is reduced in its row-major order.
  const Tensor in_T = rank_tensor(Shape{kChunk, g.size()}, DType::f32, g.rank());
  Tensor out(Shape{kChunk}, DType::f32);
  g.reduce_scatter(in_T.view().transpose(0, 1), out);
  for (int64_t i = 0; i < kChunk; ++i) EXPECT_EQ(out.at<float>({i}), reduce(ReduceOp::sum, i * g.size() + g.rank()));
}

TEST(MpiProcessGroup, AllToAllExchangesChunks) {
  ProcessGroup& g = world();
  constexpr int64_t kChunk = 3;
  for (DType dtype : kDtypes)
    for (Mode mode : kModes) {
      const Tensor in = rank_tensor(Shape{g.size() * kChunk}, dtype, g.rank());  // chunk d goes to rank d
      Tensor out(Shape{g.size() * kChunk}, dtype);
      if (mode == Mode::blocking) g.all_to_all(in, out);
      else finish(g.iall_to_all(in, out), mode);
      for (int s = 0; s < g.size(); ++s)
        for (int64_t j = 0; j < kChunk; ++j)
          ASSERT_EQ(load_f64(out, s * kChunk + j), value(s, g.rank() * kChunk + j)) << what(dtype, mode);
    }
}

TEST(MpiProcessGroup, AllToAllVExchangesUnevenChunks) {
  ProcessGroup& g = world();
  // Rank s sends (s + d) % 3 elements to rank d: value(s, 100 d + j) for j below that count.
  auto count = [](int s, int d) { return int64_t((s + d) % 3); };
  std::vector<int64_t> send_counts, recv_counts;
  for (int r = 0; r < g.size(); ++r) {
    send_counts.push_back(count(g.rank(), r));
    recv_counts.push_back(count(r, g.rank()));
  }
  for (DType dtype : kDtypes)
    for (Mode mode : kModes) {
      Tensor in(Shape{std::accumulate(send_counts.begin(), send_counts.end(), int64_t{0})}, dtype);
      Tensor out(Shape{std::accumulate(recv_counts.begin(), recv_counts.end(), int64_t{0})}, dtype);
      int64_t offset = 0;
      for (int d = 0; d < g.size(); ++d)
        for (int64_t j = 0; j < count(g.rank(), d); ++j) store_f64(in, offset++, value(g.rank(), 100 * d + j));
      if (mode == Mode::blocking) g.all_to_all_v(in, send_counts, out, recv_counts);
      else finish(g.iall_to_all_v(in, send_counts, out, recv_counts), mode);
      offset = 0;
      for (int s = 0; s < g.size(); ++s)
        for (int64_t j = 0; j < count(s, g.rank()); ++j)
          ASSERT_EQ(load_f64(out, offset++), value(s, 100 * g.rank() + j)) << what(dtype, mode);
    }
}

TEST(MpiProcessGroup, BroadcastFromEveryRoot) {
  ProcessGroup& g = world();
  for (DType dtype : kDtypes)
    for (Mode mode : kModes)
      for (int root = 0; root < g.size(); ++root) {
        const Tensor x = rank_tensor(Shape{9}, dtype, g.rank());
        if (mode == Mode::blocking) g.broadcast(x, root);
        else finish(g.ibroadcast(x, root), mode);
        for (int64_t i = 0; i < 9; ++i) ASSERT_EQ(load_f64(x, i), value(root, i)) << what(dtype, mode);
      }
}

TEST(MpiProcessGroup, SendAndReceive) {
  ProcessGroup& g = world();
  if (g.size() < 2) GTEST_SKIP() << "needs two ranks";
  const int next = (g.rank() + 1) % g.size(), prev = (g.rank() + g.size() - 1) % g.size();
  for (DType dtype : kDtypes) {
    // A ring, non-blocking: every rank sends to the next and receives from the previous.
    const Tensor out = rank_tensor(Shape{4, 2}, dtype, g.rank());
    Tensor in(Shape{4, 2}, dtype);
    CommHandle sent = g.isend(out, next, 7);
    finish(g.irecv(in, prev, 7), Mode::poll);
    sent.wait();
    for (int64_t i = 0; i < 8; ++i) ASSERT_EQ(load_f64(in, i), value(prev, i)) << dtype_name(dtype);

    // Blocking, in pairs (0<->1, 2<->3, ...): the even rank sends first, so no two ranks wait on each other.
    const int peer = g.rank() ^ 1;
    if (peer >= g.size()) continue;
    Tensor got(Shape{3}, dtype);
    const Tensor mine = rank_tensor(Shape{3}, dtype, g.rank(), 50);
    if (g.rank() % 2 == 0) {
      g.send(mine, peer, 3);
      g.recv(got, peer, 3);
    } else {
      g.recv(got, peer, 3);
      g.send(mine, peer, 3);
    }
    for (int64_t i = 0; i < 3; ++i) ASSERT_EQ(load_f64(got, i), value(peer, 50 + i)) << dtype_name(dtype);
  }
}

// Several operations in flight at once, finished in another order than they started.
TEST(MpiProcessGroup, OperationsOverlap) {
  ProcessGroup& g = world();
  const Tensor a = rank_tensor(Shape{8}, DType::f32, g.rank());
  const Tensor b = rank_tensor(Shape{5}, DType::bf16, g.rank());
  Tensor gathered(Shape{g.size() * 5}, DType::bf16);
  const Tensor c = rank_tensor(Shape{4}, DType::i64, g.rank());
  CommHandle ha = g.iall_reduce(a, ReduceOp::sum);
  CommHandle hb = g.iall_gather(b, gathered);
  CommHandle hc = g.ibroadcast(c, g.size() - 1);
  hc.wait();
  hb.wait();
  ha.wait();
  for (int64_t i = 0; i < 8; ++i) EXPECT_EQ(a.at<float>({i}), reduce(ReduceOp::sum, i));
  for (int r = 0; r < g.size(); ++r)
    for (int64_t i = 0; i < 5; ++i) EXPECT_EQ(load_f64(gathered, r * 5 + i), value(r, i));
  for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(c.at<int64_t>({i}), int64_t(value(g.size() - 1, i)));
}

// A handle that goes out of scope, or is assigned over, waits for its operation first.
TEST(MpiProcessGroup, DroppedHandlesWait) {
  ProcessGroup& g = world();
  const Tensor x = rank_tensor(Shape{6}, DType::bf16, g.rank());
  const Tensor y = rank_tensor(Shape{6}, DType::f64, g.rank());
  {
    CommHandle h = g.iall_reduce(x, ReduceOp::max);
    h = g.iall_reduce(y, ReduceOp::min);  // waits for x's reduction (and its bf16 write-back) first
    for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(load_f64(x, i), reduce(ReduceOp::max, i));
  }
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(load_f64(y, i), reduce(ReduceOp::min, i));
  EXPECT_TRUE(CommHandle().done());
}

TEST(MpiProcessGroup, SplitGroupsRanksByColourInKeyOrder) {
  ProcessGroup& g = world();
  // Rank 0 joins nothing; the others split by parity, ranked in reverse.
  const int color = g.rank() == 0 ? -1 : g.rank() % 2;
  const std::unique_ptr<ProcessGroup> sub = g.split(color, -g.rank(), "parity");
  if (g.rank() == 0) {
    EXPECT_EQ(sub, nullptr);
    return;
  }
  ASSERT_NE(sub, nullptr);
  std::vector<int> members;
  for (int r = g.size() - 1; r >= 1; --r)
    if (r % 2 == color) members.push_back(r);
  EXPECT_EQ(sub->name(), "parity");
  EXPECT_EQ(sub->size(), int(members.size()));
  EXPECT_EQ(sub->rank(), int(std::find(members.begin(), members.end(), g.rank()) - members.begin()));
  EXPECT_EQ(sub->all_reduce_scalar(g.rank(), ReduceOp::sum), std::accumulate(members.begin(), members.end(), 0));
}

// Messages name the group and the operation. MPI checks the tag itself (MPI_ERR_TAG); a receive into a
// larger buffer than was sent is caught after the fact.
TEST(MpiProcessGroup, ErrorsNameTheGroupAndOperation) {
  ProcessGroup& g = world();
  const auto expect_error = rf::testing::expect_error_containing;
  const Tensor x = rank_tensor(Shape{4}, DType::f32, g.rank());
  Tensor wrong(Shape{g.size() * 4 + 1}, DType::f32);
  expect_error([&] { g.all_gather(x, wrong); }, "world all_gather: `out` has");
  expect_error([&] { g.all_reduce(Tensor(Shape{2}, DType::u8), ReduceOp::sum); }, "world all_reduce: cannot reduce u8");
  if (g.size() < 2) return;
  const int peer = g.rank() ^ 1;
  if (peer >= g.size()) return;
  expect_error([&] { g.send(x, peer, -5); }, "world send (");
  expect_error([&] { g.send(x, peer, -5); }, "MPI_ERR_TAG");
  if (g.rank() == 0) {
    g.send(x.view().slice(0, 0, 3), 1, 9);
  } else if (g.rank() == 1) {
    Tensor four(Shape{4}, DType::f32);
    expect_error([&] { g.recv(four, 0, 9); }, "received 3 elements from rank 0, the buffer holds 4");
  }
}

}  // namespace
}  // namespace rf::dist

// SpGather / SpScatter over a TP group of the whole world: each forward and backward against the
// gather / reduce-scatter each rank computes itself, and each backward as its forward's adjoint
// (sum over ranks of <forward(x), y> = sum over ranks of <x, backward(y)>, exact on small integers).
#include <gtest/gtest.h>

#include "core/element_access.h"
#include "dist/parallel_context.h"
#include "dist/tp_comm.h"
#include "mpi_test_world.h"

namespace rf::dist {
namespace {

using testing::rank_tensor;
using testing::value;
using testing::world;

constexpr int64_t kRows = 3, kCols = 4;  // a local shard is [T/tp, C] = [3, 4]

ParallelContext tp_over_world() {
  ParallelDims dims;
  dims.world_size = world().size();
  dims.tensor_model_parallel_size = world().size();
  return ParallelContext::create(RankLayout(dims), world(), /*sequence_parallel=*/true);
}

// Sum over ranks of the elementwise product of a and b.
double global_dot(ProcessGroup& tp, const Tensor& a, const Tensor& b) {
  double dot = 0;
  for (int64_t i = 0; i < a.numel(); ++i) dot += load_f64(a, i) * load_f64(b, i);
  return tp.all_reduce_scalar(dot, ReduceOp::sum);
}

TEST(SequenceParallel, SpGatherForwardGathersBackwardReduceScatters) {
  const ParallelContext ctx = tp_over_world();
  ProcessGroup& tp = ctx.tp();
  const int n = tp.size(), me = tp.rank();
  for (DType dtype : {DType::f32, DType::bf16}) {
    const Tensor x_local = rank_tensor(Shape{kRows, kCols}, dtype, me);
    Tensor x_full(Shape{n * kRows, kCols}, dtype);
    SpGather::forward(tp, x_local, x_full);
    for (int r = 0; r < n; ++r)
      for (int64_t i = 0; i < kRows * kCols; ++i) ASSERT_EQ(load_f64(x_full, r * kRows * kCols + i), value(r, i));

    const Tensor dx_full = rank_tensor(Shape{n * kRows, kCols}, dtype, me + 10);
    Tensor dx_local(Shape{kRows, kCols}, dtype);
    SpGather::backward(tp, dx_full, dx_local);
    for (int64_t i = 0; i < kRows * kCols; ++i) {
      double sum = 0;
      for (int r = 0; r < n; ++r) sum += value(r + 10, me * kRows * kCols + i);
      ASSERT_EQ(load_f64(dx_local, i), sum) << dtype_name(dtype);
    }
    EXPECT_EQ(global_dot(tp, x_full, dx_full), global_dot(tp, x_local, dx_local)) << dtype_name(dtype);
  }
}

TEST(SequenceParallel, SpScatterForwardReduceScattersBackwardGathers) {
  const ParallelContext ctx = tp_over_world();
  ProcessGroup& tp = ctx.tp();
  const int n = tp.size(), me = tp.rank();
  for (DType dtype : {DType::f32, DType::bf16}) {
    const Tensor y_full = rank_tensor(Shape{n * kRows, kCols}, dtype, me);
    Tensor y_local(Shape{kRows, kCols}, dtype);
    SpScatter::forward(tp, y_full, y_local);
    for (int64_t i = 0; i < kRows * kCols; ++i) {
      double sum = 0;
      for (int r = 0; r < n; ++r) sum += value(r, me * kRows * kCols + i);
      ASSERT_EQ(load_f64(y_local, i), sum) << dtype_name(dtype);
    }

    const Tensor dy_local = rank_tensor(Shape{kRows, kCols}, dtype, me + 10);
    Tensor dy_full(Shape{n * kRows, kCols}, dtype);
    SpScatter::backward(tp, dy_local, dy_full);
    for (int r = 0; r < n; ++r)
      for (int64_t i = 0; i < kRows * kCols; ++i)
        ASSERT_EQ(load_f64(dy_full, r * kRows * kCols + i), value(r + 10, i)) << dtype_name(dtype);
    EXPECT_EQ(global_dot(tp, y_local, dy_local), global_dot(tp, y_full, dy_full)) << dtype_name(dtype);
  }
}

// SpScatter undoes SpGather up to the TP sum: gathering shards, then reduce-scattering the (identical)
// full tensors, gives back tp.size() x each shard.
TEST(SequenceParallel, ScatterAfterGatherIsTpTimesTheShard) {
  const ParallelContext ctx = tp_over_world();
  ProcessGroup& tp = ctx.tp();
  const Tensor x_local = rank_tensor(Shape{kRows, kCols}, DType::f32, tp.rank());
  Tensor x_full(Shape{tp.size() * kRows, kCols}, DType::f32), back(Shape{kRows, kCols}, DType::f32);
  SpGather::forward(tp, x_local, x_full);
  SpScatter::forward(tp, x_full, back);
  for (int64_t i = 0; i < kRows * kCols; ++i) EXPECT_EQ(load_f64(back, i), tp.size() * load_f64(x_local, i));
}

TEST(SequenceParallel, ShardShapesAreChecked) {
  const ParallelContext ctx = tp_over_world();
  ProcessGroup& tp = ctx.tp();
  const Tensor x_local(Shape{kRows, kCols}, DType::f32);
  Tensor too_short(Shape{tp.size() * kRows - 1, kCols}, DType::f32);
  Tensor other_cols(Shape{tp.size() * kRows, kCols + 1}, DType::f32);
  EXPECT_THROW(SpGather::forward(tp, x_local, too_short), Error);
  EXPECT_THROW(SpGather::backward(tp, other_cols, x_local), Error);
  EXPECT_THROW(SpScatter::forward(tp, too_short, x_local), Error);
  EXPECT_THROW(SpScatter::backward(tp, x_local, other_cols), Error);
}

}  // namespace
}  // namespace rf::dist

// The single-process dist layer: SingleProcessGroup collectives are identities or copies,
// ParallelContext::single_process has four groups of one, and TpCopy / TpReduce call all-reduce
// exactly in their conjugate directions (forward for TpReduce, backward for TpCopy), and only
// when the group has more than one rank.
#include "dist/process_group.h"

#include <gtest/gtest.h>

#include <cstring>
#include <utility>

#include "core/tensor.h"
#include "dist/parallel_context.h"
#include "dist/tp_comm.h"
#include "support/test_support.h"

namespace rf::dist {
namespace {

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.view().raw(), b.view().raw(), a.nbytes()) == 0;
}

TEST(SingleProcessGroup, CollectivesAreIdentitiesOrCopies) {
  SingleProcessGroup group("tp");
  EXPECT_EQ(group.rank(), 0);
  EXPECT_EQ(group.size(), 1);
  EXPECT_EQ(group.name(), "tp");

  const Tensor x = rf::testing::random_tensor(Shape{3, 5}, DType::f32, 1);
  const Tensor original = clone(x, DType::f32);
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::max, ReduceOp::min}) {
    group.all_reduce(x, op);
    EXPECT_TRUE(same_bytes(x, original));
    EXPECT_EQ(group.all_reduce_scalar(-2.5, op), -2.5);
  }
  group.broadcast(x, 0);
  EXPECT_TRUE(same_bytes(x, original));
  EXPECT_THROW(group.broadcast(x, 1), Error);

  Tensor gathered(Shape{15}, DType::f32);  // size() x in's elements, flattened
  group.all_gather(x, gathered);
  EXPECT_EQ(std::memcmp(gathered.view().raw(), x.view().raw(), x.nbytes()), 0);
  Tensor scattered(Shape{5, 3}, DType::f32);
  group.reduce_scatter(x, scattered);
  EXPECT_EQ(std::memcmp(scattered.view().raw(), x.view().raw(), x.nbytes()), 0);

  // A strided input is gathered in its logical (row-major) order.
  Tensor strided_gather(Shape{9}, DType::f32);
  group.all_gather(x.view().slice(1, 1, 3), strided_gather);
  for (int64_t r = 0; r < 3; ++r)
    for (int64_t c = 0; c < 3; ++c) EXPECT_EQ(strided_gather.at<float>({r * 3 + c}), x.at<float>({r, c + 1}));

  Tensor wrong(Shape{14}, DType::f32);
  EXPECT_THROW(group.all_gather(x, wrong), Error);
  EXPECT_THROW(group.reduce_scatter(x, wrong), Error);
}

TEST(ParallelContext, SingleProcessHasGroupsOfOne) {
  const ParallelContext ctx = ParallelContext::single_process();
  EXPECT_FALSE(ctx.sequence_parallel());
  const std::pair<ProcessGroup*, const char*> groups[] = {
      {&ctx.tp(), "tp"}, {&ctx.dp(), "dp"}, {&ctx.pp(), "pp"}, {&ctx.cp(), "cp"}};
  for (const auto& [group, name] : groups) {
    EXPECT_EQ(group->size(), 1) << name;
    EXPECT_EQ(group->rank(), 0) << name;
    EXPECT_EQ(group->name(), name);
  }
}

// A group of `size` ranks that records the all-reduces asked of it (and adds 1 to the buffer so
// that a call is visible in the data too).
class RecordingGroup final : public ProcessGroup {
 public:
  explicit RecordingGroup(int size) : size_(size) {}
  int rank() const override { return 0; }
  int size() const override { return size_; }
  std::string name() const override { return "tp"; }
  void all_reduce(TensorView buffer, ReduceOp op) override {
    ++num_all_reduces;
    last_op = op;
    for (int64_t i = 0; i < buffer.numel(); ++i) buffer.data<float>()[i] += 1.0f;
  }
  double all_reduce_scalar(double value, ReduceOp) override { return value; }
  void all_gather(TensorView, TensorView) override {}
  void reduce_scatter(TensorView, TensorView) override {}
  void broadcast(TensorView, int) override {}

  int num_all_reduces = 0;
  ReduceOp last_op = ReduceOp::max;

 private:
  int size_;
};

TEST(TpComm, SizeOneLeavesDataUnchanged) {
  ParallelContext ctx = ParallelContext::single_process();
  const Tensor x = rf::testing::random_tensor(Shape{4, 7}, DType::bf16, 2);
  const Tensor original = clone(x, DType::bf16);
  TpCopy::forward(ctx.tp(), x);
  TpCopy::backward(ctx.tp(), x);
  TpReduce::forward(ctx.tp(), x);
  TpReduce::backward(ctx.tp(), x);
  EXPECT_TRUE(same_bytes(x, original));

  RecordingGroup one(1);
  const Tensor y = rf::testing::random_tensor(Shape{4, 7}, DType::f32, 3);
  TpCopy::backward(one, y);
  TpReduce::forward(one, y);
  EXPECT_EQ(one.num_all_reduces, 0);
}

TEST(TpComm, ConjugatePairsReduceInOppositeDirections) {
  const Tensor y = rf::testing::random_tensor(Shape{2, 3}, DType::f32, 4);
  RecordingGroup copy_group(2), reduce_group(2);
  TpCopy::forward(copy_group, y);
  EXPECT_EQ(copy_group.num_all_reduces, 0);
  TpCopy::backward(copy_group, y);
  EXPECT_EQ(copy_group.num_all_reduces, 1);
  EXPECT_EQ(copy_group.last_op, ReduceOp::sum);
  TpReduce::forward(reduce_group, y);
  EXPECT_EQ(reduce_group.num_all_reduces, 1);
  EXPECT_EQ(reduce_group.last_op, ReduceOp::sum);
  TpReduce::backward(reduce_group, y);
  EXPECT_EQ(reduce_group.num_all_reduces, 1);
}

}  // namespace
}  // namespace rf::dist

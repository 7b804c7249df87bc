// The single-process dist layer: SingleProcessGroup collectives are identities or copies (blocking or
// not), bad arguments are refused naming the group and the operation, ParallelContext::single_process
// has every group, each of one rank, and TpCopy / TpReduce call all-reduce
// exactly in their conjugate directions (forward for TpReduce, backward for TpCopy), and only
// when the group has more than one rank.
#include "dist/process_group.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
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

TEST(SingleProcessGroup, VariableCountsAllToAllAndNonBlockingCalls) {
  SingleProcessGroup group("ep");
  const Tensor x = rf::testing::random_tensor(Shape{2, 3}, DType::bf16, 5);
  const int64_t six[] = {6};
  Tensor out(Shape{6}, DType::bf16);
  group.all_gather_v(x, out, six);
  EXPECT_EQ(std::memcmp(out.view().raw(), x.view().raw(), x.nbytes()), 0);
  fill_zero(out);
  group.all_to_all(x, out);
  EXPECT_EQ(std::memcmp(out.view().raw(), x.view().raw(), x.nbytes()), 0);
  fill_zero(out);
  group.all_to_all_v(x, six, out, six);
  EXPECT_EQ(std::memcmp(out.view().raw(), x.view().raw(), x.nbytes()), 0);

  // A group of one completes every non-blocking call at once.
  fill_zero(out);
  EXPECT_TRUE(group.iall_gather(x, out).done());
  EXPECT_EQ(std::memcmp(out.view().raw(), x.view().raw(), x.nbytes()), 0);
  EXPECT_TRUE(group.iall_reduce(x, ReduceOp::sum).done());
  EXPECT_TRUE(group.ireduce_scatter(x, out).done());
  EXPECT_TRUE(group.iall_gather_v(x, out, six).done());
  EXPECT_TRUE(group.iall_to_all(x, out).done());
  EXPECT_TRUE(group.iall_to_all_v(x, six, out, six).done());
  EXPECT_TRUE(group.ibroadcast(x, 0).done());
  CommHandle handle;
  EXPECT_TRUE(handle.test());
  handle.wait();

  // No peer to talk to; a colour joins a group of one, a negative colour none.
  EXPECT_THROW(group.send(x, 0, 0), Error);
  EXPECT_THROW(group.irecv(x, 1, 0), Error);
  const std::unique_ptr<ProcessGroup> sub = group.split(3, 0, "sub");
  ASSERT_NE(sub, nullptr);
  EXPECT_EQ(sub->name(), "sub");
  EXPECT_EQ(sub->size(), 1);
  EXPECT_EQ(group.split(-1, 0, "none"), nullptr);
}

// The argument checks are the base class's, so every implementation refuses the same calls.
TEST(SingleProcessGroup, BadArgumentsNameTheGroupAndOperation) {
  SingleProcessGroup group("dp");
  const auto expect_error = rf::testing::expect_error_containing;
  const Tensor x(Shape{4, 2}, DType::f32);
  const Tensor f64(Shape{8}, DType::f64);
  const Tensor bytes(Shape{8}, DType::u8);
  expect_error([&] { group.all_reduce(x.view().transpose(0, 1), ReduceOp::sum); }, "dp all_reduce: `buffer` must be contiguous");
  expect_error([&] { group.all_reduce(bytes, ReduceOp::max); }, "dp all_reduce: cannot reduce u8");
  expect_error([&] { group.reduce_scatter(bytes, bytes); }, "dp reduce_scatter: cannot reduce u8");
  expect_error([&] { group.all_gather(x, f64); }, "dp all_gather: `in` is f32 but `out` is f64");
  expect_error([&] { group.all_gather(x, x.view().transpose(0, 1)); }, "dp all_gather: `out` must be contiguous");
  const int64_t two_ranks[] = {4, 4}, negative[] = {-8}, seven[] = {7};
  expect_error([&] { group.all_gather_v(x, x, two_ranks); }, "dp all_gather_v: `counts` has 2 entries for 1 ranks");
  expect_error([&] { group.all_gather_v(x, x, negative); }, "negative count -8");
  expect_error([&] { group.all_gather_v(x, x, seven); }, "`in` has 8 elements, counts[0] = 7");
  expect_error([&] { group.all_to_all_v(x, seven, x, seven); }, "dp all_to_all_v: `in` has 8 elements for 7 to send");
  expect_error([&] { group.broadcast(x, -1); }, "dp broadcast: root -1 is not a rank of 1");
  expect_error([&] { group.send(x, 0, 1); }, "dp send: peer rank 0 is not another rank of 1");
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
  // Every group Megatron builds exists, each of one rank (the one stage is first and last: embedding too).
  for (GroupKind kind : kAllGroupKinds) {
    ASSERT_TRUE(ctx.in_group(kind)) << group_name(kind);
    EXPECT_EQ(ctx.group(kind).size(), 1) << group_name(kind);
    EXPECT_EQ(ctx.group(kind).name(), group_name(kind));
  }
  EXPECT_EQ(ctx.role().size(), 1);
  EXPECT_EQ(ctx.layout().world_size(), 1);
}

// A group of `size` ranks that records the all-reduces asked of it (and adds 1 to the buffer so
// that a call is visible in the data too).
class RecordingGroup final : public SingleProcessGroup {
 public:
  explicit RecordingGroup(int size) : SingleProcessGroup("tp"), size_(size) {}
  int size() const override { return size_; }

  int num_all_reduces = 0;
  ReduceOp last_op = ReduceOp::max;

 protected:
  CommHandle do_all_reduce(TensorView buffer, ReduceOp op, Completion) override {
    ++num_all_reduces;
    last_op = op;
    for (int64_t i = 0; i < buffer.numel(); ++i) buffer.data<float>()[i] += 1.0f;
    return {};
  }

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

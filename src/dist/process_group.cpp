#include "dist/process_group.h"

#include <exception>
#include <numeric>
#include <vector>

#include "core/tensor.h"

namespace rf::dist {
namespace {

// Everything below names the group and the collective, so "tp all_gather: ..." points at the call.
void check_contiguous(const ProcessGroup& group, const char* op, const char* what, const TensorView& view) {
  RF_CHECK(view.is_contiguous(), "{} {}: `{}` must be contiguous, got {}", group.name(), op, what,
           view.describe());
}

void check_same_dtype(const ProcessGroup& group, const char* op, const TensorView& in, const TensorView& out) {
  RF_CHECK(in.dtype() == out.dtype(), "{} {}: `in` is {} but `out` is {}", group.name(), op,
           dtype_name(in.dtype()), dtype_name(out.dtype()));
}

void check_reducible(const ProcessGroup& group, const char* op, DType dtype) {
  RF_CHECK(is_floating(dtype) || dtype == DType::i32 || dtype == DType::i64,
           "{} {}: cannot reduce {} (expected f32, f64, bf16, f16, i32 or i64)", group.name(), op,
           dtype_name(dtype));
}

// counts has one non-negative entry per rank; returns their sum.
int64_t checked_total(const ProcessGroup& group, const char* op, const char* what, std::span<const int64_t> counts) {
  RF_CHECK(int64_t(counts.size()) == group.size(), "{} {}: `{}` has {} entries for {} ranks", group.name(), op,
           what, counts.size(), group.size());
  for (int64_t c : counts) RF_CHECK(c >= 0, "{} {}: `{}` holds a negative count {}", group.name(), op, what, c);
  return std::accumulate(counts.begin(), counts.end(), int64_t{0});
}

void check_peer(const ProcessGroup& group, const char* op, int peer) {
  RF_CHECK(peer >= 0 && peer < group.size() && peer != group.rank(), "{} {}: peer rank {} is not another rank of {}",
           group.name(), op, peer, group.size());
}

void check_all_reduce(const ProcessGroup& group, const TensorView& buffer) {
  check_contiguous(group, "all_reduce", "buffer", buffer);
  check_reducible(group, "all_reduce", buffer.dtype());
}

void check_all_gather(const ProcessGroup& group, const TensorView& in, const TensorView& out) {
  check_same_dtype(group, "all_gather", in, out);
  check_contiguous(group, "all_gather", "out", out);
  RF_CHECK(out.numel() == in.numel() * group.size(), "{} all_gather: `out` has {} elements, expected {} ranks x {}",
           group.name(), out.numel(), group.size(), in.numel());
}

void check_all_gather_v(const ProcessGroup& group, const TensorView& in, const TensorView& out,
                        std::span<const int64_t> counts) {
  check_same_dtype(group, "all_gather_v", in, out);
  check_contiguous(group, "all_gather_v", "out", out);
  const int64_t total = checked_total(group, "all_gather_v", "counts", counts);
  const int64_t mine = counts[size_t(group.rank())];
  RF_CHECK(in.numel() == mine, "{} all_gather_v: `in` has {} elements, counts[{}] = {}", group.name(), in.numel(),
           group.rank(), mine);
  RF_CHECK(out.numel() == total, "{} all_gather_v: `out` has {} elements, the counts sum to {}", group.name(),
           out.numel(), total);
}

void check_reduce_scatter(const ProcessGroup& group, const TensorView& in, const TensorView& out) {
  check_same_dtype(group, "reduce_scatter", in, out);
  check_contiguous(group, "reduce_scatter", "out", out);
  check_reducible(group, "reduce_scatter", in.dtype());
  RF_CHECK(in.numel() == out.numel() * group.size(), "{} reduce_scatter: `in` has {} elements, expected {} ranks x {}",
           group.name(), in.numel(), group.size(), out.numel());
}

// The equal chunks of all_to_all as all_to_all_v counts.
std::vector<int64_t> equal_chunks(const ProcessGroup& group, const TensorView& in, const TensorView& out) {
  RF_CHECK(in.numel() == out.numel() && in.numel() % group.size() == 0,
           "{} all_to_all: `in` ({} elements) and `out` ({}) must match and split into {} equal chunks", group.name(),
           in.numel(), out.numel(), group.size());
  return std::vector<int64_t>(size_t(group.size()), in.numel() / group.size());
}

void check_all_to_all_v(const ProcessGroup& group, const TensorView& in, std::span<const int64_t> send_counts,
                        const TensorView& out, std::span<const int64_t> recv_counts) {
  check_same_dtype(group, "all_to_all_v", in, out);
  check_contiguous(group, "all_to_all_v", "out", out);
  const int64_t sent = checked_total(group, "all_to_all_v", "send_counts", send_counts);
  const int64_t received = checked_total(group, "all_to_all_v", "recv_counts", recv_counts);
  RF_CHECK(in.numel() == sent && out.numel() == received,
           "{} all_to_all_v: `in` has {} elements for {} to send, `out` {} for {} to receive", group.name(),
           in.numel(), sent, out.numel(), received);
}

void check_broadcast(const ProcessGroup& group, const TensorView& buffer, int root) {
  check_contiguous(group, "broadcast", "buffer", buffer);
  RF_CHECK(root >= 0 && root < group.size(), "{} broadcast: root {} is not a rank of {}", group.name(), root,
           group.size());
}

void check_point_to_point(const ProcessGroup& group, const char* op, const TensorView& buffer, int peer) {
  check_contiguous(group, op, "buffer", buffer);
  check_peer(group, op, peer);
}

}  // namespace

CommHandle& CommHandle::operator=(CommHandle&& other) {
  if (this != &other) {
    wait();  // the operation this handle tracked must finish before the handle forgets it
    pending_ = std::move(other.pending_);
  }
  return *this;
}

CommHandle::~CommHandle() {
  // A wait that fails here cannot reach a caller: std::terminate ends the process, and mpirun the job.
  if (pending_ && std::uncaught_exceptions() == 0) pending_->wait();
}

void CommHandle::wait() {
  if (!pending_) return;
  pending_->wait();
  pending_.reset();
}

bool CommHandle::test() {
  if (pending_ && pending_->test()) pending_.reset();
  return done();
}

// Each blocking call waits on what its implementation returns, so an implementation that can only
// start an operation is still correct.
void ProcessGroup::all_reduce(TensorView buffer, ReduceOp op) {
  check_all_reduce(*this, buffer);
  do_all_reduce(buffer, op, Completion::blocking).wait();
}
CommHandle ProcessGroup::iall_reduce(TensorView buffer, ReduceOp op) {
  check_all_reduce(*this, buffer);
  return do_all_reduce(buffer, op, Completion::nonblocking);
}

double ProcessGroup::all_reduce_scalar(double value, ReduceOp op) {
  all_reduce(TensorView(&value, DType::f64, Shape{1}), op);
  return value;
}

void ProcessGroup::all_gather(TensorView in, TensorView out) {
  check_all_gather(*this, in, out);
  do_all_gather(in, out, Completion::blocking).wait();
}
CommHandle ProcessGroup::iall_gather(TensorView in, TensorView out) {
  check_all_gather(*this, in, out);
  return do_all_gather(in, out, Completion::nonblocking);
}

void ProcessGroup::all_gather_v(TensorView in, TensorView out, std::span<const int64_t> counts) {
  check_all_gather_v(*this, in, out, counts);
  do_all_gather_v(in, out, counts, Completion::blocking).wait();
}
CommHandle ProcessGroup::iall_gather_v(TensorView in, TensorView out, std::span<const int64_t> counts) {
  check_all_gather_v(*this, in, out, counts);
  return do_all_gather_v(in, out, counts, Completion::nonblocking);
}

void ProcessGroup::reduce_scatter(TensorView in, TensorView out) {
  check_reduce_scatter(*this, in, out);
  do_reduce_scatter(in, out, Completion::blocking).wait();
}
CommHandle ProcessGroup::ireduce_scatter(TensorView in, TensorView out) {
  check_reduce_scatter(*this, in, out);
  return do_reduce_scatter(in, out, Completion::nonblocking);
}

void ProcessGroup::all_to_all(TensorView in, TensorView out) {
  const std::vector<int64_t> counts = equal_chunks(*this, in, out);
  all_to_all_v(in, counts, out, counts);
}
CommHandle ProcessGroup::iall_to_all(TensorView in, TensorView out) {
  const std::vector<int64_t> counts = equal_chunks(*this, in, out);
  return iall_to_all_v(in, counts, out, counts);
}

void ProcessGroup::all_to_all_v(TensorView in, std::span<const int64_t> send_counts, TensorView out,
                                std::span<const int64_t> recv_counts) {
  check_all_to_all_v(*this, in, send_counts, out, recv_counts);
  do_all_to_all_v(in, send_counts, out, recv_counts, Completion::blocking).wait();
}
CommHandle ProcessGroup::iall_to_all_v(TensorView in, std::span<const int64_t> send_counts, TensorView out,
                                       std::span<const int64_t> recv_counts) {
  check_all_to_all_v(*this, in, send_counts, out, recv_counts);
  return do_all_to_all_v(in, send_counts, out, recv_counts, Completion::nonblocking);
}

void ProcessGroup::broadcast(TensorView buffer, int root) {
  check_broadcast(*this, buffer, root);
  do_broadcast(buffer, root, Completion::blocking).wait();
}
CommHandle ProcessGroup::ibroadcast(TensorView buffer, int root) {
  check_broadcast(*this, buffer, root);
  return do_broadcast(buffer, root, Completion::nonblocking);
}

void ProcessGroup::send(TensorView buffer, int dst, int tag) {
  check_point_to_point(*this, "send", buffer, dst);
  do_send(buffer, dst, tag, Completion::blocking).wait();
}
CommHandle ProcessGroup::isend(TensorView buffer, int dst, int tag) {
  check_point_to_point(*this, "send", buffer, dst);
  return do_send(buffer, dst, tag, Completion::nonblocking);
}

void ProcessGroup::recv(TensorView buffer, int src, int tag) {
  check_point_to_point(*this, "recv", buffer, src);
  do_recv(buffer, src, tag, Completion::blocking).wait();
}
CommHandle ProcessGroup::irecv(TensorView buffer, int src, int tag) {
  check_point_to_point(*this, "recv", buffer, src);
  return do_recv(buffer, src, tag, Completion::nonblocking);
}

std::unique_ptr<ProcessGroup> SingleProcessGroup::split(int color, int, std::string name) {
  if (color < 0) return nullptr;
  return std::make_unique<SingleProcessGroup>(std::move(name));
}

CommHandle SingleProcessGroup::do_all_gather(TensorView in, TensorView out, Completion) {
  copy_convert(in, out.reshape(in.shape()));
  return {};
}

CommHandle SingleProcessGroup::do_all_gather_v(TensorView in, TensorView out, std::span<const int64_t>, Completion) {
  copy_convert(in, out.reshape(in.shape()));
  return {};
}

CommHandle SingleProcessGroup::do_reduce_scatter(TensorView in, TensorView out, Completion) {
  copy_convert(in, out.reshape(in.shape()));
  return {};
}

CommHandle SingleProcessGroup::do_all_to_all_v(TensorView in, std::span<const int64_t>, TensorView out,
                                               std::span<const int64_t>, Completion) {
  copy_convert(in, out.reshape(in.shape()));
  return {};
}

// Unreachable through the public calls: check_peer refuses every peer in a group of one.
CommHandle SingleProcessGroup::do_send(TensorView, int, int, Completion) {
  throw Error(fmt::format("[{}] {} send: a group of one has no peer", core::rank_label(), name_));
}

CommHandle SingleProcessGroup::do_recv(TensorView, int, int, Completion) {
  throw Error(fmt::format("[{}] {} recv: a group of one has no peer", core::rank_label(), name_));
}

}  // namespace rf::dist

// MpiProcessGroup: ProcessGroup over one MPI communicator. Arguments arrive checked (process_group.cpp);
// this file maps them onto MPI: dtypes, int counts, staging copies, blocking or non-blocking calls, and
// MPI's error codes onto rf::Error (mpi_error.h). Reduce-scatter runs as a ring of point-to-point messages
// (mpi_ring_reduce_scatter.h), which advances whenever the caller polls.
#include "dist/mpi_process_group.h"

#include <mpi.h>

#include <climits>
#include <functional>
#include <type_traits>
#include <vector>

#include "core/tensor.h"
#include "dist/mpi_error.h"
#include "dist/mpi_ring_reduce_scatter.h"

namespace rf::dist {
namespace {

// 16-bit floats and bytes only move here, as their bits; reductions never see them (see staged_for_reduction).
MPI_Datatype mpi_type(DType dtype) {
  switch (dtype) {
    case DType::f32: return MPI_FLOAT;
    case DType::f64: return MPI_DOUBLE;
    case DType::i32: return MPI_INT32_T;
    case DType::i64: return MPI_INT64_T;
    case DType::bf16:
    case DType::f16: return MPI_UINT16_T;
    case DType::u8:
    case DType::boolean: return MPI_UINT8_T;
  }
  return MPI_DATATYPE_NULL;
}

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return MPI_SUM;
    case ReduceOp::max: return MPI_MAX;
    case ReduceOp::min: return MPI_MIN;
  }
  return MPI_OP_NULL;
}

// What an operation keeps alive until MPI is done with it (MPI reads buffers and count arrays until a
// non-blocking call completes), and what it does once complete.
struct OpState {
  std::vector<Tensor> staging;                      // contiguous or f32 copies
  std::vector<int> counts[2], displacements[2];     // [0] send side, [1] receive side
  std::function<void(const MPI_Status&)> finish;    // writes staged results back; checks a receive
};

class MpiPending final : public CommHandle::Pending {
 public:
  MpiPending(OpState state, std::string what) : state_(std::move(state)), what_(std::move(what)) {}
  MPI_Request* request() { return &request_; }

  bool test() override {
    int complete = 0;
    MPI_Status status{};
    check_mpi(MPI_Test(&request_, &complete, &status), what_);
    if (complete) finish(status);
    return complete != 0;
  }
  void wait() override {
    MPI_Status status{};
    check_mpi(MPI_Wait(&request_, &status), what_);
    finish(status);
  }

 private:
  void finish(const MPI_Status& status) {
    if (state_.finish) state_.finish(status);
  }

  OpState state_;
  std::string what_;
  MPI_Request request_ = MPI_REQUEST_NULL;
};

// A ring reduce-scatter and what it keeps alive.
class RingPending final : public CommHandle::Pending {
 public:
  RingPending(OpState state, RingPlace place, TensorView in, TensorView out, MPI_Datatype type, std::string what)
      : state_(std::move(state)), ring_(place, in, out, type, std::move(what)) {}

  bool test() override {
    if (!ring_.progress()) return false;
    finish();
    return true;
  }
  void wait() override {
    ring_.complete();
    finish();
  }

 private:
  void finish() {
    if (state_.finish) state_.finish(MPI_Status{});
  }

  OpState state_;
  RingReduceScatter ring_;
};

// MPI guarantees tags up to 32767 (MPI_TAG_UB is at least that). A ring tag comes round again after this
// many further ring operations, long after the earlier one has completed.
constexpr int kNumRingTags = 32768;

enum class Ownership : uint8_t { borrowed, owned };

class MpiProcessGroup final : public ProcessGroup {
 public:
  MpiProcessGroup(MPI_Comm comm, Ownership ownership, std::string name)
      : comm_(comm), ownership_(ownership), name_(std::move(name)) {
    check(MPI_Comm_rank(comm_, &rank_), "rank");
    check(MPI_Comm_size(comm_, &size_), "size");
  }
  ~MpiProcessGroup() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    if (ring_comm_ != MPI_COMM_NULL) MPI_Comm_free(&ring_comm_);
    if (ownership_ == Ownership::owned) MPI_Comm_free(&comm_);
  }
  MpiProcessGroup(const MpiProcessGroup&) = delete;
  MpiProcessGroup& operator=(const MpiProcessGroup&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return name_; }

  std::unique_ptr<ProcessGroup> split(int color, int key, std::string name) override {
    MPI_Comm sub = MPI_COMM_NULL;
    check(MPI_Comm_split(comm_, color < 0 ? MPI_UNDEFINED : color, key, &sub), "split");
    if (sub == MPI_COMM_NULL) return nullptr;
    return std::make_unique<MpiProcessGroup>(sub, Ownership::owned, std::move(name));
  }

 protected:
  CommHandle do_all_reduce(TensorView buffer, ReduceOp op, Completion completion) override {
    OpState state;
    const TensorView work = staged_for_reduction(buffer, buffer, state);
    const int n = count(buffer.numel(), "all_reduce");
    const MPI_Datatype type = mpi_type(work.dtype());
    return launch(
        completion, "all_reduce", std::move(state),
        [&] { return MPI_Allreduce(MPI_IN_PLACE, work.raw(), n, type, mpi_op(op), comm_); },
        [&](MPI_Request* r) { return MPI_Iallreduce(MPI_IN_PLACE, work.raw(), n, type, mpi_op(op), comm_, r); });
  }

  CommHandle do_all_gather(TensorView in, TensorView out, Completion completion) override {
    OpState state;
    const TensorView src = contiguous(in, state);
    const int n = count(in.numel(), "all_gather");
    const MPI_Datatype type = mpi_type(in.dtype());
    return launch(
        completion, "all_gather", std::move(state),
        [&] { return MPI_Allgather(src.raw(), n, type, out.raw(), n, type, comm_); },
        [&](MPI_Request* r) { return MPI_Iallgather(src.raw(), n, type, out.raw(), n, type, comm_, r); });
  }

  CommHandle do_all_gather_v(TensorView in, TensorView out, std::span<const int64_t> counts,
                             Completion completion) override {
    OpState state;
    const TensorView src = contiguous(in, state);
    const int n = count(in.numel(), "all_gather_v");
    set_counts(state, 1, counts, "all_gather_v");
    const int* recv_counts = state.counts[1].data();
    const int* displacements = state.displacements[1].data();
    const MPI_Datatype type = mpi_type(in.dtype());
    return launch(
        completion, "all_gather_v", std::move(state),
        [&] { return MPI_Allgatherv(src.raw(), n, type, out.raw(), recv_counts, displacements, type, comm_); },
        [&](MPI_Request* r) {
          return MPI_Iallgatherv(src.raw(), n, type, out.raw(), recv_counts, displacements, type, comm_, r);
        });
  }

  // Blocking or not, a ring (mpi_ring_reduce_scatter.h says why), so both give the same bits.
  CommHandle do_reduce_scatter(TensorView in, TensorView out, Completion completion) override {
    OpState state;
    const TensorView src = staged_for_reduction(in, TensorView(), state);
    const TensorView dst = staged_for_reduction(out, out, state);
    count(out.numel(), "reduce_scatter");
    auto pending = std::make_unique<RingPending>(std::move(state), next_ring_place(), src, dst, mpi_type(dst.dtype()),
                                                 describe("reduce_scatter"));
    if (completion == Completion::nonblocking) return CommHandle(std::move(pending));
    pending->wait();
    return {};
  }

  CommHandle do_all_to_all_v(TensorView in, std::span<const int64_t> send_counts, TensorView out,
                             std::span<const int64_t> recv_counts, Completion completion) override {
    OpState state;
    const TensorView src = contiguous(in, state);
    set_counts(state, 0, send_counts, "all_to_all_v");
    set_counts(state, 1, recv_counts, "all_to_all_v");
    const int *sc = state.counts[0].data(), *sd = state.displacements[0].data();
    const int *rc = state.counts[1].data(), *rd = state.displacements[1].data();
    const MPI_Datatype type = mpi_type(in.dtype());
    return launch(
        completion, "all_to_all_v", std::move(state),
        [&] { return MPI_Alltoallv(src.raw(), sc, sd, type, out.raw(), rc, rd, type, comm_); },
        [&](MPI_Request* r) { return MPI_Ialltoallv(src.raw(), sc, sd, type, out.raw(), rc, rd, type, comm_, r); });
  }

  CommHandle do_broadcast(TensorView buffer, int root, Completion completion) override {
    const int n = count(buffer.numel(), "broadcast");
    const MPI_Datatype type = mpi_type(buffer.dtype());
    return launch(
        completion, "broadcast", OpState{}, [&] { return MPI_Bcast(buffer.raw(), n, type, root, comm_); },
        [&](MPI_Request* r) { return MPI_Ibcast(buffer.raw(), n, type, root, comm_, r); });
  }

  CommHandle do_send(TensorView buffer, int dst, int tag, Completion completion) override {
    const int n = count(buffer.numel(), "send");
    const MPI_Datatype type = mpi_type(buffer.dtype());
    return launch(
        completion, "send", OpState{}, [&] { return MPI_Send(buffer.raw(), n, type, dst, tag, comm_); },
        [&](MPI_Request* r) { return MPI_Isend(buffer.raw(), n, type, dst, tag, comm_, r); });
  }

  CommHandle do_recv(TensorView buffer, int src, int tag, Completion completion) override {
    const int n = count(buffer.numel(), "recv");
    const MPI_Datatype type = mpi_type(buffer.dtype());
    OpState state;
    // A longer message is MPI's truncation error; a shorter one would leave stale elements unnoticed.
    state.finish = [n, type, src, what = describe("recv")](const MPI_Status& status) {
      int received = 0;
      MPI_Get_count(&status, type, &received);
      RF_CHECK(received == n, "{}: received {} elements from rank {}, the buffer holds {}", what, received, src, n);
    };
    return launch(
        completion, "recv", std::move(state),
        [&](MPI_Status* status) { return MPI_Recv(buffer.raw(), n, type, src, tag, comm_, status); },
        [&](MPI_Request* r) { return MPI_Irecv(buffer.raw(), n, type, src, tag, comm_, r); });
  }

 private:
  std::string describe(const char* op) const { return fmt::format("{} {} ({} ranks, MPI)", name_, op, size_); }

  void check(int code, const char* op) const { check_mpi(code, describe(op)); }

  int count(int64_t n, const char* op) const {
    RF_CHECK(n <= INT_MAX, "{}: {} elements exceed MPI's int count", describe(op), n);
    return int(n);
  }

  // Per-rank counts and their packed displacements as the int arrays MPI takes, kept in `state`.
  void set_counts(OpState& state, int side, std::span<const int64_t> counts, const char* op) const {
    int64_t offset = 0;
    for (int64_t c : counts) {
      state.counts[side].push_back(count(c, op));
      state.displacements[side].push_back(count(offset, op));
      offset += c;
    }
  }

  // `view` itself when MPI can read it in place, else a contiguous copy kept in `state`.
  static TensorView contiguous(TensorView view, OpState& state) {
    if (view.is_contiguous()) return view;
    state.staging.push_back(clone(view, view.dtype()));
    return state.staging.back().view();
  }

  // The buffer a reduction runs on. MPI has no 16-bit float type, so bf16 and f16 are reduced in an f32
  // copy (Megatron's grad_reduce_in_fp32: one rounding at the end instead of one per partial sum); when
  // `result` is given, the f32 result is rounded back into it once MPI is done.
  static TensorView staged_for_reduction(TensorView view, TensorView result, OpState& state) {
    if (view.dtype() != DType::bf16 && view.dtype() != DType::f16) return contiguous(view, state);
    state.staging.push_back(clone(view, DType::f32));
    const TensorView f32 = state.staging.back().view();
    if (!result.empty()) state.finish = [f32, result](const MPI_Status&) { copy_convert(f32, result); };
    return f32;
  }

  // Runs `blocking` now, or starts `nonblocking` and hands `state` to the returned handle.
  template <class Blocking, class Nonblocking>
  CommHandle launch(Completion completion, const char* op, OpState state, Blocking blocking, Nonblocking nonblocking) {
    if (completion == Completion::blocking) {  // `state` lives until this call returns
      MPI_Status status{};
      if constexpr (std::is_invocable_v<Blocking, MPI_Status*>) {
        check(blocking(&status), op);
      } else {
        check(blocking(), op);
      }
      if (state.finish) state.finish(status);
      return {};
    }
    auto pending = std::make_unique<MpiPending>(std::move(state), describe(op));
    check(nonblocking(pending->request()), op);
    return CommHandle(std::move(pending));
  }

  // Where the next ring operation runs. Its messages go over a duplicate of the group's communicator, so
  // they never match the point-to-point messages callers send with their own tags. The duplicate is made
  // by the first ring operation, a call every rank makes at the same point (the group's collectives run
  // in the same order everywhere), so making the group stays a local call. Each operation takes the next
  // tag: rings started in the same order on every rank get the same tags.
  RingPlace next_ring_place() {
    if (ring_comm_ == MPI_COMM_NULL) check(MPI_Comm_dup(comm_, &ring_comm_), "ring communicator");
    const RingPlace place{ring_comm_, rank_, size_, next_ring_tag_};
    next_ring_tag_ = (next_ring_tag_ + 1) % kNumRingTags;
    return place;
  }

  MPI_Comm comm_;
  Ownership ownership_;
  std::string name_;
  int rank_ = 0, size_ = 1;
  MPI_Comm ring_comm_ = MPI_COMM_NULL;
  int next_ring_tag_ = 0;
};

}  // namespace

std::unique_ptr<ProcessGroup> make_mpi_world_group() {
  return std::make_unique<MpiProcessGroup>(MPI_COMM_WORLD, Ownership::borrowed, "world");
}

}  // namespace rf::dist

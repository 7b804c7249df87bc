// ProcessGroup: the collectives one parallel axis (tp, dp, pp, ...) needs, blocking and non-blocking.
// Two implementations: SingleProcessGroup (the group of one every single-process run uses, here) and the
// MPI group (mpi_process_group.cpp, the only place that includes mpi.h). Callers see only this interface.
//
// The public methods check their arguments once, for every implementation (so a layer that passes a
// wrong shape fails the same way at TP1 as at TP8), then call the implementation's do_* method with
// whether to complete now or return a pending CommHandle. Contract shared by all collectives:
// - every rank of the group calls the same collectives in the same order (MPI's rule);
// - outputs and in-place buffers are contiguous; inputs may be strided (taken in row-major order);
// - input and output have the same dtype; f32, f64, i32, i64 and bf16 (f16, u8, bool move too);
// - reductions of bf16 (and f16) run in f32 and round once at the end: MPI has no 16-bit float type,
//   and Megatron reduces bf16 gradients in f32 anyway (grad_reduce_in_fp32).
// Not here: which groups exist (rank_layout.h) and the conjugate pairs layers use (tp_comm.h).
#pragma once

#include <memory>
#include <span>
#include <string>

#include "core/tensor_view.h"

namespace rf::dist {

enum class ReduceOp : uint8_t { sum, max, min };

// A pending non-blocking operation. wait() blocks until it is complete; test() polls. MPI progresses
// an operation only inside MPI calls, so code that overlaps communication with compute calls test()
// between pieces of work. A default-constructed handle is complete.
// A pending handle that is destroyed waits, so the buffers it writes stay valid until it is done,
// except while an exception unwinds: then waiting could hang on peers that never arrive, and the
// guarded main (guarded_run.h) is about to abort the job, so the operation is abandoned.
class CommHandle {
 public:
  // What an implementation keeps alive while an operation runs (its request, staging buffers).
  class Pending {
   public:
    virtual ~Pending() = default;
    virtual bool test() = 0;  // true once complete, staging results written back
    virtual void wait() = 0;
  };

  CommHandle() = default;
  explicit CommHandle(std::unique_ptr<Pending> pending) : pending_(std::move(pending)) {}
  CommHandle(CommHandle&&) noexcept = default;
  CommHandle& operator=(CommHandle&& other);
  CommHandle(const CommHandle&) = delete;
  CommHandle& operator=(const CommHandle&) = delete;
  ~CommHandle();

  void wait();
  bool test();
  bool done() const { return pending_ == nullptr; }

 private:
  std::unique_ptr<Pending> pending_;
};

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string name() const = 0;  // "tp", "dp", ...

  // Every rank ends with the reduction of all ranks' `buffer`.
  void all_reduce(TensorView buffer, ReduceOp op);
  CommHandle iall_reduce(TensorView buffer, ReduceOp op);
  // Scalar convenience (grad norms, token counts).
  double all_reduce_scalar(double value, ReduceOp op);
  // out (size() x in's elements, rank-major) = every rank's `in`.
  void all_gather(TensorView in, TensorView out);
  CommHandle iall_gather(TensorView in, TensorView out);
  // The same with counts[r] elements from rank r (in holds counts[rank()]; out their sum).
  void all_gather_v(TensorView in, TensorView out, std::span<const int64_t> counts);
  CommHandle iall_gather_v(TensorView in, TensorView out, std::span<const int64_t> counts);
  // out (in's elements / size()) = this rank's chunk of the sum of all ranks' `in`.
  void reduce_scatter(TensorView in, TensorView out);
  CommHandle ireduce_scatter(TensorView in, TensorView out);
  // in and out hold size() equal chunks; chunk r of `in` goes to rank r, chunk r of `out` came from rank r.
  void all_to_all(TensorView in, TensorView out);
  CommHandle iall_to_all(TensorView in, TensorView out);
  // The same with send_counts[r] elements to rank r and recv_counts[r] from it (chunks packed in rank order).
  void all_to_all_v(TensorView in, std::span<const int64_t> send_counts, TensorView out,
                    std::span<const int64_t> recv_counts);
  CommHandle iall_to_all_v(TensorView in, std::span<const int64_t> send_counts, TensorView out,
                           std::span<const int64_t> recv_counts);
  // Every rank ends with `root`'s buffer.
  void broadcast(TensorView buffer, int root);
  CommHandle ibroadcast(TensorView buffer, int root);
  // Point to point (pipeline stages). recv's buffer must be exactly as large as what was sent.
  // Tags are the caller's and must be >= 0 (MPI checks them).
  void send(TensorView buffer, int dst, int tag);
  CommHandle isend(TensorView buffer, int dst, int tag);
  void recv(TensorView buffer, int src, int tag);
  CommHandle irecv(TensorView buffer, int src, int tag);

  // Collective over this group (MPI_Comm_split): ranks passing the same non-negative `color` form a
  // new group named `name`, ranked by `key`; a negative color joins no group and gets nullptr.
  virtual std::unique_ptr<ProcessGroup> split(int color, int key, std::string name) = 0;

 protected:
  enum class Completion : uint8_t { blocking, nonblocking };
  // Called with checked arguments. A blocking call returns a complete handle.
  virtual CommHandle do_all_reduce(TensorView buffer, ReduceOp op, Completion) = 0;
  virtual CommHandle do_all_gather(TensorView in, TensorView out, Completion) = 0;
  virtual CommHandle do_all_gather_v(TensorView in, TensorView out, std::span<const int64_t> counts,
                                     Completion) = 0;
  virtual CommHandle do_reduce_scatter(TensorView in, TensorView out, Completion) = 0;
  virtual CommHandle do_all_to_all_v(TensorView in, std::span<const int64_t> send_counts, TensorView out,
                                     std::span<const int64_t> recv_counts, Completion) = 0;
  virtual CommHandle do_broadcast(TensorView buffer, int root, Completion) = 0;
  virtual CommHandle do_send(TensorView buffer, int dst, int tag, Completion) = 0;
  virtual CommHandle do_recv(TensorView buffer, int src, int tag, Completion) = 0;
};

// The group of one: reductions and broadcasts are identities, gathers and scatters copies. It has no
// peer to send to or receive from. Not final: tests derive fakes from it.
class SingleProcessGroup : public ProcessGroup {
 public:
  explicit SingleProcessGroup(std::string name) : name_(std::move(name)) {}
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string name() const override { return name_; }
  std::unique_ptr<ProcessGroup> split(int color, int key, std::string name) override;

 protected:
  CommHandle do_all_reduce(TensorView, ReduceOp, Completion) override { return {}; }
  CommHandle do_all_gather(TensorView in, TensorView out, Completion) override;
  CommHandle do_all_gather_v(TensorView in, TensorView out, std::span<const int64_t>, Completion) override;
  CommHandle do_reduce_scatter(TensorView in, TensorView out, Completion) override;
  CommHandle do_all_to_all_v(TensorView in, std::span<const int64_t>, TensorView out, std::span<const int64_t>,
                             Completion) override;
  CommHandle do_broadcast(TensorView, int, Completion) override { return {}; }
  CommHandle do_send(TensorView, int, int, Completion) override;
  CommHandle do_recv(TensorView, int, int, Completion) override;

 private:
  std::string name_;
};

}  // namespace rf::dist

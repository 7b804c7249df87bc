// ProcessGroup: the collectives one parallel axis (tp, dp, pp, ...) needs. This issue ships the
// size-1 group every single-process run uses; the MPI-backed group (the only place mpi.h will be
// included) implements the same interface. Collectives are in place and blocking; non-blocking
// variants arrive with overlap.
#pragma once

#include <string>

#include "core/tensor_view.h"

namespace rf::dist {

enum class ReduceOp : uint8_t { sum, max, min };

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string name() const = 0;  // "tp", "dp", ...

  // Every rank ends with the reduction of all ranks' `buffer` (contiguous).
  virtual void all_reduce(TensorView buffer, ReduceOp op) = 0;
  // Scalar convenience (grad norms, token counts).
  virtual double all_reduce_scalar(double value, ReduceOp op) = 0;
  // out (size() x in's elements, rank-major) = every rank's `in`.
  virtual void all_gather(TensorView in, TensorView out) = 0;
  // out (in's elements / size()) = this rank's chunk of the sum of all ranks' `in`.
  virtual void reduce_scatter(TensorView in, TensorView out) = 0;
  virtual void broadcast(TensorView buffer, int root) = 0;
};

// The group of one: every collective is the identity (or a copy).
class SingleProcessGroup final : public ProcessGroup {
 public:
  explicit SingleProcessGroup(std::string name) : name_(std::move(name)) {}
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string name() const override { return name_; }
  void all_reduce(TensorView, ReduceOp) override {}
  double all_reduce_scalar(double value, ReduceOp) override { return value; }
  void all_gather(TensorView in, TensorView out) override;
  void reduce_scatter(TensorView in, TensorView out) override;
  void broadcast(TensorView, int root) override;

 private:
  std::string name_;
};

}  // namespace rf::dist

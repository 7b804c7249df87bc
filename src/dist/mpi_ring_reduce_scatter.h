// RingReduceScatter: the MPI group's reduce-scatter (mpi_process_group.cpp, which stages strided and
// 16-bit inputs before they get here) as a ring of non-blocking point-to-point messages, advanced round
// by round whenever the caller polls.
// Why not MPI's own: Open MPI 4.1's non-blocking reduce-scatter (libnbc) is a binomial reduce to rank 0
// followed by a linear scatter, so rank 0 receives and adds everything before anyone gets a result, and a
// reduce-scatter started during the backward ran mostly in the wait after it. In the ring every rank
// sends, receives and adds (p-1)/p of the buffer, and a poll that finds a round's messages arrived adds
// and posts the next round at once. On this machine the ring is also as fast as MPI's blocking
// reduce-scatter, so both calls take it, and both give the same bits.
// Not here: all-gather and all-reduce (MPI's post all their messages at once, so they move whenever MPI
// is called). Internal to rf_dist: it includes mpi.h, which no public header does.
#pragma once

#include <mpi.h>

#include <string>

#include "core/tensor.h"

namespace rf::dist {

// Where a ring operation runs: a communicator that carries ring messages only, this rank and the ring's
// size, and the operation's own tag. Several operations may be in flight on one communicator and MPI
// matches messages by (source, tag), so each needs a tag no other operation in flight has.
struct RingPlace {
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0;
  int size = 1;
  int tag = 0;
};

// Rank r's `out` = chunk r of the sum over all ranks of `in` (`size` equal chunks of out's elements).
// Round k (0 <= k < p-1) on rank r: send the partial sum of chunk r-k-1 (in round 0 this rank's own
// chunk of `in`) to rank r+1; receive the partial sum of chunk r-k-2 from rank r-1 and add this rank's
// chunk of `in` to it (chunk numbers mod p). Chunk c's sum starts on rank c+1 and gains one rank a round,
// so after round p-2 rank r holds all p terms of chunk r. The order of the terms differs from chunk to
// chunk but is fixed, so results repeat run to run. On two ranks this is one exchange of half the buffer.
class RingReduceScatter {
 public:
  // Posts round 0. `in` and `out` are contiguous, of `type` (one MPI_SUM adds: float, double, int32,
  // int64), with the same element count on every rank; `what` names the operation in errors.
  RingReduceScatter(RingPlace place, TensorView in, TensorView out, MPI_Datatype type, std::string what);
  RingReduceScatter(const RingReduceScatter&) = delete;
  RingReduceScatter& operator=(const RingReduceScatter&) = delete;

  // Advances as far as the messages that have arrived allow, without blocking; true once complete.
  bool progress();
  // Blocks until complete.
  void complete();

 private:
  int num_rounds() const { return place_.size - 1; }
  int along_ring(int offset) const;  // the rank (or chunk) `offset` places on from this rank
  TensorView in_chunk(int offset) const;
  TensorView send_buffer(int round) const;
  TensorView recv_buffer(int round) const;
  void post(int round);
  void end_round();

  RingPlace place_;
  TensorView in_, out_;  // flat
  MPI_Datatype type_;
  std::string what_;
  // Partial sums alternate between two chunks of this buffer (round k+1 receives into the chunk round k
  // sent from, free by then: a round ends once its send has completed too); the last round receives
  // into `out`, so two ranks need none and three need one.
  Tensor partial_sums_;
  int round_ = 0;
  MPI_Request requests_[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};  // send, receive
};

}  // namespace rf::dist

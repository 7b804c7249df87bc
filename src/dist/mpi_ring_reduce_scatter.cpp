#include "dist/mpi_ring_reduce_scatter.h"

#include <algorithm>

#include "dist/mpi_error.h"

namespace rf::dist {

RingReduceScatter::RingReduceScatter(RingPlace place, TensorView in, TensorView out, MPI_Datatype type,
                                     std::string what)
    : place_(place),
      in_(in.reshape(Shape{in.numel()})),
      out_(out.reshape(Shape{out.numel()})),
      type_(type),
      what_(std::move(what)),
      partial_sums_(Shape{std::clamp(place.size - 2, 0, 2) * out.numel()}, out.dtype()) {
  if (num_rounds() == 0) {
    copy_convert(in_, out_);  // a group of one
  } else {
    post(0);
  }
}

bool RingReduceScatter::progress() {
  while (round_ < num_rounds()) {
    int complete = 0;
    check_mpi(MPI_Testall(2, requests_, &complete, MPI_STATUSES_IGNORE), what_);
    if (complete == 0) return false;
    end_round();
  }
  return true;
}

void RingReduceScatter::complete() {
  while (round_ < num_rounds()) {
    check_mpi(MPI_Waitall(2, requests_, MPI_STATUSES_IGNORE), what_);
    end_round();
  }
}

int RingReduceScatter::along_ring(int offset) const {
  return ((place_.rank + offset) % place_.size + place_.size) % place_.size;
}

TensorView RingReduceScatter::in_chunk(int offset) const {
  const int64_t n = out_.numel();
  return in_.slice(0, along_ring(offset) * n, n);
}

TensorView RingReduceScatter::send_buffer(int round) const {
  return round == 0 ? in_chunk(-1) : recv_buffer(round - 1);
}

TensorView RingReduceScatter::recv_buffer(int round) const {
  const int64_t n = out_.numel();
  return round == num_rounds() - 1 ? out_ : partial_sums_.view().slice(0, (round % 2) * n, n);
}

// Round k+1 between two ranks follows round k on the same tag: MPI keeps the messages of one
// (source, tag) in order, so they cannot be confused.
void RingReduceScatter::post(int round) {
  const TensorView recv = recv_buffer(round), send = send_buffer(round);
  // The receive first: a message that arrives early then lands in place, not in MPI's unexpected queue.
  check_mpi(MPI_Irecv(recv.raw(), int(recv.numel()), type_, along_ring(-1), place_.tag, place_.comm, &requests_[1]),
            what_);
  check_mpi(MPI_Isend(send.raw(), int(send.numel()), type_, along_ring(1), place_.tag, place_.comm, &requests_[0]),
            what_);
}

// Both of the round's messages are complete: add this rank's term to the partial sum that arrived, then
// pass it on.
void RingReduceScatter::end_round() {
  const TensorView mine = in_chunk(-round_ - 2), sum = recv_buffer(round_);
  check_mpi(MPI_Reduce_local(mine.raw(), sum.raw(), int(sum.numel()), type_, MPI_SUM), what_);  // sum += mine
  if (++round_ < num_rounds()) post(round_);
}

}  // namespace rf::dist

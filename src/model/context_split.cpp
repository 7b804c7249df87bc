#include "model/context_split.h"

#include <algorithm>

#include "core/element_access.h"
#include "core/error.h"

namespace rf::model {

ContextSplit::ContextSplit(std::span<const int32_t> cu_seqlens, int64_t N, int cp_size, int cp_rank,
                           int64_t local_multiple)
    : cp_size_(cp_size), cp_rank_(cp_rank), num_tokens_(N) {
  RF_CHECK(cp_size >= 1 && cp_rank >= 0 && cp_rank < cp_size, "context split: rank {} of {} ranks", cp_rank, cp_size);
  RF_CHECK(local_multiple >= 1, "context split: local multiple must be >= 1, got {}", local_multiple);
  std::vector<int64_t> bounds(cu_seqlens.begin(), cu_seqlens.end());
  if (bounds.empty()) bounds = {0, N};
  RF_CHECK(bounds.front() == 0 && bounds.back() == N,
           "context split: cu_seqlens must run from 0 to the micro-batch's {} tokens, got {} .. {}", N, bounds.front(),
           bounds.back());
  const int64_t chunks_per_document = 2 * int64_t(cp_size);
  int64_t padded = 0;
  auto add_document = [&](int64_t start, int64_t length, int64_t chunk) {
    doc_start_.push_back(start);
    doc_length_.push_back(length);
    chunk_.push_back(chunk);
    local_offset_.push_back(local_tokens_);
    padded_start_.push_back(padded);
    local_tokens_ += 2 * chunk;
    padded += chunks_per_document * chunk;
  };
  for (size_t d = 1; d < bounds.size(); ++d) {
    const int64_t length = bounds[d] - bounds[d - 1];
    RF_CHECK(length >= 0, "context split: cu_seqlens must be non-decreasing, got {} then {}", bounds[d - 1], bounds[d]);
    if (length > 0) add_document(bounds[d - 1], length, (length + chunks_per_document - 1) / chunks_per_document);
  }
  // Sequence parallel: the shortest padding document that makes the local length divide over TP.
  int64_t pad_chunk = 0;
  while ((local_tokens_ + 2 * pad_chunk) % local_multiple != 0) ++pad_chunk;
  if (pad_chunk > 0) add_document(N, 0, pad_chunk);

  local_cu_seqlens_.push_back(0);
  padded_cu_seqlens_.push_back(0);
  for (size_t d = 0; d < chunk_.size(); ++d) {
    const int64_t o = local_offset_[d], c = chunk_[d];
    local_cu_seqlens_.push_back(int32_t(o + 2 * c));
    padded_cu_seqlens_.push_back(int32_t(padded_start_[d] + chunks_per_document * c));
    earlier_spans_.push_back({.q_begin = o, .q_end = o + 2 * c, .k_begin = o, .k_end = o + c});
    later_spans_.push_back({.q_begin = o + c, .q_end = o + 2 * c, .k_begin = o, .k_end = o + 2 * c});
  }
}

ContextSplit::LocalPlace ContextSplit::place(int rank, int64_t t) const {
  RF_CHECK(t >= 0 && t < local_tokens_, "context split: local position {} of {}", t, local_tokens_);
  const auto after = std::upper_bound(local_offset_.begin(), local_offset_.end(), t);
  const int64_t d = int64_t(after - local_offset_.begin()) - 1;
  const int64_t c = chunk_[size_t(d)], within = t - local_offset_[size_t(d)];
  if (within < c) return {d, rank, within};
  return {d, 2 * int64_t(cp_size_) - 1 - rank, within - c};
}

int64_t ContextSplit::source_token(int rank, int64_t t) const {
  const LocalPlace p = place(rank, t);
  const int64_t in_document = p.chunk_index * chunk_[size_t(p.document)] + p.offset;
  return in_document < doc_length_[size_t(p.document)] ? doc_start_[size_t(p.document)] + in_document : -1;
}

int64_t ContextSplit::padded_position(int rank, int64_t t) const {
  const LocalPlace p = place(rank, t);
  return padded_start_[size_t(p.document)] + p.chunk_index * chunk_[size_t(p.document)] + p.offset;
}

void ContextSplit::take_local(TensorView x_N, TensorView local_n, double pad) const {
  RF_CHECK(x_N.numel() == num_tokens_ && local_n.numel() == local_tokens_,
           "context split: {} of the micro-batch's {} tokens into {} of {} local rows", x_N.describe(), num_tokens_,
           local_n.describe(), local_tokens_);
  for (int64_t t = 0; t < local_tokens_; ++t) {
    const int64_t n = source_token(cp_rank_, t);
    store_f64(local_n, t * local_n.stride(0), n >= 0 ? load_f64(x_N, n * x_N.stride(0)) : pad);
  }
}

void ContextSplit::take_local_positions(TensorView positions_N, TensorView local_n) const {
  RF_CHECK(positions_N.numel() == num_tokens_ && local_n.numel() == local_tokens_,
           "context split: positions {} into {}", positions_N.describe(), local_n.describe());
  for (int64_t t = 0; t < local_tokens_; ++t) {
    const LocalPlace p = place(cp_rank_, t);
    const int64_t d = p.document, length = doc_length_[size_t(d)];
    const int64_t in_document = p.chunk_index * chunk_[size_t(d)] + p.offset;
    double position = double(in_document);  // the padding document counts from 0
    if (in_document < length)
      position = load_f64(positions_N, (doc_start_[size_t(d)] + in_document) * positions_N.stride(0));
    else if (length > 0)
      position = load_f64(positions_N, (doc_start_[size_t(d)] + length - 1) * positions_N.stride(0)) +
                 double(in_document - length + 1);
    store_f64(local_n, t * local_n.stride(0), position);
  }
}

void ContextSplit::put_gathered(TensorView all_n, TensorView x_N) const {
  RF_CHECK(all_n.numel() == padded_tokens() && x_N.numel() == num_tokens_,
           "context split: gathered {} ({} expected) into {} ({} expected)", all_n.describe(), padded_tokens(),
           x_N.describe(), num_tokens_);
  for (int rank = 0; rank < cp_size_; ++rank)
    for (int64_t t = 0; t < local_tokens_; ++t) {
      const int64_t n = source_token(rank, t);
      if (n >= 0) store_f64(x_N, n * x_N.stride(0), load_f64(all_n, (rank * local_tokens_ + t) * all_n.stride(0)));
    }
}

}  // namespace rf::model

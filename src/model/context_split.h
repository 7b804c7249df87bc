// ContextSplit: where the tokens of one packed micro-batch go on the context-parallel (CP) group, Megatron's
// load-balanced ("zig-zag") split (megatron.md §5.1) applied to each document of the row on its own (THD with
// cu_seqlens). A document of L tokens is padded to a multiple of 2*CP, 2*CP*c tokens, and cut into 2*CP chunks
// of c tokens; CP rank r keeps chunk r (its "early" half) and chunk 2*CP-1-r (its "late" half), in that order.
// This rank's sequence is its two halves of every document, document after document:
//   [early_0, late_0, early_1, late_1, ...],  document d at local offset o_d = 2 (c_0 + ... + c_{d-1}).
// Every rank's sequence has the same shape (the same c_d), so a rank knows where each document sits in any
// other rank's keys and values, and causal attention splits into the ring's three kinds of block (§5.2):
// its own (causal within each document's two halves, which are in order), an earlier rank's (every local
// query sees the early half only) and a later rank's (the late half sees both of its halves).
// Padding takes no loss and changes nothing real: a document's padding follows all its tokens, so no real
// token attends to it. With sequence parallel the local sequence must also divide over TP: a padding document
// is appended when it does not. Everything is a function of the micro-batch's cu_seqlens and the sizes.
// Legend: N tokens of the micro-batch, n = this rank's local tokens (padded), c a document's chunk length.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/attention.h"

namespace rf::model {

class ContextSplit {
 public:
  // `cu_seqlens` the micro-batch's documents over its N tokens (empty: one document); cp_size >= 1;
  // local_multiple: what the local length must divide by (TP with sequence parallel, else 1).
  ContextSplit(std::span<const int32_t> cu_seqlens, int64_t num_tokens, int cp_size, int cp_rank,
               int64_t local_multiple);

  int cp_size() const { return cp_size_; }
  int cp_rank() const { return cp_rank_; }
  int64_t num_tokens() const { return num_tokens_; }      // N, of the micro-batch
  int64_t local_tokens() const { return local_tokens_; }  // n, every rank's
  int64_t padded_tokens() const { return local_tokens_ * cp_size_; }
  int64_t num_documents() const { return int64_t(chunk_.size()); }  // padding document included
  int64_t chunk(int64_t document) const { return chunk_[size_t(document)]; }
  int64_t local_offset(int64_t document) const { return local_offset_[size_t(document)]; }
  // The micro-batch token held at local position t of CP rank `rank`, or -1 for padding; and the position
  // it takes in the padded sequence in natural order (documents padded, one after the other).
  int64_t source_token(int rank, int64_t t) const;
  int64_t padded_position(int rank, int64_t t) const;
  // Documents of the local sequence, [0, 2 c_0, 2 (c_0 + c_1), ..., n] (for the own block's causal mask),
  // and of the padded sequence in natural order (Ulysses attends over it).
  const std::vector<int32_t>& local_cu_seqlens() const { return local_cu_seqlens_; }
  const std::vector<int32_t>& padded_cu_seqlens() const { return padded_cu_seqlens_; }
  // The span-mode blocks of attention against another rank's keys (kernels/attention.h): from an earlier rank,
  // each document's queries see its early half; from a later rank, each document's late half sees all of it.
  const std::vector<kernels::AttentionSpan>& earlier_rank_spans() const { return earlier_spans_; }
  const std::vector<kernels::AttentionSpan>& later_rank_spans() const { return later_spans_; }

  // This rank's rows of a per-token column x_N of the micro-batch (any dtype, one value per token) into
  // local_n, padding rows set to `pad` (as the dtype converts it).
  void take_local(TensorView x_N, TensorView local_n, double pad) const;
  // The positions of this rank's rows: the micro-batch's positions, continued through each document's padding.
  void take_local_positions(TensorView positions_N, TensorView local_n) const;
  // The micro-batch's column from every rank's rows gathered rank-major (all_n: [CP * n]): padding dropped.
  void put_gathered(TensorView all_n, TensorView x_N) const;

 private:
  // Document of local position t and t's place in it: the chunk index (0 .. 2CP-1) and the offset inside.
  struct LocalPlace {
    int64_t document, chunk_index, offset;
  };
  LocalPlace place(int rank, int64_t t) const;

  int cp_size_, cp_rank_;
  int64_t num_tokens_, local_tokens_ = 0;
  std::vector<int64_t> doc_start_, doc_length_;  // in the micro-batch (the padding document: start N, length 0)
  std::vector<int64_t> chunk_, local_offset_;    // per document: c and o
  std::vector<int64_t> padded_start_;            // per document, in the padded natural order
  std::vector<int32_t> local_cu_seqlens_, padded_cu_seqlens_;
  std::vector<kernels::AttentionSpan> earlier_spans_, later_spans_;
};

}  // namespace rf::model

// The packed documents of an engine micro-batch as the rows of verl's (B, T) matrices, for the losses
// that run on the engine (ActorLoss, CriticLoss): row b holds document b's tokens [cu[b], cu[b+1]) from
// column 0, T is the longest document's length, and the rest of a row is 0.
//
// Dimension legend: N packed tokens, B batch (one row per document), T tokens per row.
#pragma once

#include <span>

#include "core/tensor.h"

namespace rf::rl {

class DocumentRows {
 public:
  // cu_seqlens: [0, ..., num_tokens], non-decreasing (rf::Error otherwise).
  DocumentRows(std::span<const int32_t> cu_seqlens, int64_t num_tokens);
  int64_t num_rows() const { return int64_t(cu_.size()) - 1; }
  int64_t num_cols() const { return num_cols_; }

  // column_N ([N], any floating dtype and stride) as (B, T) rows in its own dtype, so that the losses
  // compute as verl does in it (their bounds are rounded to the inputs' dtype). `what` names it in errors.
  Tensor gather(TensorView column_N, const char* what) const;
  // The inverse: overwrites every element of out_N ([N]) with its row's value.
  void scatter(TensorView rows_BT, TensorView out_N, const char* what) const;

 private:
  int64_t length(int64_t b) const { return cu_[size_t(b) + 1] - cu_[size_t(b)]; }

  std::span<const int32_t> cu_;
  int64_t num_cols_ = 0;
};

}  // namespace rf::rl

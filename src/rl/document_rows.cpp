#include "rl/document_rows.h"

#include <algorithm>

namespace rf::rl {

DocumentRows::DocumentRows(std::span<const int32_t> cu_seqlens, int64_t num_tokens) : cu_(cu_seqlens) {
  RF_CHECK(cu_.size() >= 2 && cu_.front() == 0 && cu_.back() == num_tokens,
           "cu_seqlens: expected [0, ..., N={}] over the micro-batch's tokens, got {} entries ending at {}",
           num_tokens, cu_.size(), cu_.empty() ? -1 : cu_.back());
  for (size_t b = 0; b + 1 < cu_.size(); ++b) {
    RF_CHECK(cu_[b] <= cu_[b + 1], "cu_seqlens: expected non-decreasing boundaries, got {} then {}", cu_[b],
             cu_[b + 1]);
    num_cols_ = std::max<int64_t>(num_cols_, cu_[b + 1] - cu_[b]);
  }
}

Tensor DocumentRows::gather(TensorView column_N, const char* what) const {
  const int64_t N = cu_.back();
  RF_CHECK(!column_N.empty() && is_floating(column_N.dtype()), "{}: expected a floating [{}] tensor, got {}", what, N,
           column_N.empty() ? std::string("none") : column_N.describe());
  check_shape(column_N, Shape{N}, what);
  Tensor rows_BT({num_rows(), num_cols_}, column_N.dtype());
  for (int64_t b = 0; b < num_rows(); ++b)
    copy_convert(column_N.slice(0, cu_[size_t(b)], length(b)), rows_BT.view().select(0, b).slice(0, 0, length(b)));
  return rows_BT;
}

void DocumentRows::scatter(TensorView rows_BT, TensorView out_N, const char* what) const {
  check_shape(out_N, Shape{cu_.back()}, what);
  for (int64_t b = 0; b < num_rows(); ++b)
    copy_convert(rows_BT.select(0, b).slice(0, 0, length(b)), out_N.slice(0, cu_[size_t(b)], length(b)));
}

}  // namespace rf::rl

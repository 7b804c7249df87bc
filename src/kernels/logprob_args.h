// Argument checks shared by the ref and cpu log-prob kernels (maths and the vocab-parallel
// convention in kernels/logprob.h), so both reject exactly the same calls. In an unnamed namespace,
// as attention_args.h: each cpu variant's translation unit keeps its own copy.
// Legend: N tokens, V vocab columns held here.
#pragma once

#include <algorithm>

#include "core/element_access.h"
#include "kernels/logprob.h"

namespace rf::kernels {
namespace {

// This call's columns: V held, of which the first `real` are vocabulary ids below vocab_size (the
// rest are padding).
struct LogprobColumns {
  int64_t V, real, vocab_start, vocab_size;
  bool holds(int64_t target) const { return target >= vocab_start && target < vocab_start + real; }
};

// The checks of every log-prob entry point (each variant also checks the dtypes it takes).
LogprobColumns check_logprob_args(const LogprobParams& params, const TensorView& logits_NV,
                                         const TensorView& targets_N) {
  RF_CHECK(params.temperature > 0, "logprob: temperature must be > 0, got {}", params.temperature);
  RF_CHECK(logits_NV.rank() == 2 && logits_NV.inner_contiguous() && logits_NV.size(1) > 0,
           "logits_NV: expected a non-empty [N, V] view with a contiguous inner dim, got {}", logits_NV.describe());
  check_shape(targets_N, Shape{logits_NV.size(0)}, "targets_N");
  RF_CHECK(targets_N.dtype() == DType::i32 || targets_N.dtype() == DType::i64,
           "targets_N: expected i32 or i64, got {}", dtype_name(targets_N.dtype()));
  const int64_t V = logits_NV.size(1);
  const int64_t vocab_size = params.vocab_size == 0 ? params.vocab_start + V : params.vocab_size;
  // A shard may lie wholly in the padding (vocab_start >= vocab_size): it then holds no real column.
  RF_CHECK(params.vocab_start >= 0, "logprob: vocab_start must be >= 0, got {}", params.vocab_start);
  for (int64_t n = 0; n < targets_N.size(0); ++n) {
    const int64_t target = int64_t(load_f64(targets_N, n * targets_N.stride(0)));
    RF_CHECK(target < vocab_size, "logprob: target id {} outside the vocabulary of {}", target, vocab_size);
  }
  return {V, std::clamp<int64_t>(vocab_size - params.vocab_start, 0, V), params.vocab_start, vocab_size};
}

// The one-pass forward serves a whole vocabulary only.
void check_whole_vocabulary(const LogprobColumns& columns) {
  RF_CHECK(columns.vocab_start == 0 && columns.real == columns.V && columns.vocab_size == columns.V,
           "logprob_forward: takes the whole, unpadded vocabulary (vocab_start 0, vocab_size = V = {}), got "
           "vocab_start {} and vocab_size {}; a vocab-parallel shard goes through logprob_shard_stats",
           columns.V, columns.vocab_start, columns.vocab_size);
}

}  // namespace
}  // namespace rf::kernels

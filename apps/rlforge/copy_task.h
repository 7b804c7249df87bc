// The built-in copy task: a prompt of k random symbols, a separator, then the same k symbols. A
// model that learns it has learned to attend back (an induction head), which makes it a quick,
// honest check that attention, RoPE and the backward pass train. Token ids: 0 pad, 1 bos,
// 2 separator, 3.. symbols.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace rf::apps {

struct CopyTask {
  int64_t vocab_size = 32;
  int64_t num_symbols = 8;  // k

  int64_t seq_len() const { return 2 * num_symbols + 2; }  // bos, k symbols, separator, k symbols
  // Fills tokens and targets of `rows` sequences ([rows * seq_len], i64), drawn from (seed, index):
  // targets are -100 except where the next token is a copied symbol.
  void fill(uint64_t seed, uint64_t first_index, int64_t rows, TensorView tokens_N, TensorView positions_N,
            TensorView targets_N) const;
};

}  // namespace rf::apps

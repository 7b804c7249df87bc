#include "apps/rlforge/copy_task.h"

#include "core/philox.h"

namespace rf::apps {

void CopyTask::fill(uint64_t seed, uint64_t first_index, int64_t rows, TensorView tokens_N, TensorView positions_N,
                    TensorView targets_N) const {
  const int64_t T = seq_len(), k = num_symbols;
  int64_t* tokens = tokens_N.data<int64_t>();
  int64_t* positions = positions_N.data<int64_t>();
  int64_t* targets = targets_N.data<int64_t>();
  for (int64_t r = 0; r < rows; ++r) {
    const Philox rng(seed, first_index + uint64_t(r));
    int64_t* row = tokens + r * T;
    row[0] = 1;
    for (int64_t i = 0; i < k; ++i) {
      const int64_t symbol = 3 + int64_t(rng.uniform(uint64_t(i)) * double(vocab_size - 3));
      row[1 + i] = symbol;
      row[k + 2 + i] = symbol;
    }
    row[k + 1] = 2;
    for (int64_t t = 0; t < T; ++t) {
      positions[r * T + t] = t;
      // Predicting token t+1 from position t counts only inside the copied half.
      targets[r * T + t] = (t >= k + 1 && t + 1 < T) ? row[t + 1] : -100;
    }
  }
}

}  // namespace rf::apps

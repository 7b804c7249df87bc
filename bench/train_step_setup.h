// What the training-step benchmarks share: the model shapes (Foundation III's large and tiny configs),
// a batch of random one-document rows, and the SFT trainer's loss.
// Legend: B rows, T tokens per row, C hidden, F FFN, V vocab, L layers, H heads, K kv heads.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/philox.h"
#include "core/tensor.h"
#include "engine/train_engine.h"

namespace rf::bench {

struct BenchShape {
  int64_t C, L, H, K, F, V, T, B;
};

inline BenchShape bench_shape(const std::string& config) {
  if (config == "large") return {512, 8, 8, 4, 1408, 8192, 256, 8};
  if (config == "tiny") return {128, 2, 4, 2, 352, 512, 64, 16};
  throw ConfigError("--config", "'" + config + "': expected large or tiny");
}

inline model::ModelConfig bench_model_config(const BenchShape& s) {
  model::ModelConfig c;
  c.vocab_size = s.V;
  c.hidden_size = s.C;
  c.intermediate_size = s.F;
  c.num_hidden_layers = s.L;
  c.num_attention_heads = s.H;
  c.num_key_value_heads = s.K;
  c.head_dim = s.C / s.H;
  c.max_position_embeddings = std::max<int64_t>(s.T, c.max_position_embeddings);
  c.tie_word_embeddings = false;
  c.validate();
  return c;
}

// Rows [first_row, first_row + num_rows) of one seeded batch of B rows of T random tokens, as one
// micro-batch; each row is its own document (positions restart at 0, the row's last target is
// ignored, as the SFT packer does at every document end). A row's tokens do not depend on which rows
// are taken, so DP ranks taking their rows run exactly the one-rank batch between them.
inline engine::TensorMap random_rows(const BenchShape& s, int64_t first_row, int64_t num_rows) {
  constexpr int64_t kIgnoreTarget = -100;
  const int64_t N = num_rows * s.T;
  Tensor tokens_N({N}, DType::i64), positions_N({N}, DType::i64), targets_N({N}, DType::i64);
  const Philox rng(7, 0);
  int64_t* tokens = tokens_N.data<int64_t>();
  for (int64_t n = 0; n < N; ++n)
    tokens[n] = std::min(int64_t(rng.uniform(uint64_t(first_row * s.T + n)) * double(s.V)), s.V - 1);
  std::vector<int32_t> cu_seqlens = {0};
  for (int64_t b = 0; b < num_rows; ++b) {
    for (int64_t t = 0; t < s.T; ++t) {
      const int64_t n = b * s.T + t;
      positions_N.data<int64_t>()[n] = t;
      targets_N.data<int64_t>()[n] = t + 1 < s.T ? tokens[n + 1] : kIgnoreTarget;
    }
    cu_seqlens.push_back(int32_t((b + 1) * s.T));
  }
  return engine::make_micro_batch(std::move(tokens_N), std::move(positions_N), std::move(targets_N),
                                  std::move(cu_seqlens));
}

}  // namespace rf::bench

// The FLOPs a decoder's pass does, the numerator of MFU (verl's FlopsCounter, MindSpeed's TFLOPS count,
// Megatron's num_floating_point_operations): 2 per multiply-add of every weight a token multiplies, and
// the attention scores and their weighted sum over the causal half of the square (2·T² FLOPs per layer,
// head and head dimension, forward). Backward is twice the forward, so a training pass is 3x.
// Not counted: norms, activations, softmax, the embedding lookup (no multiply), the optimizer.
#pragma once

#include <cstdint>
#include <span>

#include "model/model_config.h"

namespace rf::model {

// Weights every token multiplies: q, k, v, o and the gated MLP per layer (an MoE layer: its router, the top-k
// experts and the shared expert), and the head (the LM head's vocab x hidden, tied or not; a value or score
// head's labels x hidden).
int64_t matmul_parameters(const ModelConfig& config);

// Forward FLOPs of documents of `lengths` tokens each (a packed micro-batch, or one response each).
double forward_flops(const ModelConfig& config, std::span<const int64_t> lengths);
inline double train_flops(const ModelConfig& config, std::span<const int64_t> lengths) {
  return 3.0 * forward_flops(config, lengths);
}

}  // namespace rf::model

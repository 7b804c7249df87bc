// Helpers shared by the model tests: build a model of a given config and dtype on a kernel
// registry, load reference folders, and evaluate a scalar loss of the model's outputs.
#pragma once

#include <memory>
#include <vector>

#include "dist/parallel_context.h"
#include "kernels/kernel_registry.h"
#include "model/causal_lm.h"
#include "model/model_config.h"

namespace rf::model::testing {

// A model with its own weights, gradients and parallel context.
struct ModelUnderTest {
  ModelUnderTest(const ModelConfig& config, DType dtype, const kernels::KernelRegistry& kernels,
                 int64_t max_tokens);
  ModelConfig config;
  dist::ParallelContext parallel;
  ParamStore params;
  GradBuffer grads;
  CausalLm model;
};

// A micro config of `arch` for exhaustive finite differences (vocab 24, hidden 16, 2 layers,
// 4 heads over 2 kv heads, ffn 20).
ModelConfig micro_config(Arch arch, bool tied);

// The token sequences of shared/reference/hf_models/tokens.json.
std::vector<std::vector<int64_t>> reference_sequences();

// Per-token weights of a test loss L = sum_n a_n logp_n + b_n entropy_n (stat dtype of the model),
// drawn from a seed; zero where the target is -100.
struct LossWeights {
  Tensor a_N, b_N;
};
LossWeights random_loss_weights(const PackedSequences& packed, DType stat_dtype, uint64_t seed);
double weighted_loss(const ModelOutputs& out, const LossWeights& w);

}  // namespace rf::model::testing

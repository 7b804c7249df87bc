// Helpers shared by the model tests, LM and value models alike: the kernel registries, micro configs,
// weights drawn away from HF's init, the packed documents the tests run on, a model of a given config
// and dtype, reference folders, and a scalar loss of the model's outputs.
// Legend: N tokens.
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
                 int64_t max_tokens, const RecomputePolicy& recompute = {}, MemoryTracker* tracker = nullptr);
  ModelConfig config;
  dist::ParallelContext parallel;
  ParamStore params;
  GradBuffer grads;
  CausalLm model;
};

// The f64 oracle's kernels (`ref`, optimization level 0) and the default fast ones.
const kernels::KernelRegistry& ref_kernels();
const kernels::KernelRegistry& fast_kernels();

// A micro config of `arch` for exhaustive finite differences (vocab 24, hidden 16, 2 layers,
// 4 heads over 2 kv heads, ffn 20), with `head` on top of the backbone. qwen3_moe: layer 0 of 4 experts top-2
// (renormalised), layer 1 dense; qwen2_moe: both layers of 5 experts top-2 with a gated shared expert.
ModelConfig micro_config(Arch arch, bool tied, HeadKind head = HeadKind::lm);

// Weights away from HF's init so that every term shows: norms ~ U(0.5, 1.5) (a gain applied wrongly
// shows), the rest (biases and a value head's included) ~ U(-0.5, 0.5); tensor i of the layout from
// Philox(seed, i).
void randomize_weights(const ParamStore& params, uint64_t seed);

// Two packed documents of 6 and 5 tokens (ids < 24): the finite-difference tests' input.
PackedSequences fd_documents();
// Three packed documents of 8, 3 and 5 tokens (ids < 24): the fast-kernels-against-the-oracle input.
PackedSequences oracle_documents();

// Every parameter's gradient in layout order, in f64.
std::vector<Tensor> grads_f64(const ModelUnderTest& m);

// The token sequences of shared/reference/hf_models/tokens.json.
std::vector<std::vector<int64_t>> reference_sequences();

// dL/dlogp of the reference folders' loss_seq_sum: the sum over the packed sequences of each one's mean token
// cross-entropy.
Tensor seq_sum_loss_grad(const PackedSequences& packed, DType dtype);

// Per-token weights of a test loss L = sum_n a_n logp_n + b_n entropy_n (stat dtype of the model),
// drawn from a seed; zero where the target is -100.
struct LossWeights {
  Tensor a_N, b_N;
};
LossWeights random_loss_weights(const PackedSequences& packed, DType stat_dtype, uint64_t seed);
double weighted_loss(const ModelOutputs& out, const LossWeights& w);

}  // namespace rf::model::testing

// InferEngine: the forward passes of a frozen model (verl's reference policy; DESIGN §4), on its own
// layout. It holds the weights once, in the compute dtype (no f32 master, no gradients, no
// optimizer), loaded whole by HF name from another engine's export or from an HF folder, and returns
// the log-probs (and entropy) of packed micro-batches, as TrainEngine's forward-only pass does; or, for
// a value or score model (a reward model: model_config.h's HeadKind), their values, of which
// last_token_values reads each document's score.
// Micro-batches are TensorMaps with input_ids, position_ids, labels and cu_seqlens (train_engine.h).
// Pipeline parallel as TrainEngine: a rank holds its stage's chunks (pipeline_stage.h) and runs the
// forward-only schedule through the one executor; every stage returns the last stage's outputs.
// Idle-role offload (verl's ref.megatron.param_offload): offload() moves the weights to the host tier
// between uses; everything that reads or writes them onloads them first.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/offload.h"
#include "engine/engine_config.h"
#include "engine/offload_set.h"
#include "engine/tensor_map.h"
#include "model/causal_lm.h"
#include "model/pipeline_split.h"

namespace rf::engine {

class InferEngine {
 public:
  InferEngine(const EngineConfig& engine_config, const model::ModelConfig& model_config,
              const kernels::KernelRegistry& kernels, dist::ParallelContext& parallel, MemoryTracker& tracker,
              int64_t max_tokens_per_micro_batch);

  // One weight by HF name, whole (any floating dtype): this rank keeps its TP shard (nothing of another
  // pipeline stage's weight).
  void update_weights(const std::string& hf_name, TensorView full);
  void load_hf_weights(const std::string& model_dir);

  // Per micro-batch: "log_probs" f32 [N] (the labels' log-probs at `temperature`; 0 where a label is
  // -100) and, when asked, "entropy" f32 [N].
  std::vector<TensorMap> compute_log_prob(const std::vector<TensorMap>& micro_batches, double temperature,
                                          model::EntropyOutput entropy);
  // A value or score model's: per micro-batch "values" f32 [N], the head's output at every token.
  std::vector<TensorMap> compute_values(const std::vector<TensorMap>& micro_batches);
  // Reads zeros once offloaded again.
  const model::ParamStore& weights() const {
    params_offload_.onload();
    return params_;
  }

  // As TrainEngine::offload / onload for its params (host copies on the tracker's host tier; onload is
  // whole or, when the device budget refuses it, nothing: the tracker's error, still offloaded, intact)
  // and its activations (given back, no copy). `parts`' grads and optimizer: an InferEngine has none.
  // Every pass onloads both.
  void offload(OffloadSet parts);
  void onload();
  bool offloaded() const { return params_offload_.offloaded(); }

 private:
  // The outputs under `keys` (forward_output_keys) of every micro-batch, on every pipeline stage.
  std::vector<TensorMap> forward(const std::vector<TensorMap>& micro_batches, double temperature,
                                 model::EntropyOutput entropy, const std::vector<std::string>& keys);

  EngineConfig config_;
  dist::ParallelContext& parallel_;
  MemoryTracker& tracker_;
  model::PipelineSplit split_;
  model::ParamStore params_;
  std::vector<std::unique_ptr<model::CausalLm>> chunks_;  // this stage's, in virtual-stage order
  int64_t capacity_;
  mutable OffloadGroup params_offload_;  // mutable: weights() onloads
};

// Each document's value at its last token, f32 [D]: a reward model's sequence scores (HF's sequence
// classifiers score the last token; verl's reward workers the last one of the attention mask). values_N
// is a micro-batch's [N] values, cu_seqlens its documents ([0, ..., N]; none may be empty).
Tensor last_token_values(TensorView values_N, std::span<const int32_t> cu_seqlens);

}  // namespace rf::engine

// LocalMicroBatch: a packed micro-batch (TensorMap, one row) as this rank's model runs it, and the way back from
// the run to the micro-batch's N tokens. Both engines (train_engine.h, infer_engine.h) run every micro-batch
// through one, so the layouts below are invisible to their callers: outputs and the loss see the micro-batch.
//  - Sequence parallel: N must divide over TP; a padding document is appended when it does not
//    (sequence_padding.h), its outputs dropped.
//  - Context parallel (CP > 1): the model runs this CP rank's share of every document (model/context_split.h:
//    the load-balanced split, each document padded to a multiple of 2 CP, positions kept); the outputs of the
//    CP group's ranks are all-gathered back into the micro-batch's order, so every CP rank evaluates the loss
//    on the whole micro-batch (per-sequence losses and token counts are the whole documents'), and each takes the
//    gradients of its own tokens' outputs for its backward. The weights' gradients of the CP ranks, each from its
//    own tokens, then sum (over dp-cp) to the one-rank gradient.
// Legend: N tokens of the micro-batch, n this rank's (padded) tokens.
#pragma once

#include <optional>

#include "dist/parallel_context.h"
#include "engine/tensor_map.h"
#include "model/context_split.h"
#include "model/model_inputs.h"

namespace rf::engine {

// The rows a model of this layout reserves for micro-batches of up to max_tokens tokens: max_tokens rounded up
// for sequence parallel, or with CP this rank's share of them (callers count each document's CP padding in
// max_tokens: context_parallel_length).
int64_t local_token_capacity(int64_t max_tokens, const dist::ParallelContext& parallel);
// A document of `length` tokens as context parallel pads it: a multiple of 2 CP (length itself at CP 1).
int64_t context_parallel_length(int64_t length, int64_t cp_size);

class LocalMicroBatch {
 public:
  // `mb` must outlive this. Throws naming `capacity` (this rank's reserved rows) when the micro-batch needs more.
  LocalMicroBatch(const TensorMap& mb, double temperature, const dist::ParallelContext& parallel, int64_t capacity);
  LocalMicroBatch(const LocalMicroBatch&) = delete;
  LocalMicroBatch& operator=(const LocalMicroBatch&) = delete;

  const model::ModelInputs& inputs() const { return inputs_; }
  int64_t num_tokens() const { return num_tokens_; }  // N
  int64_t real_tokens() const;                        // of N, those this rank runs
  // The run's outputs for the micro-batch's N tokens (logp, entropy, values; logits only without CP): views
  // of `run` or, with CP, of this object's buffers (valid until the next call).
  model::ModelOutputs outputs(const model::ModelOutputs& run);
  // Zeroed gradients of those N tokens' outputs for the loss to fill: views of `run_grads`, or with CP of this
  // object's buffers; then local_grads puts this rank's rows of them into `run_grads` (padding rows 0).
  model::OutputGrads loss_grads(const model::OutputGrads& run_grads);
  void local_grads(const model::OutputGrads& loss_grads, const model::OutputGrads& run_grads) const;

 private:
  const dist::ParallelContext& parallel_;
  int64_t num_tokens_;
  model::ModelInputs inputs_;
  std::optional<model::PackedSequences> padded_;  // sequence parallel's padding document, without CP
  std::optional<model::ContextSplit> split_;       // context parallel
  Tensor tokens_n_, positions_n_, targets_n_;      // context parallel: this rank's inputs
  Tensor gathered_, logp_N_, entropy_N_, values_N_, dlogp_N_, dentropy_N_, dvalues_N_;  // context parallel
};

}  // namespace rf::engine

// What one forward pass of a causal LM (or a value model on its backbone) reads, what it returns, and
// the gradients of a loss with respect to what it returns, which backward reads.
// Legend: B rows, T tokens per row, N = B*T tokens (flattened row-major).
#pragma once

#include <span>
#include <vector>

#include "core/tensor.h"

namespace rf::model {

class ContextSplit;

struct ModelInputs {
  int64_t batch = 1;    // B
  int64_t seq_len = 0;  // T
  TensorView tokens_N;     // i32 or i64 token ids
  TensorView positions_N;  // i32 or i64 rotary positions (restart at 0 in each packed document)
  TensorView targets_N;    // i32 or i64 next-token targets; -100 where there is none (LM head only)
  // Packed documents on the flattened N axis ([0, e1, ..., N]); empty: each row is one document.
  std::span<const int32_t> cu_seqlens;
  double temperature = 1.0;  // logits are divided by it before the softmax
  // Sequence parallel's padding document at the end (engine/sequence_padding.h): it takes no loss, and the MoE
  // load-balancing losses do not count it.
  int64_t padding_tokens = 0;
  // A pipeline chunk without the embedding (causal_lm.h's ModelSpan): its input, the previous chunk's output
  // (this rank's rows of the residual stream). Copied by forward.
  TensorView hidden_NC;
  // Context parallel: the split these inputs are this CP rank's part of (context_split.h); null without CP.
  const ContextSplit* context = nullptr;
  // MoE router replay (verl's router_replay R2 / R3; moe_router.h's route_forward_replayed): i32 [N, L_moe, k],
  // token n's k experts in each of the model chunk's MoE layers, in layer order (any order within the k). The routers
  // compute the weights for these experts from their own logits. Empty: each router chooses. The rows are the
  // micro-batch's real tokens (N less padding_tokens; the model fills the padding's); not with context parallelism.
  TensorView replay_experts_NLk;
  // When given (i32 [N, L_moe, k]), forward writes there the experts each MoE layer routed each token to, in
  // increasing order (the replayed ones under replay): what replay_experts_NLk takes. The caller owns it.
  TensorView record_experts_NLk;
};

// Views into the model's own buffers: valid until the next forward. An LM head fills the first four,
// a value or score head (model_config.h's HeadKind) only values_N.
struct ModelOutputs {
  TensorView logp_N;     // log p(target | prefix); 0 where the target is -100
  TensorView entropy_N;  // full-vocabulary entropy (nats); empty if not requested
  TensorView logits_NV;  // before the temperature (greedy decoding reads the argmax)
  // Under TP, logits_NV holds this rank's columns of the padded vocabulary, from this id on.
  int64_t vocab_start = 0;
  TensorView values_N;  // the value head's output at every token (stat dtype)
  // A pipeline chunk without the head: its output (this rank's rows of the residual stream), the next
  // chunk's input; valid until its slot's next forward. The outputs above are then empty.
  TensorView hidden_NC;
};

// dL/d(each output of a forward), what backward reads, [N] in the stat dtype (f64 for an f64 model,
// else f32): dlogp_N (and dentropy_N, or empty) for an LM head, dvalues_N for a value or score head;
// the views of outputs the model does not have stay empty.
struct OutputGrads {
  TensorView dlogp_N, dentropy_N, dvalues_N;
  // The gradient scale of the MoE layers' load-balancing losses (moe_losses.h), which are not outputs: Megatron's
  // AuxLossAutoScaler scale, the weight of this micro-batch's losses in the step's (1 / micro-batches); 0: none.
  double moe_loss_scale = 0.0;
  TensorView dhidden_NC;  // a pipeline chunk without the head: dL/d(its hidden_NC output), the only one
};

enum class EntropyOutput : uint8_t { skip, compute };

// rf::Error naming `what` unless ids_N holds i32 or i64 ids in [0, limit) (or equal to allowed_negative,
// e.g. -100 for targets).
void check_token_ids(TensorView ids_N, int64_t limit, int64_t allowed_negative, const char* what);

// Builds next-token targets and per-document positions for packed documents: positions restart at
// 0 in each document; target[n] = token[n + 1] inside a document and -100 at each document's last
// token. `cu_seqlens` as in ModelInputs (must cover all N tokens).
void make_causal_lm_targets(TensorView tokens_N, std::span<const int32_t> cu_seqlens, TensorView positions_N,
                            TensorView targets_N);

// The packed layout of several token sequences: one row of all tokens, and their boundaries.
struct PackedSequences {
  Tensor tokens_N, positions_N, targets_N;  // i64
  std::vector<int32_t> cu_seqlens;
  int64_t padding_tokens = 0;  // as ModelInputs'
  ModelInputs inputs(double temperature = 1.0) const;
};
PackedSequences pack_sequences(const std::vector<std::vector<int64_t>>& sequences);

}  // namespace rf::model

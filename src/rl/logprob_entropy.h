// Log-probs and entropy from logits as verl.utils.torch_functional defines them, and the entropy
// loss (core_algos.compute_entropy_loss):
//   logprobs_from_logits  z[label] - logsumexp(z)
//   entropy_from_logits   logsumexp(z) - Σ softmax(z)·z
//   entropy loss          aggregate(entropy, response_mask)
// computed in f64 with the max subtracted, so large or peaked logits lose nothing (verl's f32 values
// carry a looser tolerance there). These are the reference forms for the driver and the tests; the
// training path gets log-probs and entropy from the LM head's kernels (src/model, src/kernels).
//
// Dimension legend: B batch (responses), T response tokens, V vocab.
#pragma once

#include "core/tensor_view.h"
#include "rl/agg_loss.h"

namespace rf::rl {

void entropy_from_logits(TensorView logits_BTV, TensorView entropy_BT);
// labels_BT: integer token ids in [0, V).
void logprobs_from_logits(TensorView logits_BTV, TensorView labels_BT, TensorView logprobs_BT);
double compute_entropy_loss(TensorView logits_BTV, TensorView response_mask_BT, const LossAggregation& aggregation);

}  // namespace rf::rl

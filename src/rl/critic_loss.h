// CriticLoss: the critic's loss function for TrainEngine::forward_backward (an engine::LossFn) on a value
// model (model_config.h's HeadKind::value), verl's value loss (core_algos.compute_value_loss, spec §1.9;
// workers/utils/losses.py value_loss on the engine path) with its gradient:
//   v̂c   = clip_by_value(v̂, V - c, V + c)                 c = critic.cliprange_value
//   loss = ½·aggregate(max((v̂ - G)², (v̂c - G)²), response mask)
// with v̂ the model's values, V the values at rollout (compute_values), G the returns. It writes
// dL/dv̂ into grads.dvalues_N, torch autograd's for verl's code: clip_by_value is
// torch.max(torch.min(v̂, V + c), V - c), so at v̂ = V ± c exactly half the gradient passes (both halves
// at c = 0), and the outer torch.max gives half to each side on a tie (subgradients.h). The clip bounds
// are rounded to V's dtype, as verl forms them (value_loss.h).
//
// The micro-batch (TensorMap), everything per packed token [N] and aligned as ActorLoss's: position n
// carries what belongs to the token labels[n], whose value the model reads from position n's hidden
// state (verl's values[:, -R-1:-1]: response token t at prompt_len + t - 1).
//   loss_mask   f32 [N]    verl's response_mask (the engine counts it into LossContext)
//   values      float [N]  V
//   returns     float [N]  G
//   cu_seqlens  i32 [D+1]  one document per sample: the rows of verl's (B, T)
// Values off the mask are never read into a result (NaN there is harmless).
//
// Aggregation is LossAggregation::global over the step's counts, so a step's loss and gradients do not
// depend on how it is cut into micro-batches and DP ranks (verl aggregates each micro-batch with its own
// counts: agg_loss.h). seq-mean-token-sum-norm divides by F = max_response_length: verl's critic passes
// no loss_scale_factor, so agg_loss takes the padded response length.
// Metrics (verl's names), contributions that sum over the step's micro-batches and DP ranks to the step's
// value: critic/vf_loss (the loss); critic/vf_clipfrac (masked mean of (v̂c - G)² > (v̂ - G)²) and
// critic/vpred_mean (masked mean of v̂), each the micro-batch's masked mean times its share of the step's
// loss tokens, so they sum to the step's token means.
//
// Dimension legend: N packed tokens, D documents, B batch (one row per document), T tokens per row.
#pragma once

#include "engine/train_engine.h"
#include "rl/agg_loss.h"

namespace rf::rl {

struct CriticLossConfig {  // critic.* (verl's defaults)
  double cliprange_value = 0.5;
  // Not keys of this struct: critic.loss_agg_mode follows the actor's when null, so the run config
  // resolves it; data.max_response_length is F of seq-mean-token-sum-norm.
  AggMode loss_agg_mode = AggMode::token_mean;
  int64_t max_response_length = 0;

  // verl's key, spliced into the critic's block.
  template <class Fields>
  void fields(Fields& f) {
    f("cliprange_value", cliprange_value, "value clip: the new values stay within this of the values at rollout");
  }
  // ConfigError keyed relative to the critic's block: a cliprange_value below 0.
  void validate() const;
};

class CriticLoss {
 public:
  // Throws validate()'s ConfigError (keyed critic.*) or, with seq-mean-token-sum-norm, one for no F.
  explicit CriticLoss(CriticLossConfig config);

  // engine::LossFn. Overwrites grads.dvalues_N (floating [N]); returns the micro-batch's contribution to
  // the step's loss and the metrics above. A model without a value head is an rf::Error.
  engine::LossOutput operator()(const engine::TensorMap& micro_batch, const model::ModelOutputs& outputs,
                                const engine::LossContext& context, const model::OutputGrads& grads) const;

  const CriticLossConfig& config() const { return config_; }

 private:
  CriticLossConfig config_;
};

}  // namespace rf::rl

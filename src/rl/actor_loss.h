// ActorLoss: the actor's loss function for TrainEngine::forward_backward (an engine::LossFn), verl's
// actor objective (spec §1.10; workers/utils/losses.py ppo_loss on the engine path) with its gradient:
//   loss = pg_loss - entropy_coeff·entropy_loss + kl_loss_coef·kl_loss
//   pg_loss       the policy loss of actor.policy_loss.loss_mode (policy_loss.h)
//   entropy_loss  aggregate(entropy, response mask) with loss_agg_mode; only when the engine was asked
//                 for the entropy (EntropyOutput::compute), which entropy_coeff != 0 requires
//   kl_loss       aggregate(kl_penalty(log_prob, ref_log_prob, kl_loss_type), response mask) with
//                 loss_agg_mode; only when use_kl_loss
// It writes dL/dlogp_N (and dL/dentropy_N = -entropy_coeff·aggregation weight when the entropy is on):
// the exact gradient of the returned loss, torch autograd's for verl's code (see policy_loss.h).
//
// The micro-batch (TensorMap), everything per packed token [N] and aligned with the model's outputs:
// position n carries what belongs to the token labels[n], the one the model predicts at n (verl reads
// response token t's log-prob at prompt_len + t - 1; the trainer builds the columns shifted the same way).
//   loss_mask         f32 [N]  verl's response_mask: 1 where labels[n] is a response token the loss
//                              counts, 0 on prompt tokens, each document's last token, padding and
//                              multi-turn observation tokens. The engine counts this column into
//                              LossContext::global_num_tokens, so the mask and the normaliser agree.
//   old_log_probs     float [N]  log-probs of labels[n] under the policy that sampled (old_log_prob)
//   advantages        float [N]
//   ref_log_prob      float [N]  reference policy's log-probs; read only when use_kl_loss
//   rollout_is_weights float [N] optional: rollout-correction IS weights, used when present
//   cu_seqlens        i32 [D+1]  one document per sample (prompt + response): the rows of verl's (B, T)
// Values off the mask are never read into a result (NaN there is harmless). Each document becomes one
// row of a (B, T) matrix, T its longest document, so that the sequence-level modes (gspo, geo_mean, the
// seq-mean-* aggregations) see verl's per-sample rows.
//
// Aggregation is LossAggregation::global over the step's counts (LossContext: T_step loss tokens,
// S_step documents), so the sum of the micro-batches' losses and gradients over a step is the same
// however the step is cut into micro-batches and DP ranks (except kl_cov, which picks its tokens per
// micro-batch, as verl does). S_step counts documents: every sample should have a response token.
// seq-mean-token-sum-norm divides by F = loss_scale_factor, or verl's default, the padded response length.
//
// Metrics (verl's names), each a contribution that sums over the step's micro-batches and DP ranks to
// the step's value (the engine sums over micro-batches; the trainer sums over DP as for the loss):
//   actor/pg_loss, actor/entropy_loss, actor/kl_loss   the terms' contributions
//   actor/pg_clipfrac, actor/ppo_kl, actor/pg_clipfrac_lower (as the mode reports them), actor/kl_coef
//     the micro-batch's value times its share of the step's loss tokens, so they sum to the step's
//     token mean (verl averages per-micro-batch means, which depends on the micro-batching) and
//     kl_coef sums to kl_loss_coef.
// actor/entropy (verl's metric) is the old-log-prob pass's aggregated entropy, not this loss's.
// Not here: clip_cov, bypass_mode, the straight-through '+' KL estimators (kl_penalty.h), and building
// the micro-batches (the trainer's).
//
// Dimension legend: N packed tokens, D documents, B batch (one row per document), T tokens per row.
#pragma once

#include <optional>
#include <string>

#include "engine/train_engine.h"
#include "rl/agg_loss.h"
#include "rl/kl_penalty.h"
#include "rl/policy_loss.h"

namespace rf::rl {

struct ActorLossConfig {                        // actor_rollout_ref.actor.* (verl's defaults)
  AggMode loss_agg_mode = AggMode::token_mean;  // loss_agg_mode
  PolicyLossConfig policy_loss;  // loss mode, clip ratios, dual clip, sapo's taus, kl_cov's ratio and coef
  double entropy_coeff = 0.0;
  bool use_kl_loss = false;
  double kl_loss_coef = 0.001;
  KlPenalty kl_loss_type = KlPenalty::k3;   // kl_loss_type: low_var_kl
  std::optional<double> loss_scale_factor;  // F of seq-mean-token-sum-norm
  int64_t max_response_length = 0;          // not a key: data.max_response_length, F when loss_scale_factor is unset

  // verl's keys, spliced into the actor's block (verl keeps them flat there), with policy_loss's own.
  template <class Fields>
  void fields(Fields& f) {
    f("clip_ratio", policy_loss.clip_ratio, "PPO clip ratio (when clip_ratio_low / high are null)");
    f("clip_ratio_low", policy_loss.clip_ratio_low, "lower clip ratio");
    f("clip_ratio_high", policy_loss.clip_ratio_high, "upper clip ratio");
    f("clip_ratio_c", policy_loss.clip_ratio_c, "dual-clip constant (> 1)");
    f("tau_pos", policy_loss.tau_pos, "sapo: temperature for positive advantages");
    f("tau_neg", policy_loss.tau_neg, "sapo: temperature for negative advantages");
    f("policy_loss", policy_loss, "policy loss mode and its parameters");
    f("loss_agg_mode", loss_agg_mode,
      "token-mean, seq-mean-token-sum, seq-mean-token-mean or seq-mean-token-sum-norm");
    f("loss_scale_factor", loss_scale_factor, "seq-mean-token-sum-norm divisor (null: data.max_response_length)");
    f("entropy_coeff", entropy_coeff, "entropy bonus coefficient");
    f("use_kl_loss", use_kl_loss, "KL to the reference policy as a loss term (GRPO)");
    f("kl_loss_coef", kl_loss_coef, "coefficient of the KL loss");
    f("kl_loss_type", kl_loss_type, "KL estimator of the loss: kl (k1), abs, mse (k2), low_var_kl (k3)");
  }
  // ConfigError keyed relative to the actor's block: an unknown policy_loss.loss_mode, clip_ratio_c <= 1.
  void validate() const;
};

class ActorLoss {
 public:
  // Throws ConfigError for an unknown loss_mode or, with seq-mean-token-sum-norm, for no F at all.
  explicit ActorLoss(ActorLossConfig config);

  // engine::LossFn. Overwrites grads.dlogp_N (floating [N]) and, when given, grads.dentropy_N; returns
  // the micro-batch's contribution to the step's loss and the metrics above.
  engine::LossOutput operator()(const engine::TensorMap& micro_batch, const model::ModelOutputs& outputs,
                                const engine::LossContext& context, const model::OutputGrads& grads) const;

  const ActorLossConfig& config() const { return config_; }

 private:
  ActorLossConfig config_;
  const PolicyLoss* policy_loss_;
};

}  // namespace rf::rl

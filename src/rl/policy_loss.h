// Policy losses: verl's registry (actor.policy_loss.loss_mode) as a constant table of pure functions.
// Each takes the old and current log-probs of the sampled tokens, the advantages and the response
// mask, and returns the aggregated loss of the micro-batch plus verl's metrics for it (names without
// the "actor/" prefix; each mode reports exactly the metrics verl's does). Rollout importance-
// sampling weights, when given, multiply the per-token loss before aggregation and leave the metrics
// alone. With δ = log_prob - old_log_prob and ρ = exp(δ):
//   vanilla   PPO clip: max(-A·ρ, -A·clamp(ρ, 1-low, 1+high)) with δ clamped to ±20, and for A < 0
//             the dual clip min(that, -A·clip_ratio_c)
//   gspo      PPO clip on the sequence ratio exp(Σ_t δ·m / max(n, 1)) (not clamped; capped at
//             exp(10)), no dual clip; always aggregated seq-mean-token-mean
//   cispo     -clamp(ρ, 1-low, 1+high)·A·log_prob (the clamped ratio is a constant for the gradient)
//   sapo      -σ(τ(ρ-1))·(4/τ)·A with τ = tau_pos where A > 0, tau_neg elsewhere; always
//             seq-mean-token-mean
//   geo_mean  GMPO: δ clipped to [-low, high] on the side sign(A) selects, per-sequence geometric
//             mean ratio and mean advantage, then the mean over sequences (ignores loss_agg_mode)
//   gpg       -log_prob·A
//   kl_cov    -A·ρ, plus ppo_kl_coef·|δ| on the max(1, ⌊N·kl_cov_ratio⌋) valid tokens with the
//             largest centred covariance (A - mean A)(log_prob - mean log_prob)
// Family files: token_ratio_losses.cpp (vanilla, cispo, sapo), sequence_ratio_losses.cpp (gspo,
// geo_mean), unclipped_policy_losses.cpp (gpg, kl_cov).
// kl_cov picks its tokens within the micro-batch it is given, as verl does, so unlike the others it
// depends on how a step is cut into micro-batches even with LossAggregation::global.
// Not here: clip_cov (picks tokens with torch.randperm) and bypass_mode.
//
// The gradient. Given dlog_prob_BT, a mode also writes d(pg_loss)/d(log_prob_BT), computed in the same
// loop as the loss from the same terms, so each formula has one home. It is the gradient torch autograd
// gives for verl's code (tests/rl/torch_grad_reference_test.cpp; finite differences in
// policy_loss_grad_test.cpp), with torch's subgradients where a piece is flat or kinked (subgradients.h):
// 0 where the ±20 log-ratio clamp, a ratio clip or gspo's cap at 10 holds its input, half to each side of
// a max/min tie, 0 for |δ| at 0. verl's stop-gradients hold too (cispo's clipped ratio, gspo's sequence
// ratio, kl_cov's token choice), so for cispo, and for gspo with per-token advantages, the gradient is not
// the derivative of pg_loss's value. Off the mask it is exactly 0, even where an input there is NaN or inf.
//
// Dimension legend: B batch (responses), T response tokens.
#pragma once

#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "core/tensor_view.h"
#include "rl/agg_loss.h"

namespace rf::rl {

struct PolicyLossInputs {
  TensorView old_log_prob_BT;
  TensorView log_prob_BT;
  TensorView advantages_BT;
  TensorView response_mask_BT;
  TensorView rollout_is_weights_BT;  // optional: rollout-correction importance-sampling weights
};

struct PolicyLossConfig {  // actor_rollout_ref.actor.* and .policy_loss.* (verl's defaults)
  std::string loss_mode = "vanilla";  // policy_loss.loss_mode: the registry's name (find_policy_loss)
  double clip_ratio = 0.2;
  std::optional<double> clip_ratio_low = 0.2;  // unset: clip_ratio
  std::optional<double> clip_ratio_high = 0.2;
  double clip_ratio_c = 3.0;  // dual clip; must be > 1
  double tau_pos = 1.0;
  double tau_neg = 1.05;
  double kl_cov_ratio = 0.0002;  // policy_loss.kl_cov_ratio; must be > 0
  double ppo_kl_coef = 0.1;      // policy_loss.ppo_kl_coef

  double low() const { return clip_ratio_low.value_or(clip_ratio); }
  double high() const { return clip_ratio_high.value_or(clip_ratio); }

  // verl's actor.policy_loss block; the clip ratios and taus are the actor's own keys (ActorLossConfig).
  template <class Fields>
  void fields(Fields& f) {
    f("loss_mode", loss_mode, "policy loss: vanilla, gspo, sapo, gpg, clip_cov, kl_cov, geo_mean, ...");
    f("kl_cov_ratio", kl_cov_ratio, "kl_cov: fraction of tokens with the KL penalty");
    f("ppo_kl_coef", ppo_kl_coef, "kl_cov: coefficient of the KL penalty");
  }
};

struct PolicyLossResult {
  double pg_loss = 0;
  std::map<std::string, double> metrics;  // pg_clipfrac, ppo_kl, pg_clipfrac_lower (as the mode reports)
};

// dlog_prob_BT: empty, or a (B, T) floating tensor (any dtype and strides) that receives the gradient.
using PolicyLossFn = PolicyLossResult (*)(const PolicyLossInputs&, const PolicyLossConfig&, const LossAggregation&,
                                          TensorView dlog_prob_BT);

struct PolicyLoss {
  std::string_view name;           // verl's loss_mode
  std::string_view verl_function;  // the verl function it reproduces, fully qualified
  PolicyLossFn fn;

  PolicyLossResult compute(const PolicyLossInputs& in, const PolicyLossConfig& config,
                           const LossAggregation& aggregation, TensorView dlog_prob_BT = {}) const {
    return fn(in, config, aggregation, dlog_prob_BT);
  }
};

std::span<const PolicyLoss> policy_losses();
// Throws ConfigError (key policy_loss.loss_mode) listing the known names.
const PolicyLoss& find_policy_loss(std::string_view loss_mode);

PolicyLossResult policy_loss_vanilla(const PolicyLossInputs&, const PolicyLossConfig&, const LossAggregation&,
                                     TensorView dlog_prob_BT = {});
PolicyLossResult policy_loss_cispo(const PolicyLossInputs&, const PolicyLossConfig&, const LossAggregation&,
                                   TensorView dlog_prob_BT = {});
PolicyLossResult policy_loss_sapo(const PolicyLossInputs&, const PolicyLossConfig&, const LossAggregation&,
                                  TensorView dlog_prob_BT = {});
PolicyLossResult policy_loss_gspo(const PolicyLossInputs&, const PolicyLossConfig&, const LossAggregation&,
                                  TensorView dlog_prob_BT = {});
PolicyLossResult policy_loss_geo_mean(const PolicyLossInputs&, const PolicyLossConfig&, const LossAggregation&,
                                      TensorView dlog_prob_BT = {});
PolicyLossResult policy_loss_gpg(const PolicyLossInputs&, const PolicyLossConfig&, const LossAggregation&,
                                 TensorView dlog_prob_BT = {});
PolicyLossResult policy_loss_kl_cov(const PolicyLossInputs&, const PolicyLossConfig&, const LossAggregation&,
                                    TensorView dlog_prob_BT = {});

}  // namespace rf::rl

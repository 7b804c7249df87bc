// ActorLoss: the packed micro-batch as (B, T) rows, the three terms with their gradients, and the
// gradients put back on the packed tokens. See actor_loss.h.
//
// Dimension legend: N packed tokens, B batch (one row per document), T tokens per row.
#include "rl/actor_loss.h"

#include <fmt/format.h>

#include "core/element_access.h"
#include "rl/document_rows.h"
#include "rl/masked_stats.h"

namespace rf::rl {
namespace {

double* values(const Tensor& f64_BT) { return f64_BT.data<double>(); }

}  // namespace

ActorLoss::ActorLoss(ActorLossConfig config)
    : config_(std::move(config)), policy_loss_(&find_policy_loss(config_.policy_loss.loss_mode)) {
  if (config_.loss_agg_mode == AggMode::seq_mean_token_sum_norm && !config_.loss_scale_factor &&
      config_.max_response_length <= 0)
    throw ConfigError("actor_rollout_ref.actor.loss_scale_factor",
                      "seq-mean-token-sum-norm divides by loss_scale_factor, or by data.max_response_length "
                      "when it is null; neither is set");
}

void ActorLossConfig::validate() const {
  try {
    (void)find_policy_loss(policy_loss.loss_mode);
  } catch (const ConfigError& e) {
    throw ConfigError("policy_loss.loss_mode", e.detail());
  }
  const auto require_non_negative = [](const std::string& key, double value) {
    if (!(value >= 0)) throw ConfigError(key, fmt::format("must be >= 0, got {}", value));
  };
  require_non_negative("clip_ratio", policy_loss.clip_ratio);
  if (policy_loss.clip_ratio_low) require_non_negative("clip_ratio_low", *policy_loss.clip_ratio_low);
  if (policy_loss.clip_ratio_high) require_non_negative("clip_ratio_high", *policy_loss.clip_ratio_high);
  if (!(policy_loss.low() < 1))
    throw ConfigError(policy_loss.clip_ratio_low ? "clip_ratio_low" : "clip_ratio",
                      fmt::format("must be < 1 (the ratio's lower bound 1 - clip_ratio_low must stay positive), got {}",
                                  policy_loss.low()));
  require_non_negative("kl_loss_coef", kl_loss_coef);
  if (loss_scale_factor && !(*loss_scale_factor > 0))
    throw ConfigError("loss_scale_factor", fmt::format("must be positive (or null), got {}", *loss_scale_factor));
  if (!(policy_loss.clip_ratio_c > 1))
    throw ConfigError("clip_ratio_c", fmt::format("must be > 1 (the dual-clip bound), got {}", policy_loss.clip_ratio_c));
  if (!(policy_loss.kl_cov_ratio > 0 && policy_loss.kl_cov_ratio <= 1))
    throw ConfigError("policy_loss.kl_cov_ratio",
                      fmt::format("must be a fraction of the tokens in (0, 1], got {}", policy_loss.kl_cov_ratio));
}

engine::LossOutput ActorLoss::operator()(const engine::TensorMap& micro_batch, const model::ModelOutputs& outputs,
                                         const engine::LossContext& context, const model::OutputGrads& grads) const {
  const ActorLossConfig& c = config_;
  const TensorView dlogp_N = grads.dlogp_N, dentropy_N = grads.dentropy_N;
  const DocumentRows rows(micro_batch.cu_seqlens(), micro_batch.num_tokens());
  const int64_t B = rows.num_rows(), T = rows.num_cols();
  const Tensor mask = rows.gather(micro_batch.get("loss_mask"), "loss_mask");
  const Tensor log_prob = rows.gather(outputs.logp_N, "log_probs");
  const Tensor old_log_prob = rows.gather(micro_batch.get("old_log_probs"), "old_log_probs");
  const Tensor advantages = rows.gather(micro_batch.get("advantages"), "advantages");
  const Tensor is_weights = micro_batch.contains("rollout_is_weights")
                                ? rows.gather(micro_batch.get("rollout_is_weights"), "rollout_is_weights")
                                : Tensor();
  const bool with_entropy = !outputs.entropy_N.empty();
  RF_CHECK(c.entropy_coeff == 0.0 || (with_entropy && !dentropy_N.empty()),
           "entropy_coeff = {} needs the model's entropy and its gradient: run forward_backward with "
           "EntropyOutput::compute",
           c.entropy_coeff);

  std::optional<double> norm_length = c.loss_scale_factor;  // F, verl's default being the padded response length
  if (!norm_length && c.max_response_length > 0) norm_length = double(c.max_response_length);
  const LossAggregation aggregation = LossAggregation::global(c.loss_agg_mode, context, norm_length);
  engine::LossOutput out;

  // The policy loss, and d pg_loss/dlog_prob, to which the KL term's gradient is added.
  Tensor dlog_prob({B, T}, DType::f64);
  const PolicyLossResult pg = policy_loss_->compute({old_log_prob, log_prob, advantages, mask, is_weights},
                                                    c.policy_loss, aggregation, dlog_prob);
  out.loss = pg.pg_loss;
  out.metrics["actor/pg_loss"] = pg.pg_loss;
  // The metrics are masked means over the micro-batch's loss tokens: back to masked sums (verl's divisor,
  // Σm + 1e-8 in the log-probs' dtype), over the step's loss tokens.
  const double num_tokens = masked_sum(mask, mask);
  const double step_tokens = double(context.global_num_tokens);
  const double token_share = step_tokens > 0 ? num_tokens / step_tokens : 0.0;
  const double mean_to_share = step_tokens > 0 ? masked_count_divisor(num_tokens, log_prob.dtype()) / step_tokens : 0.0;
  for (const auto& [name, value] : pg.metrics) out.metrics["actor/" + name] = value * mean_to_share;

  if (with_entropy) {
    const Tensor entropy = rows.gather(outputs.entropy_N, "entropy");
    Tensor dentropy({B, T}, DType::f64);
    const double entropy_loss = aggregation.aggregate(entropy, mask, dentropy);
    out.loss -= c.entropy_coeff * entropy_loss;
    out.metrics["actor/entropy_loss"] = entropy_loss;
    if (!dentropy_N.empty()) {
      for (int64_t i = 0; i < B * T; ++i) values(dentropy)[i] *= -c.entropy_coeff;
      rows.scatter(dentropy, dentropy_N, "dentropy_N");
    }
  } else if (!dentropy_N.empty()) {
    fill_zero(dentropy_N);
  }

  if (c.use_kl_loss) {
    const Tensor ref_log_prob = rows.gather(micro_batch.get("ref_log_prob"), "ref_log_prob");
    Tensor kl({B, T}, log_prob.dtype()), dkl({B, T}, DType::f64), kl_weights({B, T}, DType::f64);
    kl_penalty(log_prob, ref_log_prob, c.kl_loss_type, kl, dkl);
    const double kl_loss = aggregation.aggregate(kl, mask, kl_weights);
    out.loss += c.kl_loss_coef * kl_loss;
    out.metrics["actor/kl_loss"] = kl_loss;
    out.metrics["actor/kl_coef"] = c.kl_loss_coef * token_share;
    for (int64_t i = 0; i < B * T; ++i)  // off the mask the weight is 0, and dkl may not be finite
      if (load_f64(mask, i) != 0.0) values(dlog_prob)[i] += c.kl_loss_coef * values(kl_weights)[i] * values(dkl)[i];
  }
  rows.scatter(dlog_prob, dlogp_N, "dlogp_N");
  return out;
}

}  // namespace rf::rl

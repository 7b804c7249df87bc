// CriticLoss: the packed micro-batch as (B, T) rows, verl's clipped value loss per token with its
// derivative, the step-global aggregation, and the gradient put back on the packed tokens. See
// critic_loss.h.
//
// Dimension legend: N packed tokens, B batch (one row per document), T tokens per row.
#include "rl/critic_loss.h"

#include <algorithm>
#include <optional>

#include "rl/document_rows.h"
#include "rl/masked_stats.h"
#include "rl/subgradients.h"

namespace rf::rl {
namespace {

// One token's max((v̂ - G)², (v̂c - G)²), whether the clipped term won, and the loss's derivative with
// respect to v̂ as torch's autograd takes it through verl's ops.
struct TokenValueLoss {
  double loss = 0, dloss_dvpred = 0;
  bool clipped = false;
};

TokenValueLoss token_value_loss(double vpred, double ret, double lo, double hi) {
  const double upper = std::min(vpred, hi);         // torch.min(v̂, V + c)
  const double vpred_clipped = std::max(upper, lo);  // torch.max(·, V - c)
  const double dclipped_dvpred = max_grad_share(hi, vpred) * max_grad_share(upper, lo);
  const double unclipped_loss = (vpred - ret) * (vpred - ret);
  const double clipped_loss = (vpred_clipped - ret) * (vpred_clipped - ret);
  return {std::max(unclipped_loss, clipped_loss),
          max_grad_share(unclipped_loss, clipped_loss) * 2.0 * (vpred - ret) +
              max_grad_share(clipped_loss, unclipped_loss) * 2.0 * (vpred_clipped - ret) * dclipped_dvpred,
          clipped_loss > unclipped_loss};
}

}  // namespace

void CriticLossConfig::validate() const {
  if (!(cliprange_value >= 0.0))
    throw ConfigError("cliprange_value", fmt::format("must be >= 0, got {}", cliprange_value));
}

CriticLoss::CriticLoss(CriticLossConfig config) : config_(config) {
  try {
    config_.validate();
  } catch (const ConfigError& error) {
    throw ConfigError("critic." + error.key_path(), error.detail());
  }
  if (config_.loss_agg_mode == AggMode::seq_mean_token_sum_norm && config_.max_response_length <= 0)
    throw ConfigError("data.max_response_length",
                      "the critic's seq-mean-token-sum-norm divides by the padded response length; it is not set");
}

engine::LossOutput CriticLoss::operator()(const engine::TensorMap& micro_batch, const model::ModelOutputs& outputs,
                                          const engine::LossContext& context, const model::OutputGrads& grads) const {
  RF_CHECK(!outputs.values_N.empty() && !grads.dvalues_N.empty(),
           "CriticLoss: the model has no value head (expected a ForTokenClassification critic)");
  const DocumentRows rows(micro_batch.cu_seqlens(), micro_batch.num_tokens());
  const Matrix mask = read_mask(rows.gather(micro_batch.get("loss_mask"), "loss_mask"), "loss_mask");
  const Matrix vpreds = read_matrix(rows.gather(outputs.values_N, "the model's values"), "the model's values");
  const Matrix values = read_matrix(rows.gather(micro_batch.get("values"), "values"), "values");
  const Matrix returns = read_matrix(rows.gather(micro_batch.get("returns"), "returns"), "returns");

  Matrix loss(vpreds.rows, vpreds.cols, vpreds.dtype), clipped(loss), dloss_dvpred(loss);
  for (size_t i = 0; i < loss.values.size(); ++i) {
    if (mask.values[i] == 0.0) continue;  // off the mask the weight is 0, and the inputs may not be finite
    // verl's bounds, values ∓ c, formed in the values' dtype.
    const double lo = round_to(values.dtype, values.values[i] - config_.cliprange_value);
    const double hi = round_to(values.dtype, values.values[i] + config_.cliprange_value);
    const TokenValueLoss t = token_value_loss(vpreds.values[i], returns.values[i], lo, hi);
    loss.values[i] = t.loss;
    dloss_dvpred.values[i] = t.dloss_dvpred;
    clipped.values[i] = t.clipped ? 1.0 : 0.0;
  }
  const LossAggregation aggregation = LossAggregation::global(
      config_.loss_agg_mode, context,
      config_.max_response_length > 0 ? std::optional<double>(double(config_.max_response_length)) : std::nullopt);
  Matrix weights;
  const double vf_loss = 0.5 * aggregation.aggregate(loss, mask, &weights);
  Matrix dvpred(loss.rows, loss.cols, DType::f64);
  for (size_t i = 0; i < dvpred.values.size(); ++i) dvpred.values[i] = 0.5 * weights.values[i] * dloss_dvpred.values[i];
  Tensor dvpred_BT({loss.rows, loss.cols}, DType::f64);
  write_matrix(dvpred, dvpred_BT, "dvpred_BT");
  rows.scatter(dvpred_BT, grads.dvalues_N, "dvalues_N");

  // The masked means (verl's divisor, Σm + 1e-8 in the values' dtype) as shares of the step's loss tokens.
  const double step_tokens = double(context.global_num_tokens);
  const double mean_to_share =
      step_tokens > 0 ? masked_count_divisor(masked_sum(mask, mask), vpreds.dtype) / step_tokens : 0.0;
  engine::LossOutput out;
  out.loss = vf_loss;
  out.metrics["critic/vf_loss"] = vf_loss;
  out.metrics["critic/vf_clipfrac"] = masked_mean(clipped, mask) * mean_to_share;
  out.metrics["critic/vpred_mean"] = masked_mean(vpreds, mask) * mean_to_share;
  return out;
}

}  // namespace rf::rl

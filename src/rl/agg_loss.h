// Loss aggregation: how per-token losses L (B, T) under a mask M become the scalar one micro-batch
// contributes (verl core_algos.agg_loss, by verl's loss_agg_mode names). Every mode is linear in L,
// loss = Σ_bt w_bt·L_bt, so the gradient with respect to the per-token losses is the weight matrix w,
// which aggregate() writes when asked.
//
// With n_b = Σ_t M[b, t] (a row counts only if n_b > 0):
//   mode                     LossAggregation::verl                     LossAggregation::global
//   token-mean               Σ L·M / T · D                             Σ L·M / T_step
//   seq-mean-token-sum       Σ_b Σ_t L·M / S · D                       Σ_b Σ_t L·M / S_step
//   seq-mean-token-mean      Σ_b (Σ_t L·M)/(n_b + 1e-8) / S · D        the same over S_step
//   seq-mean-token-sum-norm  Σ L·M / F                                 Σ L·M / (F · S_step)
// verl's keyword arguments: D = dp_size, T = batch_num_tokens, S = global_batch_size,
// F = loss_scale_factor; unset, T and S are the micro-batch's own counts (Σ M, rows with n_b > 0)
// and F is the padded length T. The 1e-8 is added in the losses' dtype (it vanishes in f32).
// T_step and S_step come from engine::LossContext: the loss tokens and the sequences of the whole
// step, over all micro-batches and DP ranks.
//
// Why the global form. The engine runs a step as micro-batches on DP ranks and sums what they
// contribute (engine::LossOutput, and the DP gradient reduction is a sum), so an aggregation is
// invariant to micro-batching and DP when its normalisers are constants of the whole step. That is
// what the global form uses, and it needs no D: verl multiplies by D only to undo DDP's gradient
// averaging. verl itself is not invariant in two places:
//   - seq-mean-token-sum-norm is Σ/F with neither D nor S: under DP averaging the objective shrinks
//     with D, and it grows with the batch size. We use Σ/(F·S_step), Dr.GRPO's objective (the mean
//     over sequences of token sums over a constant length), which later verl also adopted
//     (seq-mean-token-sum, then / F). So with global counts this mode is verl's value / S.
//   - compute_value_loss takes no global counts: each micro-batch is aggregated with its own, and
//     the step's value loss becomes a mean of per-micro-batch means. We aggregate the value loss like
//     the policy loss (later verl forwards the global counts there too).
// S_step must count the sequences with at least one loss token, as verl's default S does;
// LossContext::global_num_seqs counts documents, which agrees while no response is fully masked.
// Masked elements never enter a sum, so a NaN or inf under the mask does not spread (verl ensures
// that only for token-mean). A zero normaliser (no loss token at all) gives 0 where verl gives NaN.
//
// Dimension legend: B batch (responses), T response tokens.
#pragma once

#include <utility>
#include <array>
#include <optional>
#include <string_view>
#include <vector>

#include "core/tensor_view.h"
#include "engine/train_engine.h"
#include "rl/matrix.h"

namespace rf::rl {

enum class AggMode : uint8_t { token_mean, seq_mean_token_sum, seq_mean_token_mean, seq_mean_token_sum_norm };

// "token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm". Anything else
// (e.g. "token-sum", which appears in later verl) throws ConfigError (key loss_agg_mode).
// verl's names (actor.loss_agg_mode, critic.loss_agg_mode): how the config binds them.
constexpr std::array<std::pair<AggMode, std::string_view>, 4> enum_names(AggMode) {
  return {{{AggMode::token_mean, "token-mean"},
           {AggMode::seq_mean_token_sum, "seq-mean-token-sum"},
           {AggMode::seq_mean_token_mean, "seq-mean-token-mean"},
           {AggMode::seq_mean_token_sum_norm, "seq-mean-token-sum-norm"}}};
}
AggMode parse_agg_mode(std::string_view name);
std::string_view agg_mode_name(AggMode mode);

// verl's agg_loss keyword arguments, as ActorConfig.global_batch_info passes them.
struct VerlBatchInfo {
  int64_t dp_size = 1;
  std::optional<double> batch_num_tokens;
  std::optional<double> global_batch_size;
  std::optional<double> loss_scale_factor;
};

class LossAggregation {
 public:
  // verl's agg_loss at b178a3c: what the reference vectors hold.
  static LossAggregation verl(AggMode mode, const VerlBatchInfo& info = {});
  // The micro-batch- and DP-invariant form, from the step's global counts.
  static LossAggregation global(AggMode mode, const engine::LossContext& context,
                                std::optional<double> loss_scale_factor = std::nullopt);

  // The same counts under another mode (gspo and sapo always aggregate seq-mean-token-mean).
  LossAggregation with_mode(AggMode mode) const;

  // Σ w·L over the mask; writes w = d(result)/dL into `weights` when given.
  double aggregate(const Matrix& loss, const Matrix& mask, Matrix* weights = nullptr) const;
  double aggregate(TensorView loss_BT, TensorView mask_BT, TensorView dloss_BT = {}) const;
  // The mean over sequences of per-sequence losses (geo_mean, which ignores the mode): verl takes
  // torch.mean over the micro-batch's rows, fully masked ones included; the global form divides the
  // sum by the step's sequence count. Writes d(result)/d(loss_B[b]), the same for every b, into
  // `weight` when given.
  double sequence_mean(const std::vector<double>& loss_B, double* weight = nullptr) const;

 private:
  enum class Form : uint8_t { verl, global };
  LossAggregation(AggMode mode, Form form, const VerlBatchInfo& counts) : mode_(mode), form_(form), counts_(counts) {}

  AggMode mode_;
  Form form_;
  VerlBatchInfo counts_;  // the global form: dp_size 1, T_step, S_step, F
};

// verl's agg_loss(loss_mat, loss_mask, loss_agg_mode, **global_batch_info).
double agg_loss(TensorView loss_BT, TensorView mask_BT, AggMode mode, const VerlBatchInfo& info = {});
// Its loop twin: verl's formulas line by line, per row (agg_loss_loop.cpp).
double agg_loss_loop(TensorView loss_BT, TensorView mask_BT, AggMode mode, const VerlBatchInfo& info = {});

}  // namespace rf::rl

// Inputs for the gradient tests of the policy losses and of ActorLoss: verl-style (B, T) response rows
// drawn away from the losses' kinks (so that finite differences see one smooth piece), their packing into
// ActorLoss's micro-batch layout (actor_loss.h), the step counts the engine would form, and the torch
// reference file (torch_grad_reference.py).
//
// Dimension legend: B batch (responses), T response tokens, N packed tokens.
#pragma once

#include <nlohmann/json.hpp>
#include <span>
#include <vector>

#include "core/tensor.h"
#include "engine/train_engine.h"
#include "rl/policy_loss.h"

namespace rf::testing {

// What verl's actor loss reads per response token, all (B, T) f64 except the f32 0/1 mask.
struct ResponseRows {
  Tensor old_log_prob, log_prob, advantages, mask, ref_log_prob, entropy;
  Tensor rollout_is_weights;  // empty: none
};

struct ResponseRowsSpec {
  int64_t B = 5, T = 7;
  uint64_t seed = 1;
  // Log-ratios δ = log_prob - old_log_prob are drawn from [-0.6, 0.6] at least 0.01 from each of these.
  std::vector<double> kinks;
  // Each row's masked mean of δ kept 0.01 from each of these instead (gspo's sequence ratio), and the
  // advantages and IS weights made one value per row, as GRPO's are: then gspo's token-level gradient is
  // the derivative of its loss (GSPO's sequence-level equivalence), which finite differences can check.
  std::vector<double> row_kinks;
  bool with_weights = false;
};
ResponseRows random_response_rows(const ResponseRowsSpec& spec);
int64_t num_loss_tokens(const Tensor& mask_BT);

// The policy-loss config of the finite-difference tests: clip 0.2 / 0.28 and a dual clip of 1.7, low
// enough to bind on some tokens.
rl::PolicyLossConfig fd_policy_config();

// What a mode's finite-difference check needs: the log-ratios its loss kinks at (token- or row-level)
// and which input moves along with log_prob.
enum class FdDirection : uint8_t {
  log_prob,
  // cispo's clipped ratio is a constant for the gradient (verl detaches it): moving old_log_prob with
  // log_prob keeps the ratio, so the difference quotient is the derivative the gradient is.
  log_prob_and_old,
};
struct FdMode {
  std::vector<double> kinks, row_kinks;
  FdDirection direction = FdDirection::log_prob;
};
FdMode fd_mode(std::string_view loss_mode, const rl::PolicyLossConfig& config);
// kl_cov penalises the tokens of largest covariance: a kl_cov_ratio whose count sits at the widest gap
// between consecutive covariances, so that no finite-difference step changes which tokens are penalised.
double stable_kl_cov_ratio(const ResponseRows& rows);

// Rows as ActorLoss reads them: document b is `prompt_length(b)` prompt tokens then row b's T response
// tokens, so the log-prob of response token t sits at packed position start_b + prompt_length(b) - 1 + t
// and the document's last position predicts nothing (mask 0). Positions the rows do not cover hold NaN
// in the RL columns (the loss must not read them) and random values in the model's outputs.
struct PackedRows {
  engine::TensorMap micro_batch;
  Tensor log_prob_N, entropy_N;         // the model's outputs, f64
  std::vector<int64_t> response_start;  // packed position of response token 0 of each row
  model::ModelOutputs outputs() const;
};
PackedRows pack_response_rows(const ResponseRows& rows, int64_t first_row, int64_t num_rows);

// The counts TrainEngine::forward_backward forms over a step's micro-batches.
engine::LossContext step_context(std::span<const PackedRows> micro_batches);

// tests/rl/torch_grad_reference.json, and a nested JSON list as an f64 tensor of its shape.
const nlohmann::json& torch_grad_reference();
Tensor json_tensor(const nlohmann::json& nested);

}  // namespace rf::testing

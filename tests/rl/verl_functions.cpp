#include "verl_functions.h"

#include <gtest/gtest.h>

#include "rl/advantage_estimator.h"
#include "rl/agg_loss.h"
#include "rl/kl_controller.h"
#include "rl/kl_penalty.h"
#include "rl/logprob_entropy.h"
#include "rl/masked_stats.h"
#include "rl/policy_loss.h"
#include "rl/value_loss.h"

namespace rf::testing {
namespace {

using nlohmann::json;

// Each handler reads the case (outside any expected error) and returns closures that call the rl
// layer. Tensors are move-only and std::function must be copyable, hence the shared_ptrs.

std::vector<Implementation> masked_reduction(CaseReader& r, double (*whole)(TensorView, TensorView),
                                             void (*per_row)(TensorView, TensorView, TensorView)) {
  auto values = std::make_shared<Tensor>(r.floats("values"));
  auto mask = std::make_shared<Tensor>(r.mask("mask"));
  const json axis = r.config("axis");
  if (axis.is_null()) return {{"whole", [=] { return Outputs{{"result", scalar(whole(*values, *mask))}}; }}};
  if (axis != -1) throw Error("axis: expected null or -1, got " + axis.dump());
  auto rows = std::make_shared<Tensor>(r.output({values->size(0)}));
  return {{"rows", [=] {
             per_row(*values, *mask, *rows);
             return Outputs{{"result", result_of(*rows)}};
           }}};
}

std::vector<Implementation> masked_sum_case(CaseReader& r) {
  return masked_reduction(r, rl::masked_sum, rl::masked_row_sums);
}

std::vector<Implementation> masked_mean_case(CaseReader& r) {
  return masked_reduction(r, rl::masked_mean, rl::masked_row_means);
}

std::vector<Implementation> masked_var_case(CaseReader& r) {
  auto values = std::make_shared<Tensor>(r.floats("values"));
  auto mask = std::make_shared<Tensor>(r.mask("mask"));
  const auto correction = r.flag("unbiased") ? rl::VarianceCorrection::unbiased : rl::VarianceCorrection::biased;
  return {{"masked_var", [=] { return Outputs{{"result", scalar(rl::masked_var(*values, *mask, correction))}}; }}};
}

std::vector<Implementation> masked_whiten_case(CaseReader& r) {
  auto values = std::make_shared<Tensor>(r.floats("values"));
  auto mask = std::make_shared<Tensor>(r.mask("mask"));
  auto whitened = std::make_shared<Tensor>(r.output_like(*values));
  const auto shift = r.flag("shift_mean") ? rl::MeanShift::remove : rl::MeanShift::keep;
  return {{"masked_whiten", [=] {
             rl::masked_whiten(*values, *mask, shift, *whitened);
             return Outputs{{"result", result_of(*whitened)}};
           }}};
}

std::vector<Implementation> kl_penalty_case(CaseReader& r) {
  auto logprob = std::make_shared<Tensor>(r.floats("logprob"));
  auto ref_logprob = std::make_shared<Tensor>(r.floats("ref_logprob"));
  auto kl = std::make_shared<Tensor>(r.output_like(*logprob));
  const std::string name = r.text("kl_penalty");
  return {{"kl_penalty", [=] {
             rl::kl_penalty(*logprob, *ref_logprob, rl::parse_kl_penalty(name), *kl);
             return Outputs{{"kl", result_of(*kl)}};
           }}};
}

std::vector<Implementation> compute_rewards_case(CaseReader& r) {
  auto scores = std::make_shared<Tensor>(r.floats("token_level_scores"));
  auto old_log_prob = std::make_shared<Tensor>(r.floats("old_log_prob"));
  auto ref_log_prob = std::make_shared<Tensor>(r.floats("ref_log_prob"));
  auto rewards = std::make_shared<Tensor>(r.output_like(*scores));
  const double kl_ratio = r.number("kl_ratio");
  return {{"compute_rewards", [=] {
             rl::compute_rewards(*scores, *old_log_prob, *ref_log_prob, kl_ratio, *rewards);
             return Outputs{{"rewards", result_of(*rewards)}};
           }}};
}

// Both controller classes: verl's get_kl_controller builds either from the same config.
std::vector<Implementation> kl_controller_case(CaseReader& r) {
  const std::string type = r.text("type");
  rl::KlControlConfig config;
  config.kl_coef = r.number("kl_coef");
  if (auto target_kl = r.optional_number("target_kl")) config.target_kl = *target_kl;
  if (auto horizon = r.optional_number("horizon")) config.horizon = int64_t(*horizon);
  std::vector<std::pair<double, int64_t>> updates;
  for (const json& update : r.input("updates"))
    updates.emplace_back(update.at(0).get<double>(), update.at(1).get<int64_t>());
  return {{"kl_controller", [=] {
             rl::KlControlConfig typed = config;
             typed.type = rl::parse_kl_control_type(type);
             rl::KlController controller(typed);
             std::vector<double> values;
             for (const auto& [current_kl, n_steps] : updates) {
               controller.update(current_kl, n_steps);
               values.push_back(controller.value());
             }
             return Outputs{{"value_after_each_update", result_of(values)}};
           }}};
}

// verl's global_batch_info: {} means the micro-batch's own counts.
rl::VerlBatchInfo batch_info(CaseReader& r) {
  rl::VerlBatchInfo info;
  if (!r.has_config("global_batch_info")) return info;
  for (const auto& [key, value] : r.config("global_batch_info").items()) {
    const std::optional<double> number = value.is_null() ? std::nullopt : std::optional<double>(value.get<double>());
    if (key == "dp_size")
      info.dp_size = int64_t(number.value_or(1));
    else if (key == "batch_num_tokens")
      info.batch_num_tokens = number;
    else if (key == "global_batch_size")
      info.global_batch_size = number;
    else if (key == "loss_scale_factor")
      info.loss_scale_factor = number;
    else
      ADD_FAILURE() << "global_batch_info: key '" << key << "' is not understood by the harness";
  }
  return info;
}

std::vector<Implementation> agg_loss_case(CaseReader& r) {
  auto loss = std::make_shared<Tensor>(r.floats("loss_mat"));
  auto mask = std::make_shared<Tensor>(r.mask("loss_mask"));
  const std::string mode = r.text("loss_agg_mode");
  const rl::VerlBatchInfo info = batch_info(r);
  return {{"agg_loss",
           [=] {
             return Outputs{{"loss", scalar(rl::agg_loss(*loss, *mask, rl::parse_agg_mode(mode), info))}};
           }},
          {"agg_loss_loop", [=] {
             return Outputs{{"loss", scalar(rl::agg_loss_loop(*loss, *mask, rl::parse_agg_mode(mode), info))}};
           }}};
}

std::vector<Implementation> entropy_loss_case(CaseReader& r) {
  auto logits = std::make_shared<Tensor>(r.floats("logits"));
  auto mask = std::make_shared<Tensor>(r.mask("response_mask"));
  const std::string mode = r.text("loss_agg_mode");
  return {{"compute_entropy_loss", [=] {
             const auto aggregation = rl::LossAggregation::verl(rl::parse_agg_mode(mode));
             return Outputs{{"entropy_loss", scalar(rl::compute_entropy_loss(*logits, *mask, aggregation))}};
           }}};
}

std::vector<Implementation> value_loss_case(CaseReader& r) {
  auto vpreds = std::make_shared<Tensor>(r.floats("vpreds"));
  auto returns = std::make_shared<Tensor>(r.floats("returns"));
  auto values = std::make_shared<Tensor>(r.floats("values"));
  auto mask = std::make_shared<Tensor>(r.mask("response_mask"));
  const double cliprange_value = r.number("cliprange_value");
  const std::string mode = r.text("loss_agg_mode");
  return {{"compute_value_loss", [=] {
             const rl::ValueLossResult result =
                 rl::compute_value_loss(*vpreds, *returns, *values, *mask, cliprange_value,
                                        rl::LossAggregation::verl(rl::parse_agg_mode(mode)));
             return Outputs{{"vf_loss", scalar(result.vf_loss)}, {"vf_clipfrac", scalar(result.vf_clipfrac)}};
           }}};
}

std::vector<Implementation> entropy_from_logits_case(CaseReader& r) {
  auto logits = std::make_shared<Tensor>(r.floats("logits"));
  auto entropy = std::make_shared<Tensor>(r.output({logits->size(0), logits->size(1)}));
  return {{"entropy_from_logits", [=] {
             rl::entropy_from_logits(*logits, *entropy);
             return Outputs{{"entropy", result_of(*entropy)}};
           }}};
}

std::vector<Implementation> logprobs_from_logits_case(CaseReader& r) {
  auto logits = std::make_shared<Tensor>(r.floats("logits"));
  auto labels = std::make_shared<Tensor>(r.labels("labels"));
  auto logprobs = std::make_shared<Tensor>(r.output({logits->size(0), logits->size(1)}));
  // verl's implementations (v2, naive, flash-attn) compute the same log-softmax gather.
  if (r.has_config("impl")) r.text("impl");
  return {{"logprobs_from_logits", [=] {
             rl::logprobs_from_logits(*logits, *labels, *logprobs);
             return Outputs{{"logprobs", result_of(*logprobs)}};
           }}};
}

std::vector<Implementation> advantage_case(CaseReader& r, const rl::AdvantageEstimator& estimator) {
  auto rewards = std::make_shared<Tensor>(r.floats("token_level_rewards"));
  auto mask = std::make_shared<Tensor>(r.mask("response_mask"));
  auto values = std::make_shared<Tensor>(r.has_input("values") ? r.floats("values") : Tensor());
  auto baselines = std::make_shared<Tensor>(r.has_input("reward_baselines") ? r.floats("reward_baselines") : Tensor());
  std::shared_ptr<rl::GroupIndex> index;
  // verl was given the uid strings when a case has them, the integers otherwise.
  if (r.has_input("index")) {
    const auto labels = r.input("index").get<std::vector<int64_t>>();
    index = std::make_shared<rl::GroupIndex>(labels);
  }
  if (r.has_input("index_uid")) {
    const auto labels = r.input("index_uid").get<std::vector<std::string>>();
    index = std::make_shared<rl::GroupIndex>(labels);
  }
  rl::AdvantageConfig config;
  if (auto gamma = r.optional_number("gamma")) config.gamma = *gamma;
  if (auto lam = r.optional_number("lam")) config.lam = *lam;
  if (auto epsilon = r.optional_number("epsilon")) config.epsilon = *epsilon;
  if (r.has_config("norm_adv_by_std_in_grpo")) config.norm_adv_by_std_in_grpo = r.flag("norm_adv_by_std_in_grpo");
  r.optional_number("alpha");  // gpg's alpha: verl overwrites it
  if (auto f_norm = r.optional_number("f_norm")) {
    EXPECT_EQ(*f_norm, 1.0) << "f_norm: verl's trainer never passes it, and the estimators assume 1";
  }
  auto advantages = std::make_shared<Tensor>(r.output_like(*rewards));
  auto returns = std::make_shared<Tensor>(r.output_like(*rewards));
  auto run = [=](rl::AdvantageFn fn) {
    return [=] {
      fn({*rewards, *mask, *values, *baselines, index.get()}, config, {*advantages, *returns});
      return Outputs{{"advantages", result_of(*advantages)}, {"returns", result_of(*returns)}};
    };
  };
  return {{"vectorised", run(estimator.compute)}, {"loop", run(estimator.compute_loop)}};
}

std::vector<Implementation> policy_loss_case(CaseReader& r, const rl::PolicyLoss& loss) {
  auto old_log_prob = std::make_shared<Tensor>(r.floats("old_log_prob"));
  auto log_prob = std::make_shared<Tensor>(r.floats("log_prob"));
  auto advantages = std::make_shared<Tensor>(r.floats("advantages"));
  auto mask = std::make_shared<Tensor>(r.mask("response_mask"));
  auto weights =
      std::make_shared<Tensor>(r.has_input("rollout_is_weights") ? r.floats("rollout_is_weights") : Tensor());
  EXPECT_EQ(r.text("loss_mode"), loss.name) << "config loss_mode names another policy loss than the function";
  rl::PolicyLossConfig config;
  if (auto clip_ratio = r.optional_number("clip_ratio")) config.clip_ratio = *clip_ratio;
  // A null bound falls back to clip_ratio, as in verl; an absent one keeps ActorConfig's default.
  if (r.config_contains("clip_ratio_low")) config.clip_ratio_low = r.optional_number("clip_ratio_low");
  if (r.config_contains("clip_ratio_high")) config.clip_ratio_high = r.optional_number("clip_ratio_high");
  if (auto c = r.optional_number("clip_ratio_c")) config.clip_ratio_c = *c;
  if (auto tau_pos = r.optional_number("tau_pos")) config.tau_pos = *tau_pos;
  if (auto tau_neg = r.optional_number("tau_neg")) config.tau_neg = *tau_neg;
  if (auto ratio = r.optional_number("kl_cov_ratio")) config.kl_cov_ratio = *ratio;
  if (auto coef = r.optional_number("ppo_kl_coef")) config.ppo_kl_coef = *coef;
  const std::string mode = r.text("loss_agg_mode");
  const rl::VerlBatchInfo info = batch_info(r);
  const std::string_view name = loss.name;
  return {{std::string(name), [=] {
             const rl::PolicyLoss& registered = rl::find_policy_loss(name);
             const rl::PolicyLossResult result =
                 registered.compute({*old_log_prob, *log_prob, *advantages, *mask, *weights}, config,
                                    rl::LossAggregation::verl(rl::parse_agg_mode(mode), info));
             Outputs outputs{{"pg_loss", scalar(result.pg_loss)}};
             for (const auto& [metric, value] : result.metrics) outputs[metric] = scalar(value);
             return outputs;
           }}};
}

using CaseHandler = std::vector<Implementation> (*)(CaseReader&);

const std::map<std::string, CaseHandler>& function_handlers() {
  static const std::map<std::string, CaseHandler> handlers{
      {"verl.utils.torch_functional.masked_sum", masked_sum_case},
      {"verl.utils.torch_functional.masked_mean", masked_mean_case},
      {"verl.utils.torch_functional.masked_var", masked_var_case},
      {"verl.utils.torch_functional.masked_whiten", masked_whiten_case},
      {"verl.utils.torch_functional.entropy_from_logits", entropy_from_logits_case},
      {"verl.utils.torch_functional.logprobs_from_logits", logprobs_from_logits_case},
      {"verl.trainer.ppo.core_algos.kl_penalty", kl_penalty_case},
      {"verl.trainer.ppo.core_algos.compute_rewards", compute_rewards_case},
      {"verl.trainer.ppo.core_algos.AdaptiveKLController", kl_controller_case},
      {"verl.trainer.ppo.core_algos.FixedKLController", kl_controller_case},
      {"verl.trainer.ppo.core_algos.agg_loss", agg_loss_case},
      {"verl.trainer.ppo.core_algos.compute_entropy_loss", entropy_loss_case},
      {"verl.trainer.ppo.core_algos.compute_value_loss", value_loss_case},
  };
  return handlers;
}

}  // namespace

std::optional<std::vector<Implementation>> implementations_of(const std::string& function, CaseReader& r,
                                                              const std::string& registry_name) {
  if (auto it = function_handlers().find(function); it != function_handlers().end()) return it->second(r);
  for (const rl::AdvantageEstimator& estimator : rl::advantage_estimators()) {
    if (estimator.verl_function != function) continue;
    EXPECT_EQ(registry_name, estimator.name) << "the case's registry_name names another estimator";
    return advantage_case(r, estimator);
  }
  for (const rl::PolicyLoss& loss : rl::policy_losses()) {
    if (loss.verl_function != function) continue;
    EXPECT_EQ(registry_name, loss.name) << "the case's registry_name names another policy loss";
    return policy_loss_case(r, loss);
  }
  return std::nullopt;
}

}  // namespace rf::testing

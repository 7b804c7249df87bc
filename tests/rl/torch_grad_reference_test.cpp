// The gradients against torch autograd: tests/rl/torch_grad_reference.json holds losses and gradients
// that torch 1.13 computed (float64) for verl's formulas written in torch ops (torch_grad_reference.py,
// which documents the cases); here the rl layer recomputes each and must agree to rounding.
//
// Dimension legend: B batch (responses), T response tokens, N packed tokens.
#include <gtest/gtest.h>

#include "actor_loss_test_data.h"
#include "rl/actor_loss.h"
#include "rl/kl_penalty.h"
#include "support/test_support.h"

namespace rf::testing {
namespace {

constexpr double kRtol = 1e-10, kAtol = 1e-14;

rl::PolicyLossConfig policy_config(const nlohmann::json& c) {
  rl::PolicyLossConfig config;
  config.clip_ratio = c.at("clip_ratio").get<double>();
  config.clip_ratio_low = c.at("clip_ratio_low").get<double>();
  config.clip_ratio_high = c.at("clip_ratio_high").get<double>();
  config.clip_ratio_c = c.at("clip_ratio_c").get<double>();
  config.tau_pos = c.at("tau_pos").get<double>();
  config.tau_neg = c.at("tau_neg").get<double>();
  config.kl_cov_ratio = c.at("kl_cov_ratio").get<double>();
  config.ppo_kl_coef = c.at("ppo_kl_coef").get<double>();
  return config;
}

engine::LossContext context_of(const nlohmann::json& counts) {
  engine::LossContext context;
  context.global_num_tokens = int64_t(counts.at("num_tokens").get<double>());
  context.global_num_seqs = int64_t(counts.at("num_seqs").get<double>());
  return context;
}

// The case's (B, T) inputs as ResponseRows (entropy and ref_log_prob when the case has them).
ResponseRows rows_of(const nlohmann::json& test_case) {
  const nlohmann::json& in = test_case.at("inputs");
  auto optional = [&](const nlohmann::json& value) { return value.is_null() ? Tensor() : json_tensor(value); };
  return {json_tensor(in.at("old_log_prob")),
          json_tensor(in.at("log_prob")),
          json_tensor(in.at("advantages")),
          clone(json_tensor(in.at("response_mask")), DType::f32),
          test_case.contains("ref_log_prob") ? json_tensor(test_case.at("ref_log_prob")) : Tensor(),
          test_case.contains("entropy") ? json_tensor(test_case.at("entropy")) : Tensor(),
          optional(in.at("rollout_is_weights"))};
}

void expect_near_rel(double actual, double expected, const std::string& what) {
  EXPECT_NEAR(actual, expected, kAtol + kRtol * std::abs(expected)) << what;
}

TEST(TorchGradReference, FileIsTheOneTheScriptWrites) {
  const nlohmann::json& reference = torch_grad_reference();
  EXPECT_EQ(reference.at("format"), "rlforge-torch-grad-reference");
  EXPECT_EQ(reference.at("produced_with").at("dtype"), "float64");
  EXPECT_EQ(reference.at("policy_loss").size(), 35u);  // 7 modes x (4 agg modes + a boundary case)
  EXPECT_EQ(reference.at("kl_penalty").size(), 4u);
  EXPECT_EQ(reference.at("actor_loss").size(), 6u);
}

TEST(TorchGradReference, PolicyLossGradients) {
  for (const nlohmann::json& test_case : torch_grad_reference().at("policy_loss")) {
    const std::string id = test_case.at("id");
    const ResponseRows rows = rows_of(test_case);
    const nlohmann::json& counts = test_case.at("counts");
    const Tensor grad(rows.log_prob.shape(), DType::f64);
    const rl::PolicyLossResult result =
        rl::find_policy_loss(test_case.at("loss_mode").get<std::string>())
            .compute({rows.old_log_prob, rows.log_prob, rows.advantages, rows.mask, rows.rollout_is_weights},
                     policy_config(test_case.at("config")),
                     rl::LossAggregation::global(rl::parse_agg_mode(test_case.at("loss_agg_mode").get<std::string>()),
                                                 context_of(counts), counts.at("norm_length").get<double>()),
                     grad);
    expect_near_rel(result.pg_loss, test_case.at("pg_loss").get<double>(), id + " pg_loss");
    expect_close(grad, json_tensor(test_case.at("dlog_prob")), kRtol, kAtol, id + " dlog_prob");
  }
}

TEST(TorchGradReference, KlPenaltyGradients) {
  for (const nlohmann::json& test_case : torch_grad_reference().at("kl_penalty")) {
    const std::string id = test_case.at("id");
    const Tensor log_prob = json_tensor(test_case.at("logprob")), ref = json_tensor(test_case.at("ref_logprob"));
    const int64_t K = log_prob.numel();
    const Tensor kl({1, K}, DType::f64), dkl({1, K}, DType::f64);
    rl::kl_penalty(log_prob.view().reshape({1, K}), ref.view().reshape({1, K}),
                   rl::parse_kl_penalty(test_case.at("kl_loss_type").get<std::string>()), kl, dkl);
    expect_close(kl.view().reshape({K}), json_tensor(test_case.at("kl")), kRtol, kAtol, id + " kl");
    expect_close(dkl.view().reshape({K}), json_tensor(test_case.at("dkl")), kRtol, kAtol, id + " dkl");
  }
}

// The composed loss through ActorLoss, the case's rows packed into a micro-batch with prompts.
TEST(TorchGradReference, ActorLossGradients) {
  for (const nlohmann::json& test_case : torch_grad_reference().at("actor_loss")) {
    const std::string id = test_case.at("id");
    const nlohmann::json& c = test_case.at("config");
    rl::ActorLossConfig config;
    config.policy_loss = policy_config(c);
    config.policy_loss.loss_mode = test_case.at("loss_mode").get<std::string>();
    config.loss_agg_mode = rl::parse_agg_mode(test_case.at("loss_agg_mode").get<std::string>());
    config.entropy_coeff = c.at("entropy_coeff").get<double>();
    config.use_kl_loss = true;
    config.kl_loss_coef = c.at("kl_loss_coef").get<double>();
    config.kl_loss_type = rl::parse_kl_penalty(test_case.at("kl_loss_type").get<std::string>());
    config.loss_scale_factor = test_case.at("counts").at("norm_length").get<double>();

    const ResponseRows rows = rows_of(test_case);
    const int64_t B = rows.log_prob.size(0), T = rows.log_prob.size(1);
    const PackedRows packed = pack_response_rows(rows, 0, B);
    const int64_t N = packed.log_prob_N.numel();
    Tensor dlogp({N}, DType::f64), dentropy({N}, DType::f64);
    const rl::ActorLoss loss(config);
    const engine::LossOutput out =
        loss(packed.micro_batch, packed.outputs(), context_of(test_case.at("counts")), {dlogp, dentropy});
    expect_near_rel(out.loss, test_case.at("loss").get<double>(), id + " loss");
    for (const char* term : {"pg_loss", "entropy_loss", "kl_loss"})
      expect_near_rel(out.metrics.at(std::string("actor/") + term), test_case.at(term).get<double>(), id + " " + term);
    // The packed gradients: torch's at the response tokens, 0 elsewhere.
    Tensor expected_dlogp({N}, DType::f64), expected_dentropy({N}, DType::f64);
    const Tensor torch_dlogp = json_tensor(test_case.at("dlog_prob")),
                 torch_dentropy = json_tensor(test_case.at("dentropy"));
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t) {
        const int64_t n = packed.response_start[size_t(b)] + t;
        expected_dlogp.data<double>()[n] = torch_dlogp.data<double>()[b * T + t];
        expected_dentropy.data<double>()[n] = torch_dentropy.data<double>()[b * T + t];
      }
    expect_close(dlogp, expected_dlogp, kRtol, kAtol, id + " dlogp_N");
    expect_close(dentropy, expected_dentropy, kRtol, kAtol, id + " dentropy_N");
  }
}

}  // namespace
}  // namespace rf::testing

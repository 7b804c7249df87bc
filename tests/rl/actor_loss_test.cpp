// ActorLoss on packed micro-batches: its gradients against finite differences (every mode x every
// aggregation, with the entropy term and each KL estimator), its policy term against the policy loss on
// the same (B, T) rows, invariance of the step's loss, gradients and metrics to how the step is cut into
// micro-batches, its config and input errors, and its use as an engine::LossFn with f32 buffers.
//
// Dimension legend: B batch (responses), T response tokens, N packed tokens.
#include "rl/actor_loss.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "actor_loss_test_data.h"
#include "support/test_support.h"

namespace rf::testing {
namespace {

constexpr rl::AggMode kAggModes[] = {rl::AggMode::token_mean, rl::AggMode::seq_mean_token_sum,
                                     rl::AggMode::seq_mean_token_mean, rl::AggMode::seq_mean_token_sum_norm};
constexpr rl::KlPenalty kKlPenalties[] = {rl::KlPenalty::k1, rl::KlPenalty::abs, rl::KlPenalty::k2, rl::KlPenalty::k3};

rl::ActorLossConfig full_config(std::string_view loss_mode, rl::AggMode agg_mode, rl::KlPenalty kl_type) {
  rl::ActorLossConfig config;
  config.policy_loss = fd_policy_config();
  config.policy_loss.loss_mode = loss_mode;
  config.loss_agg_mode = agg_mode;
  config.entropy_coeff = 0.03;
  config.use_kl_loss = true;
  config.kl_loss_coef = 0.2;
  config.kl_loss_type = kl_type;
  config.max_response_length = 6;
  return config;
}

// One run of the loss on a micro-batch, with its gradients in f64 buffers.
struct LossRun {
  engine::LossOutput output;
  Tensor dlogp_N, dentropy_N;
};
LossRun run(const rl::ActorLoss& loss, const PackedRows& packed, const engine::LossContext& context) {
  const int64_t N = packed.log_prob_N.numel();
  LossRun r{{}, Tensor({N}, DType::f64), Tensor({N}, DType::f64)};
  r.output = loss(packed.micro_batch, packed.outputs(), context, {r.dlogp_N, r.dentropy_N});
  return r;
}

TEST(ActorLoss, GradientsMatchFiniteDifferences) {
  uint64_t seed = 900;
  size_t kl_index = 0;
  for (const rl::PolicyLoss& policy_loss : rl::policy_losses()) {
    for (rl::AggMode agg_mode : kAggModes) {
      rl::ActorLossConfig config = full_config(policy_loss.name, agg_mode, kKlPenalties[kl_index++ % 4]);
      const FdMode fd = fd_mode(policy_loss.name, config.policy_loss);
      const ResponseRows rows = random_response_rows({4, 6, ++seed, fd.kinks, fd.row_kinks, seed % 2 == 0});
      if (policy_loss.name == "kl_cov") config.policy_loss.kl_cov_ratio = stable_kl_cov_ratio(rows);
      const rl::ActorLoss loss(config);
      const PackedRows packed = pack_response_rows(rows, 0, 4);
      engine::LossContext context = step_context({&packed, 1});
      context.global_num_tokens += 3;  // as if other micro-batches shared the step
      context.global_num_seqs += 2;
      const LossRun analytic = run(loss, packed, context);
      const TensorView old_log_probs = packed.micro_batch.get("old_log_probs");
      const Tensor old_at = clone(old_log_probs, DType::f64), log_prob_at = clone(packed.log_prob_N, DType::f64);
      auto total_loss = [&] {
        if (fd.direction == FdDirection::log_prob_and_old)
          for (int64_t n = 0; n < old_log_probs.numel(); ++n)
            old_log_probs.data<double>()[n] =
                old_at.data<double>()[n] + (packed.log_prob_N.data<double>()[n] - log_prob_at.data<double>()[n]);
        return run(loss, packed, context).output.loss;
      };
      const std::string what = fmt::format("{} {} {}", policy_loss.name, rl::agg_mode_name(agg_mode),
                                           rl::kl_penalty_name(config.kl_loss_type));
      expect_gradient_matches_fd(total_loss, packed.log_prob_N, analytic.dlogp_N, what + " dlogp");
      expect_gradient_matches_fd(total_loss, packed.entropy_N, analytic.dentropy_N, what + " dentropy");
    }
  }
}

TEST(ActorLoss, PolicyTermIsThePolicyLossOnTheResponseRows) {
  for (const rl::PolicyLoss& policy_loss : rl::policy_losses()) {
    rl::ActorLossConfig config;
    config.policy_loss.loss_mode = policy_loss.name;
    config.loss_agg_mode = rl::AggMode::seq_mean_token_mean;
    const ResponseRows rows = random_response_rows({5, 6, 41, {}, {}, true});
    const PackedRows packed = pack_response_rows(rows, 0, 5);
    const engine::LossContext context = step_context({&packed, 1});
    const LossRun r = run(rl::ActorLoss(config), packed, context);

    const Tensor grad_BT({5, 6}, DType::f64);
    const rl::PolicyLossResult expected =
        policy_loss.compute({rows.old_log_prob, rows.log_prob, rows.advantages, rows.mask, rows.rollout_is_weights},
                            config.policy_loss, rl::LossAggregation::global(config.loss_agg_mode, context), grad_BT);
    const std::string what(policy_loss.name);
    EXPECT_NEAR(r.output.loss, expected.pg_loss, 1e-14) << what;
    EXPECT_EQ(r.output.metrics.at("actor/pg_loss"), r.output.loss) << what;
    // One micro-batch holds all of the step's loss tokens, so each metric is the policy loss's masked
    // mean, but exact: verl's divides by Σm + 1e-8 (which vanishes in f32, not in these f64 rows).
    for (const auto& [name, value] : expected.metrics)
      EXPECT_NEAR(r.output.metrics.at("actor/" + name), value, 1e-9 * std::abs(value) + 1e-15) << what << " " << name;
    std::vector<double> dlogp(size_t(packed.log_prob_N.numel()), 0.0);  // zero off the responses
    for (int64_t b = 0; b < 5; ++b)
      for (int64_t t = 0; t < 6; ++t)
        dlogp[size_t(packed.response_start[size_t(b)] + t)] = grad_BT.data<double>()[b * 6 + t];
    for (size_t n = 0; n < dlogp.size(); ++n) {
      EXPECT_NEAR(r.dlogp_N.data<double>()[n], dlogp[n], 1e-15) << what << " token " << n;
      EXPECT_EQ(r.dentropy_N.data<double>()[n], 0.0) << what << ": no entropy term without entropy_coeff";
    }
  }
}

// The step's rows cut into micro-batches of these row counts.
struct Step {
  double loss = 0;
  std::map<std::string, double> metrics;
  std::vector<double> dlogp_BT, dentropy_BT;
};
Step run_step(const rl::ActorLoss& loss, const ResponseRows& rows, const std::vector<int64_t>& cut) {
  const int64_t T = rows.log_prob.size(1);
  std::vector<PackedRows> micro_batches;
  int64_t first = 0;
  for (int64_t count : cut) {
    micro_batches.push_back(pack_response_rows(rows, first, count));
    first += count;
  }
  const engine::LossContext context = step_context(micro_batches);
  Step step;
  first = 0;
  for (size_t m = 0; m < cut.size(); ++m) {
    const LossRun r = run(loss, micro_batches[m], context);
    step.loss += r.output.loss;
    for (const auto& [name, value] : r.output.metrics) step.metrics[name] += value;
    for (int64_t b = 0; b < cut[m]; ++b)
      for (int64_t t = 0; t < T; ++t) {
        const int64_t n = micro_batches[m].response_start[size_t(b)] + t;
        step.dlogp_BT.push_back(r.dlogp_N.data<double>()[n]);
        step.dentropy_BT.push_back(r.dentropy_N.data<double>()[n]);
      }
    first += cut[m];
  }
  return step;
}

TEST(ActorLoss, StepIsInvariantToMicroBatching) {
  const ResponseRows rows = random_response_rows({8, 6, 77, {}, {}, true});
  for (const rl::PolicyLoss& policy_loss : rl::policy_losses()) {
    if (policy_loss.name == "kl_cov") continue;  // picks its tokens per micro-batch, as verl does
    for (rl::AggMode agg_mode : kAggModes) {
      const rl::ActorLoss loss(full_config(policy_loss.name, agg_mode, rl::KlPenalty::k3));
      const Step whole = run_step(loss, rows, {8});
      EXPECT_NEAR(whole.metrics.at("actor/kl_coef"), 0.2, 1e-15);
      for (const std::vector<int64_t>& cut : {std::vector<int64_t>{3, 5}, std::vector<int64_t>{2, 1, 4, 1}}) {
        const std::string what =
            fmt::format("{} {} in {} micro-batches", policy_loss.name, rl::agg_mode_name(agg_mode), cut.size());
        const Step split = run_step(loss, rows, cut);
        EXPECT_NEAR(split.loss, whole.loss, 1e-13) << what;
        ASSERT_EQ(split.metrics.size(), whole.metrics.size()) << what;
        for (const auto& [name, value] : whole.metrics)
          EXPECT_NEAR(split.metrics.at(name), value, 1e-13) << what << " " << name;
        for (size_t i = 0; i < whole.dlogp_BT.size(); ++i) {
          EXPECT_NEAR(split.dlogp_BT[i], whole.dlogp_BT[i], 1e-15) << what << " dlogp " << i;
          EXPECT_NEAR(split.dentropy_BT[i], whole.dentropy_BT[i], 1e-15) << what << " dentropy " << i;
        }
      }
    }
  }
}

TEST(ActorLoss, RejectsBadConfigsAndMicroBatches) {
  rl::ActorLossConfig config;
  config.policy_loss.loss_mode = "clip_cov";
  EXPECT_THROW(rl::ActorLoss{config}, ConfigError);
  config.policy_loss.loss_mode = "vanilla";
  config.loss_agg_mode = rl::AggMode::seq_mean_token_sum_norm;
  try {
    rl::ActorLoss{config};
    ADD_FAILURE() << "seq-mean-token-sum-norm without F";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key_path(), "actor_rollout_ref.actor.loss_scale_factor");
  }
  config.loss_scale_factor = 512.0;
  EXPECT_NO_THROW(rl::ActorLoss{config});

  const ResponseRows rows = random_response_rows({3, 5, 5, {}, {}, false});
  const PackedRows packed = pack_response_rows(rows, 0, 3);
  const engine::LossContext context = step_context({&packed, 1});
  const int64_t N = packed.log_prob_N.numel();
  Tensor dlogp({N}, DType::f64);
  config = {};
  config.entropy_coeff = 0.01;
  model::ModelOutputs no_entropy = packed.outputs();
  no_entropy.entropy_N = TensorView();
  const rl::ActorLoss with_entropy_term(config);
  expect_error_containing([&] { with_entropy_term(packed.micro_batch, no_entropy, context, {dlogp}); },
                          "EntropyOutput::compute");
  config = {};
  config.use_kl_loss = true;
  engine::TensorMap without_ref;
  for (const std::string& name : packed.micro_batch.names())
    if (name != "ref_log_prob")
      without_ref.set(name, clone(packed.micro_batch.get(name), packed.micro_batch.get(name).dtype()));
  const rl::ActorLoss with_kl_term(config);
  expect_error_containing([&] { with_kl_term(without_ref, packed.outputs(), context, {dlogp}); }, "ref_log_prob");
  model::ModelOutputs short_outputs = packed.outputs();
  short_outputs.logp_N = short_outputs.logp_N.slice(0, 0, N - 1);
  const rl::ActorLoss plain_loss({});
  expect_error_containing([&] { plain_loss(packed.micro_batch, short_outputs, context, {dlogp}); }, "log_probs");
}

TEST(ActorLoss, IsAnEngineLossFnOverF32Buffers) {
  const ResponseRows rows = random_response_rows({4, 6, 12, {}, {}, false});
  const PackedRows packed = pack_response_rows(rows, 0, 4);
  const engine::LossContext context = step_context({&packed, 1});
  const engine::LossFn loss_fn = rl::ActorLoss(full_config("vanilla", rl::AggMode::token_mean, rl::KlPenalty::k3));
  const LossRun reference =
      run(rl::ActorLoss(full_config("vanilla", rl::AggMode::token_mean, rl::KlPenalty::k3)), packed, context);
  const int64_t N = packed.log_prob_N.numel();
  const Tensor log_prob = clone(packed.log_prob_N, DType::f32), entropy = clone(packed.entropy_N, DType::f32);
  Tensor dlogp({N}, DType::f32), dentropy({N}, DType::f32);
  const engine::LossOutput out =
      loss_fn(packed.micro_batch, {log_prob, entropy, TensorView(), 0}, context, {dlogp, dentropy});
  EXPECT_NEAR(out.loss, reference.output.loss, 1e-5);
  expect_close(dlogp, reference.dlogp_N, 1e-4, 1e-7, "dlogp_N f32");
  expect_close(dentropy, reference.dentropy_N, 1e-6, 1e-9, "dentropy_N f32");
}

}  // namespace
}  // namespace rf::testing

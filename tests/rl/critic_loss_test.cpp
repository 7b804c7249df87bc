// CriticLoss on packed micro-batches: its gradient against finite differences for every aggregation, its
// loss and clip fraction against compute_value_loss on the same (B, T) rows, invariance of the step's
// loss, gradients and metrics to how the step is cut into micro-batches, torch's subgradients at ties
// and at the clip edges (derived by hand below), its config and input errors, and a TrainEngine critic
// whose value loss falls on fixed returns.
//
// Dimension legend: B batch (responses), T response tokens, N packed tokens.
#include "rl/critic_loss.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>

#include "core/element_access.h"
#include "rl/masked_stats.h"
#include "rl/value_loss.h"
#include "rl_test_data.h"
#include "support/test_support.h"

namespace rf::testing {
namespace {

constexpr rl::AggMode kAggModes[] = {rl::AggMode::token_mean, rl::AggMode::seq_mean_token_sum,
                                     rl::AggMode::seq_mean_token_mean, rl::AggMode::seq_mean_token_sum_norm};
constexpr double kClip = 0.3;

rl::CriticLossConfig config_of(rl::AggMode mode) {
  return {.cliprange_value = kClip, .loss_agg_mode = mode, .max_response_length = 6};
}

// What verl's value loss reads per response token, (B, T): f64 except the f32 0/1 mask.
struct ValueRows {
  Tensor vpreds, values, returns, mask;
};

// vpreds at least 0.02 from the clip edges V ± c, and the returns 0.02 from where the clipped and the
// unclipped losses cross (v̂ + v̂c = 2G), so that finite differences see one smooth piece.
ValueRows random_value_rows(int64_t B, int64_t T, uint64_t seed) {
  Draws draws(seed);
  ValueRows rows{Tensor({B, T}, DType::f64), Tensor({B, T}, DType::f64), Tensor({B, T}, DType::f64),
                 random_response_mask(B, T, seed + 1)};
  rows.mask.at<float>({0, 0}) = 1.0f;
  for (int64_t i = 0; i < B * T; ++i) {
    const double value = draws.uniform(-1.0, 1.0);
    double delta = draws.uniform(-0.8, 0.8);
    while (std::abs(std::abs(delta) - kClip) < 0.02) delta = draws.uniform(-0.8, 0.8);
    const double vpred = value + delta, clipped = std::clamp(vpred, value - kClip, value + kClip);
    double ret = draws.uniform(-1.5, 1.5);
    while (std::abs(vpred + clipped - 2 * ret) < 0.02) ret = draws.uniform(-1.5, 1.5);
    rows.values.data<double>()[i] = value;
    rows.vpreds.data<double>()[i] = vpred;
    rows.returns.data<double>()[i] = ret;
  }
  return rows;
}

// Rows [first, first + count) as CriticLoss reads them: document b is `prompt_length(b)` prompt tokens then
// row b's T response tokens, the value of response token t at packed position start_b + prompt_length - 1
// + t. The RL columns hold NaN where the rows put nothing (the loss must not read them), the model's
// values random numbers.
struct PackedValues {
  engine::TensorMap micro_batch;
  Tensor values_N;  // the model's, f64
  std::vector<int64_t> response_start;
  model::ModelOutputs outputs() const {
    model::ModelOutputs out;
    out.values_N = values_N;
    return out;
  }
};

PackedValues pack_value_rows(const ValueRows& rows, int64_t first, int64_t count) {
  const int64_t T = rows.vpreds.size(1);
  auto prompt_length = [](int64_t b) { return 1 + (3 * b) % 4; };
  std::vector<int32_t> cu{0};
  PackedValues packed;
  for (int64_t b = first; b < first + count; ++b) {
    packed.response_start.push_back(cu.back() + prompt_length(b) - 1);
    cu.push_back(int32_t(cu.back() + prompt_length(b) + T));
  }
  const int64_t N = cu.back();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Draws draws(uint64_t(500 + first));
  Tensor input_ids({N}, DType::i64), loss_mask({N}, DType::f32), cu_seqlens({int64_t(cu.size())}, DType::i32);
  Tensor values({N}, DType::f64), returns({N}, DType::f64);
  packed.values_N = Tensor({N}, DType::f64);
  for (int64_t n = 0; n < N; ++n) {
    values.data<double>()[n] = returns.data<double>()[n] = nan;
    packed.values_N.data<double>()[n] = draws.uniform(-2.0, 2.0);
  }
  for (int64_t b = 0; b < count; ++b)
    for (int64_t t = 0; t < T; ++t) {
      const int64_t n = packed.response_start[size_t(b)] + t, i = (first + b) * T + t;
      loss_mask.data<float>()[n] = rows.mask.data<float>()[i];
      values.data<double>()[n] = rows.values.data<double>()[i];
      returns.data<double>()[n] = rows.returns.data<double>()[i];
      packed.values_N.data<double>()[n] = rows.vpreds.data<double>()[i];
    }
  std::copy(cu.begin(), cu.end(), cu_seqlens.data<int32_t>());
  packed.micro_batch.set("input_ids", std::move(input_ids));
  packed.micro_batch.set("loss_mask", std::move(loss_mask));
  packed.micro_batch.set("values", std::move(values));
  packed.micro_batch.set("returns", std::move(returns));
  packed.micro_batch.set("cu_seqlens", std::move(cu_seqlens));
  return packed;
}

engine::LossContext step_context(const std::vector<PackedValues>& micro_batches) {
  engine::LossContext context;
  context.num_microbatches = int64_t(micro_batches.size());
  for (const PackedValues& packed : micro_batches) {
    const TensorView mask = packed.micro_batch.get("loss_mask");
    for (int64_t n = 0; n < mask.numel(); ++n) context.global_num_tokens += load_f64(mask, n) != 0.0;
    context.global_num_seqs += int64_t(packed.micro_batch.cu_seqlens().size()) - 1;
  }
  return context;
}

struct LossRun {
  engine::LossOutput output;
  Tensor dvalues_N;
};
LossRun run(const rl::CriticLoss& loss, const PackedValues& packed, const engine::LossContext& context) {
  LossRun r{{}, Tensor({packed.values_N.numel()}, DType::f64)};
  r.output = loss(packed.micro_batch, packed.outputs(), context, {.dvalues_N = r.dvalues_N});
  return r;
}

TEST(CriticLoss, GradientMatchesFiniteDifferencesForEveryAggregation) {
  uint64_t seed = 40;
  for (rl::AggMode mode : kAggModes) {
    const ValueRows rows = random_value_rows(4, 6, ++seed);
    std::vector<PackedValues> step;
    step.push_back(pack_value_rows(rows, 0, 4));
    const PackedValues& packed = step[0];
    engine::LossContext context = step_context(step);
    context.global_num_tokens += 3;  // as if other micro-batches shared the step
    context.global_num_seqs += 2;
    const rl::CriticLoss loss(config_of(mode));
    const LossRun analytic = run(loss, packed, context);
    // Some tokens of every kind: clipped and not.
    EXPECT_GT(analytic.output.metrics.at("critic/vf_clipfrac"), 0.0);
    expect_gradient_matches_fd([&] { return run(loss, packed, context).output.loss; }, packed.values_N,
                               analytic.dvalues_N, std::string(rl::agg_mode_name(mode)));
  }
}

TEST(CriticLoss, IsTheValueLossOnTheResponseRows) {
  const ValueRows rows = random_value_rows(5, 6, 3);
  std::vector<PackedValues> step;
  step.push_back(pack_value_rows(rows, 0, 5));
  const engine::LossContext context = step_context(step);
  for (rl::AggMode mode : kAggModes) {
    const std::string what(rl::agg_mode_name(mode));
    const LossRun r = run(rl::CriticLoss(config_of(mode)), step[0], context);
    const rl::ValueLossResult expected =
        rl::compute_value_loss(rows.vpreds, rows.returns, rows.values, rows.mask, kClip,
                               rl::LossAggregation::global(mode, context, 6.0));
    EXPECT_NEAR(r.output.loss, expected.vf_loss, 1e-14) << what;
    EXPECT_EQ(r.output.metrics.at("critic/vf_loss"), r.output.loss) << what;
    // One micro-batch holds all of the step's loss tokens: the metrics are the rows' masked means (up to
    // verl's 1e-8 in the divisor, which these f64 rows keep).
    EXPECT_NEAR(r.output.metrics.at("critic/vf_clipfrac"), expected.vf_clipfrac, 1e-9) << what;
    EXPECT_NEAR(r.output.metrics.at("critic/vpred_mean"), rl::masked_mean(rows.vpreds, rows.mask), 1e-9) << what;
    // Off the responses (prompts, each document's last token) the gradient is 0.
    for (int64_t n = 0; n < r.dvalues_N.numel(); ++n)
      if (load_f64(step[0].micro_batch.get("loss_mask"), n) == 0.0) {
        EXPECT_EQ(r.dvalues_N.data<double>()[n], 0.0) << what << " token " << n;
      }
  }
}

struct Step {
  double loss = 0;
  std::map<std::string, double> metrics;
  std::vector<double> dvalues_BT;
};
Step run_step(const rl::CriticLoss& loss, const ValueRows& rows, const std::vector<int64_t>& cut) {
  const int64_t T = rows.vpreds.size(1);
  std::vector<PackedValues> micro_batches;
  int64_t first = 0;
  for (int64_t count : cut) {
    micro_batches.push_back(pack_value_rows(rows, first, count));
    first += count;
  }
  const engine::LossContext context = step_context(micro_batches);
  Step step;
  for (size_t m = 0; m < cut.size(); ++m) {
    const LossRun r = run(loss, micro_batches[m], context);
    step.loss += r.output.loss;
    for (const auto& [name, value] : r.output.metrics) step.metrics[name] += value;
    for (int64_t b = 0; b < cut[m]; ++b)
      for (int64_t t = 0; t < T; ++t)
        step.dvalues_BT.push_back(r.dvalues_N.data<double>()[micro_batches[m].response_start[size_t(b)] + t]);
  }
  return step;
}

TEST(CriticLoss, StepIsInvariantToMicroBatching) {
  const ValueRows rows = random_value_rows(8, 6, 77);
  for (rl::AggMode mode : kAggModes) {
    const rl::CriticLoss loss(config_of(mode));
    const Step whole = run_step(loss, rows, {8});
    for (const std::vector<int64_t>& cut : {std::vector<int64_t>{3, 5}, std::vector<int64_t>{2, 1, 4, 1}}) {
      const std::string what = fmt::format("{} in {} micro-batches", rl::agg_mode_name(mode), cut.size());
      const Step split = run_step(loss, rows, cut);
      EXPECT_NEAR(split.loss, whole.loss, 1e-13) << what;
      ASSERT_EQ(split.metrics.size(), 3u) << what;
      for (const auto& [name, value] : whole.metrics)
        EXPECT_NEAR(split.metrics.at(name), value, 1e-13) << what << " " << name;
      for (size_t i = 0; i < whole.dvalues_BT.size(); ++i)
        EXPECT_NEAR(split.dvalues_BT[i], whole.dvalues_BT[i], 1e-15) << what << " dvalues " << i;
    }
  }
}

// One response token of one document, token-mean over it alone (weight 1): dL/dv̂ for
// L = ½ max((v̂ - G)², (v̂c - G)²), v̂c = max(min(v̂, V + c), V - c), by torch's rules (subgradients.h):
// a tie in torch.max / torch.min sends half the gradient each way. All inputs are exact in binary.
double single_token_grad(double vpred, double value, double ret, double clip) {
  const PackedValues packed = [&] {
    ValueRows rows{Tensor({1, 1}, DType::f64), Tensor({1, 1}, DType::f64), Tensor({1, 1}, DType::f64),
                   Tensor({1, 1}, DType::f32)};
    rows.vpreds.data<double>()[0] = vpred;
    rows.values.data<double>()[0] = value;
    rows.returns.data<double>()[0] = ret;
    rows.mask.data<float>()[0] = 1.0f;
    return pack_value_rows(rows, 0, 1);
  }();
  engine::LossContext context;
  context.global_num_tokens = context.global_num_seqs = context.num_microbatches = 1;
  const rl::CriticLoss loss({.cliprange_value = clip, .loss_agg_mode = rl::AggMode::token_mean});
  return run(loss, packed, context).dvalues_N.data<double>()[packed.response_start[0]];
}

TEST(CriticLoss, TiesAndClipEdgesTakeTorchsSubgradients) {
  // Inside the clip range the two losses tie: half through each, and v̂c passes all of it: v̂ - G.
  EXPECT_EQ(single_token_grad(0.625, 0.5, 0.25, 0.25), 0.375);
  // v̂ = V + c: min(v̂, V + c) ties (half passes), the losses tie: ½·(v̂ - G) + ½·(v̂ - G)·½ = 0.75 (v̂ - G).
  EXPECT_EQ(single_token_grad(0.75, 0.5, 0.25, 0.25), 0.75 * 0.5);
  // v̂ = V - c: the max with V - c ties instead, the same share.
  EXPECT_EQ(single_token_grad(0.25, 0.5, 1.0, 0.25), 0.75 * -0.75);
  // c = 0 and v̂ = V: both min and max tie (a quarter passes), the losses tie: ½·(1 + ¼)·(v̂ - G).
  EXPECT_EQ(single_token_grad(0.5, 0.5, 0.0, 0.0), 0.625 * 0.5);
  // Beyond V + c, G further up: the clipped loss is the larger, and v̂c does not move with v̂.
  EXPECT_EQ(single_token_grad(1.0, 0.5, 2.0, 0.25), 0.0);
  // Beyond V + c, G below: the unclipped loss wins, all of its gradient v̂ - G.
  EXPECT_EQ(single_token_grad(1.0, 0.5, 0.0, 0.25), 1.0);
}

TEST(CriticLoss, RejectsBadConfigsAndInputs) {
  try {
    rl::CriticLoss({.cliprange_value = -0.1});
    ADD_FAILURE() << "a negative clip range";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key_path(), "critic.cliprange_value");
  }
  try {
    rl::CriticLoss({.loss_agg_mode = rl::AggMode::seq_mean_token_sum_norm});
    ADD_FAILURE() << "seq-mean-token-sum-norm without F";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key_path(), "data.max_response_length");
  }
  const ValueRows rows = random_value_rows(3, 4, 5);
  std::vector<PackedValues> step;
  step.push_back(pack_value_rows(rows, 0, 3));
  const engine::LossContext context = step_context(step);
  const rl::CriticLoss loss({});
  const int64_t N = step[0].values_N.numel();
  Tensor dlogp({N}, DType::f64), dvalues({N}, DType::f64);
  model::ModelOutputs lm_outputs;
  lm_outputs.logp_N = step[0].values_N;
  expect_error_containing([&] { loss(step[0].micro_batch, lm_outputs, context, {.dlogp_N = dlogp}); },
                          "no value head");
  engine::TensorMap without_returns;
  for (const std::string& name : step[0].micro_batch.names())
    if (name != "returns")
      without_returns.set(name, clone(step[0].micro_batch.get(name), step[0].micro_batch.get(name).dtype()));
  expect_error_containing([&] { loss(without_returns, step[0].outputs(), context, {.dvalues_N = dvalues}); },
                          "returns");
}

// A TrainEngine critic (a value model) through CriticLoss as its LossFn: f32 buffers, and a value loss
// that falls within a few steps on fixed returns (a wide clip range, so the clipping does not stall it).
TEST(CriticLoss, TrainsATrainEngineCriticTowardsFixedReturns) {
  model::ModelConfig config;
  config.arch = model::Arch::qwen3;
  config.qk_norm = true;
  config.head = model::HeadKind::value;
  config.vocab_size = 24;
  config.hidden_size = 16;
  config.intermediate_size = 24;
  config.num_hidden_layers = 2;
  config.num_attention_heads = 4;
  config.num_key_value_heads = 2;
  config.head_dim = 4;
  config.initializer_range = 0.2;
  engine::EngineConfig engine_config;
  engine_config.dtype = "float32";
  optim::OptimConfig optim;
  optim.lr = 2e-2;
  optim.lr_decay_steps = 100;
  kernels::KernelRegistry kernels;
  dist::ParallelContext parallel = dist::ParallelContext::single_process();
  MemoryTracker tracker;
  engine::TrainEngine critic(engine_config, optim, config, kernels, parallel, tracker, 64);
  critic.init_random_weights(4);

  // Two documents of prompt then response; the response's returns are fixed, the rollout values 0.
  auto micro_batches = [] {
    const model::PackedSequences p = model::pack_sequences({{1, 4, 7, 9, 3, 5, 2}, {1, 6, 8, 10, 11, 2}});
    engine::TensorMap mb = engine::make_micro_batch(clone(p.tokens_N, DType::i64), clone(p.positions_N, DType::i64),
                                                    clone(p.targets_N, DType::i64), p.cu_seqlens);
    const int64_t N = p.tokens_N.numel();
    Tensor mask({N}, DType::f32), values({N}, DType::f32), returns({N}, DType::f32);
    for (int64_t n : {2, 3, 4, 5, 9, 10, 11}) {  // the responses' tokens, read at the position before each
      mask.data<float>()[n] = 1.0f;
      returns.data<float>()[n] = n % 3 == 0 ? 1.0f : -0.5f;
    }
    mb.set("loss_mask", std::move(mask));
    mb.set("values", std::move(values));
    mb.set("returns", std::move(returns));
    std::vector<engine::TensorMap> out;
    out.push_back(std::move(mb));
    return out;
  };
  const engine::LossFn loss = rl::CriticLoss({.cliprange_value = 100.0});
  double first = 0, last = 0;
  for (int i = 0; i < 12; ++i) {
    const engine::ForwardBackwardResult r = critic.forward_backward(micro_batches(), loss, engine::ForwardOnly::no);
    (i == 0 ? first : last) = r.loss;
    EXPECT_EQ(r.metrics.at("critic/vf_loss"), r.loss);
    critic.optimizer_step();
    critic.lr_step();
  }
  EXPECT_LT(last, 0.1 * first);
}

}  // namespace
}  // namespace rf::testing

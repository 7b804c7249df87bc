// The engines with a value model (model_config.h's HeadKind): a TrainEngine critic lowers a squared
// error to fixed returns and its forward-only pass returns "values"; an InferEngine reward model on the
// same weights returns the same values, and last_token_values reads each document's score at its last
// token; an LM engine refuses compute_values and a value engine compute_log_prob.
// Legend: N tokens, D documents.
#include <gtest/gtest.h>

#include "core/element_access.h"
#include "engine/infer_engine.h"
#include "engine/train_engine.h"
#include "engine_fixture.h"
#include "support/test_support.h"

namespace rf::engine {
namespace {

using engine_testing::adam;
using engine_testing::f32_engine;
using engine_testing::kDocs;
using engine_testing::step;

model::ModelConfig value_config(model::HeadKind head) { return engine_testing::tiny_config(model::Arch::qwen2, head); }

// The documents packed, with a "returns" column: 0.5 at even token ids, -0.25 at odd ones.
TensorMap micro_batch(const std::vector<std::vector<int64_t>>& docs) {
  TensorMap mb = engine_testing::micro_batch(docs);
  const TensorView tokens = mb.get("input_ids");
  Tensor returns({tokens.numel()}, DType::f32);
  for (int64_t n = 0; n < returns.numel(); ++n)
    returns.data<float>()[n] = tokens.data<int64_t>()[n] % 2 == 0 ? 0.5f : -0.25f;
  mb.set("returns", std::move(returns));
  return mb;
}

std::vector<TensorMap> one_micro_batch() { return step(micro_batch(kDocs)); }

// Mean squared error of the values against the returns over the step's loss tokens.
LossOutput squared_error(const TensorMap& mb, const model::ModelOutputs& out, const LossContext& ctx,
                         const model::OutputGrads& grads) {
  const TensorView mask = mb.get("loss_mask"), returns = mb.get("returns");
  LossOutput result;
  for (int64_t n = 0; n < mask.numel(); ++n) {
    const double m = load_f64(mask, n) / double(ctx.global_num_tokens);
    const double error = load_f64(out.values_N, n) - load_f64(returns, n);
    result.loss += m * error * error;
    grads.dvalues_N.data<float>()[n] = float(2.0 * m * error);
  }
  return result;
}

TEST(ValueEngine, ACriticLearnsFixedReturnsAndForwardOnlyReturnsValues) {
  engine_testing::EngineEnv env;
  TrainEngine critic(f32_engine(), adam(3e-2), value_config(model::HeadKind::value), env.kernels, env.parallel,
                     env.tracker, 64);
  critic.init_random_weights(1);
  double first = 0, last = 0;
  for (int i = 0; i < 15; ++i) {
    (i == 0 ? first : last) = critic.forward_backward(one_micro_batch(), squared_error, ForwardOnly::no).loss;
    critic.optimizer_step();
    critic.lr_step();
  }
  EXPECT_LT(last, 0.1 * first);

  const ForwardBackwardResult eval = critic.forward_backward(one_micro_batch(), squared_error, ForwardOnly::yes,
                                                             model::EntropyOutput::compute);
  ASSERT_EQ(eval.outputs.size(), 1u);
  EXPECT_FALSE(eval.outputs[0].contains("log_probs"));
  EXPECT_FALSE(eval.outputs[0].contains("entropy"));
  const TensorView values = eval.outputs[0].get("values");
  ASSERT_EQ(values.numel(), 19);
  const TensorMap mb = micro_batch(kDocs);
  double loss = 0;
  for (int64_t n = 0; n < 19; ++n) {
    const double error = load_f64(values, n) - load_f64(mb.get("returns"), n);
    loss += load_f64(mb.get("loss_mask"), n) * error * error / 15.0;  // 15 loss tokens
  }
  EXPECT_NEAR(loss, eval.loss, 1e-6);
}

TEST(ValueEngine, ARewardModelScoresEachDocumentAtItsLastToken) {
  engine_testing::EngineEnv env;
  const model::ModelConfig config = value_config(model::HeadKind::score);
  TrainEngine trainer(f32_engine(), adam(1e-3), config, env.kernels, env.parallel, env.tracker, 64);
  trainer.init_random_weights(2);
  InferEngine reward_model(f32_engine(), config, env.kernels, env.parallel, env.tracker, 64);
  trainer.export_weights([&](const std::string& name, TensorView full) { reward_model.update_weights(name, full); });

  const std::vector<TensorMap> scored = reward_model.compute_values(one_micro_batch());
  const ForwardBackwardResult full = trainer.forward_backward(one_micro_batch(), squared_error, ForwardOnly::yes);
  ASSERT_EQ(scored.size(), 1u);
  rf::testing::expect_close(scored[0].get("values"), full.outputs[0].get("values"), 0, 0, "values");

  const TensorMap mb = micro_batch(kDocs);
  const Tensor scores_D = last_token_values(scored[0].get("values"), mb.cu_seqlens());
  ASSERT_EQ(scores_D.numel(), 4);
  const std::vector<int64_t> last_rows = {4, 8, 15, 18};
  for (int64_t d = 0; d < 4; ++d)
    EXPECT_EQ(scores_D.data<float>()[d], load_f64(full.outputs[0].get("values"), last_rows[size_t(d)])) << d;
  // The score of a document is its own: the same document alone scores the same (causal attention).
  const Tensor alone = last_token_values(reward_model.compute_values(step(micro_batch({kDocs[2]})))[0].get("values"),
                                         std::vector<int32_t>{0, 7});
  EXPECT_NEAR(alone.data<float>()[0], scores_D.data<float>()[2], 1e-6);

  const std::vector<int32_t> empty_document = {0, 4, 4, 19};
  rf::testing::expect_error_containing(
      [&] { last_token_values(scored[0].get("values"), empty_document); }, "document 1 is empty");
  rf::testing::expect_error_containing([&] { reward_model.compute_log_prob(one_micro_batch(), 1.0, {}); },
                                       "has no LM head");
  model::ModelConfig lm = config;
  lm.head = model::HeadKind::lm;
  InferEngine ref(f32_engine(), lm, env.kernels, env.parallel, env.tracker, 64);
  rf::testing::expect_error_containing([&] { ref.compute_values(one_micro_batch()); }, "no value head");
}

}  // namespace
}  // namespace rf::engine

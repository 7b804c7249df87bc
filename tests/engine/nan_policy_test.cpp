// check_for_nan_in_loss_and_grad and nan_policy on one rank (engine_config.h, non_finite_check.h): a
// non-finite loss or gradient stops the step before anything is applied (error) or leaves no trace of it
// (skip_step); the check never changes a finite step; non-finite weights are never saved or exported.
// The same over DP and TP ranks: tests/parallel/nan_policy_mpi_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>

#include "checkpoint/checkpoint_reader.h"
#include "core/element_access.h"
#include "core/finite_values.h"
#include "engine/hf_checkpoint.h"
#include "engine/train_engine.h"
#include "engine_fixture.h"
#include "model/hf_folder.h"
#include "support/scratch_folder.h"

namespace rf::engine {
namespace {

using engine_testing::adam;
using engine_testing::kDocs;
using engine_testing::micro_batch;
using engine_testing::step;
using engine_testing::tiny_config;

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

// Where a step's loss function puts a NaN: nowhere, in the loss value of one micro-batch (its gradient
// stays finite), or in the gradient it writes for one token (its value stays finite).
enum class Poison : uint8_t { none, loss, loss_grad };

// Token-mean NLL over the step that poisons its `poisoned`-th call (the micro-batch of that index).
LossFn poisoned_nll(Poison poison, int64_t poisoned) {
  auto calls = std::make_shared<int64_t>(0);
  return [=](const TensorMap& mb, const model::ModelOutputs& out, const LossContext& ctx,
             const model::OutputGrads& grads) {
    const bool here = (*calls)++ == poisoned;
    const TensorView mask = mb.get("loss_mask");
    LossOutput result;
    for (int64_t n = 0; n < mask.numel(); ++n) {
      const double m = load_f64(mask, n);
      result.loss -= m * load_f64(out.logp_N, n) / double(ctx.global_num_tokens);
      grads.dlogp_N.data<float>()[n] = float(-m / double(ctx.global_num_tokens));
    }
    if (here && poison == Poison::loss) result.loss = kNan;
    // Token 1 has a target in every document (a token without one takes no gradient).
    if (here && poison == Poison::loss_grad) grads.dlogp_N.data<float>()[1] = float(kNan);
    return result;
  };
}

std::vector<TensorMap> three_micro_batches() {
  return step(micro_batch({kDocs[0]}), micro_batch({kDocs[1], kDocs[2]}), micro_batch({kDocs[3]}));
}

EngineConfig engine_config(NanPolicy policy, bool check = true) {
  EngineConfig c = engine_testing::f32_engine();
  c.nan_policy = policy;
  c.check_for_nan_in_loss_and_grad = check;
  return c;
}

struct Harness {
  engine_testing::EngineEnv env;
  TrainEngine engine;
  explicit Harness(const EngineConfig& config)
      : engine(config, adam(1e-2), tiny_config(), env.kernels, env.parallel, env.tracker, 64) {
    engine.init_random_weights(1);
  }
  // One step through `loss`; returns the grad norm.
  double train(const LossFn& loss, const std::string& update = "optimizer step") {
    engine.forward_backward(three_micro_batches(), loss, ForwardOnly::no);
    return engine.optimizer_step(update);
  }
};

// What a step may change: weights, Adam moments and the step count.
struct State {
  Tensor weights, exp_avg, exp_avg_sq;
  int64_t num_steps = 0;
  explicit State(const TrainEngine& e)
      : weights(clone(e.master_weights().flat(), DType::f32)),
        exp_avg(clone(e.optimizer().exp_avg(), DType::f32)),
        exp_avg_sq(clone(e.optimizer().exp_avg_sq(), DType::f32)),
        num_steps(e.optimizer().num_steps()) {}
};

bool same_bits(TensorView a, TensorView b) {
  return a.numel() == b.numel() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

void expect_unchanged(const State& before, const TrainEngine& e) {
  const State after(e);
  EXPECT_TRUE(same_bits(before.weights, after.weights)) << "weights changed";
  EXPECT_TRUE(same_bits(before.exp_avg, after.exp_avg)) << "exp_avg changed";
  EXPECT_TRUE(same_bits(before.exp_avg_sq, after.exp_avg_sq)) << "exp_avg_sq changed";
  EXPECT_EQ(before.num_steps, after.num_steps);
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(NanPolicy, ErrorStopsBeforeTheUpdateNamingTheStepAndTheMicroBatch) {
  Harness h(engine_config(NanPolicy::error));
  h.train(poisoned_nll(Poison::none, -1));
  const State before(h.engine);
  const std::string message =
      error_of([&] { h.train(poisoned_nll(Poison::loss, 1), "step 2, actor update, mini-batch 1 of 1"); });
  EXPECT_NE(message.find("step 2, actor update, mini-batch 1 of 1: not finite: the loss of micro-batch 1 of 3 on DP "
                         "rank 0 is nan"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("no weight changed"), std::string::npos) << message;
  EXPECT_EQ(message.find("check `"), std::string::npos) << "internal check text: " << message;
  expect_unchanged(before, h.engine);
  EXPECT_FALSE(h.engine.last_step_skipped());
  // The engine stays usable: the next finite step trains.
  EXPECT_TRUE(std::isfinite(h.train(poisoned_nll(Poison::none, -1))));
  EXPECT_EQ(h.engine.optimizer().num_steps(), before.num_steps + 1);
}

TEST(NanPolicy, ANonFiniteGradientIsNamedByMicroBatchAndParameter) {
  Harness h(engine_config(NanPolicy::error));
  const State before(h.engine);
  const std::string message = error_of([&] { h.train(poisoned_nll(Poison::loss_grad, 2)); });
  // The loss is finite; the gradient it wrote is not, and the parameters' gradients turn NaN from the
  // LM head down: the last parameter of the layout is the first the backward reached.
  EXPECT_NE(message.find("every loss is finite, but micro-batch 2 of 3 on DP rank 0"), std::string::npos) << message;
  EXPECT_NE(message.find("the loss's gradient for log_probs at token 1 (nan)"), std::string::npos) << message;
  EXPECT_NE(message.find("gradient norm nan, first non-finite gradient in backward order: lm_head.weight"),
            std::string::npos)
      << message;
  expect_unchanged(before, h.engine);
}

// Megatron's skipped iteration: no update, Adam state as it was, gradients zeroed. The run that skipped a
// step and the run that never saw it then train bit for bit alike.
TEST(NanPolicy, SkipStepLeavesNoTrace) {
  Harness skipping(engine_config(NanPolicy::skip_step)), never(engine_config(NanPolicy::skip_step));
  for (Harness* h : {&skipping, &never}) h->train(poisoned_nll(Poison::none, -1));
  const State before(skipping.engine);
  const double norm = skipping.train(poisoned_nll(Poison::loss_grad, 0));
  EXPECT_TRUE(std::isnan(norm));
  EXPECT_TRUE(skipping.engine.last_step_skipped());
  EXPECT_EQ(skipping.engine.num_skipped_steps(), 1);
  expect_unchanged(before, skipping.engine);
  // A NaN loss with finite gradients is skipped as well.
  skipping.train(poisoned_nll(Poison::loss, 1));
  EXPECT_EQ(skipping.engine.num_skipped_steps(), 2);
  expect_unchanged(before, skipping.engine);
  for (Harness* h : {&skipping, &never}) h->train(poisoned_nll(Poison::none, -1));
  EXPECT_FALSE(skipping.engine.last_step_skipped());
  EXPECT_EQ(skipping.engine.num_skipped_steps(), 2);
  const State a(skipping.engine), b(never.engine);
  EXPECT_TRUE(same_bits(a.weights, b.weights));
  EXPECT_TRUE(same_bits(a.exp_avg, b.exp_avg));
  EXPECT_TRUE(same_bits(a.exp_avg_sq, b.exp_avg_sq));
  EXPECT_EQ(a.num_steps, 2);
  EXPECT_EQ(b.num_steps, 2);
}

// The default run's numbers are those of a run without the check, bit for bit.
TEST(NanPolicy, TheCheckDoesNotChangeAFiniteStep) {
  Harness checked(engine_config(NanPolicy::error)), unchecked(engine_config(NanPolicy::error, false));
  for (int i = 0; i < 3; ++i) {
    const double a = checked.train(poisoned_nll(Poison::none, -1)), b = unchecked.train(poisoned_nll(Poison::none, -1));
    EXPECT_EQ(a, b);
  }
  EXPECT_TRUE(same_bits(checked.engine.master_weights().flat(), unchecked.engine.master_weights().flat()));
}

// Without the check (Megatron's --no-check-for-nan-in-loss-and-grad) the NaN reaches the weights, and
// then nothing writes them: no checkpoint step, no HF export, no HF folder.
class NanPolicySave : public rf::testing::ScratchFolderTest {};

TEST_F(NanPolicySave, NonFiniteWeightsAreNeverSaved) {
  Harness h(engine_config(NanPolicy::error, false));
  h.train(poisoned_nll(Poison::loss_grad, 0));
  ASSERT_FALSE(all_finite(h.engine.master_weights().flat())) << "the unchecked step should have applied the NaN";
  const std::string root = path("run");
  std::string message = error_of([&] {
    checkpoint::CheckpointWriter writer(root, 3);
    h.engine.save_checkpoint(writer, "actor");
    writer.commit();
  });
  EXPECT_NE(message.find("saving actor to " + root + "/global_step_3: refused: model.embed_tokens.weight holds NaN"),
            std::string::npos)
      << message;
  EXPECT_FALSE(checkpoint::CheckpointReader::latest_step(root).has_value());
  EXPECT_FALSE(std::filesystem::exists(root + "/global_step_3"));

  const model::HfModelFolder folder = model::HfModelFolder::for_config(tiny_config(), DType::f32);
  message = error_of([&] {
    checkpoint::CheckpointWriter writer(root, 4);
    add_hf_export(writer, folder, h.engine.master_weights(), h.env.parallel);
    writer.commit();
  });
  EXPECT_NE(message.find("exporting huggingface to " + root + "/global_step_4: refused: model.embed_tokens.weight"),
            std::string::npos)
      << message;
  EXPECT_FALSE(std::filesystem::exists(root + "/global_step_4"));

  message = error_of([&] { model::write_hf_folder(path("hf"), folder, h.engine.master_weights()); });
  EXPECT_NE(message.find("refused: weight 'model.embed_tokens.weight' holds NaN or Inf values"), std::string::npos)
      << message;
  EXPECT_FALSE(std::filesystem::exists(path("hf/config.json")));
}

}  // namespace
}  // namespace rf::engine

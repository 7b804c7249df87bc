// What the equivalence tests against one rank share: a small model, a step's global batch of packed SFT
// micro-batches, a token-mean NLL normalised by the step's global token count (exact under any
// micro-batching and DP split), and the norm-wise comparison of every parameter (or gradient) gathered
// over TP with the one-rank engine's: ||a - b|| <= rtol ||b|| + 1e-8 (issue #6).
// Legend: N tokens, M micro-batches of a step.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include <functional>

#include "core/element_access.h"
#include "engine/shard_gatherer.h"
#include "engine/train_engine.h"
#include "model/tp_gather.h"

namespace rf::parallel_testing {

// Vocabulary 200, hidden 32, 4 heads of 8, FFN 48; qwen2 with q/k/v biases, qwen3 with q/k norms.
inline model::ModelConfig small_model_config(model::Arch arch, bool tied, int64_t kv_heads, int64_t num_layers) {
  model::ModelConfig c;
  c.arch = arch;
  c.vocab_size = 200;
  c.hidden_size = 32;
  c.intermediate_size = 48;
  c.num_hidden_layers = num_layers;
  c.num_attention_heads = 4;
  c.num_key_value_heads = kv_heads;
  c.head_dim = 8;
  c.tie_word_embeddings = tied;
  c.attention_bias = arch == model::Arch::qwen2;
  c.qk_norm = arch == model::Arch::qwen3;
  c.initializer_range = 0.2;
  return c;
}

// Every rank of `world` a data-parallel rank (TP 1).
inline dist::ParallelContext data_parallel_context(dist::ProcessGroup& world) {
  dist::ParallelDims dims;
  dims.world_size = world.size();
  return dist::ParallelContext::create(dist::RankLayout(dims), world, false);
}

inline engine::TensorMap micro_batch(const std::vector<std::vector<int64_t>>& docs) {
  const model::PackedSequences p = model::pack_sequences(docs);
  return engine::make_micro_batch(clone(p.tokens_N, DType::i64), clone(p.positions_N, DType::i64),
                                  clone(p.targets_N, DType::i64), p.cu_seqlens);
}

inline constexpr int64_t kMicroBatchesPerStep = 4;  // M

// Micro-batches [first, first + count) of step `step`'s M, of 13, 12, 9 and 15 tokens (sequence
// parallel pads the odd ones); the step shifts the tokens so every step differs.
inline std::vector<engine::TensorMap> step_micro_batches(int step, int64_t first, int64_t count) {
  auto doc = [&](std::vector<int64_t> ids) {
    for (int64_t& id : ids) id = (id + 37 * step) % 200;
    return ids;
  };
  std::vector<engine::TensorMap> all;
  all.push_back(micro_batch({doc({1, 5, 7, 9, 2, 150}), doc({1, 3, 3, 2}), doc({4, 199, 120})}));
  all.push_back(micro_batch({doc({1, 8, 6, 4, 11, 12, 2, 60, 61}), doc({1, 19, 2})}));
  all.push_back(micro_batch({doc({1, 77, 78, 79, 2}), doc({1, 30, 31, 32})}));
  all.push_back(micro_batch({doc({1, 90, 91, 92, 93, 94, 95, 2}), doc({1, 13, 14, 15, 16, 17, 2})}));
  std::vector<engine::TensorMap> slice;
  for (int64_t i = first; i < first + count; ++i) slice.push_back(std::move(all[size_t(i)]));
  return slice;
}

inline engine::LossOutput token_mean_nll(const engine::TensorMap& mb, const model::ModelOutputs& out,
                                         const engine::LossContext& ctx, const model::OutputGrads& grads) {
  const TensorView mask = mb.get("loss_mask");
  engine::LossOutput result;
  for (int64_t n = 0; n < mask.numel(); ++n) {
    const double m = load_f64(mask, n);
    result.loss -= m * load_f64(out.logp_N, n) / double(ctx.global_num_tokens);
    grads.dlogp_N.data<float>()[n] = float(-m / double(ctx.global_num_tokens));
  }
  return result;
}

inline double norm(TensorView x) {
  double sum = 0;
  for (int64_t i = 0; i < x.numel(); ++i) sum += load_f64(x, i) * load_f64(x, i);
  return std::sqrt(sum);
}

// Every parameter of `flat` (laid out by `layout`, this TP rank's) gathered over TP against
// `single`'s (a one-rank ParamStore or GradBuffer): rtol 1e-5, or `noise_rtol` for the k_proj biases,
// whose gradient is mostly f32 noise (tp_equivalence_mpi_test.cpp explains).
template <class Store>
void expect_params_match(const model::ParamLayout& layout, TensorView flat, const Store& single,
                         dist::ProcessGroup& tp, const std::string& what, double noise_rtol = 1e-5) {
  for (const model::ParamEntry& e : layout.entries()) {
    const double rtol = e.name.ends_with("k_proj.bias") ? noise_rtol : 1e-5;
    const Tensor whole = model::gather_tp_tensor(e, flat.slice(0, e.offset, e.shape.numel()).reshape(e.shape), tp);
    const TensorView expected = single.get(e.name);
    ASSERT_EQ(whole.shape(), expected.shape()) << what << " " << e.name;
    Tensor diff(expected.shape(), DType::f64);
    for (int64_t i = 0; i < diff.numel(); ++i) store_f64(diff, i, load_f64(whole, i) - load_f64(expected, i));
    EXPECT_LE(norm(diff), rtol * norm(expected) + 1e-8) << what << " " << e.name;
  }
}

// A forward-only pass's log-probs and entropy against the one-rank engine's, micro-batch by micro-batch.
inline void expect_outputs_match(const std::vector<engine::TensorMap>& got,
                                 const std::vector<engine::TensorMap>& one_rank, const char* engine) {
  SCOPED_TRACE(engine);
  ASSERT_EQ(got.size(), one_rank.size());
  for (size_t i = 0; i < got.size(); ++i)
    for (const char* key : {"log_probs", "entropy"}) {
      const TensorView a = got[i].get(key), b = one_rank[i].get(key);
      ASSERT_EQ(a.shape(), b.shape()) << key;
      Tensor diff(a.shape(), DType::f64);
      for (int64_t n = 0; n < a.numel(); ++n) store_f64(diff, n, load_f64(a, n) - load_f64(b, n));
      EXPECT_LE(norm(diff), 1e-5 * norm(b) + 1e-8) << key << " mb " << i;
    }
}

// The optimizer of both engines: AdamW at lr 1e-4 (tp_equivalence_mpi_test.cpp: AdamW turns f32 summation-order
// noise into ~lr moves).
inline optim::OptimConfig equivalence_optim() {
  optim::OptimConfig optim;
  optim.lr = 1e-4;
  optim.lr_decay_steps = 100;
  return optim;
}

// Trains `parallel` (each DP rank its contiguous share of the step's M micro-batches) and `single` (all of them)
// 3 steps, on every rank: per step the loss forward_backward reports must be the one-rank loss, every gradient
// this rank holds (gathered over TP and the distributed optimizer's DP shards) must match, and so must the grad
// norm; after the third step every weight (the k_proj biases to 1e-2: expect_params_match). `after_backward` runs
// after each step's forward_backward (checks of the parallel engine's own).
inline void expect_three_steps_match(engine::TrainEngine& parallel, engine::TrainEngine& single,
                                     const dist::ParallelContext& context,
                                     const std::function<void()>& after_backward = {}) {
  const model::ParamLayout& params = parallel.master_weights().layout();
  const Tensor gather_staging({parallel.bucket_plan().shard_numel()}, DType::f32);
  engine::ShardGatherer grad_gatherer(parallel.bucket_plan(), gather_staging, context.dp_cp(), nullptr);
  const int64_t per_rank = kMicroBatchesPerStep / context.dp().size(), first = context.dp().rank() * per_rank;
  for (int step = 0; step < 3; ++step) {
    const std::string at = "step " + std::to_string(step);
    const engine::ForwardBackwardResult result = parallel.forward_backward(
        step_micro_batches(step, first, per_rank), token_mean_nll, engine::ForwardOnly::no);
    const engine::ForwardBackwardResult result_one = single.forward_backward(
        step_micro_batches(step, 0, kMicroBatchesPerStep), token_mean_nll, engine::ForwardOnly::no);
    const double loss = result.loss, loss_one = result_one.loss;
    EXPECT_NEAR(loss, loss_one, 1e-5 * std::abs(loss_one)) << at << ": forward_backward's loss is the global loss";
    // The MoE layers' load-balancing losses: each DP rank's share of the step's (the RL trainer sums over DP).
    EXPECT_EQ(result.metrics.size(), result_one.metrics.size()) << at;
    for (const auto& [name, value_one] : result_one.metrics) {
      ASSERT_TRUE(result.metrics.count(name)) << at << " " << name;
      const double value = context.dp().all_reduce_scalar(result.metrics.at(name), dist::ReduceOp::sum);
      EXPECT_NEAR(value, value_one, 1e-5 * std::abs(value_one) + 1e-12) << at << " " << name;
    }
    if (after_backward) after_backward();
    parallel.reduce_gradients();
    single.reduce_gradients();
    const Tensor grads = clone(parallel.grads().flat(), DType::f32);
    grad_gatherer.gather(grads);  // the distributed optimizer's reduced shards from every DP rank
    expect_params_match(params, grads, single.grads(), context.tp(), at + " grads");
    const double norm = parallel.optimizer_step(), norm_one = single.optimizer_step();
    EXPECT_NEAR(norm, norm_one, 1e-5 * norm_one) << at << " grad norm";
  }
  expect_params_match(params, parallel.master_weights().flat(), single.master_weights(), context.tp(),
                      "weights after 3 steps", 1e-2);
}

}  // namespace rf::parallel_testing

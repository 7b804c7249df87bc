// Expert parallelism against one rank (issue #25 acceptance 2): the same MoE model (same seed), global batch and
// optimizer, trained 3 steps by a TrainEngine whose MoE layers' experts are split over the EP group (the tokens
// exchanged by the all-to-all dispatcher) and by a one-rank TrainEngine, on every rank: per step the loss, the
// load-balancing losses when on, every gradient and the grad norm; after the third step every weight
// (equivalence_checks.h, f32, 1e-5 relative). Qwen3-MoE (all layers sparse) and Qwen2-MoE (a gated shared expert);
// both dispatchers (alltoall, allgather); EP 2 and 4, EP 2 x DP 2 (two replicas of each expert), EP 2 with the
// distributed optimizer, PP 2 x EP 2 and CP 2 x EP 2; with Megatron's aux_loss and z-loss and with Hugging Face's
// pooled loss; dropless and with an expert capacity (both drop policies, padded to capacity or not: each
// micro-batch's capacity is its own, as on one rank);
// with moe_layer_recompute (the dispatch's exchanges run again in backward). Tensor parallel with sequence parallel:
// TP 2 with the experts split over TP (ETP 2, Megatron's default) or whole (ETP 1), TP 2 x EP 2 (both), and
// MindSpeed's TP-extend-EP (TP 2 extending EP 1 or 2); the shared expert split over TP as the dense MLP; sequence
// parallel's padding tokens left out of the load-balancing losses. (A capacity with SP is per rank's own tokens, as
// Megatron's: it drops other tokens than one rank would, so it has no one-rank equivalent to check.)
// A forward-only pass (compute_log_prob, and an InferEngine at the same layout, and at TP > 1 one without sequence
// parallel as the rollout runs) returns the one-rank log-probs.
// Then the refusals.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "dist/parallel_context.h"
#include "engine/infer_engine.h"
#include "engine/parallel_setup.h"
#include "engine/train_engine.h"
#include "equivalence_checks.h"
#include "mpi_test_world.h"

namespace rf {
namespace {

using dist::testing::world;
using parallel_testing::step_micro_batches;

struct ExpertLayout {
  int ep = 2;
  int pp = 1;
  int cp = 1;
  int tp = 1;             // with sequence parallel when > 1
  int etp = 0;            // expert_tensor_parallel_size: 0 null (the TP size), or 1
  bool tp_extend_ep = false;
  bool distributed_optimizer = false;
  model::Arch arch = model::Arch::qwen3_moe;
  std::string balancing = "none";  // aux_loss (with a z-loss), hf (HF's pooled loss), none
  double capacity_factor = 0;      // 0: dropless
  model::TokenDropPolicy drop_policy = model::TokenDropPolicy::probs;
  bool pad = false;
  bool moe_layer_recompute = false;
  model::MoeDispatcher dispatcher = model::MoeDispatcher::alltoall;
  bool shared_overlap = false;  // moe_shared_expert_overlap
  std::string name() const {
    std::string out = fmt::format("{} EP{}", model::arch_name(arch), ep);
    if (tp > 1)
      out += tp_extend_ep ? fmt::format(" x TP{} +SP TP-extend-EP", tp)
                          : fmt::format(" x TP{} +SP ETP{}", tp, etp == 0 ? tp : etp);
    if (pp > 1) out += fmt::format(" x PP{}", pp);
    if (cp > 1) out += fmt::format(" x CP{}", cp);
    const int dp = world().size() / (pp * cp * tp);
    if (dp > ep) out += fmt::format(" (DP{})", dp);
    if (distributed_optimizer) out += " +distributed optimizer";
    if (capacity_factor > 0)
      out += fmt::format(" capacity {} {}{}", capacity_factor,
                         model::enum_names(drop_policy)[size_t(drop_policy)].second, pad ? " padded" : "");
    if (moe_layer_recompute) out += " +moe_layer_recompute";
    if (dispatcher == model::MoeDispatcher::allgather) out += " allgather";
    if (shared_overlap) out += " +shared expert overlap";
    return out + " losses: " + balancing;
  }
};

// Vocabulary 200, hidden 32, 2 layers; 8 experts top-2 of FFN 16 (Qwen2-MoE: a gated shared expert of 24).
model::ModelConfig moe_config(const ExpertLayout& layout) {
  model::ModelConfig c = parallel_testing::small_model_config(layout.arch, false, 2, 2);
  c.moe = model::MoeConfig{.num_experts = 8, .num_experts_per_tok = 2, .moe_intermediate_size = 16,
                           .norm_topk_prob = layout.arch == model::Arch::qwen3_moe};
  if (layout.arch == model::Arch::qwen2_moe) {
    c.moe.shared_expert_intermediate_size = 24;
    c.moe.shared_expert_gate = true;
  }
  if (layout.balancing == "hf") {
    c.moe.output_router_logits = true;
    c.moe.router_aux_loss_coef = 0.05;
  }
  c.validate();
  return c;
}

engine::EngineConfig engine_config_for(const ExpertLayout& layout, int ep, int pp, int cp, int tp = 1) {
  engine::EngineConfig c;
  c.dtype = "float32";
  c.expert_model_parallel_size = ep;
  c.pipeline_model_parallel_size = pp;
  c.context_parallel_size = cp;
  c.tensor_model_parallel_size = tp;
  c.sequence_parallel = tp > 1;
  if (tp > 1 && layout.etp > 0) c.expert_tensor_parallel_size = layout.etp;
  c.moe_tp_extend_ep = tp > 1 && layout.tp_extend_ep;
  c.use_distributed_optimizer = layout.distributed_optimizer && ep > 1;
  if (layout.balancing == "aux_loss") {
    c.moe_aux_loss_coeff = 0.1;
    c.moe_z_loss_coeff = 0.01;
  }
  if (layout.capacity_factor > 0) c.moe_expert_capacity_factor = layout.capacity_factor;
  c.moe_token_drop_policy = layout.drop_policy;
  c.moe_pad_expert_input_to_capacity = layout.pad;
  c.moe_layer_recompute = layout.moe_layer_recompute;
  c.moe_token_dispatcher_type = layout.dispatcher;
  c.moe_shared_expert_overlap = layout.shared_overlap;
  return c;
}

dist::ParallelContext context_for(const engine::EngineConfig& config) {
  return dist::ParallelContext::create(dist::RankLayout(engine::parallel_dims(config, world().size())), world(),
                                       config.sequence_parallel);
}

// A layout's TrainEngine over the world and a one-rank TrainEngine of the same model, weights from one seed.
struct EnginePair {
  explicit EnginePair(const ExpertLayout& layout)
      : parallel_config(engine_config_for(layout, layout.ep, layout.pp, layout.cp, layout.tp)),
        context(context_for(parallel_config)),
        config(moe_config(layout)),
        parallel(parallel_config, optim, config, kernels, context, tracker, 64),
        single(engine_config_for(layout, 1, 1, 1), optim, config, kernels, one_rank, one_tracker, 64) {
    parallel.init_random_weights(3);
    single.init_random_weights(3);
  }
  const engine::EngineConfig parallel_config;
  dist::ParallelContext context;
  dist::ParallelContext one_rank = dist::ParallelContext::single_process();
  const optim::OptimConfig optim = parallel_testing::equivalence_optim();
  kernels::KernelRegistry kernels;
  MemoryTracker tracker, one_tracker;
  const model::ModelConfig config;
  engine::TrainEngine parallel, single;
};

void check_expert_parallel_matches_one_rank(const ExpertLayout& layout) {
  SCOPED_TRACE(layout.name());
  EnginePair engines(layout);
  const engine::EngineConfig& parallel_config = engines.parallel_config;
  dist::ParallelContext& context = engines.context;
  const model::ModelConfig& config = engines.config;
  engine::TrainEngine &parallel = engines.parallel, &single = engines.single;
  kernels::KernelRegistry& kernels = engines.kernels;
  MemoryTracker& tracker = engines.tracker;
  parallel_testing::expect_three_steps_match(parallel, single, context);  // moe/dropped_tokens among the metrics
  if (layout.capacity_factor > 0 && layout.capacity_factor < 1) {  // a tight capacity drops, and says so
    const auto result = single.forward_backward(step_micro_batches(0, 0, parallel_testing::kMicroBatchesPerStep),
                                                parallel_testing::token_mean_nll, engine::ForwardOnly::no);
    EXPECT_GT(result.metrics.at("moe/dropped_tokens"), 0);
  }
  const int64_t per_rank = parallel_testing::kMicroBatchesPerStep / context.dp().size();
  const int64_t first = context.dp().rank() * per_rank;
  const auto logp_one =
      single.compute_log_prob(step_micro_batches(5, first, per_rank), 1.0, model::EntropyOutput::compute);
  parallel_testing::expect_outputs_match(
      parallel.compute_log_prob(step_micro_batches(5, first, per_rank), 1.0, model::EntropyOutput::compute), logp_one,
      "TrainEngine");
  engine::InferEngine frozen(parallel_config, config, kernels, context, tracker, 64);
  single.export_weights([&](const std::string& name, TensorView full) { frozen.update_weights(name, full); });
  parallel_testing::expect_outputs_match(
      frozen.compute_log_prob(step_micro_batches(5, first, per_rank), 1.0, model::EntropyOutput::compute), logp_one,
      "InferEngine");
  if (layout.tp == 1) return;
  engine::EngineConfig no_sp_config = parallel_config;  // as the rollout: every TP rank runs all tokens
  no_sp_config.sequence_parallel = false;
  dist::ParallelContext no_sp = context_for(no_sp_config);
  engine::InferEngine no_sp_frozen(no_sp_config, config, kernels, no_sp, tracker, 64);
  single.export_weights([&](const std::string& name, TensorView full) { no_sp_frozen.update_weights(name, full); });
  parallel_testing::expect_outputs_match(
      no_sp_frozen.compute_log_prob(step_micro_batches(5, first, per_rank), 1.0, model::EntropyOutput::compute),
      logp_one, "InferEngine without sequence parallel");
}

std::vector<ExpertLayout> layouts_for(int world_size) {
  if (world_size == 2)
    return {{},
            {.arch = model::Arch::qwen2_moe},
            {.balancing = "aux_loss"},
            {.balancing = "hf"},
            {.distributed_optimizer = true, .arch = model::Arch::qwen2_moe},
            {.capacity_factor = 0.5},
            {.arch = model::Arch::qwen2_moe, .capacity_factor = 1.0, .drop_policy = model::TokenDropPolicy::position,
             .pad = true},
            {.balancing = "aux_loss", .moe_layer_recompute = true},
            {.arch = model::Arch::qwen2_moe, .balancing = "aux_loss", .dispatcher = model::MoeDispatcher::allgather},
            {.capacity_factor = 1.0, .pad = true, .moe_layer_recompute = true,
             .dispatcher = model::MoeDispatcher::allgather},
            {.arch = model::Arch::qwen2_moe, .balancing = "aux_loss", .moe_layer_recompute = true,
             .shared_overlap = true}};
  return {{.ep = 4},
          {.ep = 4, .arch = model::Arch::qwen2_moe, .balancing = "aux_loss"},
          {},
          {.pp = 2, .balancing = "aux_loss"},
          {.cp = 2, .arch = model::Arch::qwen2_moe, .balancing = "aux_loss"},
          {.ep = 4, .capacity_factor = 0.75, .pad = true},
          {.ep = 1, .tp = 2, .arch = model::Arch::qwen2_moe, .balancing = "aux_loss"},
          {.ep = 1, .tp = 2, .etp = 1, .arch = model::Arch::qwen2_moe},
          {.tp = 2, .balancing = "aux_loss"},
          {.tp = 2, .etp = 1, .arch = model::Arch::qwen2_moe, .balancing = "aux_loss"},
          {.ep = 1, .tp = 2, .tp_extend_ep = true, .balancing = "aux_loss"},
          {.tp = 2, .tp_extend_ep = true, .arch = model::Arch::qwen2_moe},
          {.tp = 2, .balancing = "aux_loss", .moe_layer_recompute = true},
          {.ep = 4, .arch = model::Arch::qwen2_moe, .dispatcher = model::MoeDispatcher::allgather},
          {.pp = 2, .balancing = "aux_loss", .dispatcher = model::MoeDispatcher::allgather},
          {.tp = 2, .arch = model::Arch::qwen2_moe, .balancing = "aux_loss",
           .dispatcher = model::MoeDispatcher::allgather},
          {.tp = 2, .etp = 1, .dispatcher = model::MoeDispatcher::allgather},
          {.tp = 2, .tp_extend_ep = true, .dispatcher = model::MoeDispatcher::allgather},
          {.ep = 4, .arch = model::Arch::qwen2_moe, .shared_overlap = true},
          {.tp = 2, .arch = model::Arch::qwen2_moe, .shared_overlap = true}};
}

TEST(ExpertParallel, TrainsLikeOneRank) {
  ASSERT_TRUE(world().size() == 2 || world().size() == 4) << "the layouts are written for 2 and 4 ranks";
  for (const ExpertLayout& layout : layouts_for(world().size())) check_expert_parallel_matches_one_rank(layout);
}

// Router recording and replay (verl's router replay) at TP 2 with sequence parallel (and its padding rows: the
// micro-batches have odd token counts): each rank records its own tokens' experts, gathered into the micro-batch's
// record, equal to one rank's; replaying other experts (each recorded one shifted by one) gives one rank's
// log-probs under the same replay.
TEST(ExpertParallel, RouterReplayAndRecordingAtTensorParallelMatchOneRank) {
  EnginePair engines({.ep = world().size() / 2, .tp = 2, .arch = model::Arch::qwen2_moe});
  const dist::ParallelContext& context = engines.context;
  const model::ModelConfig& config = engines.config;
  engine::TrainEngine &parallel = engines.parallel, &single = engines.single;
  const int64_t per_rank = parallel_testing::kMicroBatchesPerStep / context.dp().size();
  const int64_t first = context.dp().rank() * per_rank, L = 2, k = config.moe.num_experts_per_tok;
  auto with = [&](std::vector<engine::TensorMap> mbs, const char* key, const std::vector<Tensor>* experts) {
    for (size_t i = 0; i < mbs.size(); ++i)
      mbs[i].set(key, experts ? clone((*experts)[i].view(), DType::i32)
                              : Tensor({mbs[i].num_tokens(), L, k}, DType::i32));
    return mbs;
  };
  const auto recorded_one = with(step_micro_batches(5, 0, parallel_testing::kMicroBatchesPerStep), "record_experts",
                                 nullptr);
  single.compute_log_prob(recorded_one, 1.0, model::EntropyOutput::skip);
  const auto recorded = with(step_micro_batches(5, first, per_rank), "record_experts", nullptr);
  parallel.compute_log_prob(recorded, 1.0, model::EntropyOutput::skip);
  bool padded = false;
  for (size_t i = 0; i < recorded.size(); ++i) {
    const TensorView got = recorded[i].get("record_experts");
    const TensorView want = recorded_one[size_t(first) + i].get("record_experts");
    padded = padded || recorded[i].num_tokens() % 2 != 0;
    ASSERT_EQ(got.numel(), want.numel());
    EXPECT_EQ(std::memcmp(got.raw(), want.raw(), size_t(got.numel()) * 4), 0) << "micro-batch " << i;
  }
  EXPECT_TRUE(world().all_reduce_scalar(padded, dist::ReduceOp::max)) << "no micro-batch has SP padding";
  std::vector<Tensor> mine;  // this rank's micro-batches' records, each expert shifted by one
  for (int64_t i = first; i < first + per_rank; ++i) {
    mine.push_back(clone(recorded_one[size_t(i)].get("record_experts"), DType::i32));
    for (int64_t j = 0; j < mine.back().numel(); ++j)
      mine.back().data<int32_t>()[j] = (mine.back().data<int32_t>()[j] + 1) % int32_t(config.moe.num_experts);
  }
  // The replaying pass records too: every rank's routers used the replayed experts (as sets of k).
  const auto replayed = with(with(step_micro_batches(5, first, per_rank), "replay_experts", &mine), "record_experts",
                             nullptr);
  const auto logp = parallel.compute_log_prob(replayed, 1.0, model::EntropyOutput::compute);
  auto sorted_rows = [k](TensorView experts) {
    std::vector<int32_t> out(experts.data<int32_t>(), experts.data<int32_t>() + experts.numel());
    for (size_t t = 0; t < out.size(); t += size_t(k))
      std::sort(out.begin() + int64_t(t), out.begin() + int64_t(t) + k);
    return out;
  };
  for (size_t i = 0; i < replayed.size(); ++i)
    EXPECT_EQ(sorted_rows(replayed[i].get("record_experts")), sorted_rows(mine[i].view())) << "micro-batch " << i;
  parallel_testing::expect_outputs_match(
      logp,
      single.compute_log_prob(with(step_micro_batches(5, first, per_rank), "replay_experts", &mine), 1.0,
                              model::EntropyOutput::compute),
      "replayed");
}

// moe_shared_expert_overlap only moves the shared expert's work between the exchanges: the same bits.
TEST(ExpertParallel, SharedExpertOverlapChangesNoBit) {
  const ExpertLayout plain{.ep = world().size(), .arch = model::Arch::qwen2_moe, .balancing = "aux_loss"};
  ExpertLayout overlapped = plain;
  overlapped.shared_overlap = true;
  const optim::OptimConfig optim = parallel_testing::equivalence_optim();
  kernels::KernelRegistry kernels;
  MemoryTracker tracker;
  const model::ModelConfig config = moe_config(plain);
  std::vector<Tensor> grads;
  std::vector<double> losses;
  for (const ExpertLayout& layout : {plain, overlapped}) {
    const engine::EngineConfig engine_config = engine_config_for(layout, layout.ep, 1, 1);
    dist::ParallelContext context = context_for(engine_config);
    engine::TrainEngine engine(engine_config, optim, config, kernels, context, tracker, 64);
    engine.init_random_weights(3);
    const int64_t per_rank = parallel_testing::kMicroBatchesPerStep / context.dp().size();
    losses.push_back(engine.forward_backward(step_micro_batches(0, context.dp().rank() * per_rank, per_rank),
                                             parallel_testing::token_mean_nll, engine::ForwardOnly::no)
                         .loss);
    grads.push_back(clone(engine.grads().flat(), DType::f32));
  }
  EXPECT_EQ(losses[0], losses[1]);
  ASSERT_EQ(grads[0].numel(), grads[1].numel());
  EXPECT_EQ(std::memcmp(grads[0].view().raw(), grads[1].view().raw(), size_t(grads[0].numel()) * 4), 0);
}

// Refused before any work, naming the key: EP on a dense model, EP not dividing the experts, the keys not built.
TEST(ExpertParallel, RefusesWhatItCannotRunByKey) {
  if (world().size() != 2) GTEST_SKIP() << "written for 2 ranks";
  const optim::OptimConfig optim = parallel_testing::equivalence_optim();
  kernels::KernelRegistry kernels;
  MemoryTracker tracker;
  dist::ParallelContext context = context_for(engine_config_for({}, 2, 1, 1));
  auto key_of = [&](const model::ModelConfig& config, const engine::EngineConfig& engine_config) -> std::string {
    try {
      engine::TrainEngine engine(engine_config, optim, config, kernels, context, tracker, 64);
    } catch (const ConfigError& e) {
      return std::string(e.key_path());
    }
    return "";
  };
  const engine::EngineConfig ep2 = engine_config_for({}, 2, 1, 1);
  EXPECT_EQ(key_of(parallel_testing::small_model_config(model::Arch::qwen3, false, 2, 2), ep2),
            "expert_model_parallel_size");
  model::ModelConfig five_experts = moe_config({});
  five_experts.moe.num_experts = 5;
  EXPECT_EQ(key_of(five_experts, ep2), "expert_model_parallel_size");
  auto refused = [](auto set) {
    engine::EngineConfig c = engine_config_for({}, 2, 1, 1);
    set(c);
    try {
      c.validate();
    } catch (const ConfigError& e) {
      return std::string(e.key_path());
    }
    return std::string();
  };
  EXPECT_EQ(refused([](auto& c) { c.expert_tensor_parallel_size = 2; }), "expert_tensor_parallel_size");
  EXPECT_EQ(refused([](auto& c) {
              c.tensor_model_parallel_size = 2;
              c.sequence_parallel = true;
              c.expert_tensor_parallel_size = 2;
              c.moe_tp_extend_ep = true;
            }),
            "moe_tp_extend_ep");
  EXPECT_EQ(refused([](auto& c) {
              c.moe_shared_expert_overlap = true;
              c.moe_token_dispatcher_type = model::MoeDispatcher::allgather;
            }),
            "moe_shared_expert_overlap");
  engine::EngineConfig overlap = ep2;
  overlap.moe_shared_expert_overlap = true;
  EXPECT_EQ(key_of(moe_config({}), overlap), "moe_shared_expert_overlap");  // Qwen3-MoE: no shared expert
  EXPECT_EQ(refused([](auto& c) { c.moe_aux_loss_coeff = -1; }), "moe_aux_loss_coeff");
}

}  // namespace
}  // namespace rf

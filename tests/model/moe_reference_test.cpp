// MoE models against Hugging Face's own modeling code (tests/reference/moe, made by
// scripts/generate_moe_reference.sh; its README gives the formats and tolerances):
// - Qwen3-MoE (all layers sparse; a dense layer among sparse ones, tied) and Qwen2-MoE (gated shared expert):
//   f64 log-probs and entropies to 1e-10 and the gradients of loss_seq_sum to 1e-9 relative, with the `ref`
//   kernels; f32 and bf16 on the fast kernels close to the oracle;
// - DeepSeek-V3's MoE layer alone (sigmoid scores, expert bias, group-limited top-k, scaling, shared experts): the
//   chosen experts, the output, d input and every gradient.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "core/element_access.h"
#include "formats/safetensors_reader.h"
#include "model/hf_weights.h"
#include "model/moe_block.h"
#include "model_fixture.h"
#include "support/test_support.h"

namespace rf::model {
namespace {

using testing::ModelUnderTest;

const std::string kDir = RF_MOE_REFERENCE_DIR;

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

struct LmCase {
  ModelConfig config;
  nlohmann::json expected;
  std::vector<std::vector<int64_t>> sequences;
};

LmCase lm_case(const std::string& dir) {
  LmCase c{ModelConfig::from_file(dir + "/config.json"), read_json(dir + "/expected_logprobs.json"), {}};
  for (const auto& s : c.expected.at("sequences")) c.sequences.push_back(s.at("tokens").get<std::vector<int64_t>>());
  return c;
}

// The worst |logp - HF| and |entropy - HF| over every predicted token.
std::pair<double, double> worst_logp_entropy(const ModelOutputs& out, const LmCase& c, const PackedSequences& packed) {
  double logp = 0, entropy = 0;
  for (size_t s = 0; s < c.sequences.size(); ++s) {
    const auto& expected = c.expected["sequences"][s];
    for (size_t t = 0; t < expected["logprobs"].size(); ++t) {
      const int64_t n = packed.cu_seqlens[s] + int64_t(t);
      logp = std::max(logp, std::abs(load_f64(out.logp_N, n) - expected["logprobs"][t].get<double>()));
      entropy = std::max(entropy, std::abs(load_f64(out.entropy_N, n) - expected["entropy"][t].get<double>()));
    }
  }
  return {logp, entropy};
}

class MoeLmReference : public ::testing::TestWithParam<std::string> {};

TEST_P(MoeLmReference, F64LogprobsAndGradientsMatchHuggingFace) {
  const std::string dir = kDir + "/" + GetParam();
  const LmCase c = lm_case(dir);
  ASSERT_TRUE(c.config.moe.enabled());
  const PackedSequences packed = pack_sequences(c.sequences);
  ModelUnderTest m(c.config, DType::f64, testing::ref_kernels(), packed.tokens_N.numel());
  load_hf_weights(m.params, dir);
  const ModelOutputs out = m.model.forward(packed.inputs());
  const auto [logp, entropy] = worst_logp_entropy(out, c, packed);
  EXPECT_LE(logp, 1e-10);
  EXPECT_LE(entropy, 1e-10);

  m.grads.zero();
  m.model.backward({testing::seq_sum_loss_grad(packed, DType::f64)});
  const formats::SafetensorsReader expected(dir + "/expected_grads.safetensors");
  for (const auto& entry : m.params.layout().entries()) {
    ASSERT_TRUE(expected.contains(entry.name)) << entry.name;
    const TensorView grad = expected.view(entry.name);
    rf::testing::expect_close(m.grads.get(entry.name), grad, 1e-9, 1e-10 * rf::testing::max_abs(grad), entry.name);
  }
}

// f32 to 1e-5 (the README's f32 bound). bf16 compute to 0.1 nats (measured <= 0.057), looser than the dense
// models' 2e-2: a bf16 router can choose another expert where the top-k margin (>= 1e-5 here) is below bf16's
// resolution, and a changed expert moves a token's output by far more than rounding does.
TEST_P(MoeLmReference, FastKernelsStayCloseToTheOracle) {
  const std::string dir = kDir + "/" + GetParam();
  const LmCase c = lm_case(dir);
  const PackedSequences packed = pack_sequences(c.sequences);
  for (const auto& [dtype, tolerance] : {std::pair{DType::f32, 1e-5}, std::pair{DType::bf16, 0.1}}) {
    SCOPED_TRACE(dtype_name(dtype));
    ModelUnderTest m(c.config, dtype, testing::fast_kernels(), packed.tokens_N.numel());
    load_hf_weights(m.params, dir);
    const auto [logp, entropy] = worst_logp_entropy(m.model.forward(packed.inputs()), c, packed);
    EXPECT_LE(logp, tolerance);
    EXPECT_LE(entropy, tolerance);
  }
}

// HF's load-balancing loss over the four sequences (every MoE layer's router logits pooled) and its gradient alone
// (coefficient 1, no cross-entropy): the value to 1e-12 relative, every gradient to 1e-9.
TEST_P(MoeLmReference, PooledLoadBalancingLossAndGradientsMatchHuggingFace) {
  const std::string dir = kDir + "/" + GetParam();
  const LmCase c = lm_case(dir);
  const PackedSequences packed = pack_sequences(c.sequences);
  dist::ParallelContext parallel = dist::ParallelContext::single_process();
  ParamStore params(ParamLayout::for_model(c.config), DType::f64);
  GradBuffer grads(ParamLayout::for_model(c.config), DType::f64);
  CausalLm model(c.config, params, &grads, testing::ref_kernels(), parallel);
  model.set_moe_losses({.balancing = MoeBalancing::hf_pooled, .aux_coeff = 1.0});
  model.reserve(packed.tokens_N.numel());
  load_hf_weights(params, dir);
  CausalLm::Activations saved = model.make_activations();
  model.forward(packed.inputs(), EntropyOutput::compute, saved);
  Tensor no_logp_grad({packed.tokens_N.numel()}, DType::f64);
  fill_zero(no_logp_grad);
  grads.zero();
  model.backward({.dlogp_N = no_logp_grad, .moe_loss_scale = 1.0}, kernels::Accumulate::add, saved);

  const double expected_loss = c.expected["aux_loss_pooled"].get<double>();
  EXPECT_NEAR(saved.moe_losses.aux_loss, expected_loss, 1e-12 * expected_loss);
  const formats::SafetensorsReader expected(dir + "/expected_aux_grads.safetensors");
  EXPECT_NEAR(load_f64(expected.view("aux_loss_pooled"), 0), expected_loss, 1e-15);
  for (const auto& entry : params.layout().entries()) {
    ASSERT_TRUE(expected.contains(entry.name)) << entry.name;
    const TensorView grad = expected.view(entry.name);
    rf::testing::expect_close(grads.get(entry.name), grad, 1e-9, 1e-10 * rf::testing::max_abs(grad), entry.name);
  }
}

INSTANTIATE_TEST_SUITE_P(Folders, MoeLmReference, ::testing::Values("qwen3_moe", "qwen3_moe_dense_layer", "qwen2_moe"));

// DeepseekV3MoE alone: its weights packed as MoeParams wants them, and zero gradients of the same shapes.
struct DeepseekBlock {
  MoeBlockConfig config;
  std::vector<Tensor> weights, grads;
  MoeParams w, g;
};

DeepseekBlock deepseek_block(const std::string& dir) {
  const nlohmann::json json = read_json(dir + "/block.json");
  const nlohmann::json& c = json.at("config");
  const int64_t E = c["n_routed_experts"], C = c["hidden_size"], F = c["moe_intermediate_size"];
  DeepseekBlock b;
  b.config = MoeBlockConfig{.router = {.num_experts = E,
                                       .top_k = c["num_experts_per_tok"],
                                       .score = RouterScore::sigmoid,
                                       .normalize_topk = c["norm_topk_prob"],
                                       .scaling_factor = c["routed_scaling_factor"],
                                       .num_groups = c["n_group"],
                                       .group_topk = c["topk_group"]},
                            .hidden = C,
                            .expert_ffn = F,
                            .shared_ffn = F * c["n_shared_experts"].get<int64_t>()};
  const formats::SafetensorsReader reader(dir + "/weights.safetensors");
  auto tensor = [&](Shape shape, std::vector<Tensor>& into) -> TensorView {
    into.emplace_back(shape, DType::f64);
    fill_zero(into.back());
    return into.back();
  };
  auto both = [&](Shape shape, TensorView MoeParams::*member) {
    b.w.*member = tensor(shape, b.weights);
    b.g.*member = tensor(shape, b.grads);
  };
  b.weights.reserve(16);
  b.grads.reserve(16);
  both({E, C}, &MoeParams::router_EC);
  both({E, F, C}, &MoeParams::wg_EFC);
  both({E, F, C}, &MoeParams::wu_EFC);
  both({E, C, F}, &MoeParams::wd_ECF);
  const int64_t S = b.config.shared_ffn;
  both({S, C}, &MoeParams::shared_wg_SC);
  both({S, C}, &MoeParams::shared_wu_SC);
  both({C, S}, &MoeParams::shared_wd_CS);
  b.w.expert_bias_E = tensor({E}, b.weights);
  copy_convert(reader.view("gate.weight"), b.w.router_EC);
  copy_convert(reader.view("gate.e_score_correction_bias"), b.w.expert_bias_E);
  for (int64_t e = 0; e < E; ++e)
    for (const auto& [proj, member] : {std::pair{"gate_proj", &MoeParams::wg_EFC},
                                       std::pair{"up_proj", &MoeParams::wu_EFC},
                                       std::pair{"down_proj", &MoeParams::wd_ECF}})
      copy_convert(reader.view(fmt::format("experts.{}.{}.weight", e, proj)), (b.w.*member).select(0, e));
  copy_convert(reader.view("shared_experts.gate_proj.weight"), b.w.shared_wg_SC);
  copy_convert(reader.view("shared_experts.up_proj.weight"), b.w.shared_wu_SC);
  copy_convert(reader.view("shared_experts.down_proj.weight"), b.w.shared_wd_CS);
  return b;
}

// The gradient of HF's parameter `name` in the block's gradients.
TensorView deepseek_grad(const DeepseekBlock& b, const std::string& name) {
  if (name == "gate.weight") return b.g.router_EC;
  if (name.starts_with("shared_experts.")) {
    const std::string proj = name.substr(15, name.find(".weight") - 15);
    return proj == "gate_proj" ? b.g.shared_wg_SC : proj == "up_proj" ? b.g.shared_wu_SC : b.g.shared_wd_CS;
  }
  const int64_t e = std::stoll(name.substr(8));
  const std::string proj = name.substr(name.find('.', 8) + 1, name.find(".weight") - name.find('.', 8) - 1);
  return (proj == "gate_proj" ? b.g.wg_EFC : proj == "up_proj" ? b.g.wu_EFC : b.g.wd_ECF).select(0, e);
}

class DeepseekMoeBlockReference : public ::testing::TestWithParam<std::string> {};

void check_deepseek_block(const std::string& dir, bool grouped_gemm);

// Both expert paths: the grouped GEMM and Megatron's SequentialMLP (moe_grouped_gemm: false).
TEST_P(DeepseekMoeBlockReference, RoutingOutputAndGradientsMatchHuggingFace) {
  for (const bool grouped_gemm : {true, false}) {
    SCOPED_TRACE(grouped_gemm ? "grouped GEMM" : "a linear call per expert");
    check_deepseek_block(kDir + "/" + GetParam(), grouped_gemm);
  }
}

void check_deepseek_block(const std::string& dir, bool grouped_gemm) {
  DeepseekBlock b = deepseek_block(dir);
  b.config.grouped_gemm = grouped_gemm;
  const formats::SafetensorsReader io(dir + "/io.safetensors");
  const int64_t C = b.config.hidden, E = b.config.router.num_experts, k = b.config.router.top_k;
  const int64_t N = io.view("x").numel() / C;
  Tensor x({N, C}, DType::f64), dout({N, C}, DType::f64), y({N, C}, DType::f64), dx({N, C}, DType::f64);
  copy_convert(io.view("x").reshape({N, C}), x);
  copy_convert(io.view("dout").reshape({N, C}), dout);
  fill_zero(y);

  const MoeBlock block(b.config);
  MoeSaved saved;
  MoeScratch scratch;
  block.reserve(saved, N, DType::f64, {});
  block.reserve(scratch, N, DType::f64, {});
  dist::ParallelContext parallel = dist::ParallelContext::single_process();
  LayerContext ctx{testing::ref_kernels(), parallel};
  block.forward_experts(ctx, b.w, x, y, saved, scratch);

  const TensorView topk = io.view("topk_indices");  // [N, k], ascending per token
  for (int64_t n = 0; n < N; ++n) {
    std::vector<int64_t> chosen;
    for (int64_t e = 0; e < E; ++e)
      if (load_f64(saved.routing_map_NE, n * E + e) != 0) chosen.push_back(e);
    ASSERT_EQ(int64_t(chosen.size()), k) << "token " << n;
    for (int64_t j = 0; j < k; ++j) EXPECT_EQ(chosen[size_t(j)], int64_t(load_f64(topk, n * k + j))) << "token " << n;
  }
  rf::testing::expect_close(y, io.view("out").reshape({N, C}), 1e-12, 1e-12, "out");

  ctx.linear_weight_grads = kernels::Accumulate::overwrite;
  block.backward_experts(ctx, b.w, b.g, x, saved, scratch, dout, dx);
  rf::testing::expect_close(dx, io.view("dx").reshape({N, C}), 1e-12, 1e-12, "dx");
  const formats::SafetensorsReader expected(dir + "/expected_grads.safetensors");
  for (const std::string& name : expected.names()) {
    const TensorView grad = expected.view(name);
    rf::testing::expect_close(deepseek_grad(b, name), grad, 1e-9, 1e-10 * rf::testing::max_abs(grad), name);
  }
}

INSTANTIATE_TEST_SUITE_P(Folders, DeepseekMoeBlockReference,
                         ::testing::Values("deepseek_v3_moe_block", "deepseek_v3_moe_block_ungrouped"));

}  // namespace
}  // namespace rf::model

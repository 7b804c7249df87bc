#include "model_fixture.h"

#include <fstream>
#include <nlohmann/json.hpp>

#include "core/element_access.h"
#include "core/philox.h"
#include "support/test_support.h"

namespace rf::model::testing {

ModelUnderTest::ModelUnderTest(const ModelConfig& c, DType dtype, const kernels::KernelRegistry& kernels,
                               int64_t max_tokens, const RecomputePolicy& recompute, MemoryTracker* tracker)
    : config(c),
      parallel(dist::ParallelContext::single_process()),
      params(ParamLayout::for_model(c), dtype),
      grads(ParamLayout::for_model(c), grad_dtype_for(dtype)),
      model(c, params, &grads, kernels, parallel, tracker) {
  model.set_recompute(recompute);
  model.reserve(max_tokens);
}

const kernels::KernelRegistry& ref_kernels() {
  static const kernels::KernelRegistry registry(kernels::KernelConfig{.optimization_level = 0});
  return registry;
}

const kernels::KernelRegistry& fast_kernels() {
  static const kernels::KernelRegistry registry;
  return registry;
}

ModelConfig micro_config(Arch arch, bool tied, HeadKind head) {
  ModelConfig c;
  c.arch = arch;
  c.head = head;
  c.vocab_size = 24;
  c.hidden_size = 16;
  c.intermediate_size = 20;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  const bool qwen3 = arch == Arch::qwen3 || arch == Arch::qwen3_moe;
  c.head_dim = qwen3 ? 6 : 4;  // qwen3 states head_dim, and it may differ from hidden/heads
  c.tie_word_embeddings = tied;
  c.attention_bias = arch == Arch::qwen2 || arch == Arch::qwen2_moe;
  c.qk_norm = qwen3;
  if (arch == Arch::qwen3_moe)  // layer 0 sparse, layer 1 dense
    c.moe = MoeConfig{.num_experts = 4, .num_experts_per_tok = 2, .moe_intermediate_size = 6, .norm_topk_prob = true,
                      .mlp_only_layers = {1}};
  if (arch == Arch::qwen2_moe)  // both sparse, with the gated shared expert
    c.moe = MoeConfig{.num_experts = 5, .num_experts_per_tok = 2, .moe_intermediate_size = 6,
                      .shared_expert_intermediate_size = 8, .shared_expert_gate = true};
  c.rope_theta = 10000.0;
  c.initializer_range = 0.3;  // large enough that every path carries signal
  c.validate();
  return c;
}

void randomize_weights(const ParamStore& params, uint64_t seed) {
  const auto& entries = params.layout().entries();
  for (size_t i = 0; i < entries.size(); ++i) {
    const bool norm = entries[i].name.ends_with("norm.weight");
    fill_uniform(params.get(entries[i].name), Philox(seed, i), norm ? 0.5 : -0.5, norm ? 1.5 : 0.5);
  }
}

PackedSequences fd_documents() { return pack_sequences({{3, 17, 5, 9, 23, 1}, {8, 2, 19, 4, 11}}); }

PackedSequences oracle_documents() {
  return pack_sequences({{3, 17, 5, 9, 23, 1, 7, 7}, {8, 2, 19}, {4, 11, 12, 13, 0}});
}

std::vector<Tensor> grads_f64(const ModelUnderTest& m) {
  std::vector<Tensor> grads;
  for (const auto& e : m.params.layout().entries()) grads.push_back(clone(m.grads.get(e.name), DType::f64));
  return grads;
}

std::vector<std::vector<int64_t>> reference_sequences() {
  std::ifstream in(rf::testing::reference_dir() + "/hf_models/tokens.json");
  const auto json = nlohmann::json::parse(in);
  return json.at("sequences").get<std::vector<std::vector<int64_t>>>();
}

LossWeights random_loss_weights(const PackedSequences& packed, DType stat, uint64_t seed) {
  const int64_t N = packed.tokens_N.numel();
  LossWeights w{rf::testing::random_tensor({N}, stat, seed, -1.0, 1.0),
                rf::testing::random_tensor({N}, stat, seed + 1, -0.5, 0.5)};
  for (int64_t n = 0; n < N; ++n)
    if (packed.targets_N.data<int64_t>()[n] < 0) store_f64(w.a_N, n, 0.0);
  return w;
}

double weighted_loss(const ModelOutputs& out, const LossWeights& w) {
  double loss = 0;
  for (int64_t n = 0; n < out.logp_N.numel(); ++n) {
    loss += load_f64(w.a_N, n) * load_f64(out.logp_N, n);
    if (!out.entropy_N.empty()) loss += load_f64(w.b_N, n) * load_f64(out.entropy_N, n);
  }
  return loss;
}

Tensor seq_sum_loss_grad(const PackedSequences& packed, DType dtype) {
  Tensor d({packed.tokens_N.numel()}, dtype);
  for (size_t s = 0; s + 1 < packed.cu_seqlens.size(); ++s) {
    const int64_t begin = packed.cu_seqlens[s], end = packed.cu_seqlens[s + 1];
    for (int64_t n = begin; n + 1 < end; ++n) store_f64(d, n, -1.0 / double(end - begin - 1));
  }
  return d;
}

}  // namespace rf::model::testing

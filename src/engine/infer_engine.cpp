#include "engine/infer_engine.h"

#include <optional>

#include "core/element_access.h"
#include "engine/sequence_padding.h"
#include "model/hf_weights.h"

namespace rf::engine {
namespace {

model::ParamLayout layout_for(const EngineConfig& config, const model::ModelConfig& model_config,
                              const dist::ParallelContext& parallel) {
  if (config.tensor_model_parallel_size != parallel.tp().size())
    throw ConfigError("tensor_model_parallel_size",
                      fmt::format("{} but the engine's TP group has {} ranks", config.tensor_model_parallel_size,
                                  parallel.tp().size()));
  return model::ParamLayout::for_model(model_config,
                                       model::TensorParallelShard{.rank = parallel.tp().rank(),
                                                                  .size = parallel.tp().size(),
                                                                  .vocab_multiple = config.make_vocab_size_divisible_by});
}

EngineConfig validated(EngineConfig config) {
  config.validate();
  return config;
}

}  // namespace

InferEngine::InferEngine(const EngineConfig& engine_config, const model::ModelConfig& model_config,
                         const kernels::KernelRegistry& kernels, dist::ParallelContext& parallel,
                         MemoryTracker& tracker, int64_t max_tokens_per_micro_batch)
    : config_(validated(engine_config)),
      parallel_(parallel),
      params_(layout_for(config_, model_config, parallel), config_.compute_dtype(),
              {&tracker, MemoryTier::device, MemoryCategory::params}) {
  if (config_.sequence_parallel != parallel.sequence_parallel())
    throw ConfigError("sequence_parallel", fmt::format("{} but the engine's parallel context has it {}",
                                                       config_.sequence_parallel, parallel.sequence_parallel()));
  const int64_t tp = parallel.sequence_parallel() ? parallel.tp().size() : 1;
  capacity_ = (max_tokens_per_micro_batch + tp - 1) / tp * tp;
  model_ = std::make_unique<model::CausalLm>(model_config, params_, nullptr, kernels, parallel, &tracker);
  model_->reserve(capacity_);
  params_offload_.add(params_.storage());
}

void InferEngine::offload(OffloadSet parts) {
  if (parts.params) params_offload_.offload(OffloadContents::keep);
  if (parts.activations) model_->set_activations_resident(false);
}

void InferEngine::onload() {
  params_offload_.onload();
  model_->set_activations_resident(true);
}

void InferEngine::update_weights(const std::string& hf_name, TensorView full) {
  onload();
  const model::ParamEntry& e = params_.layout().entry(hf_name);
  check_shape(full, e.hf_shape, hf_name.c_str());
  copy_convert(e.hf_part(full), e.local_part(params_.get(hf_name)));
}

void InferEngine::load_hf_weights(const std::string& model_dir) {
  onload();
  model::load_hf_weights(params_, model_dir);
}

model::ModelOutputs InferEngine::forward(const TensorMap& mb, double temperature, model::EntropyOutput entropy) {
  const int64_t N = mb.num_tokens();
  RF_CHECK(N <= capacity_, "InferEngine: a micro-batch of {} tokens, room for {}", N, capacity_);
  // Sequence parallel needs N to divide over TP: a padding document whose outputs are dropped.
  std::optional<model::PackedSequences> padded;
  const model::ModelInputs inputs = micro_batch_inputs(mb, temperature, parallel_, padded);
  model::ModelOutputs out = model_->forward(inputs, entropy);
  for (TensorView* t : {&out.logp_N, &out.entropy_N, &out.values_N})
    if (!t->empty()) *t = t->slice(0, 0, N);
  return out;
}

std::vector<TensorMap> InferEngine::compute_log_prob(const std::vector<TensorMap>& micro_batches, double temperature,
                                                     model::EntropyOutput entropy) {
  RF_CHECK(model_->config().head == model::HeadKind::lm, "compute_log_prob: a {} model has no LM head",
           model::head_name(model_->config().head));
  onload();
  std::vector<TensorMap> outputs;
  for (const TensorMap& mb : micro_batches) {
    const model::ModelOutputs out = forward(mb, temperature, entropy);
    TensorMap result;
    result.set("log_probs", clone(out.logp_N, DType::f32));
    if (entropy == model::EntropyOutput::compute) result.set("entropy", clone(out.entropy_N, DType::f32));
    outputs.push_back(std::move(result));
  }
  return outputs;
}

std::vector<TensorMap> InferEngine::compute_values(const std::vector<TensorMap>& micro_batches) {
  RF_CHECK(model_->config().head != model::HeadKind::lm,
           "compute_values: an LM has no value head (expected a ForTokenClassification or "
           "ForSequenceClassification model)");
  onload();
  std::vector<TensorMap> outputs;
  for (const TensorMap& mb : micro_batches) {
    TensorMap result;
    result.set("values", clone(forward(mb, 1.0, model::EntropyOutput::skip).values_N, DType::f32));
    outputs.push_back(std::move(result));
  }
  return outputs;
}

Tensor last_token_values(TensorView values_N, std::span<const int32_t> cu_seqlens) {
  const int64_t N = values_N.numel();
  RF_CHECK(values_N.rank() == 1, "values_N: expected [N], got {}", values_N.shape().to_string());
  RF_CHECK(cu_seqlens.size() >= 2 && cu_seqlens.front() == 0 && cu_seqlens.back() == N,
           "cu_seqlens: expected [0, ..., N={}] over the values' tokens, got {} entries ending at {}", N,
           cu_seqlens.size(), cu_seqlens.empty() ? -1 : cu_seqlens.back());
  const int64_t D = int64_t(cu_seqlens.size()) - 1;
  Tensor scores_D({D}, DType::f32);
  for (int64_t d = 0; d < D; ++d) {
    const int32_t begin = cu_seqlens[size_t(d)], end = cu_seqlens[size_t(d) + 1];
    RF_CHECK(begin < end, "cu_seqlens: document {} is empty ([{}, {})): it has no last token to score", d, begin, end);
    scores_D.data<float>()[d] = float(load_f64(values_N, (end - 1) * values_N.stride(0)));
  }
  return scores_D;
}

}  // namespace rf::engine

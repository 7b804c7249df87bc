#include "engine/infer_engine.h"

#include <optional>

#include "core/element_access.h"
#include "core/log.h"
#include "engine/local_micro_batch.h"
#include "engine/pipeline/pipeline_executor.h"
#include "engine/pipeline_stage.h"
#include "model/hf_weights.h"

namespace rf::engine {
namespace {

model::ParamLayout layout_for(const EngineConfig& config, const model::ModelConfig& model_config,
                              const model::PipelineSplit& split, const dist::ParallelContext& parallel) {
  if (config.tensor_model_parallel_size != parallel.tp().size())
    throw ConfigError("tensor_model_parallel_size",
                      fmt::format("{} but the engine's TP group has {} ranks", config.tensor_model_parallel_size,
                                  parallel.tp().size()));
  return model::ParamLayout::for_stage(model_config, config.tp_shard(parallel.tp().rank()),
                                       stage_parts(split, parallel.pp().rank()));
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
      tracker_(tracker),
      split_(pipeline_split_of(config_, model_config, parallel)),
      params_(layout_for(config_, model_config, split_, parallel), config_.compute_dtype(),
              {&tracker, MemoryTier::device, MemoryCategory::params}) {
  if (config_.sequence_parallel != parallel.sequence_parallel())
    throw ConfigError("sequence_parallel", fmt::format("{} but the engine's parallel context has it {}",
                                                       config_.sequence_parallel, parallel.sequence_parallel()));
  capacity_ = local_token_capacity(max_tokens_per_micro_batch, parallel);
  // A forward-only pass keeps nothing between actions (the executor copies what it sends), so each chunk's
  // own activations are all it needs.
  for (int64_t v = 0; v < split_.vp_size; ++v) {
    chunks_.push_back(std::make_unique<model::CausalLm>(model_config, chunk_span(split_, parallel.pp().rank(), v),
                                                        params_, nullptr, kernels, parallel, &tracker));
    // As the trainer's passes: the same tokens dropped, the same GEMMs.
    chunks_.back()->set_moe_experts(config_.moe_expert_options());
    chunks_.back()->reserve(capacity_);
  }
  params_offload_.add(params_.storage());
  if (parallel.role().rank() == 0 && split_.pp_size > 1) core::log_info("{}", split_.describe());
}

void InferEngine::offload(OffloadSet parts) {
  if (parts.params) params_offload_.offload(OffloadContents::keep);
  if (parts.activations)
    for (const auto& chunk : chunks_) chunk->set_activations_resident(false);
}

void InferEngine::onload() {
  params_offload_.onload();
  for (const auto& chunk : chunks_) chunk->set_activations_resident(true);
}

void InferEngine::update_weights(const std::string& hf_name, TensorView full) {
  onload();
  const model::ParamLayout& layout = params_.layout();
  if (!layout.contains(hf_name) && layout.in_model(hf_name)) return;  // another pipeline stage's
  const model::ParamEntry& e = layout.entry(hf_name);
  check_shape(full, e.hf_shape, hf_name.c_str());
  copy_convert(e.hf_part(full), e.local_part(params_.get(hf_name)));
}

void InferEngine::load_hf_weights(const std::string& model_dir) {
  onload();
  model::load_hf_weights(params_, model_dir);
}

std::vector<TensorMap> InferEngine::forward(const std::vector<TensorMap>& micro_batches, double temperature,
                                            model::EntropyOutput entropy, const std::vector<std::string>& keys) {
  onload();
  const int64_t M = int64_t(micro_batches.size());
  std::vector<TensorMap> outputs(static_cast<size_t>(M));
  if (M == 0) return outputs;
  const pipeline::PipelineSchedule schedule =
      pass_schedule(split_, config_, M, pipeline::PipelinePass::forward_only);
  const model::CausalLm& head_chunk = *chunks_.back();
  pipeline::StageWork work;
  work.transfer_dtype = config_.compute_dtype();
  // Every micro-batch as this rank runs it (padded for SP, split for CP), alive until the schedule ends.
  std::vector<std::unique_ptr<LocalMicroBatch>> local;
  for (const TensorMap& mb : micro_batches)
    local.push_back(std::make_unique<LocalMicroBatch>(mb, temperature, parallel_, capacity_));
  work.transfer_shape = [&](int64_t i) {
    const int64_t N = local[size_t(i)]->inputs().seq_len;
    return Shape{parallel_.sequence_parallel() ? N / parallel_.tp().size() : N, head_chunk.config().hidden_size};
  };
  work.forward = [&](int64_t i, int64_t v, TensorView input) -> TensorView {
    model::CausalLm& chunk = *chunks_[size_t(v)];
    model::ModelInputs in = local[size_t(i)]->inputs();
    in.hidden_NC = input;
    const model::ModelOutputs run = chunk.forward(in, entropy);
    if (!chunk.span().post_process) return run.hidden_NC;
    const model::ModelOutputs out = local[size_t(i)]->outputs(run);
    for (const std::string& key : keys) {
      const TensorView t_N = key == "log_probs" ? out.logp_N : key == "entropy" ? out.entropy_N : out.values_N;
      outputs[size_t(i)].set(key, clone(t_N, DType::f32));
    }
    return {};
  };
  work.backward = [](int64_t, int64_t, TensorView) -> TensorView {
    throw Error("InferEngine: a forward-only schedule asked for a backward");
  };
  pipeline::run_stage_actions(schedule.stages[size_t(parallel_.pp().rank())], parallel_.pp(), work,
                              {&tracker_, MemoryTier::device, MemoryCategory::activations});
  if (split_.pp_size > 1) share_outputs_over_pipeline(parallel_.pp(), keys, micro_batches, outputs);
  return outputs;
}

std::vector<TensorMap> InferEngine::compute_log_prob(const std::vector<TensorMap>& micro_batches, double temperature,
                                                     model::EntropyOutput entropy) {
  RF_CHECK(chunks_.front()->config().head == model::HeadKind::lm, "compute_log_prob: a {} model has no LM head",
           model::head_name(chunks_.front()->config().head));
  return forward(micro_batches, temperature, entropy, forward_output_keys(model::HeadKind::lm, entropy));
}

std::vector<TensorMap> InferEngine::compute_values(const std::vector<TensorMap>& micro_batches) {
  const model::HeadKind head = chunks_.front()->config().head;
  RF_CHECK(head != model::HeadKind::lm,
           "compute_values: an LM has no value head (expected a ForTokenClassification or "
           "ForSequenceClassification model)");
  return forward(micro_batches, 1.0, model::EntropyOutput::skip, forward_output_keys(head, model::EntropyOutput::skip));
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

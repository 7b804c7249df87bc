#include "trainer/sft_trainer.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "trainer/run_folder.h"
#include "trainer/run_loop.h"
#include "trainer/sft_loss.h"
#include "trainer/sft_parallel.h"
#include "engine/parallel_setup.h"
#include "trainer/run_tokenizer.h"
#include "config/yaml_json.h"
#include "checkpoint/checkpoint_reader.h"
#include "checkpoint/checkpoint_writer.h"
#include "core/element_access.h"
#include "core/log.h"
#include "core/memory_budget.h"
#include "core/stopwatch.h"
#include "core/thread_pool.h"
#include "data/data_cursor.h"
#include "data/jsonl_dataset.h"
#include "data/sft_batch.h"
#include "engine/generation_copy.h"
#include "engine/greedy_decode.h"
#include "engine/hf_checkpoint.h"
#include "engine/local_micro_batch.h"
#include "engine/train_engine.h"
#include "kernels/gemm_choice.h"
#include "kernels/gemm_peak.h"
#include "model/model_flops.h"

namespace rf::trainer {
namespace {

constexpr const char* kComponent = "actor";

// Where the examples come from: a built-in task's generator or JSONL files.
class ExampleSource {
 public:
  explicit ExampleSource(const data::DataConfig& c) {
    if (c.train_files) {  // DataConfig::validate saw to val_files
      train_.emplace(c.train_files->paths);
      val_.emplace(c.val_files->paths);
    } else {
      task_ = data::make_task(c.builtin_task(), config::yaml_to_json(c.task_kwargs), c.seed);
    }
  }
  std::string name() const { return task_ ? std::string(task_->name()) : "jsonl"; }
  data::Example next_train(data::DataCursor& cursor) const {
    return task_ ? data::take_example(*task_, cursor) : data::take_example(*train_, cursor);
  }
  uint64_t num_val() const { return task_ ? task_->num_val_examples() : val_->size(); }
  data::Example val(uint64_t i) const { return task_ ? task_->example(data::Split::val, i) : val_->example(i); }
  double score(const std::string& response, const std::string& ground_truth) const {
    return task_ ? task_->score(response, ground_truth).acc : data::exact_match_score(response, ground_truth).acc;
  }

 private:
  std::unique_ptr<data::Task> task_;
  std::optional<data::JsonlDataset> train_, val_;
};

model::ModelConfig make_model_config(const ModelSection& m, const RunTokenizer& tokens) {
  nlohmann::json json = config::yaml_to_json(m.config);
  if (!json.is_object()) throw ConfigError("model.config", "expected a map of HF config.json fields");
  if (!json.contains("vocab_size")) json["vocab_size"] = tokens.tokenizer->vocab_size();
  if (!json.contains("bos_token_id") && tokens.special_ids.bos) json["bos_token_id"] = *tokens.special_ids.bos;
  if (!json.contains("eos_token_id")) json["eos_token_id"] = tokens.special_ids.eos;
  try {
    return model::ModelConfig::from_json(json, "model.config");
  } catch (const ConfigError& e) {
    throw ConfigError("model.config." + e.key_path(), e.detail());
  }
}

// Tokens the engine runs at once: evaluation packs many prompts per forward, so room for a few hundred
// short problems whatever the micro-batch; with context parallel, each example as it pads it.
int64_t engine_capacity(const data::DataConfig& data, const engine::EngineConfig& megatron) {
  const int64_t example = engine::context_parallel_length(data.max_length, megatron.context_parallel_size);
  return std::max<int64_t>(data.micro_batch_size_per_gpu * example, 4096);
}

// `model_config`, once the engine this run builds for it fits this machine's memory: checked before
// anything of the model's size exists (the export folder's layout, the engine; no weights bound a new
// model's dimensions). TrainEngine checks the same estimate again. A new model's keys are model.config's.
model::ModelConfig fitting(model::ModelConfig model_config, const SftConfig& config, int world_size) {
  const int64_t tp = config.megatron.tensor_model_parallel_size, pp = config.megatron.pipeline_model_parallel_size;
  const int64_t cp = config.megatron.context_parallel_size;
  try {
    // The distributed optimizer shards over DP x CP; a CP rank holds its share of a micro-batch's tokens.
    model::require_fits(model_config,
                        engine::training_memory(model_config, config.megatron, tp, world_size / (tp * pp),
                                                (engine_capacity(config.data, config.megatron) + cp - 1) / cp),
                        machine_memory_budget(), "train");
  } catch (const ConfigError& e) {
    if (config.model.path) throw;
    throw ConfigError("model.config." + e.key_path(), e.detail());
  }
  return model_config;
}

// The Hugging Face folder every checkpoint carries under huggingface/ (and `rlforge convert` exports):
// model.path's folder whole (config.json with every field, side files, per-tensor dtypes, split into
// files) with the trained weights, or a new model's config.json in f32; plus the tokenizer's files
// when they are not the folder's own.
model::HfModelFolder make_export_folder(const std::optional<model::HfModelFolder>& source,
                                        const model::ModelConfig& config, const RunTokenizer& tokens) {
  model::HfModelFolder folder = source ? *source : model::HfModelFolder::for_config(config, DType::f32);
  for (const auto& [name, contents] : tokens.hf_files) folder.side_files[name] = contents;
  return folder;
}

// Training FLOPs of one micro-batch (model/model_flops.h), its documents' lengths from cu_seqlens.
double train_flops(const model::ModelConfig& c, std::span<const int32_t> cu_seqlens) {
  std::vector<int64_t> lengths;
  for (size_t d = 0; d + 1 < cu_seqlens.size(); ++d) lengths.push_back(cu_seqlens[d + 1] - cu_seqlens[d]);
  return model::train_flops(c, lengths);
}

struct Evaluation {
  double accuracy = 0;
  int64_t num_examples = 0;
};

// Greedy decoding of the validation prompts. At PP > 1 no rank holds the whole model: each decodes with a
// generation copy gathered from the stages. Decoding runs without context parallel (the model's CP attention expects
// split micro-batches): with CP each rank decodes over its TP group alone, on the engine's weights (or the
// generation copy), batches of 1/CP of the engine's tokens, so that its activations stay the CP share the training's
// are. The pipeline's stages and the CP ranks take turns at the batches of prompts (as DP, like the RL rollout),
// their scores summed.
Evaluation evaluate(engine::TrainEngine& engine, const ExampleSource& source, const RunTokenizer& tokens,
                    const data::SftBatchBuilder& builder, const data::DataConfig& data, int64_t engine_capacity,
                    const kernels::KernelRegistry& kernels, dist::ParallelContext& parallel, MemoryTracker& tracker) {
  const int64_t cp = parallel.cp().size(), capacity = engine_capacity / cp;
  std::optional<dist::ParallelContext> tp_only;
  if (cp > 1) {
    dist::ParallelDims dims;
    dims.world_size = parallel.tp().size();
    dims.tensor_model_parallel_size = parallel.tp().size();
    tp_only.emplace(dist::ParallelContext::create(dist::RankLayout(dims), parallel.tp(), false));
  }
  dist::ParallelContext& decoding = tp_only ? *tp_only : parallel;
  std::optional<engine::GenerationCopy> copy;
  std::optional<model::CausalLm> on_engine_weights;
  if (parallel.pp().size() > 1) {
    copy.emplace(engine, kernels, decoding, tracker, capacity);
  } else if (cp > 1) {
    on_engine_weights.emplace(engine.model_config(), engine.compute_weights(), nullptr, kernels, decoding, &tracker);
    on_engine_weights->reserve(capacity);
  }
  model::CausalLm& model = copy ? copy->model() : on_engine_weights ? *on_engine_weights : engine.model();
  const int64_t stages = parallel.pp().size() * cp, stage = parallel.pp().rank() * cp + parallel.cp().rank();
  int64_t batch = 0;
  const int64_t count = int64_t(std::min<uint64_t>(uint64_t(data.val_size), source.num_val()));
  // Padded embedding rows the tokenizer has no text for are never generated.
  const int64_t num_candidates = std::min(engine.model_config().vocab_size, tokens.tokenizer->vocab_size());
  double correct = 0;
  int64_t next = 0;
  while (next < count) {
    std::vector<std::vector<int64_t>> prompts;
    std::vector<data::Example> examples;
    int64_t num_tokens = 0;
    while (next < count) {
      data::Example ex = source.val(uint64_t(next));
      std::vector<int64_t> prompt = builder.prompt_tokens(ex);
      const int64_t budget = int64_t(prompt.size()) + std::max<int64_t>(1, data.max_length - int64_t(prompt.size()));
      if (!prompts.empty() && num_tokens + budget > capacity) break;
      num_tokens += budget;
      prompts.push_back(std::move(prompt));
      examples.push_back(std::move(ex));
      ++next;
    }
    if (batch++ % stages != stage) continue;
    const int64_t max_new = std::max<int64_t>(1, data.max_length - int64_t(prompts.front().size()));
    const auto generated = engine::greedy_decode(model, prompts, max_new, tokens.stop_ids, num_candidates);
    for (size_t i = 0; i < generated.size(); ++i)
      correct += source.score(tokens.tokenizer->decode(generated[i], data::SpecialTokens::skip),
                              examples[i].ground_truth);
  }
  // 0/1 scores: exact. Every rank of a stage's TP group and of its DP replicas scored the same batches.
  if (stages > 1)
    correct = parallel.role().all_reduce_scalar(correct, dist::ReduceOp::sum) /
              double(parallel.tp().size() * parallel.dp().size());
  return {count ? correct / double(count) : 0.0, count};
}

// `rlforge sft` as run_loop's steps: every rank trains; world rank 0 alone writes the run folder, the metrics
// and the console.
class SftTrainer : public Trainable {
 public:
  SftTrainer(const SftConfig& config, const std::string& resolved_yaml, dist::ProcessGroup& world)
      : config_(config),
        data_(config.data),
        world_(world),
        lead_(world.rank() == 0),
        resolved_yaml_(resolved_yaml),
        folder_(config.trainer.default_local_dir, lead_),
        pool_(config.trainer.num_threads, "trainer.num_threads"),
        kernels_(kernels::run_kernel_config(false)),
        source_folder_(open_source_folder(config.model)),
        tokens_(make_run_tokenizer(config.model, data_, source_folder_ ? &*source_folder_ : nullptr)),
        source_(data_),
        model_config_(fitting(source_folder_ ? source_folder_->config : make_model_config(config.model, tokens_),
                              config, world.size())),
        export_folder_(checked_export_folder(config.model, data_, source_folder_, model_config_, tokens_)),
        capacity_(engine_capacity(data_, config.megatron)),
        builder_(*tokens_.tokenizer, tokens_.special_ids,
                 data::SftPackingConfig{data_.max_length, data_.micro_batch_size_per_gpu * data_.max_length}),
        parallel_(engine::make_parallel_context(config.megatron, world)),
        engine_(config.megatron, optim_config(config), model_config_, kernels_, parallel_,
                with_device_budget(tracker_, config.trainer.device_memory_budget_gb), capacity_),
        cursor_{data_.seed, 0, 0},
        peak_gflops_(kernels::measure_gemm_peak(engine_.compute_dtype()).best()) {
    if (!lead_) return;
    core::log_info("{}", pool_.describe());
    core::log_info("{}", kernels_.describe());
    core::log_info("model {} ({} parameters)", model_config_.describe(),
                   model::ParamLayout::for_model(model_config_).num_parameters());
  }

  Resumed resume() override {
    Resumed resumed;
    if (const std::optional<CheckpointRef> from = folder_.resume_point(config_.trainer.resume_mode, std::nullopt, "trainer")) {
      const checkpoint::CheckpointReader reader(from->root, from->step);
      engine_.load_checkpoint(reader, kComponent);
      const nlohmann::json state = reader.read_json("trainer", "state");
      cursor_ = data::DataCursor::from_json(state.at("data_cursor"), reader.step_dir() + "/trainer/state");
      if (lead_) core::log_info("resumed from {}", reader.step_dir());
      resumed = {from->step, read_metrics_row(reader)};
    } else if (config_.model.path) {
      engine_.load_hf_weights(*config_.model.path);
    } else {
      engine_.init_random_weights(config_.megatron.seed);
    }
    // Only now: a run refused while setting up or resuming leaves the folder's config.yaml as it was.
    folder_.write_config(resolved_yaml_);
    return resumed;
  }

  Metrics step(int64_t step) override {
    Stopwatch step_clock;
    std::vector<engine::TensorMap> micro_batches;
    double flops = 0;
    std::vector<data::Example> global_batch;
    for (int64_t i = 0; i < data_.train_batch_size; ++i) global_batch.push_back(source_.next_train(cursor_));
    const std::vector<data::Example> share = dp_share(std::move(global_batch), parallel_.dp());
    for (size_t first = 0; first < share.size(); first += size_t(data_.micro_batch_size_per_gpu)) {
      const size_t last = std::min(share.size(), first + size_t(data_.micro_batch_size_per_gpu));
      const std::vector<data::Example> examples(share.begin() + int64_t(first), share.begin() + int64_t(last));
      for (data::SftMicroBatch& mb : builder_.build(examples)) {
        flops += train_flops(model_config_, mb.cu_seqlens);
        micro_batches.push_back(engine::make_micro_batch(std::move(mb.tokens_N), std::move(mb.positions_N),
                                                         std::move(mb.targets_N), std::move(mb.cu_seqlens)));
      }
    }
    const engine::ForwardBackwardResult fb = engine_.forward_backward(micro_batches, token_mean_nll, engine::ForwardOnly::no);
    const double lr = engine_.lr();
    const double grad_norm = engine_.optimizer_step(fmt::format("step {}, SFT update", step));
    if (!engine_.last_step_skipped()) engine_.lr_step();  // as Megatron: a skipped step leaves the schedule
    const double seconds = step_clock.seconds();
    // Each DP rank ran its share of the batch (its TP ranks the same share, its CP ranks a part of each
    // micro-batch): the tokens sum over DP x CP, the FLOPs (of whole micro-batches) over DP.
    const int64_t step_tokens =
        int64_t(parallel_.dp_cp().all_reduce_scalar(double(fb.num_tokens), dist::ReduceOp::sum));
    flops = parallel_.dp().all_reduce_scalar(flops, dist::ReduceOp::sum);
    tokens_run_ += step_tokens;
    train_seconds_ += seconds;
    final_loss_ = fb.loss;
    Metrics metrics = {{"train/loss", fb.loss},
                       {"train/grad_norm", grad_norm},
                       {"train/lr", lr},
                       {"perf/tokens", double(step_tokens)},
                       {"perf/throughput", double(step_tokens) / seconds},
                       {"perf/mfu", flops / seconds / (peak_gflops_ * 1e9 * double(world_.size()))}};
    if (config_.megatron.skips_non_finite_steps()) metrics["train/skipped_steps"] = double(engine_.num_skipped_steps());
    return metrics;
  }

  Validation validate(int64_t step) override {
    const Evaluation eval = evaluate(engine_, source_, tokens_, builder_, data_, capacity_, kernels_, parallel_, tracker_);
    const std::optional<double> target = config_.trainer.stop_at_val_acc;
    const bool reached = target && eval.accuracy >= *target;
    if (reached && lead_) core::log_info("trainer.stop_at_val_acc {} reached at step {}", *target, step);
    return {.metrics = {{fmt::format("val-core/{}/acc/mean@1", source_.name()), eval.accuracy}},
            .score = eval.accuracy,
            .stop = reached};
  }

  void save_checkpoint(int64_t step, const nlohmann::json& metrics_row) override {
    // Every rank writes its part of the step (train_engine.h); rank 0 the trainer's state.
    checkpoint::CheckpointWriter writer(config_.trainer.default_local_dir, step, world_);
    engine_.save_checkpoint(writer, kComponent);
    engine::add_hf_export(writer, export_folder_, engine_.master_weights(), parallel_);
    if (lead_) {
      writer.add_json("trainer", "state", nlohmann::json{{"global_step", step}, {"data_cursor", cursor_.to_json()}});
      add_metrics_row(writer, metrics_row);
    }
    writer.commit();
  }

  std::string task_name() const { return source_.name(); }
  const MemoryTracker& tracker() const { return tracker_; }
  double final_loss() const { return final_loss_; }
  // Tokens per second of the training steps alone (validation and checkpoints not counted).
  double tokens_per_second() const { return train_seconds_ > 0 ? double(tokens_run_) / train_seconds_ : 0; }

 private:
  static std::optional<model::HfModelFolder> open_source_folder(const ModelSection& model) {
    if (!model.path) return std::nullopt;
    if (model.config.IsDefined() && !model.config.IsNull())
      core::log_warning("model.config is ignored: model.path {} gives the model's config.json", *model.path);
    return model::HfModelFolder::open(*model.path);
  }
  // The export folder, once the tokenizer and the sequence length are known to fit the model.
  static model::HfModelFolder checked_export_folder(const ModelSection& model, const data::DataConfig& data,
                                                    const std::optional<model::HfModelFolder>& source,
                                                    const model::ModelConfig& config, const RunTokenizer& tokens) {
    check_tokenizer_fits(tokens, model, config);
    if (data.max_length > config.max_position_embeddings)
      throw ConfigError("data.max_length", fmt::format("{} tokens exceed the model's max_position_embeddings {}",
                                                       data.max_length, config.max_position_embeddings));
    return make_export_folder(source, config, tokens);
  }
  static optim::OptimConfig optim_config(const SftConfig& config) {
    optim::OptimConfig optim = config.optim;
    optim.total_training_steps = config.trainer.total_training_steps;
    return optim;
  }

  const SftConfig& config_;
  const data::DataConfig& data_;
  dist::ProcessGroup& world_;
  const bool lead_;
  const std::string resolved_yaml_;
  const RunFolder folder_;  // locked before anything is written
  const ThreadPool pool_;
  const kernels::KernelRegistry kernels_;
  const std::optional<model::HfModelFolder> source_folder_;
  const RunTokenizer tokens_;
  const ExampleSource source_;
  const model::ModelConfig model_config_;
  const model::HfModelFolder export_folder_;
  const int64_t capacity_;
  const data::SftBatchBuilder builder_;
  dist::ParallelContext parallel_;
  MemoryTracker tracker_;
  engine::TrainEngine engine_;
  data::DataCursor cursor_;
  const double peak_gflops_;
  int64_t tokens_run_ = 0;
  double train_seconds_ = 0, final_loss_ = 0;
};

}  // namespace

SftSummary run_sft(const SftConfig& config, const std::string& resolved_yaml, dist::ProcessGroup& world) {
  const TrainerConfig& trainer = config.trainer;
  SftTrainer sft(config, resolved_yaml, world);
  const bool lead = world.rank() == 0;
  const LoopSchedule schedule{.total_steps = trainer.total_training_steps,
                              .test_freq = trainer.test_freq,
                              .save_freq = trainer.save_freq,
                              .validate_before_training = false,
                              .validate_at_end = true,
                              .time_budget_s = std::nullopt};
  const LoopOutput output{.run_dir = trainer.default_local_dir,
                          .console = has_logger(trainer.logger, Logger::console),
                          .jsonl = has_logger(trainer.logger, Logger::jsonl),
                          .lead = lead,
                          .console_keys = {},
                          .plot = {{"training loss", {"train/loss"}}, {"validation", {"val-core/"}}}};
  const LoopSummary loop = run_loop(sft, schedule, output, sft.tracker());
  const SftSummary summary{.steps_run = loop.steps_run,
                           .final_step = loop.final_step,
                           .final_loss = sft.final_loss(),
                           .val_accuracy = loop.final_score,
                           .train_seconds = loop.seconds,
                           .tokens_per_second = sft.tokens_per_second()};
  if (!lead) return summary;
  std::printf("\nsft done: %lld steps (to step %lld) in %.1f s, %.0f tokens/s; final loss %.4f; "
              "val-core/%s/acc/mean@1 %.3f\n",
              (long long)summary.steps_run, (long long)summary.final_step, summary.train_seconds,
              summary.tokens_per_second, summary.final_loss, sft.task_name().c_str(), summary.val_accuracy);
  std::printf("memory %s\n", sft.tracker().summary().c_str());
  if (output.jsonl)
    std::printf("metrics: %s/metrics.jsonl (plot: %s/metrics.svg)\n", output.run_dir.c_str(), output.run_dir.c_str());
  return summary;
}

}  // namespace rf::trainer

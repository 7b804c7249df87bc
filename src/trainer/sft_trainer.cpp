#include "trainer/sft_trainer.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "trainer/metrics_log.h"
#include "trainer/metrics_plot.h"
#include "trainer/sft_parallel.h"
#include "engine/parallel_setup.h"
#include "trainer/run_tokenizer.h"
#include "config/yaml_json.h"
#include "checkpoint/checkpoint_reader.h"
#include "checkpoint/checkpoint_writer.h"
#include "core/element_access.h"
#include "core/log.h"
#include "core/stopwatch.h"
#include "core/thread_pool.h"
#include "data/data_cursor.h"
#include "data/jsonl_dataset.h"
#include "data/sft_batch.h"
#include "engine/greedy_decode.h"
#include "engine/hf_checkpoint.h"
#include "engine/train_engine.h"
#include "formats/atomic_file.h"
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

void prepare_run_folder(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir))
    throw IoError(dir, "cannot create the run folder (trainer.default_local_dir): " +
                           (ec ? ec.message() : std::string("a file is in the way")));
}

engine::LossOutput token_mean_nll(const engine::TensorMap& mb, const model::ModelOutputs& out,
                                  const engine::LossContext& ctx, const model::OutputGrads& grads) {
  const float* mask = mb.get("loss_mask").data<float>();
  const float* logp = out.logp_N.data<float>();
  float* dlogp = grads.dlogp_N.data<float>();
  const double scale = 1.0 / double(ctx.global_num_tokens);
  engine::LossOutput result;
  for (int64_t n = 0; n < grads.dlogp_N.numel(); ++n) {
    result.loss -= double(mask[n]) * double(logp[n]) * scale;
    dlogp[n] = float(-double(mask[n]) * scale);
  }
  return result;
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

Evaluation evaluate(engine::TrainEngine& engine, const ExampleSource& source, const RunTokenizer& tokens,
                    const data::SftBatchBuilder& builder, const data::DataConfig& data, int64_t capacity) {
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
    const int64_t max_new = std::max<int64_t>(1, data.max_length - int64_t(prompts.front().size()));
    const auto generated = engine::greedy_decode(engine.model(), prompts, max_new, tokens.stop_ids, num_candidates);
    for (size_t i = 0; i < generated.size(); ++i)
      correct += source.score(tokens.tokenizer->decode(generated[i], data::SpecialTokens::skip),
                              examples[i].ground_truth);
  }
  return {count ? correct / double(count) : 0.0, count};
}

}  // namespace

SftSummary run_sft(const SftConfig& config, const std::string& resolved_yaml, dist::ProcessGroup& world) {
  const TrainerConfig& trainer = config.trainer;
  const data::DataConfig& data_config = config.data;
  // Every rank trains; rank 0 of the world alone writes the run folder, the metrics and the console.
  const bool lead = world.rank() == 0;
  const ThreadPool pool(trainer.num_threads);
  const kernels::KernelRegistry kernels(kernels::run_kernel_config(false));
  if (lead) {
    core::log_info("{}", pool.describe());
    core::log_info("{}", kernels.describe());
  }

  const std::filesystem::path run_dir = trainer.default_local_dir;
  if (lead) {
    prepare_run_folder(trainer.default_local_dir);
    formats::write_file_atomically((run_dir / "config.yaml").string(), resolved_yaml);
  }

  std::optional<model::HfModelFolder> source_folder;
  if (config.model.path) {
    source_folder = model::HfModelFolder::open(*config.model.path);
    if (config.model.config.IsDefined() && !config.model.config.IsNull())
      core::log_warning("model.config is ignored: model.path {} gives the model's config.json", *config.model.path);
  }
  const RunTokenizer tokens = make_run_tokenizer(config.model, data_config, source_folder ? &*source_folder : nullptr);
  const ExampleSource source(data_config);
  const model::ModelConfig model_config =
      source_folder ? source_folder->config : make_model_config(config.model, tokens);
  check_tokenizer_fits(tokens, config.model, model_config);
  const model::HfModelFolder export_folder = make_export_folder(source_folder, model_config, tokens);
  if (lead)
    core::log_info("model {} ({} parameters)", model_config.describe(),
                   model::ParamLayout::for_model(model_config).num_parameters());

  const int64_t tokens_per_micro_batch = data_config.micro_batch_size_per_gpu * data_config.max_length;
  // Evaluation packs many prompts per forward; give it room for a few hundred short problems.
  const int64_t capacity = std::max<int64_t>(tokens_per_micro_batch, 4096);
  const data::SftBatchBuilder builder(*tokens.tokenizer, tokens.special_ids,
                                      data::SftPackingConfig{data_config.max_length, tokens_per_micro_batch});

  optim::OptimConfig optim_config = config.optim;
  optim_config.total_training_steps = trainer.total_training_steps;
  dist::ParallelContext parallel = engine::make_parallel_context(config.megatron, world);
  MemoryTracker tracker;
  engine::TrainEngine engine(config.megatron, optim_config, model_config, kernels, parallel, tracker, capacity);

  data::DataCursor cursor{data_config.seed, 0, 0};
  int64_t start_step = 0;
  const std::optional<int64_t> latest =
      trainer.resume_mode == "auto" ? checkpoint::CheckpointReader::latest_step(trainer.default_local_dir) : std::nullopt;
  if (latest) {
    const checkpoint::CheckpointReader reader(trainer.default_local_dir, *latest);
    engine.load_checkpoint(reader, kComponent);
    const nlohmann::json state = reader.read_json("trainer", "state");
    cursor = data::DataCursor::from_json(state.at("data_cursor"), reader.step_dir() + "/trainer/state");
    start_step = *latest;
    core::log_info("resumed from {}/global_step_{}", trainer.default_local_dir, *latest);
  } else if (config.model.path) {
    engine.load_hf_weights(*config.model.path);
  } else {
    engine.init_random_weights(config.megatron.seed);
  }

  const bool console = std::find(trainer.logger.begin(), trainer.logger.end(), "console") != trainer.logger.end();
  const bool jsonl = std::find(trainer.logger.begin(), trainer.logger.end(), "jsonl") != trainer.logger.end();
  MetricsLog metrics(jsonl && lead ? (run_dir / "metrics.jsonl").string() : std::string(), start_step);
  const std::string task_name = source.name();
  const double peak_gflops = kernels::measure_gemm_peak(engine.compute_dtype()).best();

  SftSummary summary;
  summary.final_step = start_step;
  Stopwatch run_clock;
  int64_t tokens_run = 0;
  for (int64_t step = start_step + 1; step <= trainer.total_training_steps; ++step) {
    Stopwatch step_clock;
    std::vector<engine::TensorMap> micro_batches;
    double flops = 0;
    std::vector<data::Example> global_batch;
    for (int64_t i = 0; i < data_config.train_batch_size; ++i) global_batch.push_back(source.next_train(cursor));
    const std::vector<data::Example> share = dp_share(std::move(global_batch), parallel.dp());
    for (size_t first = 0; first < share.size(); first += size_t(data_config.micro_batch_size_per_gpu)) {
      const size_t last = std::min(share.size(), first + size_t(data_config.micro_batch_size_per_gpu));
      const std::vector<data::Example> examples(share.begin() + int64_t(first), share.begin() + int64_t(last));
      for (data::SftMicroBatch& mb : builder.build(examples)) {
        flops += train_flops(model_config, mb.cu_seqlens);
        micro_batches.push_back(engine::make_micro_batch(std::move(mb.tokens_N), std::move(mb.positions_N),
                                                         std::move(mb.targets_N), std::move(mb.cu_seqlens)));
      }
    }
    const engine::ForwardBackwardResult fb = engine.forward_backward(micro_batches, token_mean_nll, engine::ForwardOnly::no);
    const double lr = engine.lr();
    const double grad_norm = engine.optimizer_step();
    engine.lr_step();
    const double seconds = step_clock.seconds();
    // Each DP rank ran its share of the batch (its TP ranks the same share): sum over DP.
    const int64_t step_tokens = int64_t(parallel.dp().all_reduce_scalar(double(fb.num_tokens), dist::ReduceOp::sum));
    flops = parallel.dp().all_reduce_scalar(flops, dist::ReduceOp::sum);
    tokens_run += step_tokens;

    nlohmann::json row = {{"step", step},
                          {"train/loss", fb.loss},
                          {"train/grad_norm", grad_norm},
                          {"train/lr", lr},
                          {"perf/tokens", step_tokens},
                          {"perf/throughput", double(step_tokens) / seconds},
                          {"perf/mfu", flops / seconds / (peak_gflops * 1e9 * double(world.size()))},
                          {"timing_s/step", seconds}};
    for (int t = 0; t < kNumMemoryTiers; ++t) {
      const auto tier = MemoryTier(t);
      if (tracker.peak(tier) == 0) continue;
      row[fmt::format("perf/max_memory_{}_bytes", memory_tier_name(tier))] = tracker.peak(tier);
      for (int c = 0; c < kNumMemoryCategories; ++c) {
        const auto category = MemoryCategory(c);
        if (tracker.peak(tier, category) > 0)
          row[fmt::format("perf/max_memory_{}_{}_bytes", memory_tier_name(tier), memory_category_name(category))] =
              tracker.peak(tier, category);
      }
    }
    bool last = step == trainer.total_training_steps;
    if (last || (trainer.test_freq > 0 && step % trainer.test_freq == 0)) {
      Stopwatch eval_clock;
      const Evaluation eval = evaluate(engine, source, tokens, builder, data_config, capacity);
      row[fmt::format("val-core/{}/acc/mean@1", task_name)] = eval.accuracy;
      row["timing_s/testing"] = eval_clock.seconds();
      summary.val_accuracy = eval.accuracy;
      if (trainer.stop_at_val_acc && eval.accuracy >= *trainer.stop_at_val_acc) {
        if (lead) core::log_info("trainer.stop_at_val_acc {} reached at step {}", *trainer.stop_at_val_acc, step);
        last = true;
      }
    }
    if (trainer.save_freq > 0 && (last || step % trainer.save_freq == 0)) {
      // Every rank writes its part of the step (train_engine.h); rank 0 the trainer's state.
      checkpoint::CheckpointWriter writer(trainer.default_local_dir, step, world);
      engine.save_checkpoint(writer, kComponent);
      engine::add_hf_export(writer, export_folder, engine.master_weights(), parallel);
      if (lead)
        writer.add_json("trainer", "state", nlohmann::json{{"global_step", step}, {"data_cursor", cursor.to_json()}});
      writer.commit();
    }
    metrics.write(row, console && lead);
    summary.final_loss = fb.loss;
    summary.final_step = step;
    ++summary.steps_run;
    if (last) break;
  }
  summary.train_seconds = run_clock.seconds();
  summary.tokens_per_second = summary.train_seconds > 0 ? double(tokens_run) / summary.train_seconds : 0;
  if (!lead) return summary;
  if (jsonl) write_metrics_plot((run_dir / "metrics.jsonl").string(), (run_dir / "metrics.svg").string(),
                                {{"training loss", {"train/loss"}}, {"validation", {"val-core/"}}});
  std::printf("\nsft done: %lld steps (to step %lld) in %.1f s, %.0f tokens/s; final loss %.4f; "
              "val-core/%s/acc/mean@1 %.3f\n",
              (long long)summary.steps_run, (long long)summary.final_step, summary.train_seconds,
              summary.tokens_per_second, summary.final_loss, task_name.c_str(), summary.val_accuracy);
  std::printf("memory %s\n", tracker.summary().c_str());
  if (jsonl) std::printf("metrics: %s (plot: %s)\n", (run_dir / "metrics.jsonl").c_str(), (run_dir / "metrics.svg").c_str());
  return summary;
}

}  // namespace rf::trainer

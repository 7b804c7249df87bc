#include "apps/rlforge/rl_trainer.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "apps/rlforge/metrics_log.h"
#include "apps/rlforge/metrics_plot.h"
#include "apps/rlforge/rl_advantages.h"
#include "apps/rlforge/rl_roles.h"
#include "apps/rlforge/sft_tokenizer.h"
#include "apps/rlforge/yaml_json.h"
#include "checkpoint/checkpoint_reader.h"
#include "checkpoint/checkpoint_writer.h"
#include "core/log.h"
#include "core/stopwatch.h"
#include "core/thread_pool.h"
#include "data/data_cursor.h"
#include "engine/hf_checkpoint.h"
#include "formats/atomic_file.h"
#include "rl/kl_controller.h"
#include "rl/rewards/reward_scorer.h"

namespace rf::apps {
namespace {

constexpr const char* kActor = "actor";

// The prompts of a built-in task, tokenized as the SFT warm start saw them ([bos] prompt).
class PromptSource {
 public:
  PromptSource(const RlConfig& config, const SftTokenizer& tokens)
      : task_(data::make_task(config.data.task, yaml_to_json(config.data.task_kwargs), data_seed(config))),
        builder_(*tokens.tokenizer, tokens.special_ids,
                 data::SftPackingConfig{config.prompt_length() + config.response_length(),
                                        config.prompt_length() + config.response_length()}),
        max_prompt_length_(config.prompt_length()) {}

  static uint64_t data_seed(const RlConfig& config) { return config.data.seed.value_or(1); }
  std::string data_source() const { return std::string(task_->name()); }
  RlPrompt next_train(data::DataCursor& cursor) const { return prompt(data::take_example(*task_, cursor)); }
  uint64_t num_val() const { return task_->num_val_examples(); }
  RlPrompt val(uint64_t i) const { return prompt(task_->example(data::Split::val, i)); }

 private:
  RlPrompt prompt(const data::Example& example) const {
    RlPrompt p{builder_.prompt_tokens(example), example.ground_truth};
    if (int64_t(p.tokens.size()) > max_prompt_length_)
      throw ConfigError("data.max_prompt_length", fmt::format("{} is shorter than the prompt '{}' ({} tokens)",
                                                              max_prompt_length_, example.prompt, p.tokens.size()));
    return p;
  }

  std::unique_ptr<data::Task> task_;
  data::SftBatchBuilder builder_;
  int64_t max_prompt_length_;
};

// The tokenizer of the policy: the model folder's own (an `rlforge sft` export carries it), or the
// one actor_rollout_ref.model.tokenizer_path names.
SftTokenizer make_tokenizer(const RlConfig& config, const model::HfModelFolder& folder) {
  ModelSection model;
  model.path = config.actor_rollout_ref.model.path;
  model.tokenizer = config.actor_rollout_ref.model.tokenizer_path;
  data::DataConfig data;
  data.task = config.data.task;
  data.task_kwargs = config.data.task_kwargs;
  data.max_length = config.prompt_length() + config.response_length();
  SftTokenizer tokens = make_sft_tokenizer(model, data, &folder);
  check_tokenizer_fits(tokens, model, folder.config);
  return tokens;
}

// Scores every response with the data source's rule scorer: score and extras (acc).
void score_batch(RlBatch& batch, std::span<const RlPrompt> prompts, const rl::RewardScorer& scorer,
                 const data::Tokenizer& tokenizer) {
  for (RlResponse& r : batch) {
    const std::string text = tokenizer.decode(r.response, data::SpecialTokens::skip);
    const rl::RewardScore s = scorer.score(text, nlohmann::json(prompts[size_t(r.group)].ground_truth), nullptr);
    r.score = s.score;
    r.reward_extra = s.extra;
  }
}

struct Validation {
  Metrics metrics;
  double score = 0;  // the core variable's mean: acc when the scorer returns it, else the reward
};

struct RunContext {
  const RlConfig& config;
  RlRoles& roles;
  const PromptSource& prompts;
  const rl::RewardScorer& scorer;
  const SftTokenizer& tokens;
  int64_t num_candidates;
};

Validation validate(RunContext& run) {
  const RlConfig& c = run.config;
  const int64_t count = int64_t(std::min<uint64_t>(uint64_t(c.data.val_size), run.prompts.num_val()));
  std::vector<RlPrompt> prompts;
  for (int64_t i = 0; i < count; ++i) prompts.push_back(run.prompts.val(uint64_t(i)));
  const auto params = val_sampling(c.actor_rollout_ref.rollout, c.response_length(), c.actor_rollout_ref.actor.megatron.seed);
  // Validation prompts keep their own request ids (above every training id), so they draw the
  // same way at every validation.
  RlBatch batch = run.roles.generate(prompts, uint64_t(1) << 31, params, run.tokens.stop_ids, run.num_candidates);
  score_batch(batch, prompts, run.scorer, *run.tokens.tokenizer);
  double reward = 0, acc = 0;
  bool has_acc = true;
  for (const RlResponse& r : batch) {
    reward += r.score;
    const auto it = r.reward_extra.find("acc");
    has_acc = has_acc && it != r.reward_extra.end();
    if (it != r.reward_extra.end()) acc += it->second;
  }
  const double n = double(std::max<size_t>(1, batch.size()));
  const std::string ds = run.prompts.data_source(), at = fmt::format("mean@{}", params.n);
  Validation v;
  if (has_acc) {
    v.metrics["val-core/" + ds + "/acc/" + at] = acc / n;
    v.metrics["val-aux/" + ds + "/reward/" + at] = reward / n;
    v.score = acc / n;
  } else {
    v.metrics["val-core/" + ds + "/reward/" + at] = reward / n;
    v.score = reward / n;
  }
  return v;
}

void add_memory_metrics(nlohmann::json& row, const MemoryTracker& tracker) {
  for (int t = 0; t < kNumMemoryTiers; ++t) {
    const auto tier = MemoryTier(t);
    if (tracker.peak(tier) > 0)
      row[fmt::format("perf/max_memory_{}_bytes", memory_tier_name(tier))] = tracker.peak(tier);
  }
}

// The step to resume from, per trainer.resume_mode (spec §2.8).
std::optional<int64_t> resume_step(const RlTrainerConfig& t, const std::string& run_dir) {
  if (t.resume_mode == "disable") return std::nullopt;
  if (t.resume_mode == "auto") return checkpoint::CheckpointReader::latest_step(run_dir);
  const std::string path = t.resume_from_path.value_or("");
  const size_t at = path.rfind("global_step_");
  if (at == std::string::npos)
    throw ConfigError("trainer.resume_from_path", fmt::format("'{}' must name a global_step_<k> folder", path));
  return std::stoll(path.substr(at + 12));
}

// Deletes all but the newest `keep` global_step_<k> folders (trainer.max_actor_ckpt_to_keep).
void prune_checkpoints(const std::string& run_dir, std::optional<int64_t> keep) {
  if (!keep || *keep <= 0) return;
  std::vector<std::pair<int64_t, std::filesystem::path>> steps;
  for (const auto& entry : std::filesystem::directory_iterator(run_dir)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_directory() && name.starts_with("global_step_") &&
        name.find_first_not_of("0123456789", 12) == std::string::npos && name.size() > 12)
      steps.emplace_back(std::stoll(name.substr(12)), entry.path());
  }
  std::sort(steps.begin(), steps.end());
  for (size_t i = 0; i + size_t(*keep) < steps.size(); ++i) std::filesystem::remove_all(steps[i].second);
}

}  // namespace

RlSummary run_rl(const RlConfig& config, const std::string& resolved_yaml, dist::ProcessGroup& world) {
  const RlTrainerConfig& trainer = config.trainer;
  const bool lead = world.rank() == 0;
  const ThreadPool pool(trainer.num_threads);
  if (lead) core::log_info("{}", pool.describe());
  if (!config.actor_rollout_ref.model.path)
    throw ConfigError("actor_rollout_ref.model.path",
                      "RL starts from a model: name an HF folder (an `rlforge sft` export's huggingface/ folder, "
                      "or a model of your own)");
  if (config.data.train_files)
    throw ConfigError("data.train_files", "JSONL RL data in verl's columns is not implemented yet (issue #10); "
                                          "use a built-in task (data.task)");
  const std::string model_dir = *config.actor_rollout_ref.model.path;
  const model::HfModelFolder folder = model::HfModelFolder::open(model_dir);
  const SftTokenizer tokens = make_tokenizer(config, folder);
  const PromptSource prompts(config, tokens);
  const std::unique_ptr<rl::RewardScorer> scorer = rl::make_rule_scorer(prompts.data_source());
  const int64_t num_candidates = std::min(folder.config.vocab_size, tokens.tokenizer->vocab_size());

  const std::string run_dir = config.run_dir();
  if (lead) {
    std::filesystem::create_directories(run_dir);
    formats::write_file_atomically(run_dir + "/config.yaml", resolved_yaml);
    core::log_info("model {} from {}", folder.config.describe(), model_dir);
  }
  MemoryTracker tracker;
  RlRoles roles(config, folder.config, world, tracker);
  roles.load_initial_weights(model_dir);

  data::DataCursor cursor{PromptSource::data_seed(config), 0, 0};
  rl::KlControlConfig kl_config;
  kl_config.type = rl::parse_kl_control_type(config.algorithm.kl_ctrl.type);
  kl_config.kl_coef = config.algorithm.kl_ctrl.kl_coef;
  kl_config.horizon = int64_t(config.algorithm.kl_ctrl.horizon);
  kl_config.target_kl = config.algorithm.kl_ctrl.target_kl;
  rl::KlController kl_controller(kl_config);
  int64_t start_step = 0;
  if (const std::optional<int64_t> step = resume_step(trainer, run_dir)) {
    const checkpoint::CheckpointReader reader(run_dir, *step);
    roles.actor().load_checkpoint(reader, kActor);
    const nlohmann::json state = reader.read_json("trainer", "state");
    cursor = data::DataCursor::from_json(state.at("data_cursor"), reader.step_dir() + "/trainer/state");
    kl_config.kl_coef = state.at("kl_coef").get<double>();
    kl_controller = rl::KlController(kl_config);
    start_step = *step;
    if (lead) core::log_info("resumed from {}/global_step_{}", run_dir, *step);
  }
  roles.sync_weights();

  const int64_t total_steps = *trainer.total_training_steps;
  const bool console = std::find(trainer.logger.begin(), trainer.logger.end(), "console") != trainer.logger.end();
  const bool jsonl = std::find(trainer.logger.begin(), trainer.logger.end(), "jsonl") != trainer.logger.end();
  const std::string metrics_path = run_dir + "/metrics.jsonl";
  // The console line: the score, the validation's core metric, what moves the policy, and the time.
  const std::string val_at = fmt::format("mean@{}", config.actor_rollout_ref.rollout.val_kwargs.n);
  const std::string ds = prompts.data_source();
  MetricsLog metrics_log(jsonl && lead ? metrics_path : std::string(), start_step,
                         {"critic/score/mean", "val-core/" + ds + "/acc/" + val_at, "val-core/" + ds + "/reward/" + val_at,
                          "actor/entropy", "actor/kl_loss", "actor/pg_clipfrac", "actor/grad_norm",
                          "response_length/mean", "rollout/logprob_diff_max", "timing_s/gen", "timing_s/update_actor",
                          "timing_s/step"});
  RunContext run{config, roles, prompts, *scorer, tokens, num_candidates};
  const RolloutSection& rollout = config.actor_rollout_ref.rollout;
  const uint64_t seed = config.actor_rollout_ref.actor.megatron.seed;

  RlSummary summary;
  summary.final_step = start_step;
  if (trainer.val_before_train && start_step == 0 && trainer.test_freq > 0) {
    const Validation v = validate(run);
    summary.first_val_score = v.score;
    nlohmann::json row = {{"step", 0}};
    for (const auto& [k, value] : v.metrics) row[k] = value;
    metrics_log.write(row, console && lead);
  }
  Stopwatch run_clock;
  for (int64_t step = start_step + 1; step <= total_steps; ++step) {
    Stopwatch step_clock;
    Metrics m;
    auto timed = [&](const std::string& stage, const auto& fn) {
      Stopwatch clock;
      fn();
      m["timing_s/" + stage] = clock.seconds();
    };
    std::vector<RlPrompt> batch_prompts;
    for (int64_t i = 0; i < config.data.train_batch_size; ++i) batch_prompts.push_back(prompts.next_train(cursor));
    RlBatch batch;
    timed("gen", [&] {
      batch = roles.generate(batch_prompts, uint64_t((step - 1) * config.data.train_batch_size),
                             train_sampling(rollout, config.response_length(), seed), tokens.stop_ids, num_candidates);
    });
    timed("reward", [&] { score_batch(batch, batch_prompts, *scorer, *tokens.tokenizer); });
    timed("old_log_prob", [&] {
      const Metrics entropy = roles.compute_log_prob(batch);
      m.insert(entropy.begin(), entropy.end());
    });
    if (roles.has_ref()) timed("ref", [&] { roles.compute_ref(batch); });
    timed("adv", [&] {
      const Metrics kl = compute_advantages(batch, config.algorithm, kl_controller);
      m.insert(kl.begin(), kl.end());
    });
    timed("update_actor", [&] {
      const Metrics actor = roles.update_actor(batch, step);
      m.insert(actor.begin(), actor.end());
    });
    timed("update_weights", [&] { roles.sync_weights(); });
    const Metrics data = data_metrics(batch, config.prompt_length(), config.response_length());
    m.insert(data.begin(), data.end());
    if (rollout.calculate_log_probs) {
      const Metrics diff = rollout_diff_metrics(batch);
      m.insert(diff.begin(), diff.end());
    }

    const bool out_of_time = trainer.time_budget_s && run_clock.seconds() >= *trainer.time_budget_s;
    const bool last = step == total_steps || out_of_time;
    if (trainer.test_freq > 0 && (last || step % trainer.test_freq == 0)) {
      timed("testing", [&] {
        const Validation v = validate(run);
        m.insert(v.metrics.begin(), v.metrics.end());
        summary.final_val_score = v.score;
        if (summary.first_val_score < 0) summary.first_val_score = v.score;
      });
    }
    if (trainer.save_freq > 0 && (last || step % trainer.save_freq == 0)) {
      timed("save_checkpoint", [&] {
        checkpoint::CheckpointWriter writer(run_dir, step, world);
        roles.actor().save_checkpoint(writer, kActor);
        engine::add_hf_export(writer, folder, roles.actor().master_weights(), roles.actor_parallel());
        if (lead)
          writer.add_json("trainer", "state",
                          nlohmann::json{{"global_step", step}, {"data_cursor", cursor.to_json()},
                                         {"kl_coef", kl_controller.value()}});
        writer.commit();
        if (lead) prune_checkpoints(run_dir, trainer.max_actor_ckpt_to_keep);
      });
    }
    int64_t step_tokens = 0;
    for (const RlResponse& r : batch) step_tokens += num_tokens(r);
    const double seconds = step_clock.seconds();
    m["timing_s/step"] = seconds;
    m["perf/total_num_tokens"] = double(step_tokens);
    m["perf/time_per_step"] = seconds;
    m["perf/throughput"] = double(step_tokens) / seconds / double(world.size());
    m["training/global_step"] = double(step);
    nlohmann::json row = {{"step", step}};
    for (const auto& [k, value] : m) row[k] = value;
    add_memory_metrics(row, tracker);
    metrics_log.write(row, console && lead);
    summary.final_step = step;
    ++summary.steps_run;
    if (out_of_time) {
      if (lead) core::log_info("trainer.time_budget_s {} reached after step {}", *trainer.time_budget_s, step);
      break;
    }
  }
  summary.train_seconds = run_clock.seconds();
  if (!lead) return summary;
  if (jsonl)
    write_metrics_plot(metrics_path, run_dir + "/metrics.svg",
                       {{"score", {"critic/score/mean", "val-core/"}},
                        {"KL", {"actor/kl_loss", "actor/ppo_kl", "actor/reward_kl_penalty"}},
                        {"entropy", {"actor/entropy"}},
                        {"response length", {"response_length/mean"}}});
  std::printf("\ntrain done: %lld steps (to step %lld) in %.1f s; validation score %.3f -> %.3f\n",
              (long long)summary.steps_run, (long long)summary.final_step, summary.train_seconds,
              summary.first_val_score, summary.final_val_score);
  std::printf("memory %s\n", tracker.summary().c_str());
  if (jsonl) std::printf("metrics: %s (plot: %s/metrics.svg)\n", metrics_path.c_str(), run_dir.c_str());
  return summary;
}

}  // namespace rf::apps

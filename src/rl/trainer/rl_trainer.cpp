#include "rl/trainer/rl_trainer.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "trainer/metrics_log.h"
#include "trainer/metrics_plot.h"
#include "rl/trainer/rl_advantages.h"
#include "rl/trainer/rl_generations.h"
#include "rl/trainer/rl_metrics.h"
#include "rl/trainer/rl_prompt_source.h"
#include "rl/trainer/rl_reward_model_input.h"
#include "rl/trainer/rl_roles.h"
#include "rl/trainer/rl_transfer.h"
#include "rl/trainer/role_placement.h"
#include "trainer/run_folder.h"
#include "trainer/run_tokenizer.h"
#include "config/yaml_json.h"
#include "checkpoint/checkpoint_reader.h"
#include "checkpoint/checkpoint_writer.h"
#include "core/log.h"
#include "core/memory_budget.h"
#include "core/stopwatch.h"
#include "core/thread_pool.h"
#include "data/data_cursor.h"
#include "engine/hf_checkpoint.h"
#include "kernels/gemm_peak.h"
#include "model/model_flops.h"
#include "rl/kl_controller.h"
#include "rl/rewards/python_reward_pool.h"
#include "rl/rewards/reward_scorer.h"

namespace rf::rl {
namespace {

constexpr const char* kActor = "actor";
constexpr const char* kCritic = "critic";

// The tokenizer of the policy: the model folder's own (an `rlforge sft` export carries it), or the
// one actor_rollout_ref.model.tokenizer_path names.
trainer::RunTokenizer make_tokenizer(const RlConfig& config, const model::HfModelFolder& folder) {
  trainer::ModelSection model;
  model.path = config.actor_rollout_ref.model.path;
  model.tokenizer = config.actor_rollout_ref.model.tokenizer_path;
  data::DataConfig data;
  data.task = config.data.task;
  data.task_kwargs = config.data.task_kwargs;
  data.max_length = config.prompt_length() + config.response_length();
  trainer::RunTokenizer tokens = trainer::make_run_tokenizer(model, data, &folder);
  trainer::check_tokenizer_fits(tokens, model, folder.config);
  return tokens;
}

// The reward function (rl/rewards/reward_function.h): a user's verl-style Python file
// (custom_reward_function), else the rule scorer of each row's data_source (verl's default_compute_score
// dispatch), every data_source it will score checked here, before training: an unknown one is
// make_rule_scorer's ConfigError, with the row it first appears in. With a reward model it scores the
// validation prompts only. Only the scoring rank (world rank 0) builds it.
std::unique_ptr<rl::RewardFunction> make_reward_function(const RlConfig& config, const PromptSource& prompts) {
  const CustomRewardFunctionSection& c = config.custom_reward_function;
  if (c.path) {
    rl::PythonRewardConfig python = c.python;
    python.path = *c.path;
    python.reward_kwargs = c.reward_kwargs.IsDefined() && !c.reward_kwargs.IsNull() ? config::yaml_to_json(c.reward_kwargs)
                                                                                    : nlohmann::json::object();
    return std::make_unique<rl::PythonRewardFunction>(std::move(python));
  }
  const bool validation_only = config.reward_model.enable;
  const bool validates = config.trainer.test_freq > 0;
  if (validation_only && !validates) return std::make_unique<rl::RuleRewardFunction>();  // never called
  for (const auto& [data_source, where] :
       validation_only ? prompts.validation_data_sources() : prompts.data_sources()) {
    try {
      rl::make_rule_scorer(data_source);
    } catch (const ConfigError& error) {
      throw ConfigError(error.key_path(), fmt::format("{} (in {})", error.detail(), where));
    }
  }
  return std::make_unique<rl::RuleRewardFunction>();
}

// What the rollout reads of each prompt: its tokens (the reward reads the rows).
std::vector<RlPrompt> rollout_prompts(std::span<const PromptRow> rows) {
  std::vector<RlPrompt> prompts;
  prompts.reserve(rows.size());
  for (const PromptRow& row : rows) prompts.push_back({row.tokens, {}});
  return prompts;
}

// Scores every response (score and extras such as acc) on world rank 0, which holds the reward function,
// and sends the scores to every rank. The response is decoded without special tokens (its eos), as verl's
// reward manager does; extra_info is an object, as verl passes it. Then, with reward_manager dapo, every
// rank adds the overlong penalty of each response's length (eos included). Returns the samples the
// failure policy scored 0 (custom_reward_function.on_error: zero).
int64_t score_batch(RlBatch& batch, std::span<const PromptRow> prompts, rl::RewardFunction* reward,
                    const data::Tokenizer& tokenizer, const rl::OverlongBufferConfig& overlong,
                    dist::ProcessGroup& world) {
  std::optional<std::string> error;
  int64_t failed = 0;
  if (reward) {
    std::vector<rl::RewardRequest> requests;
    requests.reserve(batch.size());
    for (const RlResponse& r : batch) {
      const PromptRow& row = prompts[size_t(r.group)];
      requests.push_back({row.data_source, tokenizer.decode(r.response, data::SpecialTokens::skip), row.ground_truth,
                          row.extra_info.is_null() ? nlohmann::json::object() : row.extra_info});
    }
    try {
      const std::vector<rl::RewardOutcome> outcomes = reward->score(requests);
      for (size_t i = 0; i < batch.size(); ++i) {
        batch[i].score = outcomes[i].score.score;
        batch[i].reward_extra = outcomes[i].score.extra;
      }
      failed = rl::count_failures(outcomes);
    } catch (const Error& e) {
      if (world.size() == 1) throw;
      error = e.what();
    }
  }
  broadcast_scores(batch, error, world, 0);
  if (overlong.enable)
    for (RlResponse& r : batch) {
      const double penalty = rl::overlong_reward(int64_t(r.response.size()), overlong);
      r.score += penalty;
      if (!overlong.log) continue;
      r.reward_extra["overlong_reward"] = penalty;
      r.reward_extra["overlong"] = penalty < 0 ? 1.0 : 0.0;
    }
  return int64_t(world.all_reduce_scalar(double(failed), dist::ReduceOp::sum));
}

struct RunContext {
  const RlConfig& config;
  dist::ProcessGroup& world;
  RlRoles& roles;
  const PromptSource& prompts;
  rl::RewardFunction* reward;  // world rank 0's; null elsewhere
  const trainer::RunTokenizer& tokens;
  const rl::OverlongBufferConfig& overlong;  // reward_manager dapo's penalty, read once
  int64_t num_candidates;
};

// verl's val metrics per data source: val-core/<data_source>/<acc or reward>/mean@n, and the reward as
// val-aux when acc is the core variable. `step`: the step it follows (0: before training), for the
// generations it dumps and logs (rl_generations.h).
Validation run_validation(RunContext& run, int64_t step) {
  const RlConfig& c = run.config;
  const std::vector<PromptRow> prompts = run.prompts.validation();
  const auto params = val_sampling(c.actor_rollout_ref.rollout, c.response_length(), c.actor_rollout_ref.actor.megatron.seed);
  // Validation prompts keep their own request ids (above every training id), so they draw the
  // same way at every validation.
  RlBatch batch =
      run.roles.generate(rollout_prompts(prompts), uint64_t(1) << 31, params, run.tokens.stop_ids, run.num_candidates);
  score_batch(batch, prompts, run.reward, *run.tokens.tokenizer, run.overlong, run.world);
  const RlTrainerConfig& t = c.trainer;
  if (run.world.rank() == 0 && (t.validation_data_dir || t.log_val_generations > 0)) {
    const std::vector<Generation> generations = generations_of(batch, prompts, *run.tokens.tokenizer);
    if (t.validation_data_dir) dump_generations(*t.validation_data_dir, step, generations);
    log_generations(generations, t.log_val_generations, step);
  }
  struct Sums {
    double reward = 0, acc = 0;
    int64_t count = 0;
    bool has_acc = true;
  };
  std::map<std::string, Sums> by_source;
  for (const RlResponse& r : batch) {
    Sums& sums = by_source[prompts[size_t(r.group)].data_source];
    sums.reward += r.score;
    const auto it = r.reward_extra.find("acc");
    sums.has_acc = sums.has_acc && it != r.reward_extra.end();
    if (it != r.reward_extra.end()) sums.acc += it->second;
    ++sums.count;
  }
  const std::string at = fmt::format("mean@{}", params.n);
  Validation v;
  for (const auto& [ds, sums] : by_source) {
    const double n = double(sums.count);
    if (sums.has_acc) {
      v.metrics["val-core/" + ds + "/acc/" + at] = sums.acc / n;
      v.metrics["val-aux/" + ds + "/reward/" + at] = sums.reward / n;
      v.score += sums.acc / n;
    } else {
      v.metrics["val-core/" + ds + "/reward/" + at] = sums.reward / n;
      v.score += sums.reward / n;
    }
  }
  if (!by_source.empty()) v.score /= double(by_source.size());
  return v;
}

// What MFU needs besides the step's timings: each model's config, the roles' rank counts and the
// measured GEMM peak of the actor's and the rollout's compute dtypes (world rank 0 only, which logs).
struct MfuInputs {
  const RlConfig& config;
  const model::ModelConfig& policy;
  const model::ModelConfig* critic;        // null without a critic
  const model::ModelConfig* reward_model;  // null without a reward model
  RlRoles::RankCounts ranks;
  double actor_peak_gflops, rollout_peak_gflops;
};

// verl's perf/mfu/{actor, actor_infer, critic} (and rlforge's rollout, ref, critic_infer, reward_model) with
// MindSpeed's perf/tflops/<stage> per rank: each stage's model FLOPs (model/model_flops.h; an update counts
// its epochs) over its time and its role's ranks, against the GEMM peak measured at start-up.
Metrics mfu_metrics(const Metrics& timing, const RlBatch& batch, const RlBatch* rm_sequences, const MfuInputs& in) {
  std::vector<int64_t> lengths;
  for (const RlResponse& r : batch) lengths.push_back(num_tokens(r));
  Metrics m;
  const auto add = [&](const std::string& stage, const std::string& name, double flops, int64_t ranks, double peak) {
    const auto it = timing.find("timing_s/" + stage);
    if (it == timing.end() || !(it->second > 0) || !(peak > 0)) return;
    const double per_rank = flops / it->second / double(ranks);
    m["perf/mfu/" + name] = per_rank / (peak * 1e9);
    m["perf/tflops/" + name] = per_rank / 1e12;
  };
  const RlConfig& c = in.config;
  const double policy_forward = model::forward_flops(in.policy, lengths);
  // Generation: with prefix caching a group's prompt runs once, each response then continues from it.
  double generation = policy_forward;
  if (c.actor_rollout_ref.rollout.engine.enable_prefix_caching) {
    generation = 0;
    std::set<int64_t> prefilled;
    for (const RlResponse& r : batch) {
      const int64_t prompt[] = {int64_t(r.prompt.size())}, whole[] = {num_tokens(r)};
      const double prompt_flops = model::forward_flops(in.policy, prompt);
      generation += model::forward_flops(in.policy, whole) - prompt_flops;
      if (prefilled.insert(r.group).second) generation += prompt_flops;
    }
  }
  add("gen", "rollout", generation, in.ranks.rollout, in.rollout_peak_gflops);
  add("old_log_prob", "actor_infer", policy_forward, in.ranks.actor, in.actor_peak_gflops);
  add("ref", "ref", policy_forward, in.ranks.ref, in.actor_peak_gflops);
  add("update_actor", "actor", double(c.actor_rollout_ref.actor.ppo_epochs) * model::train_flops(in.policy, lengths),
      in.ranks.actor, in.actor_peak_gflops);
  if (in.critic) {
    add("values", "critic_infer", model::forward_flops(*in.critic, lengths), in.ranks.critic, in.actor_peak_gflops);
    add("update_critic", "critic", double(c.critic_ppo_epochs()) * model::train_flops(*in.critic, lengths),
        in.ranks.critic, in.actor_peak_gflops);
  }
  if (in.reward_model && rm_sequences) {
    std::vector<int64_t> rm_lengths;
    for (const RlResponse& r : *rm_sequences) rm_lengths.push_back(num_tokens(r));
    add("reward", "reward_model", model::forward_flops(*in.reward_model, rm_lengths), in.ranks.reward_model,
        in.actor_peak_gflops);
  }
  return m;
}

// How many global_step_<k> folders to keep (null: all): the actor's limit, or with a critic the larger
// of the two roles' limits, since one step folder holds both (one manifest, resumed as a whole).
std::optional<int64_t> checkpoints_to_keep(const RlConfig& config) {
  const RlTrainerConfig& t = config.trainer;
  if (!config.uses_critic() || !t.max_actor_ckpt_to_keep) return t.max_actor_ckpt_to_keep;
  if (!t.max_critic_ckpt_to_keep) return std::nullopt;
  return std::max(*t.max_actor_ckpt_to_keep, *t.max_critic_ckpt_to_keep);
}

// The policy's HF folder: RL starts from a model, whose positions must hold a prompt and its response (every
// pass scores them; the rollout would refuse them only at generation).
model::HfModelFolder open_policy_folder(const RlConfig& config) {
  if (!config.actor_rollout_ref.model.path)
    throw ConfigError("actor_rollout_ref.model.path",
                      "RL starts from a model: name an HF folder (an `rlforge sft` export's huggingface/ folder, "
                      "or a model of your own)");
  model::HfModelFolder folder = model::HfModelFolder::open(*config.actor_rollout_ref.model.path);
  const int64_t longest = config.prompt_length() + config.response_length();
  if (longest > folder.config.max_position_embeddings)
    throw ConfigError("data.max_response_length",
                      fmt::format("a prompt of {} tokens and a response of {} make {}, beyond the max_position_embeddings "
                                  "{} of {}/config.json",
                                  config.prompt_length(), config.response_length(), longest,
                                  folder.config.max_position_embeddings, *config.actor_rollout_ref.model.path));
  return folder;
}

// The console line: the score, the validation's core metric, what moves the policy, and the time.
std::vector<std::string> console_keys(const RlConfig& config, const PromptSource& prompts, bool with_critic) {
  const std::string val_at = fmt::format("mean@{}", config.actor_rollout_ref.rollout.val_kwargs.n);
  std::vector<std::string> keys = {"critic/score/mean"};
  for (const auto& [ds, where] : prompts.data_sources())
    for (const char* core : {"acc", "reward"}) keys.push_back(fmt::format("val-core/{}/{}/{}", ds, core, val_at));
  for (const char* key : {"actor/entropy", "actor/kl_loss", "actor/pg_clipfrac", "actor/grad_norm"})
    keys.emplace_back(key);
  if (with_critic)
    for (const char* key : {"critic/vf_loss", "critic/vf_explained_var"}) keys.emplace_back(key);
  for (const char* key : {"response_length/mean", "rollout/logprob_diff_max", "timing_s/gen", "timing_s/update_actor",
                          "timing_s/step"})
    keys.emplace_back(key);
  return keys;
}

}  // namespace

// Everything a run holds, built in this order: the thread pool first (it sets the OpenMP threads every
// later kernel runs on), the data and reward before the run folder is written, the roles after it.
struct RlTrainer::State {
  State(const RlConfig& c, const std::string& resolved_yaml, dist::ProcessGroup& w)
      : config(c),
        world(w),
        lead(w.rank() == 0),
        pool(c.trainer.num_threads, "trainer.num_threads"),
        folder(open_policy_folder(c)),
        tokens(make_tokenizer(c, folder)),
        prompts(c, tokens),
        reward(lead ? make_reward_function(c, prompts) : nullptr),
        reward_model_input(c.reward_model.enable ? std::make_optional<RewardModelInput>(c, tokens, folder)
                                                 : std::nullopt),
        num_candidates(std::min(folder.config.vocab_size, tokens.tokenizer->vocab_size())),
        resolved_yaml(resolved_yaml),
        run_folder(c.run_dir(), lead),
        run_dir(run_folder.dir()),
        roles(c, folder.config, w,
              with_device_budget(tracker, c.resources.enforce_device_memory
                                              ? std::make_optional(c.resources.device_memory_gb)
                                              : std::nullopt),
              role_placement(c, w.size())),
        critic_folder(c.uses_critic() ? std::make_optional(critic_hf_folder(c)) : std::nullopt),
        reward_model_folder(c.reward_model.enable
                                ? std::make_optional(model::HfModelFolder::open(*c.reward_model.model.path))
                                : std::nullopt),
        cursor(prompts.start()),
        kl_controller(c.algorithm.kl_ctrl),
        overlong(c.overlong_buffer()) {
    if (lead) {
      core::log_info("{}", pool.describe());
      core::log_info("model {} from {}", folder.config.describe(), *c.actor_rollout_ref.model.path);
    }
    roles.load_initial_weights(*c.actor_rollout_ref.model.path);
    // The GEMM peak MFU divides by, measured where the metrics are written (~1.5 s per dtype).
    const DType actor_dtype = c.actor_rollout_ref.actor.megatron.compute_dtype();
    const DType rollout_dtype = engine::EngineConfig{.dtype = c.actor_rollout_ref.rollout.dtype}.compute_dtype();
    if (lead) {
      actor_peak = kernels::measure_gemm_peak(actor_dtype).best();
      rollout_peak = rollout_dtype == actor_dtype ? actor_peak : kernels::measure_gemm_peak(rollout_dtype).best();
      core::log_info("GEMM peak for MFU (2048^3, best engine): {:.1f} GFLOP/s for the actor, {:.1f} for the rollout",
                     actor_peak, rollout_peak);
      core::log_info("{}", roles.rollout_shares_actor_weights()
                               ? "rollout: reads the actor's weights in place (same ranks, TP and dtype): the sync copies nothing"
                               : "rollout: its own weight copy, loaded from the actor's by the sync after each update");
    }
  }

  RunContext run_context() {
    return {config, world, roles, prompts, reward.get(), tokens, overlong, num_candidates};
  }
  MfuInputs mfu() const {
    return {config,
            folder.config,
            critic_folder ? &critic_folder->config : nullptr,
            reward_model_folder ? &reward_model_folder->config : nullptr,
            roles.rank_counts(),
            actor_peak,
            rollout_peak};
  }

  const RlConfig& config;
  dist::ProcessGroup& world;
  const bool lead;
  const ThreadPool pool;
  const model::HfModelFolder folder;
  const trainer::RunTokenizer tokens;
  const PromptSource prompts;
  const std::unique_ptr<rl::RewardFunction> reward;  // world rank 0's
  std::optional<RewardModelInput> reward_model_input;
  const int64_t num_candidates;
  const std::string resolved_yaml;
  const trainer::RunFolder run_folder;  // locked before anything is written
  const std::string run_dir;
  MemoryTracker tracker;
  RlRoles roles;
  // What the critic's checkpoints export as a Hugging Face folder (critic_huggingface/).
  const std::optional<model::HfModelFolder> critic_folder;
  const std::optional<model::HfModelFolder> reward_model_folder;
  double actor_peak = 0, rollout_peak = 0;
  data::DataCursor cursor;
  rl::KlController kl_controller;
  const rl::OverlongBufferConfig overlong;
};

RlTrainer::RlTrainer(const RlConfig& config, const std::string& resolved_yaml, dist::ProcessGroup& world)
    : s_(std::make_unique<State>(config, resolved_yaml, world)) {}

RlTrainer::~RlTrainer() = default;

trainer::Resumed RlTrainer::resume() {
  State& s = *s_;
  trainer::Resumed resumed;
  const RlTrainerConfig& t = s.config.trainer;
  if (const std::optional<trainer::CheckpointRef> from = s.run_folder.resume_point(t.resume_mode, t.resume_from_path, "trainer")) {
    const checkpoint::CheckpointReader reader(from->root, from->step);
    if (s.roles.in_actor()) s.roles.actor().load_checkpoint(reader, kActor);
    if (s.roles.in_critic()) s.roles.critic().load_checkpoint(reader, kCritic);
    const nlohmann::json state = reader.read_json("trainer", "state");
    s.cursor = data::DataCursor::from_json(state.at("data_cursor"), reader.step_dir() + "/trainer/state");
    rl::KlControlConfig kl = s.config.algorithm.kl_ctrl;
    kl.kl_coef = state.at("kl_coef").get<double>();
    s.kl_controller = rl::KlController(kl);
    resumed = {from->step, trainer::read_metrics_row(reader)};
    if (s.lead) core::log_info("resumed from {}", reader.step_dir());
  }
  s.roles.sync_weights();
  // Only now: a run refused while setting up or resuming leaves the folder's config.yaml as it was.
  s.run_folder.write_config(s.resolved_yaml);
  return resumed;
}

Validation RlTrainer::validate(int64_t step) {
  RunContext run = s_->run_context();
  return run_validation(run, step);
}

Metrics RlTrainer::step(int64_t step) {
  State& s = *s_;
  const RlConfig& config = s.config;
  RlRoles& roles = s.roles;
  Metrics m;
  auto timed = [&](const std::string& stage, const auto& fn) {
    Stopwatch clock;
    fn();
    m["timing_s/" + stage] = clock.seconds();
  };
  const std::vector<PromptRow> prompts = s.prompts.next_batch(s.cursor);
  const uint64_t request_base = uint64_t((step - 1) * config.data.train_batch_size);
  const RolloutSection& rollout = config.actor_rollout_ref.rollout;
  const uint64_t seed = config.actor_rollout_ref.actor.megatron.seed;
  RlBatch batch, rm_sequences;
  timed("gen", [&] {
    batch = roles.generate(rollout_prompts(prompts), request_base, train_sampling(rollout, config.response_length(), seed),
                           s.tokens.stop_ids, s.num_candidates);
  });
  // ReMax (verl's gen_max): a greedy response per prompt, scored as the batch will be; its score is the
  // baseline of the prompt's responses.
  if (config.algorithm.adv_estimator == "remax")
    timed("gen_max", [&] {
      RlBatch greedy = roles.generate(rollout_prompts(prompts), request_base,
                                      greedy_sampling(rollout, config.response_length(), seed), s.tokens.stop_ids,
                                      s.num_candidates);
      if (s.reward_model_input)
        roles.compute_rm_scores(greedy, s.reward_model_input->sequences(greedy, prompts));
      else
        score_batch(greedy, prompts, s.reward.get(), *s.tokens.tokenizer, s.overlong, s.world);
      for (RlResponse& r : batch) r.reward_baseline = greedy[size_t(r.group)].score;
    });
  timed("reward", [&] {
    // verl's naive reward manager returns the reward model's scores when there are any.
    if (s.reward_model_input) {
      rm_sequences = s.reward_model_input->sequences(batch, prompts);
      roles.compute_rm_scores(batch, rm_sequences);
      return;
    }
    const int64_t failed = score_batch(batch, prompts, s.reward.get(), *s.tokens.tokenizer, s.overlong, s.world);
    if (config.custom_reward_function.path) m["reward/num_failed"] = double(failed);
  });
  // verl's balance_batch metrics, over the actor's DP ranks (each pass balances its own shares).
  if (config.trainer.balance_batch) {
    const Metrics balance = seqlen_balance_metrics(batch, roles.actor_dp_size());
    m.insert(balance.begin(), balance.end());
  }
  if (s.lead && config.trainer.rollout_data_dir)
    timed("dump_rollout_generations", [&] {
      dump_generations(*config.trainer.rollout_data_dir, step, generations_of(batch, prompts, *s.tokens.tokenizer));
    });
  timed("old_log_prob", [&] {
    const Metrics entropy = roles.compute_log_prob(batch);
    m.insert(entropy.begin(), entropy.end());
  });
  if (roles.has_ref()) timed("ref", [&] { roles.compute_ref(batch); });
  if (roles.has_critic()) timed("values", [&] { roles.compute_values(batch); });
  timed("adv", [&] {
    const Metrics kl = compute_advantages(batch, config.algorithm, s.kl_controller);
    m.insert(kl.begin(), kl.end());
  });
  if (roles.has_critic())
    timed("update_critic", [&] {
      const Metrics critic = roles.update_critic(batch, step);
      m.insert(critic.begin(), critic.end());
    });
  // verl's critic warmup: before step critic_warmup only the critic trains (the actor, and so the
  // rollout's weights, stay as they are). A rollout whose own copy training dropped is rebuilt all the same.
  const bool actor_trains = config.trainer.critic_warmup <= step;
  if (actor_trains)
    timed("update_actor", [&] {
      const Metrics actor = roles.update_actor(batch, step);
      m.insert(actor.begin(), actor.end());
    });
  if (actor_trains || roles.drops_rollout_copy())
    timed("update_weights", [&] {
      const Metrics sync = roles.sync_weights();
      m.insert(sync.begin(), sync.end());
    });
  const Metrics data = data_metrics(batch, config.prompt_length(), config.response_length());
  m.insert(data.begin(), data.end());
  if (rollout.calculate_log_probs) {
    const Metrics diff = rollout_diff_metrics(batch);
    m.insert(diff.begin(), diff.end());
  }
  int64_t step_tokens = 0;
  for (const RlResponse& r : batch) step_tokens += num_tokens(r);
  m["perf/total_num_tokens"] = double(step_tokens);
  if (s.lead) {
    const Metrics utilization = mfu_metrics(m, batch, s.reward_model_input ? &rm_sequences : nullptr, s.mfu());
    m.insert(utilization.begin(), utilization.end());
  }
  return m;
}

void RlTrainer::save_checkpoint(int64_t step, const nlohmann::json& metrics_row) {
  // Collective over the world: each role's ranks add their shards (the actor's and, with a critic, the
  // critic's, wherever device_mapping put them); world rank 0 writes the trainer state and prunes.
  State& s = *s_;
  checkpoint::CheckpointWriter writer(s.run_dir, step, s.world);
  if (s.roles.in_actor()) {
    s.roles.actor().save_checkpoint(writer, kActor);
    engine::add_hf_export(writer, s.folder, s.roles.actor().master_weights(), s.roles.actor_parallel());
  }
  if (s.roles.in_critic()) {
    s.roles.critic().save_checkpoint(writer, kCritic);
    engine::add_hf_export(writer, *s.critic_folder, s.roles.critic().master_weights(), s.roles.critic_parallel(),
                          "critic_huggingface");
  }
  if (s.lead) {
    writer.add_json("trainer", "state",
                    nlohmann::json{{"global_step", step}, {"data_cursor", s.cursor.to_json()},
                                   {"kl_coef", s.kl_controller.value()}});
    trainer::add_metrics_row(writer, metrics_row);
  }
  writer.commit();
  s.run_folder.prune(step, checkpoints_to_keep(s.config));
}

void RlTrainer::finish_step(Metrics& m, int64_t step, double seconds) {
  m["perf/time_per_step"] = seconds;
  m["perf/throughput"] = m["perf/total_num_tokens"] / seconds / double(s_->world.size());
  m["training/global_step"] = double(step);
}

RlSummary RlTrainer::fit() {
  State& s = *s_;
  const RlTrainerConfig& trainer = s.config.trainer;
  const trainer::LoopSchedule schedule{.total_steps = *trainer.total_training_steps,
                                       .test_freq = trainer.test_freq,
                                       .save_freq = trainer.save_freq,
                                       .validate_before_training = trainer.val_before_train,
                                       .validate_at_end = false,
                                       .time_budget_s = trainer.time_budget_s};
  const trainer::LoopOutput output{
      .run_dir = s.run_dir,
      .console = trainer::has_logger(trainer.logger, trainer::Logger::console),
      .jsonl = trainer::has_logger(trainer.logger, trainer::Logger::jsonl),
      .lead = s.lead,
      .console_keys = console_keys(s.config, s.prompts, s.roles.has_critic()),
      .plot = {{"score", {"critic/score/mean", "val-core/"}},
               {"KL", {"actor/kl_loss", "actor/ppo_kl", "actor/reward_kl_penalty"}},
               {"entropy", {"actor/entropy"}},
               {"critic", {"critic/vf_explained_var"}},  // a panel only with a critic
               {"response length", {"response_length/mean"}}}};
  const trainer::LoopSummary loop = trainer::run_loop(*this, schedule, output, s.tracker);
  const RlSummary summary{.steps_run = loop.steps_run,
                          .final_step = loop.final_step,
                          .first_val_score = loop.first_score,
                          .final_val_score = loop.final_score,
                          .train_seconds = loop.seconds};
  if (!s.lead) return summary;
  std::printf("\ntrain done: %lld steps (to step %lld) in %.1f s; validation score %.3f -> %.3f\n",
              (long long)summary.steps_run, (long long)summary.final_step, summary.train_seconds,
              summary.first_val_score, summary.final_val_score);
  std::printf("memory %s\n", s.tracker.summary().c_str());
  if (output.jsonl) std::printf("metrics: %s/metrics.jsonl (plot: %s/metrics.svg)\n", s.run_dir.c_str(), s.run_dir.c_str());
  return summary;
}

}  // namespace rf::rl

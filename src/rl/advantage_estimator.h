// Advantage estimators: verl's registry (algorithm.adv_estimator) as a constant table of pure
// functions, each with a plain loop twin that checks it (tests/rl/advantage_twins_test.cpp) and both
// checked against verl's own outputs (tests/rl/verl_vectors_test.cpp).
//
// Every estimator returns (advantages, returns), both (B, T). Outcome estimators start from the
// sequence score s_b = Σ_t token_level_rewards[b, t], summed over all T positions (no mask: the
// reward manager puts the score at the last valid token), and broadcast a per-sample scalar as
// a_b·m[b, t]. Group estimators compare the samples of one prompt (GroupIndex); verl's conventions
// hold throughout: torch.std is unbiased, ε = 1e-6 is added to σ (not inside the sqrt), and a group
// of one sample gets mean 0 and std 1 (so it keeps its raw score), except where an estimator says.
// Family files: token_advantages.cpp (gae, reinforce_plus_plus, remax: per-token recursions) and
// group_advantages.cpp (the outcome estimators with group baselines); *_loop.cpp hold the twins.
//
// Where verl's trainer calls an estimator differently from its signature, we follow the function:
// grpo_vectorized honours norm_adv_by_std_in_grpo here, while verl's compute_advantage does not
// forward that flag to it (it always normalises there).
// Not here: optimal_token_baseline, tir_optimal_token_baseline and gdpo (not in the reference vectors).
//
// Dimension legend: B batch (responses), T response tokens.
#pragma once

#include <span>
#include <string_view>

#include "core/tensor_view.h"
#include "rl/group_index.h"

namespace rf::rl {

struct AdvantageInputs {
  TensorView token_level_rewards_BT;
  TensorView response_mask_BT;
  TensorView values_BT;               // gae: the critic's values
  TensorView reward_baselines_B;      // remax: the score of the greedy response
  const GroupIndex* index = nullptr;  // group estimators: the uid of each sample
};

struct AdvantageConfig {  // the algorithm.* keys the estimators read (verl's defaults)
  double gamma = 1.0;
  double lam = 1.0;
  bool norm_adv_by_std_in_grpo = true;
  double epsilon = 1e-6;  // not a config key: the estimators' own default argument
};

struct AdvantageOutputs {  // written, (B, T), any floating dtype
  TensorView advantages_BT;
  TensorView returns_BT;
};

using AdvantageFn = void (*)(const AdvantageInputs&, const AdvantageConfig&, const AdvantageOutputs&);

struct AdvantageEstimator {
  std::string_view name;           // verl's adv_estimator name
  std::string_view verl_function;  // the verl function it reproduces, fully qualified
  AdvantageFn compute;
  AdvantageFn compute_loop;  // the plain loop twin: same results, written the obvious way
};

std::span<const AdvantageEstimator> advantage_estimators();
// Throws ConfigError (key adv_estimator) listing the known names.
const AdvantageEstimator& find_advantage_estimator(std::string_view name);

// Per-token recursions (token_advantages.cpp).
void compute_gae_advantages(const AdvantageInputs&, const AdvantageConfig&, const AdvantageOutputs&);
void compute_gae_advantages_loop(const AdvantageInputs&, const AdvantageConfig&, const AdvantageOutputs&);
void compute_reinforce_plus_plus_advantages(const AdvantageInputs&, const AdvantageConfig&, const AdvantageOutputs&);
void compute_reinforce_plus_plus_advantages_loop(const AdvantageInputs&, const AdvantageConfig&,
                                                 const AdvantageOutputs&);
void compute_remax_advantages(const AdvantageInputs&, const AdvantageConfig&, const AdvantageOutputs&);
void compute_remax_advantages_loop(const AdvantageInputs&, const AdvantageConfig&, const AdvantageOutputs&);

// Outcome estimators with group baselines (group_advantages.cpp).
void compute_grpo_advantages(const AdvantageInputs&, const AdvantageConfig&, const AdvantageOutputs&);
void compute_grpo_advantages_loop(const AdvantageInputs&, const AdvantageConfig&, const AdvantageOutputs&);
void compute_grpo_vectorized_advantages(const AdvantageInputs&, const AdvantageConfig&, const AdvantageOutputs&);
void compute_grpo_vectorized_advantages_loop(const AdvantageInputs&, const AdvantageConfig&, const AdvantageOutputs&);
void compute_grpo_passk_advantages(const AdvantageInputs&, const AdvantageConfig&, const AdvantageOutputs&);
void compute_grpo_passk_advantages_loop(const AdvantageInputs&, const AdvantageConfig&, const AdvantageOutputs&);
void compute_rloo_advantages(const AdvantageInputs&, const AdvantageConfig&, const AdvantageOutputs&);
void compute_rloo_advantages_loop(const AdvantageInputs&, const AdvantageConfig&, const AdvantageOutputs&);
void compute_rloo_vectorized_advantages(const AdvantageInputs&, const AdvantageConfig&, const AdvantageOutputs&);
void compute_rloo_vectorized_advantages_loop(const AdvantageInputs&, const AdvantageConfig&, const AdvantageOutputs&);
void compute_opo_advantages(const AdvantageInputs&, const AdvantageConfig&, const AdvantageOutputs&);
void compute_opo_advantages_loop(const AdvantageInputs&, const AdvantageConfig&, const AdvantageOutputs&);
void compute_gpg_advantages(const AdvantageInputs&, const AdvantageConfig&, const AdvantageOutputs&);
void compute_gpg_advantages_loop(const AdvantageInputs&, const AdvantageConfig&, const AdvantageOutputs&);
void compute_reinforce_plus_plus_baseline_advantages(const AdvantageInputs&, const AdvantageConfig&,
                                                     const AdvantageOutputs&);
void compute_reinforce_plus_plus_baseline_advantages_loop(const AdvantageInputs&, const AdvantageConfig&,
                                                          const AdvantageOutputs&);

}  // namespace rf::rl

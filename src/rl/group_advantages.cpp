// The outcome estimators with group baselines, vectorised: group statistics come from scatters over
// the batch (verl's index_add_ / bincount), one pass per moment, never from per-group lists. Their
// loop twins, which collect each sample's group explicitly, are in group_advantages_loop.cpp.
//
// Dimension legend: B batch (responses), T response tokens, G groups (prompts).
#include <algorithm>
#include <cmath>
#include <limits>

#include "rl/advantage_operands.h"
#include "rl/masked_stats.h"

namespace rf::rl {
namespace {

struct GroupSums {
  std::vector<double> count_G, sum_G, sum_squares_G;
};

GroupSums scatter_sums(const GroupIndex& index, const std::vector<double>& x_B) {
  const size_t G = size_t(index.num_groups());
  GroupSums sums{std::vector<double>(G, 0.0), std::vector<double>(G, 0.0), std::vector<double>(G, 0.0)};
  for (size_t b = 0; b < x_B.size(); ++b) {
    const size_t g = size_t(index.group_of(int64_t(b)));
    sums.count_G[g] += 1;
    sums.sum_G[g] += x_B[b];
    sums.sum_squares_G[g] += x_B[b] * x_B[b];
  }
  return sums;
}

// torch.mean and the unbiased torch.std of each group, two-pass; a singleton gets mean 0, std 1.
struct GroupMoments {
  std::vector<double> mean_G, std_G;
};

GroupMoments group_moments(const GroupIndex& index, const std::vector<double>& x_B) {
  const GroupSums sums = scatter_sums(index, x_B);
  const size_t G = sums.count_G.size();
  GroupMoments moments{std::vector<double>(G, 0.0), std::vector<double>(G, 1.0)};
  std::vector<double> squared_deviation_G(G, 0.0);
  for (size_t g = 0; g < G; ++g)
    if (sums.count_G[g] > 1) moments.mean_G[g] = sums.sum_G[g] / sums.count_G[g];
  for (size_t b = 0; b < x_B.size(); ++b) {
    const size_t g = size_t(index.group_of(int64_t(b)));
    squared_deviation_G[g] += (x_B[b] - moments.mean_G[g]) * (x_B[b] - moments.mean_G[g]);
  }
  for (size_t g = 0; g < G; ++g)
    if (sums.count_G[g] > 1) moments.std_G[g] = std::sqrt(squared_deviation_G[g] / (sums.count_G[g] - 1));
  return moments;
}

}  // namespace

// a = (s - μ_g)/(σ_g + ε), or s - μ_g without std normalisation (Dr.GRPO).
void compute_grpo_advantages(const AdvantageInputs& in, const AdvantageConfig& config, const AdvantageOutputs& out) {
  const OutcomeOperands op = read_outcome_operands(in, "grpo");
  const GroupMoments moments = group_moments(*op.index, op.scores_B);
  std::vector<double> adv_B(op.scores_B.size());
  for (size_t b = 0; b < adv_B.size(); ++b) {
    const size_t g = size_t(op.index->group_of(int64_t(b)));
    adv_B[b] = grpo_normalized(op.scores_B[b] - moments.mean_G[g], moments.std_G[g], config);
  }
  write_outcome_advantages(adv_B, op.mask, out);
}

// verl's groupwise.group_mean_std: one-pass variance (Σx² - (Σx)²/n)/(n - 1), floored at ε before
// the sqrt (so groups with var < 1e-6 differ from grpo), then divided by σ + ε like grpo.
void compute_grpo_vectorized_advantages(const AdvantageInputs& in, const AdvantageConfig& config,
                                        const AdvantageOutputs& out) {
  const OutcomeOperands op = read_outcome_operands(in, "grpo_vectorized");
  const GroupSums sums = scatter_sums(*op.index, op.scores_B);
  std::vector<double> adv_B(op.scores_B.size());
  for (size_t b = 0; b < adv_B.size(); ++b) {
    const size_t g = size_t(op.index->group_of(int64_t(b)));
    const double n = sums.count_G[g];
    double mean = 0.0, std = 1.0;
    if (n > 1) {
      mean = sums.sum_G[g] / n;
      const double variance = (sums.sum_squares_G[g] - sums.sum_G[g] * sums.sum_G[g] / n) / (n - 1);
      std = std::sqrt(std::max(variance, config.epsilon));
    }
    adv_B[b] = grpo_normalized(op.scores_B[b] - mean, std, config);
  }
  write_outcome_advantages(adv_B, op.mask, out);
}

// Only the best sample of each group gets an advantage: best - second best (over its σ + ε when
// normalising). A group needs at least 2 samples. On a tie the advantage is 0 whoever gets it; the
// first of the tied samples does.
void compute_grpo_passk_advantages(const AdvantageInputs& in, const AdvantageConfig& config,
                                   const AdvantageOutputs& out) {
  const OutcomeOperands op = read_outcome_operands(in, "grpo_passk");
  const GroupIndex& index = *op.index;
  for (int64_t g = 0; g < index.num_groups(); ++g)
    RF_CHECK(index.group_size(g) >= 2, "grpo_passk: group '{}' has {} sample; pass@k needs at least 2 per group",
             index.label(g), index.group_size(g));
  const size_t G = size_t(index.num_groups());
  constexpr double kLowest = -std::numeric_limits<double>::infinity();
  std::vector<double> best_G(G, kLowest), second_G(G, kLowest);
  std::vector<size_t> best_sample_G(G, 0);
  for (size_t b = 0; b < op.scores_B.size(); ++b) {
    const size_t g = size_t(index.group_of(int64_t(b)));
    if (op.scores_B[b] > best_G[g]) {
      second_G[g] = best_G[g];
      best_G[g] = op.scores_B[b];
      best_sample_G[g] = b;
    } else if (op.scores_B[b] > second_G[g]) {
      second_G[g] = op.scores_B[b];
    }
  }
  const GroupMoments moments = group_moments(index, op.scores_B);
  std::vector<double> adv_B(op.scores_B.size(), 0.0);
  for (size_t g = 0; g < G; ++g)
    adv_B[best_sample_G[g]] = grpo_normalized(best_G[g] - second_G[g], moments.std_G[g], config);
  write_outcome_advantages(adv_B, op.mask, out);
}

// Leave-one-out baseline: a = (n·s - Σ_g s)/(n - 1), the score minus the mean of the others.
// A singleton keeps its raw score.
void compute_rloo_advantages(const AdvantageInputs& in, const AdvantageConfig&, const AdvantageOutputs& out) {
  const OutcomeOperands op = read_outcome_operands(in, "rloo");
  const GroupSums sums = scatter_sums(*op.index, op.scores_B);
  std::vector<double> adv_B(op.scores_B);
  for (size_t b = 0; b < adv_B.size(); ++b) {
    const size_t g = size_t(op.index->group_of(int64_t(b)));
    const double n = sums.count_G[g];
    if (n > 1) adv_B[b] = (n * op.scores_B[b] - sums.sum_G[g]) / (n - 1);
  }
  write_outcome_advantages(adv_B, op.mask, out);
}

// The same leave-one-out baseline by bincount, except that a singleton gets 0.
void compute_rloo_vectorized_advantages(const AdvantageInputs& in, const AdvantageConfig&,
                                        const AdvantageOutputs& out) {
  const OutcomeOperands op = read_outcome_operands(in, "rloo_vectorized");
  const GroupSums sums = scatter_sums(*op.index, op.scores_B);
  std::vector<double> adv_B(op.scores_B.size(), 0.0);
  for (size_t b = 0; b < adv_B.size(); ++b) {
    const size_t g = size_t(op.index->group_of(int64_t(b)));
    const double n = sums.count_G[g];
    if (n > 1) adv_B[b] = (n * op.scores_B[b] - sums.sum_G[g]) / (n - 1);
  }
  write_outcome_advantages(adv_B, op.mask, out);
}

// Length-weighted baseline b_g = Σ L·s / Σ L, L = the sample's number of valid tokens; a = s - b_g.
// A singleton keeps its raw score. A group of fully masked samples (Σ L = 0, where verl computes
// 0/0 = NaN) gets baseline 0: its advantages are masked to 0 either way.
void compute_opo_advantages(const AdvantageInputs& in, const AdvantageConfig&, const AdvantageOutputs& out) {
  const OutcomeOperands op = read_outcome_operands(in, "opo");
  const std::vector<double> length_B = masked_row_sums(op.mask, op.mask);
  std::vector<double> weighted_B(op.scores_B.size());
  for (size_t b = 0; b < weighted_B.size(); ++b) weighted_B[b] = length_B[b] * op.scores_B[b];
  const GroupSums lengths = scatter_sums(*op.index, length_B);
  const GroupSums weighted = scatter_sums(*op.index, weighted_B);
  std::vector<double> adv_B(op.scores_B);
  for (size_t b = 0; b < adv_B.size(); ++b) {
    const size_t g = size_t(op.index->group_of(int64_t(b)));
    if (lengths.count_G[g] > 1 && lengths.sum_G[g] > 0) adv_B[b] -= weighted.sum_G[g] / lengths.sum_G[g];
  }
  write_outcome_advantages(adv_B, op.mask, out);
}

// a = α·(s - μ_g) with α = B / max(number of non-zero scores, 1) over the whole batch, a quotient
// in the scores' dtype. verl's `alpha` argument is overwritten and f_norm is 1 in its trainer.
void compute_gpg_advantages(const AdvantageInputs& in, const AdvantageConfig&, const AdvantageOutputs& out) {
  const OutcomeOperands op = read_outcome_operands(in, "gpg");
  const double num_nonzero =
      double(std::count_if(op.scores_B.begin(), op.scores_B.end(), [](double s) { return s != 0.0; }));
  const double alpha = round_to(op.rewards.dtype, double(op.scores_B.size()) / std::max(num_nonzero, 1.0));
  const GroupMoments moments = group_moments(*op.index, op.scores_B);
  std::vector<double> adv_B(op.scores_B.size());
  for (size_t b = 0; b < adv_B.size(); ++b)
    adv_B[b] = alpha * (op.scores_B[b] - moments.mean_G[size_t(op.index->group_of(int64_t(b)))]);
  write_outcome_advantages(adv_B, op.mask, out);
}

// a_b = s - μ_g (a singleton: μ = 0), broadcast over tokens and masked, whitened over the whole
// batch and masked again. Both outputs are that tensor.
void compute_reinforce_plus_plus_baseline_advantages(const AdvantageInputs& in, const AdvantageConfig&,
                                                     const AdvantageOutputs& out) {
  const OutcomeOperands op = read_outcome_operands(in, "reinforce_plus_plus_baseline");
  const GroupMoments moments = group_moments(*op.index, op.scores_B);
  Matrix centred(op.mask.rows, op.mask.cols, op.rewards.dtype);
  for (int64_t b = 0; b < centred.rows; ++b) {
    const double adv = op.scores_B[size_t(b)] - moments.mean_G[size_t(op.index->group_of(b))];
    for (int64_t t = 0; t < centred.cols; ++t) centred(b, t) = adv * op.mask(b, t);
  }
  Matrix advantages = masked_whiten(centred, op.mask, MeanShift::remove);
  for (size_t i = 0; i < advantages.values.size(); ++i) advantages.values[i] *= op.mask.values[i];
  write_advantages(advantages, advantages, out);
}

}  // namespace rf::rl

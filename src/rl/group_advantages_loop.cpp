// Loop twins of the group estimators, written as verl's reference loops are: for each sample,
// collect the scores of its group and compute the statistic from that list.
//
// Dimension legend: B batch (responses), T response tokens.
#include <algorithm>
#include <cmath>

#include "rl/advantage_operands.h"
#include "rl/masked_stats.h"

namespace rf::rl {
namespace {

// The samples that share b's group, in batch order (b included).
std::vector<size_t> group_members(const GroupIndex& index, size_t b) {
  std::vector<size_t> members;
  for (int64_t j = 0; j < index.size(); ++j)
    if (index.group_of(j) == index.group_of(int64_t(b))) members.push_back(size_t(j));
  return members;
}

std::vector<double> gather(const std::vector<double>& x_B, const std::vector<size_t>& members) {
  std::vector<double> gathered;
  for (size_t j : members) gathered.push_back(x_B[j]);
  return gathered;
}

double sum_of(const std::vector<double>& x) {
  double sum = 0;
  for (double v : x) sum += v;
  return sum;
}

double mean_of(const std::vector<double>& x) { return sum_of(x) / double(x.size()); }

double unbiased_std_of(const std::vector<double>& x) {
  const double mean = mean_of(x);
  double squared_deviation = 0;
  for (double v : x) squared_deviation += (v - mean) * (v - mean);
  return std::sqrt(squared_deviation / double(x.size() - 1));
}

// (mean, std) of a group as verl's loops take them: a singleton gets (0, 1).
std::pair<double, double> mean_and_std(const std::vector<double>& group) {
  if (group.size() == 1) return {0.0, 1.0};
  return {mean_of(group), unbiased_std_of(group)};
}

double mean_or_zero(const std::vector<double>& group) { return group.size() == 1 ? 0.0 : mean_of(group); }

}  // namespace

void compute_grpo_advantages_loop(const AdvantageInputs& in, const AdvantageConfig& config,
                                  const AdvantageOutputs& out) {
  const OutcomeOperands op = read_outcome_operands(in, "grpo");
  std::vector<double> adv_B(op.scores_B.size());
  for (size_t b = 0; b < adv_B.size(); ++b) {
    const auto [mean, std] = mean_and_std(gather(op.scores_B, group_members(*op.index, b)));
    adv_B[b] = grpo_normalized(op.scores_B[b] - mean, std, config);
  }
  write_outcome_advantages(adv_B, op.mask, out);
}

void compute_grpo_vectorized_advantages_loop(const AdvantageInputs& in, const AdvantageConfig& config,
                                             const AdvantageOutputs& out) {
  const OutcomeOperands op = read_outcome_operands(in, "grpo_vectorized");
  std::vector<double> adv_B(op.scores_B.size());
  for (size_t b = 0; b < adv_B.size(); ++b) {
    const std::vector<double> group = gather(op.scores_B, group_members(*op.index, b));
    const double n = double(group.size());
    double mean = 0.0, std = 1.0;
    if (group.size() > 1) {
      double sum_squares = 0;
      for (double s : group) sum_squares += s * s;
      mean = sum_of(group) / n;
      std = std::sqrt(std::max((sum_squares - sum_of(group) * sum_of(group) / n) / (n - 1), config.epsilon));
    }
    adv_B[b] = grpo_normalized(op.scores_B[b] - mean, std, config);
  }
  write_outcome_advantages(adv_B, op.mask, out);
}

void compute_grpo_passk_advantages_loop(const AdvantageInputs& in, const AdvantageConfig& config,
                                        const AdvantageOutputs& out) {
  const OutcomeOperands op = read_outcome_operands(in, "grpo_passk");
  std::vector<double> adv_B(op.scores_B.size(), 0.0);
  for (size_t b = 0; b < adv_B.size(); ++b) {
    std::vector<size_t> members = group_members(*op.index, b);
    RF_CHECK(members.size() >= 2, "grpo_passk: group '{}' has {} sample; pass@k needs at least 2 per group",
             op.index->label(op.index->group_of(int64_t(b))), members.size());
    // Best first; among equal scores the earliest sample first.
    std::stable_sort(members.begin(), members.end(),
                     [&](size_t i, size_t j) { return op.scores_B[i] > op.scores_B[j]; });
    if (members[0] != b) continue;
    adv_B[b] = grpo_normalized(op.scores_B[members[0]] - op.scores_B[members[1]],
                               unbiased_std_of(gather(op.scores_B, members)), config);
  }
  write_outcome_advantages(adv_B, op.mask, out);
}

void compute_rloo_advantages_loop(const AdvantageInputs& in, const AdvantageConfig&, const AdvantageOutputs& out) {
  const OutcomeOperands op = read_outcome_operands(in, "rloo");
  std::vector<double> adv_B(op.scores_B.size());
  for (size_t b = 0; b < adv_B.size(); ++b) {
    const std::vector<double> group = gather(op.scores_B, group_members(*op.index, b));
    const double n = double(group.size());
    adv_B[b] = group.size() > 1 ? op.scores_B[b] * n / (n - 1) - mean_of(group) * n / (n - 1) : op.scores_B[b];
  }
  write_outcome_advantages(adv_B, op.mask, out);
}

void compute_rloo_vectorized_advantages_loop(const AdvantageInputs& in, const AdvantageConfig&,
                                             const AdvantageOutputs& out) {
  const OutcomeOperands op = read_outcome_operands(in, "rloo_vectorized");
  std::vector<double> adv_B(op.scores_B.size(), 0.0);
  for (size_t b = 0; b < adv_B.size(); ++b) {
    const std::vector<double> group = gather(op.scores_B, group_members(*op.index, b));
    // The mean of the other samples of the group.
    if (group.size() > 1) adv_B[b] = op.scores_B[b] - (sum_of(group) - op.scores_B[b]) / double(group.size() - 1);
  }
  write_outcome_advantages(adv_B, op.mask, out);
}

void compute_opo_advantages_loop(const AdvantageInputs& in, const AdvantageConfig&, const AdvantageOutputs& out) {
  const OutcomeOperands op = read_outcome_operands(in, "opo");
  std::vector<double> adv_B(op.scores_B);
  for (size_t b = 0; b < adv_B.size(); ++b) {
    const std::vector<size_t> members = group_members(*op.index, b);
    if (members.size() == 1) continue;
    double weighted = 0, length = 0;
    for (size_t j : members) {
      double length_j = 0;
      for (int64_t t = 0; t < op.mask.cols; ++t) length_j += op.mask(int64_t(j), t);
      weighted += length_j * op.scores_B[j];
      length += length_j;
    }
    if (length > 0) adv_B[b] -= weighted / length;
  }
  write_outcome_advantages(adv_B, op.mask, out);
}

void compute_gpg_advantages_loop(const AdvantageInputs& in, const AdvantageConfig&, const AdvantageOutputs& out) {
  const OutcomeOperands op = read_outcome_operands(in, "gpg");
  double num_nonzero = 0;
  for (double s : op.scores_B) num_nonzero += s != 0.0 ? 1.0 : 0.0;
  const double alpha = round_to(op.rewards.dtype, double(op.scores_B.size()) / std::max(num_nonzero, 1.0));
  std::vector<double> adv_B(op.scores_B.size());
  for (size_t b = 0; b < adv_B.size(); ++b)
    adv_B[b] = alpha * (op.scores_B[b] - mean_or_zero(gather(op.scores_B, group_members(*op.index, b))));
  write_outcome_advantages(adv_B, op.mask, out);
}

void compute_reinforce_plus_plus_baseline_advantages_loop(const AdvantageInputs& in, const AdvantageConfig&,
                                                          const AdvantageOutputs& out) {
  const OutcomeOperands op = read_outcome_operands(in, "reinforce_plus_plus_baseline");
  Matrix centred(op.mask.rows, op.mask.cols, op.rewards.dtype);
  for (int64_t b = 0; b < centred.rows; ++b) {
    const double mean = mean_or_zero(gather(op.scores_B, group_members(*op.index, size_t(b))));
    for (int64_t t = 0; t < centred.cols; ++t) centred(b, t) = (op.scores_B[size_t(b)] - mean) * op.mask(b, t);
  }
  Matrix advantages = masked_whiten(centred, op.mask, MeanShift::remove);
  for (int64_t b = 0; b < advantages.rows; ++b)
    for (int64_t t = 0; t < advantages.cols; ++t) advantages(b, t) *= op.mask(b, t);
  write_advantages(advantages, advantages, out);
}

}  // namespace rf::rl

#include "rl/trainer/rl_metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "rl/explained_variance.h"

namespace rf::rl {
namespace {

// name/mean, name/max, name/min of `values` (nothing for none).
void add_stats(Metrics& m, const std::string& name, const std::vector<double>& values) {
  if (values.empty()) return;
  m[name + "/mean"] = std::accumulate(values.begin(), values.end(), 0.0) / double(values.size());
  m[name + "/max"] = *std::max_element(values.begin(), values.end());
  m[name + "/min"] = *std::min_element(values.begin(), values.end());
}

std::vector<double> per_token(const RlBatch& batch, std::vector<float> RlResponse::*column) {
  std::vector<double> values;
  for (const RlResponse& r : batch) values.insert(values.end(), (r.*column).begin(), (r.*column).end());
  return values;
}

}  // namespace

Metrics data_metrics(const RlBatch& batch, int64_t max_prompt_length, int64_t max_response_length) {
  Metrics m;
  std::vector<double> scores, rewards, response_lengths, prompt_lengths;
  double response_clipped = 0, prompt_clipped = 0;
  for (const RlResponse& r : batch) {
    scores.push_back(r.score);
    rewards.push_back(std::accumulate(r.token_level_rewards.begin(), r.token_level_rewards.end(), 0.0));
    response_lengths.push_back(double(r.response.size()));
    prompt_lengths.push_back(double(r.prompt.size()));
    response_clipped += int64_t(r.response.size()) == max_response_length;
    prompt_clipped += int64_t(r.prompt.size()) == max_prompt_length;
  }
  add_stats(m, "critic/score", scores);
  add_stats(m, "critic/rewards", rewards);
  add_stats(m, "critic/advantages", per_token(batch, &RlResponse::advantages));
  add_stats(m, "critic/returns", per_token(batch, &RlResponse::returns));
  if (!batch.empty() && !batch.front().values.empty()) {
    add_stats(m, "critic/values", per_token(batch, &RlResponse::values));
    m["critic/vf_explained_var"] =
        rl::vf_explained_var(column_matrix(batch, &RlResponse::returns), column_matrix(batch, &RlResponse::values),
                             response_mask_matrix(batch));
  }
  add_stats(m, "response_length", response_lengths);
  add_stats(m, "prompt_length", prompt_lengths);
  if (!batch.empty()) {
    m["response_length/clip_ratio"] = response_clipped / double(batch.size());
    m["prompt_length/clip_ratio"] = prompt_clipped / double(batch.size());
  }
  return m;
}

Metrics rollout_diff_metrics(const RlBatch& batch) {
  std::vector<double> diffs;
  double max_logprob_diff = 0;
  for (const RlResponse& r : batch)
    for (size_t t = 0; t < r.response.size(); ++t) {
      const double rollout = r.rollout_log_probs.at(t), old = r.old_log_probs.at(t);
      diffs.push_back(std::abs(std::exp(rollout) - std::exp(old)));
      max_logprob_diff = std::max(max_logprob_diff, std::abs(rollout - old));
    }
  Metrics m;
  if (diffs.empty()) return m;
  const double mean = std::accumulate(diffs.begin(), diffs.end(), 0.0) / double(diffs.size());
  double var = 0;
  for (double d : diffs) var += (d - mean) * (d - mean);
  // torch.std: unbiased; NaN for a single value.
  var = diffs.size() > 1 ? var / double(diffs.size() - 1) : std::numeric_limits<double>::quiet_NaN();
  m["training/rollout_probs_diff_max"] = *std::max_element(diffs.begin(), diffs.end());
  m["training/rollout_probs_diff_mean"] = mean;
  m["training/rollout_probs_diff_std"] = std::sqrt(var);
  m["rollout/logprob_diff_max"] = max_logprob_diff;
  return m;
}

Metrics seqlen_balance_metrics(const RlBatch& batch, int64_t dp_size) {
  std::vector<int64_t> all(batch.size());
  std::iota(all.begin(), all.end(), 0);
  const auto token_sums = [&](bool balance) {
    std::vector<double> sums;
    for (const std::vector<int64_t>& share : dp_shares(batch, all, dp_size, balance)) {
      double tokens = 0;
      for (const int64_t i : share) tokens += double(num_tokens(batch[size_t(i)]));
      sums.push_back(tokens);
    }
    return sums;
  };
  const std::vector<double> contiguous = token_sums(false), balanced = token_sums(true);
  const auto [low, high] = std::minmax_element(contiguous.begin(), contiguous.end());
  const auto [balanced_low, balanced_high] = std::minmax_element(balanced.begin(), balanced.end());
  return {{"global_seqlen/min", *low},
          {"global_seqlen/max", *high},
          {"global_seqlen/minmax_diff", *high - *low},
          {"global_seqlen/balanced_min", *balanced_low},
          {"global_seqlen/balanced_max", *balanced_high},
          {"global_seqlen/mean", std::accumulate(contiguous.begin(), contiguous.end(), 0.0) / double(dp_size)}};
}

namespace {

// Expert load of `rows` (i32 [tokens, L, k] flattened; -1 rows skipped) under `prefix`.
void add_load_metrics(Metrics& m, const std::string& prefix, const std::vector<const std::vector<int32_t>*>& rows,
                      const RoutingShape& shape, bool dropless) {
  const int64_t L = shape.num_moe_layers, k = shape.top_k, E = shape.num_experts;
  std::vector<int64_t> counts(size_t(L * E), 0);
  for (const std::vector<int32_t>* r : rows)
    for (size_t t = 0; t + size_t(L * k) <= r->size(); t += size_t(L * k))
      for (int64_t l = 0; l < L; ++l)
        for (int64_t i = 0; i < k; ++i)
          if (const int32_t e = (*r)[t + size_t(l * k + i)]; e >= 0 && e < E) ++counts[size_t(l * E + e)];
  double imbalance = 0;
  int64_t least = std::numeric_limits<int64_t>::max(), most = 0, total = 0;
  for (int64_t l = 0; l < L; ++l) {
    int64_t sum = 0, max = 0;
    for (int64_t e = 0; e < E; ++e) {
      const int64_t c = counts[size_t(l * E + e)];
      sum += c;
      max = std::max(max, c);
      least = std::min(least, c);
      most = std::max(most, c);
    }
    total += sum;
    imbalance += sum > 0 ? double(max) / (double(sum) / double(E)) : 0.0;
  }
  if (total == 0) return;
  m[prefix + "moe/load_imbalance"] = imbalance / double(L);
  m[prefix + "moe/tokens_per_expert/min"] = double(least);
  m[prefix + "moe/tokens_per_expert/max"] = double(most);
  if (dropless) m[prefix + "moe/dropped_tokens"] = 0.0;
}

}  // namespace

Metrics moe_routing_metrics(const RlBatch& batch, const RoutingShape& shape, bool replay, bool natural) {
  Metrics m;
  const size_t width = size_t(shape.num_moe_layers * shape.top_k);
  if (width == 0) return m;
  std::vector<const std::vector<int32_t>*> rollout, old;
  int64_t compared = 0, equal = 0;
  for (const RlResponse& r : batch) {
    if (!r.rollout_experts.empty()) rollout.push_back(&r.rollout_experts);
    if (!r.old_experts.empty()) old.push_back(&r.old_experts);
    if (r.rollout_experts.size() != r.old_experts.size()) continue;
    // A token agrees when every MoE layer chose the same experts (both records list them in increasing order).
    for (size_t t = 0; t < r.rollout_experts.size(); t += width) {
      if (r.rollout_experts[t] < 0) continue;  // not recorded (the sequence's last token)
      ++compared;
      equal += std::equal(r.rollout_experts.begin() + int64_t(t), r.rollout_experts.begin() + int64_t(t + width),
                          r.old_experts.begin() + int64_t(t));
    }
  }
  if (compared > 0) {
    const double share = double(equal) / double(compared);
    if (natural) m["moe/routing_agreement"] = share;
    if (replay) m["moe/replay_routing_match"] = share;
  }
  add_load_metrics(m, "", old, shape, shape.actor_dropless);
  add_load_metrics(m, "rollout/", rollout, shape, true);  // the rollout runs dropless
  return m;
}

}  // namespace rf::rl

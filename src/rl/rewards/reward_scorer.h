// Rule rewards: a scorer turns one decoded response into a scalar reward, chosen by the row's
// `data_source` exactly as verl's `default_compute_score` (verl/utils/reward_score/__init__.py)
// dispatches. The built-in rule scorers, each a line-by-line port of its verl function:
//   openai/gsm8k                                  gsm8k_reward.h     (gsm8k.py)
//   lighteval/MATH, DigitalLearningGmbH/MATH-lighteval,
//   HuggingFaceH4/MATH-500                        math_reward.h      (math_reward.py)
//   any data_source containing "countdown"        countdown_reward.h (TinyZero's countdown.py)
//   arith                                         arith_reward.h     (rlforge's built-in task)
// A scorer is immutable after construction: `score` may be called from many threads at once.
// Not here: verl's other scorers (math_dapo for `math`/`math_dapo`/`aime*`, prime_math, code sandboxes,
// geo3k, search-R1), user scorers in Python, and reward models.
#pragma once

#include <map>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace rf::rl {

// What verl's reward manager gets back from a score function: the scalar written at the response's
// last valid token, and the extra values a dict result carries (`acc`, ...), which become per-sample
// `reward_extra_info` (logged, and `acc` drives val-core metrics).
struct RewardScore {
  double score = 0.0;
  std::map<std::string, double> extra;
};

class RewardScorer {
 public:
  virtual ~RewardScorer() = default;

  // The scorer's own name ("gsm8k", "math", "countdown", "arith"), not the data_source.
  virtual std::string_view name() const = 0;
  // `solution_str` is the decoded response (bytes that are not UTF-8 are read as U+FFFD, as the
  // tokenizer's decode would give them); `ground_truth` is the row's reward_model.ground_truth and
  // `extra_info` its extra_info column (null when absent). Throws rf::Error when `ground_truth` has
  // the wrong shape for this scorer: that is a dataset bug, not a zero reward.
  virtual RewardScore score(std::string_view solution_str, const nlohmann::json& ground_truth,
                            const nlohmann::json& extra_info) const = 0;
};

// The rule scorer verl's default_compute_score picks for `data_source`. An unknown data_source is a
// ConfigError at key `data_source` that names it and lists the known ones.
std::unique_ptr<RewardScorer> make_rule_scorer(std::string_view data_source);
// The data_source values make_rule_scorer knows, in its table order.
std::vector<std::string> rule_scorer_data_sources();

// A ground truth that is compared as text (gsm8k, math, arith): a JSON string as is, a JSON number
// as its JSON text (as data::JsonlDataset stores a numeric ground truth). Anything else is an
// rf::Error naming `scorer`.
std::string ground_truth_text(const nlohmann::json& ground_truth, std::string_view scorer);

}  // namespace rf::rl

// The built-in tasks (task.h), small enough to train a tiny model on in minutes:
//   arith     "12+34=" -> "46": operands with up to `digits` digits (kwargs: digits = 2, num_val).
//   reversal  "abc=" -> "cba": lower-case strings of min_len..max_len letters (kwargs: min_len = 1,
//             max_len = 8, num_val = 200).
// Held-out problems are excluded from train by construction:
//   arith: the problem space {(a, b)} is numbered a * 10^digits + b and put in a fixed pseudo-random
//     order (IndexPermutation); the first num_val problems of that order are val (val index i is the
//     i-th of them), train draws uniformly from the rest.
//   reversal: a fixed hash puts one string in kHeldOutModulus in val; train draws strings and redraws
//     held-out ones; the val set is the first num_val distinct held-out strings of a fixed draw order.
// Neither split nor val set depends on the run's seed; only the train draws do.
#pragma once

#include <vector>

#include "data/index_permutation.h"
#include "data/task.h"

namespace rf::data {

class ArithTask final : public Task {
 public:
  static constexpr std::string_view kName = "arith";
  static constexpr std::string_view kAlphabet = "0123456789+-*= ";
  static constexpr int64_t kMaxDigits = 9;  // the 10^(2 digits) problem codes fit in 64 bits

  // num_val in [1, 10^(2 digits)); ConfigError naming data.task_kwargs.<key> otherwise.
  ArithTask(int64_t digits, uint64_t num_val, uint64_t seed);
  static std::unique_ptr<Task> from_kwargs(const nlohmann::json& kwargs, uint64_t seed);
  // Without a num_val kwarg: a tenth of the problems, at most 1000.
  static uint64_t default_num_val(int64_t digits);

  std::string_view name() const override { return kName; }
  Example example(Split split, uint64_t index) const override;
  uint64_t num_val_examples() const override { return num_val_; }
  TaskScore score(const std::string& response, const std::string& ground_truth) const override;

  // Whether a + b is a val problem: the predicate that keeps val out of train.
  bool is_val_problem(uint64_t a, uint64_t b) const;

 private:
  Example make_example(uint64_t problem_code) const;

  uint64_t operand_limit_;  // 10^digits: operands are in [0, operand_limit_)
  uint64_t num_val_;
  uint64_t seed_;
  IndexPermutation order_;  // rank -> problem code a * operand_limit_ + b; ranks < num_val_ are val
};

class ReversalTask final : public Task {
 public:
  static constexpr std::string_view kName = "reversal";
  static constexpr std::string_view kAlphabet = "abcdefghijklmnopqrstuvwxyz=";
  static constexpr int64_t kMaxLen = 64;
  static constexpr uint64_t kHeldOutModulus = 10;  // one string in ten is held out

  // 1 <= min_len <= max_len <= kMaxLen; ConfigError naming data.task_kwargs.<key> otherwise, and at
  // data.task_kwargs.num_val when the lengths hold fewer than num_val held-out strings.
  ReversalTask(int64_t min_len, int64_t max_len, uint64_t num_val, uint64_t seed);
  static std::unique_ptr<Task> from_kwargs(const nlohmann::json& kwargs, uint64_t seed);

  std::string_view name() const override { return kName; }
  Example example(Split split, uint64_t index) const override;
  uint64_t num_val_examples() const override { return val_strings_.size(); }
  TaskScore score(const std::string& response, const std::string& ground_truth) const override;

  static bool is_val_string(std::string_view s);

 private:
  int64_t min_len_, max_len_;
  uint64_t seed_;
  std::vector<std::string> val_strings_;
};

}  // namespace rf::data

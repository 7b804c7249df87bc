#include "data/builtin_tasks.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <unordered_set>

#include "core/error.h"
#include "core/philox.h"

namespace rf::data {
namespace {

// Fixed keys: the train/val split and the val set are the same in every run, whatever its seed.
constexpr uint64_t kArithOrderKey = 0x61726974685f7631;      // "arith_v1"
constexpr uint64_t kReversalSplitKey = 0x7265766572736531;   // "reverse1"
constexpr uint64_t kValSeed = 0x76616c5f73656564;            // "val_seed"
constexpr uint64_t kMaxDrawsPerValString = 100;  // the expected number is kHeldOutModulus (plus repeats)
constexpr uint32_t kMaxTrainAttempts = 64;       // a held-out draw has probability 1/10: 64 in a row never happens

std::string kwarg_path(std::string_view key) { return fmt::format("data.task_kwargs.{}", key); }

// The random numbers of one draw of an example. Word w comes from
// Philox(seed, stream).block_at(index), the 64-bit stream packing (split, attempt, w / 4), so an
// example is a pure function of (seed, split, index) and is regenerated alone, without the ones before.
class Draw {
 public:
  Draw(uint64_t seed, Split split, uint64_t index, uint32_t attempt)
      : seed_(seed), stream_base_((uint64_t(split) + 1) << 56 | uint64_t(attempt) << 24), index_(index) {}

  // Uniform in [0, bound) by the multiply-high map of 64 random bits (bias below bound / 2^64).
  uint64_t below(uint64_t bound) {
    const uint64_t bits = uint64_t(next_word()) << 32 | next_word();
    return uint64_t((unsigned __int128)bits * bound >> 64);
  }

 private:
  uint32_t next_word() {
    if (num_words_ % 4 == 0) block_ = Philox(seed_, stream_base_ | num_words_ / 4).block_at(index_);
    return block_[num_words_++ % 4];
  }

  uint64_t seed_, stream_base_, index_;
  uint64_t num_words_ = 0;
  std::array<uint32_t, 4> block_{};
};

// Reads `data.task_kwargs` for one task: rejects keys the task does not know, and values of the
// wrong JSON type, with the key path. The tasks check the ranges.
class TaskKwargs {
 public:
  TaskKwargs(std::string_view task, const nlohmann::json& kwargs, std::initializer_list<std::string_view> known)
      : kwargs_(kwargs) {
    if (kwargs.is_null()) return;
    if (!kwargs.is_object())
      throw ConfigError("data.task_kwargs", fmt::format("expected a mapping, got {}", kwargs.dump()));
    for (const auto& [key, value] : kwargs.items())
      if (std::find(known.begin(), known.end(), key) == known.end())
        throw ConfigError(kwarg_path(key), fmt::format("unknown key for task '{}': expected one of {}", task,
                                                       fmt::join(known, ", ")));
  }

  std::optional<int64_t> integer(std::string_view key) const {
    if (kwargs_.is_null() || !kwargs_.contains(key)) return std::nullopt;
    const nlohmann::json& value = kwargs_.at(key);
    // nlohmann dumps a non-finite float (a YAML 1e999 read by config::yaml_to_json) as null.
    const bool non_finite = value.is_number_float() && !std::isfinite(value.get<double>());
    if (!value.is_number_integer())
      throw ConfigError(kwarg_path(key), fmt::format("expected an integer, got {}",
                                                     non_finite ? fmt::format("{}", value.get<double>()) : value.dump()));
    return value.get<int64_t>();
  }

 private:
  const nlohmann::json& kwargs_;
};

void check_range(std::string_view key, int64_t value, int64_t min, int64_t max) {
  if (value < min || value > max)
    throw ConfigError(kwarg_path(key), fmt::format("{} is outside [{}, {}]", value, min, max));
}

uint64_t power_of_ten(int64_t exponent) {
  uint64_t p = 1;
  for (int64_t i = 0; i < exponent; ++i) p *= 10;
  return p;
}

// 10^digits, after checking `digits` (it sizes the permutation built next in ArithTask's initialisers).
uint64_t checked_operand_limit(int64_t digits) {
  check_range("digits", digits, 1, ArithTask::kMaxDigits);
  return power_of_ten(digits);
}

std::string draw_lowercase_string(Draw& draw, int64_t min_len, int64_t max_len) {
  const int64_t length = min_len + int64_t(draw.below(uint64_t(max_len - min_len + 1)));
  std::string s(size_t(length), 'a');
  for (char& c : s) c = char('a' + draw.below(26));
  return s;
}

struct BuiltinTask {
  std::string_view name;
  std::string_view alphabet;
  std::unique_ptr<Task> (*from_kwargs)(const nlohmann::json& kwargs, uint64_t seed);
};

constexpr std::array<BuiltinTask, 2> kBuiltinTasks = {{
    {ArithTask::kName, ArithTask::kAlphabet, &ArithTask::from_kwargs},
    {ReversalTask::kName, ReversalTask::kAlphabet, &ReversalTask::from_kwargs},
}};

const BuiltinTask& find_builtin_task(const std::string& name) {
  for (const BuiltinTask& task : kBuiltinTasks)
    if (task.name == name) return task;
  std::vector<std::string_view> names;
  for (const BuiltinTask& task : kBuiltinTasks) names.push_back(task.name);
  throw ConfigError("data.task", fmt::format("unknown task '{}': expected one of {}", name, fmt::join(names, ", ")));
}

}  // namespace

std::unique_ptr<Task> make_task(const std::string& name, const nlohmann::json& kwargs, uint64_t seed) {
  return find_builtin_task(name).from_kwargs(kwargs, seed);
}

std::string task_alphabet(const std::string& name) { return std::string(find_builtin_task(name).alphabet); }

// ---- arith ----------------------------------------------------------------------------------------

uint64_t ArithTask::default_num_val(int64_t digits) {
  return std::min<uint64_t>(1000, power_of_ten(2 * digits) / 10);
}

ArithTask::ArithTask(int64_t digits, uint64_t num_val, uint64_t seed)
    : operand_limit_(checked_operand_limit(digits)),
      num_val_(num_val),
      seed_(seed),
      order_(operand_limit_ * operand_limit_, kArithOrderKey) {
  const uint64_t num_problems = operand_limit_ * operand_limit_;
  if (num_val < 1 || num_val >= num_problems)
    throw ConfigError(kwarg_path("num_val"),
                      fmt::format("{} is outside [1, {}): {}-digit arith has {} problems and train needs some",
                                  num_val, num_problems, digits, num_problems));
}

std::unique_ptr<Task> ArithTask::from_kwargs(const nlohmann::json& kwargs, uint64_t seed) {
  const TaskKwargs args(kName, kwargs, {"digits", "num_val"});
  const int64_t digits = args.integer("digits").value_or(2);
  checked_operand_limit(digits);  // before default_num_val uses it
  const int64_t num_val = args.integer("num_val").value_or(int64_t(default_num_val(digits)));
  check_range("num_val", num_val, 1, std::numeric_limits<int64_t>::max());
  return std::make_unique<ArithTask>(digits, uint64_t(num_val), seed);
}

Example ArithTask::make_example(uint64_t problem_code) const {
  const uint64_t a = problem_code / operand_limit_, b = problem_code % operand_limit_;
  const std::string sum = std::to_string(a + b);
  return {.prompt = fmt::format("{}+{}=", a, b), .response = sum, .ground_truth = sum};
}

Example ArithTask::example(Split split, uint64_t index) const {
  if (split == Split::val) {
    RF_CHECK(index < num_val_, "arith val index {} is outside the {} val problems (data.task_kwargs.num_val)",
             index, num_val_);
    return make_example(order_.forward(index));
  }
  Draw draw(seed_, split, index, 0);
  return make_example(order_.forward(num_val_ + draw.below(order_.size() - num_val_)));
}

TaskScore ArithTask::score(const std::string& response, const std::string& ground_truth) const {
  return exact_match_score(response, ground_truth);
}

bool ArithTask::is_val_problem(uint64_t a, uint64_t b) const {
  RF_CHECK(a < operand_limit_ && b < operand_limit_, "arith operands {} and {} must be below {}", a, b,
           operand_limit_);
  return order_.inverse(a * operand_limit_ + b) < num_val_;
}

// ---- reversal -------------------------------------------------------------------------------------

ReversalTask::ReversalTask(int64_t min_len, int64_t max_len, uint64_t num_val, uint64_t seed)
    : min_len_(min_len), max_len_(max_len), seed_(seed) {
  check_range("min_len", min_len, 1, kMaxLen);
  check_range("max_len", max_len, min_len, kMaxLen);
  if (num_val < 1) throw ConfigError(kwarg_path("num_val"), "must be at least 1");
  std::unordered_set<std::string> seen;
  for (uint64_t candidate = 0; candidate < num_val * kMaxDrawsPerValString && val_strings_.size() < num_val;
       ++candidate) {
    Draw draw(kValSeed, Split::val, candidate, 0);
    std::string s = draw_lowercase_string(draw, min_len_, max_len_);
    if (is_val_string(s) && seen.insert(s).second) val_strings_.push_back(std::move(s));
  }
  if (val_strings_.size() < num_val)
    throw ConfigError(kwarg_path("num_val"),
                      fmt::format("found only {} distinct held-out strings of length {}..{} in {} draws, "
                                  "{} requested: lower num_val or raise max_len",
                                  val_strings_.size(), min_len, max_len, num_val * kMaxDrawsPerValString, num_val));
}

std::unique_ptr<Task> ReversalTask::from_kwargs(const nlohmann::json& kwargs, uint64_t seed) {
  const TaskKwargs args(kName, kwargs, {"min_len", "max_len", "num_val"});
  const int64_t num_val = args.integer("num_val").value_or(200);
  check_range("num_val", num_val, 1, 1'000'000);
  return std::make_unique<ReversalTask>(args.integer("min_len").value_or(1), args.integer("max_len").value_or(8),
                                        uint64_t(num_val), seed);
}

bool ReversalTask::is_val_string(std::string_view s) {
  // FNV-1a folds the string to 64 bits; Philox then mixes them, so the held-out verdict does not
  // follow FNV's weak low bits.
  uint64_t h = 0xcbf29ce484222325;
  for (char c : s) h = (h ^ uint8_t(c)) * 0x100000001b3;
  return Philox(kReversalSplitKey, 0).block_at(h)[0] % kHeldOutModulus == 0;
}

Example ReversalTask::example(Split split, uint64_t index) const {
  std::string s;
  if (split == Split::val) {
    RF_CHECK(index < val_strings_.size(),
             "reversal val index {} is outside the {} val strings (data.task_kwargs.num_val)", index,
             val_strings_.size());
    s = val_strings_[index];
  } else {
    for (uint32_t attempt = 0; attempt < kMaxTrainAttempts; ++attempt) {
      Draw draw(seed_, split, index, attempt);
      s = draw_lowercase_string(draw, min_len_, max_len_);
      if (!is_val_string(s)) break;
    }
    RF_CHECK(!is_val_string(s), "reversal train index {}: {} draws in a row were held out", index,
             kMaxTrainAttempts);
  }
  std::string reversed(s.rbegin(), s.rend());
  return {.prompt = s + "=", .response = reversed, .ground_truth = reversed};
}

TaskScore ReversalTask::score(const std::string& response, const std::string& ground_truth) const {
  return exact_match_score(response, ground_truth);
}

}  // namespace rf::data

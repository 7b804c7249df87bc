// The rollout benchmark's workload (issue #7, acceptance 5), shared by bench/rollout_bench.cpp and,
// written out again in Python, bench/torch_rollout.py: 64 prompts of 64 random token ids, each with a
// max_tokens drawn uniformly from [16, 256], all from one 64-bit LCG (Knuth's MMIX constants, a draw
// being the state's top 31 bits), so both sides run exactly the same prompts and lengths:
//   for each prompt: 64 draws (token = draw % V), then one draw (max_tokens = 16 + draw % 241).
#pragma once

#include <cstdint>
#include <vector>

namespace rf::bench {

constexpr int64_t kNumPrompts = 64;
constexpr int64_t kPromptLen = 64;
constexpr int64_t kSamplesPerPrompt = 8;
constexpr int64_t kRolloutSamples = kNumPrompts * kSamplesPerPrompt;
constexpr int64_t kMaxTokensLow = 16, kMaxTokensHigh = 256;
constexpr uint64_t kWorkloadSeed = 2024;

class Lcg {
 public:
  explicit Lcg(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    state_ = state_ * 6364136223846793005ULL + 1442695040888963407ULL;
    return state_ >> 33;
  }

 private:
  uint64_t state_;
};

struct RolloutWorkload {
  std::vector<std::vector<int64_t>> prompts;
  std::vector<int64_t> max_tokens;  // per prompt, for each of its samples
  int64_t generated_tokens() const {
    int64_t total = 0;
    for (int64_t m : max_tokens) total += m * kSamplesPerPrompt;
    return total;
  }
};

inline RolloutWorkload rollout_workload(int64_t vocab_size) {
  Lcg rng(kWorkloadSeed);
  RolloutWorkload w;
  for (int64_t i = 0; i < kNumPrompts; ++i) {
    std::vector<int64_t> prompt;
    for (int64_t t = 0; t < kPromptLen; ++t) prompt.push_back(int64_t(rng.next() % uint64_t(vocab_size)));
    w.prompts.push_back(std::move(prompt));
    w.max_tokens.push_back(kMaxTokensLow + int64_t(rng.next() % uint64_t(kMaxTokensHigh - kMaxTokensLow + 1)));
  }
  return w;
}

}  // namespace rf::bench

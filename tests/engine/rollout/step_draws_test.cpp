// StepDraws (the rollout step's draws computed ahead on all threads) against draw_rollout_token called
// one by one, as RolloutScheduler::complete calls its DrawFn: the same token and log-prob for every
// sampling sequence and every fork of a prompt, none for a chunk that does not sample, and an error for
// a draw it was not asked to make.
#include "engine/rollout/step_draws.h"

#include <gtest/gtest.h>

#include "core/philox.h"

namespace rf::engine::rollout {
namespace {

RolloutSequence sequence(size_t request, int64_t sample, int64_t forks_pending, int64_t prompt_len, int64_t generated) {
  RolloutSequence s;
  s.request = request;
  s.sample = sample;
  s.forks_pending = forks_pending;
  s.prompt_len = prompt_len;
  s.tokens.assign(size_t(prompt_len + generated), 1);
  return s;
}

TEST(StepDraws, GivesTheDrawsCompleteWouldMake) {
  constexpr int64_t V = 300;
  const std::vector<RolloutRequest> requests = {{{1, 2, 3}, 70, 0}, {{4, 5}, 71, 0}, {{6}, 72, 0}};
  // A decode step of request 0's sample 2, a prompt of request 1 about to fork into 4 samples, a chunk of
  // request 2's prompt that does not sample yet, and request 2's sample 1 decoding.
  RolloutSequence decode = sequence(0, 2, 0, 3, 5), prompt = sequence(1, 0, 3, 2, 0), partial = sequence(2, 0, 1, 9, 0),
                  other = sequence(2, 1, 0, 1, 7);
  const std::vector<ScheduledChunk> chunks = {{&decode, 7, 8}, {&prompt, 0, 2}, {&partial, 0, 4}, {&other, 7, 8}};
  Tensor logits({3, V}, DType::f32);
  fill_normal(logits, Philox(9, 0), 0.0, 2.0);
  RolloutSamplingParams params;
  params.temperature = 0.8;
  params.top_k = 50;
  params.seed = 4;

  StepDraws draws;
  draws.compute(chunks, logits, requests, params, V - 10);
  const auto expect_draw = [&](const RolloutSequence& s, int64_t row) {
    SCOPED_TRACE("request " + std::to_string(s.request) + " sample " + std::to_string(s.sample));
    const auto want = draw_rollout_token(logits.view().select(0, row), params, requests[s.request].request_id,
                                         s.sample, s.generated(), V - 10);
    const auto got = draws.take(s, row);
    EXPECT_EQ(got.first, want.first);
    EXPECT_EQ(got.second, want.second);
  };
  expect_draw(decode, 0);
  for (int64_t k = 0; k <= 3; ++k) {  // the parent, then its forks as complete() makes them
    RolloutSequence fork = prompt;
    fork.sample = k;
    expect_draw(fork, 1);
  }
  expect_draw(other, 2);
  // Not drawn: a fifth sample of the prompt, the decode at another position, a row past the step's.
  RolloutSequence fifth = prompt;
  fifth.sample = 4;
  EXPECT_THROW(draws.take(fifth, 1), Error);
  RolloutSequence later = decode;
  later.tokens.push_back(1);
  EXPECT_THROW(draws.take(later, 0), Error);
  EXPECT_THROW(draws.take(decode, 3), Error);
}

}  // namespace
}  // namespace rf::engine::rollout

#include "optim/lr_scheduler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "core/error.h"

namespace rf::optim {
namespace {

OptimConfig schedule(LrDecayStyle style, int64_t warmup, int64_t decay) {
  OptimConfig c;
  c.lr = 1e-3;
  c.min_lr = 1e-5;
  c.lr_warmup_steps = warmup;
  c.lr_decay_steps = decay;
  c.lr_decay_style = style;
  return c;
}

TEST(LrScheduler, WarmupThenCosineToMinLrAsMegatron) {
  LrScheduler s(schedule(LrDecayStyle::cosine, 10, 110));
  EXPECT_DOUBLE_EQ(s.lr(), 0.0);  // the first update runs at lr_warmup_init
  EXPECT_DOUBLE_EQ(s.lr_at(5), 0.5e-3);
  EXPECT_DOUBLE_EQ(s.lr_at(10), 1e-3);
  EXPECT_DOUBLE_EQ(s.lr_at(60), 1e-5 + 0.5 * (std::cos(std::numbers::pi * 0.5) + 1) * (1e-3 - 1e-5));
  EXPECT_DOUBLE_EQ(s.lr_at(110), 1e-5);
  EXPECT_DOUBLE_EQ(s.lr_at(500), 1e-5);
  EXPECT_DOUBLE_EQ(s.step(), 1e-4);
  EXPECT_EQ(s.num_steps(), 1);
}

TEST(LrScheduler, LinearConstantAndRatioWarmup) {
  EXPECT_DOUBLE_EQ(LrScheduler(schedule(LrDecayStyle::linear, 0, 100)).lr_at(25), 1e-5 + 0.75 * (1e-3 - 1e-5));
  EXPECT_DOUBLE_EQ(LrScheduler(schedule(LrDecayStyle::constant, 0, 100)).lr_at(1000), 1e-3);
  OptimConfig ratio = schedule(LrDecayStyle::cosine, -1, 200);
  ratio.lr_warmup_steps_ratio = 0.1;
  EXPECT_EQ(LrScheduler(ratio).warmup_steps(), 20);
  OptimConfig from_total = schedule(LrDecayStyle::linear, 0, 0);
  from_total.lr_decay_steps.reset();
  from_total.total_training_steps = 50;
  EXPECT_EQ(LrScheduler(from_total).decay_steps(), 50);
}

TEST(LrScheduler, RejectsSchedulesThatCannotRun) {
  OptimConfig no_steps = schedule(LrDecayStyle::cosine, 10, 0);
  no_steps.lr_decay_steps.reset();
  EXPECT_THROW(LrScheduler{no_steps}, ConfigError);
  EXPECT_THROW(LrScheduler(schedule(LrDecayStyle::cosine, 100, 100)), ConfigError);
  OptimConfig bad = schedule(LrDecayStyle::cosine, 10, 100);
  bad.lr = -1;
  try {
    bad.validate();
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key_path(), "lr");
  }
}

}  // namespace
}  // namespace rf::optim

#include "optim/lr_scheduler.h"

#include <cmath>
#include <numbers>

#include "core/error.h"

namespace rf::optim {

LrScheduler::LrScheduler(const OptimConfig& c)
    : max_lr_(c.lr), min_lr_(c.min_lr), init_lr_(c.lr_warmup_init), style_(c.lr_decay_style) {
  if (!c.lr_decay_steps && !c.total_training_steps)
    throw ConfigError("optim.lr_decay_steps", "needs a value, or trainer.total_training_steps to default to");
  decay_steps_ = c.lr_decay_steps ? *c.lr_decay_steps : *c.total_training_steps;
  warmup_steps_ = c.lr_warmup_steps > 0 ? c.lr_warmup_steps : int64_t(c.lr_warmup_steps_ratio * double(decay_steps_));
  if (style_ != LrDecayStyle::constant && warmup_steps_ >= decay_steps_)
    throw ConfigError("optim.lr_warmup_steps", fmt::format("{} warmup steps leave no room to decay within {} steps",
                                                           warmup_steps_, decay_steps_));
}

double LrScheduler::lr_at(int64_t step) const {
  if (warmup_steps_ > 0 && step <= warmup_steps_)
    return init_lr_ + (max_lr_ - init_lr_) * double(step) / double(warmup_steps_);
  if (style_ == LrDecayStyle::constant) return max_lr_;
  if (step > decay_steps_) return min_lr_;
  const double ratio = double(step - warmup_steps_) / double(decay_steps_ - warmup_steps_);
  const double coefficient =
      style_ == LrDecayStyle::linear ? 1.0 - ratio : 0.5 * (std::cos(std::numbers::pi * ratio) + 1.0);
  return min_lr_ + coefficient * (max_lr_ - min_lr_);
}

double LrScheduler::step() {
  ++num_steps_;
  return lr();
}

}  // namespace rf::optim

// LrScheduler: Megatron's OptimizerParamScheduler for the learning rate (verl.md §3.5):
//   step <= warmup (warmup > 0):  lr = init + (max - init) * step / warmup
//   constant style:               lr = max
//   step > decay_steps:           lr = min
//   otherwise, r = (step - warmup) / (decay_steps - warmup):
//       linear: lr = min + (1 - r) (max - min);   cosine: lr = min + (cos(pi r) + 1) / 2 (max - min)
// `step` counts optimizer steps taken; the trainer calls `step()` after each optimizer step, so
// the first update runs at lr(0) (= lr_warmup_init when warming up), as in Megatron.
#pragma once

#include "optim/optim_config.h"

namespace rf::optim {

class LrScheduler {
 public:
  explicit LrScheduler(const OptimConfig& config);

  double lr() const { return lr_at(num_steps_); }
  double lr_at(int64_t step) const;
  double step();  // advances one optimizer step; returns the new lr
  int64_t num_steps() const { return num_steps_; }
  void set_num_steps(int64_t num_steps) { num_steps_ = num_steps; }  // resume
  int64_t warmup_steps() const { return warmup_steps_; }
  int64_t decay_steps() const { return decay_steps_; }

 private:
  double max_lr_, min_lr_, init_lr_;
  LrDecayStyle style_;
  int64_t warmup_steps_ = 0, decay_steps_ = 1;
  int64_t num_steps_ = 0;
};

}  // namespace rf::optim

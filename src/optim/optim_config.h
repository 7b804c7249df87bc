// OptimConfig: verl's `actor_rollout_ref.actor.optim` block for the Megatron strategy (verl.md §3.5),
// the same type the SFT trainer reads under `optim:`. Defaults are verl's.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rf::optim {

enum class LrDecayStyle : uint8_t { constant, linear, cosine };

constexpr std::array<std::pair<LrDecayStyle, std::string_view>, 3> enum_names(LrDecayStyle) {
  return {{{LrDecayStyle::constant, "constant"}, {LrDecayStyle::linear, "linear"}, {LrDecayStyle::cosine, "cosine"}}};
}

struct OptimConfig {
  std::string optimizer = "adam";  // decoupled weight decay (AdamW), as Megatron's "adam"
  double lr = 1e-6;
  double min_lr = 0.0;
  double clip_grad = 1.0;  // global grad-norm clipping; <= 0 disables it
  double weight_decay = 0.01;
  std::vector<double> betas = {0.9, 0.999};
  double eps = 1e-8;
  int64_t lr_warmup_steps = -1;  // > 0 wins over the ratio
  double lr_warmup_steps_ratio = 0.0;
  double lr_warmup_init = 0.0;
  std::optional<int64_t> lr_decay_steps;  // null: the run's total training steps
  LrDecayStyle lr_decay_style = LrDecayStyle::constant;
  // Set by the trainer from `trainer.total_training_steps`, as verl pushes it into the optim config.
  std::optional<int64_t> total_training_steps;

  template <class Fields>
  void fields(Fields& f) {
    f("optimizer", optimizer, "optimizer; only \"adam\" (AdamW with decoupled weight decay)");
    f("lr", lr, "peak learning rate");
    f("min_lr", min_lr, "learning rate at the end of the decay");
    f("clip_grad", clip_grad, "max global gradient norm (<= 0: no clipping)");
    f("weight_decay", weight_decay, "decoupled weight decay");
    f("betas", betas, "Adam (beta1, beta2)");
    f("eps", eps, "Adam epsilon");
    f("lr_warmup_steps", lr_warmup_steps, "linear warmup steps; <= 0: use lr_warmup_steps_ratio");
    f("lr_warmup_steps_ratio", lr_warmup_steps_ratio, "warmup as a fraction of the decay steps");
    f("lr_warmup_init", lr_warmup_init, "learning rate at step 0 of the warmup");
    f("lr_decay_steps", lr_decay_steps, "steps of the decay (null: total_training_steps)");
    f("lr_decay_style", lr_decay_style, "constant, linear or cosine");
    f("total_training_steps", total_training_steps, "set from trainer.total_training_steps");
  }
  void validate() const;  // ConfigError naming the key
};

}  // namespace rf::optim

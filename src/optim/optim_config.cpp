#include "optim/optim_config.h"

#include <fmt/format.h>

#include "core/error.h"

namespace rf::optim {

void OptimConfig::validate() const {
  if (optimizer != "adam") throw ConfigError("optimizer", fmt::format("'{}' is not supported: expected adam", optimizer));
  if (!(lr > 0)) throw ConfigError("lr", fmt::format("must be positive, got {}", lr));
  if (min_lr < 0 || min_lr > lr) throw ConfigError("min_lr", fmt::format("must be in [0, lr={}], got {}", lr, min_lr));
  if (weight_decay < 0) throw ConfigError("weight_decay", fmt::format("must be >= 0, got {}", weight_decay));
  if (betas.size() != 2 || !(betas[0] >= 0 && betas[0] < 1) || !(betas[1] >= 0 && betas[1] < 1))
    throw ConfigError("betas", "expected two values in [0, 1)");
  if (!(eps > 0)) throw ConfigError("eps", fmt::format("must be positive, got {}", eps));
  if (lr_warmup_steps_ratio < 0 || lr_warmup_steps_ratio > 1)
    throw ConfigError("lr_warmup_steps_ratio", fmt::format("must be in [0, 1], got {}", lr_warmup_steps_ratio));
  if (lr_decay_steps && *lr_decay_steps <= 0)
    throw ConfigError("lr_decay_steps", fmt::format("must be positive, got {}", *lr_decay_steps));
  if (total_training_steps && *total_training_steps <= 0)
    throw ConfigError("total_training_steps", fmt::format("must be positive, got {}", *total_training_steps));
}

}  // namespace rf::optim

#include "rl/kl_controller.h"

#include <algorithm>
#include <array>

#include "core/error.h"
#include "rl/named_choice.h"

namespace rf::rl {
KlControlType parse_kl_control_type(std::string_view name) {
  return find_enum_name<KlControlType>(name, "kl_ctrl.type");
}

void KlControlConfig::validate() const {
  if (type == KlControlType::adaptive) {
    if (horizon <= 0) throw ConfigError("horizon", fmt::format("must be positive, got {}", horizon));
    if (!(target_kl > 0)) throw ConfigError("target_kl", fmt::format("must be positive, got {}", target_kl));
  }
}

KlController::KlController(const KlControlConfig& config) : config_(config), value_(config.kl_coef) {
  config_.validate();
}

void KlController::update(double current_kl, int64_t n_steps) {
  if (config_.type == KlControlType::fixed) return;
  const double proportional_error = std::clamp(current_kl / config_.target_kl - 1.0, -0.2, 0.2);
  value_ *= 1.0 + proportional_error * double(n_steps) / double(config_.horizon);
}

}  // namespace rf::rl

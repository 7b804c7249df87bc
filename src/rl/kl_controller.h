// The KL-in-reward coefficient β and its controller (algorithm.kl_ctrl; verl's FixedKLController and
// AdaptiveKLController, after Ziegler et al. 2019). A fixed controller never changes β. An adaptive
// one moves β towards a target KL after each step:
//   e = clip(current_kl / target_kl - 1, -0.2, 0.2);  β <- β·(1 + e·n_steps / horizon)
// in f64 and in that order, as verl's numpy arithmetic does. verl's trainer passes n_steps = the
// number of responses in the step. Nothing stops the factor reaching 0 when n_steps > 5·horizon
// (verl does not either).
#pragma once

#include <array>
#include <cstdint>
#include <utility>
#include <string_view>

namespace rf::rl {

enum class KlControlType : uint8_t { fixed, adaptive };

constexpr std::array<std::pair<KlControlType, std::string_view>, 2> enum_names(KlControlType) {
  return {{{KlControlType::fixed, "fixed"}, {KlControlType::adaptive, "adaptive"}}};
}
KlControlType parse_kl_control_type(std::string_view name);  // "fixed" | "adaptive"

struct KlControlConfig {  // algorithm.kl_ctrl (verl's defaults)
  KlControlType type = KlControlType::fixed;
  double kl_coef = 0.001;
  int64_t horizon = 10000;
  double target_kl = 0.1;

  template <class Fields>
  void fields(Fields& f) {
    f("type", type, "fixed or adaptive");
    f("kl_coef", kl_coef, "initial KL-in-reward coefficient");
    f("horizon", horizon, "adaptive: horizon");
    f("target_kl", target_kl, "adaptive: target KL");
  }
  // ConfigError keyed relative to algorithm.kl_ctrl.
  void validate() const;
};

class KlController {
 public:
  explicit KlController(const KlControlConfig& config);

  double value() const { return value_; }
  void update(double current_kl, int64_t n_steps);

 private:
  KlControlConfig config_;
  double value_;
};

}  // namespace rf::rl

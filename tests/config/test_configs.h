// Config structs for the binder tests: together they use every supported field type (bool, int,
// int64, uint64, double, string, enum, optional, vector, nested struct, list of structs, YAML::Node)
// and both kinds of validate() (a field's rule, and a required field whose default is invalid).
#pragma once

#include <yaml-cpp/yaml.h>

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/error.h"

namespace rf::config::testing {

enum class DecayStyle : uint8_t { constant, linear, cosine };

constexpr std::array<std::pair<DecayStyle, std::string_view>, 3> enum_names(DecayStyle) {
  return {{{DecayStyle::constant, "constant"}, {DecayStyle::linear, "linear"}, {DecayStyle::cosine, "cosine"}}};
}

struct ScheduleConfig {
  int64_t warmup_steps = 10;
  double min_lr_ratio = 0.0;

  template <class Fields>
  void fields(Fields& f) {
    f("warmup_steps", warmup_steps, "linear warm-up length in steps");
    f("min_lr_ratio", min_lr_ratio, "final lr as a fraction of the peak");
  }
  void validate() const {
    if (min_lr_ratio < 0 || min_lr_ratio > 1)
      throw ConfigError("min_lr_ratio", fmt::format("must be in [0, 1], got {}", min_lr_ratio));
  }
  bool operator==(const ScheduleConfig&) const = default;
};

struct AllTypesConfig {
  bool use_kl = false;
  int num_epochs = 1;
  int64_t total_steps = -1;
  uint64_t seed = 42;
  double lr = 1e-3;
  std::string name = "run";
  DecayStyle style = DecayStyle::constant;
  std::optional<double> clip;
  std::optional<std::string> tag = "main";
  std::vector<double> betas = {0.9, 0.999};
  std::vector<std::string> loggers = {"console"};
  std::vector<bool> flags;
  ScheduleConfig schedule;
  std::vector<ScheduleConfig> stages;
  YAML::Node kwargs;  // free-form; default null

  template <class Fields>
  void fields(Fields& f) {
    f("use_kl", use_kl, "add a KL term");
    f("num_epochs", num_epochs, "passes over the data");
    f("total_steps", total_steps, "-1: derived from the epochs");
    f("seed", seed, "random seed");
    f("lr", lr, "peak learning rate");
    f("name", name, "run name");
    f("style", style, "learning-rate decay");
    f("clip", clip, "gradient clip (null: none)");
    f("tag", tag, "optional tag");
    f("betas", betas, "Adam (beta1, beta2)");
    f("loggers", loggers, "where metrics go");
    f("flags", flags, "feature switches");
    f("schedule", schedule, "the lr schedule");
    f("stages", stages, "extra schedule stages");
    f("kwargs", kwargs, "passed through as is");
  }
  void validate() const {
    if (lr <= 0) throw ConfigError("lr", fmt::format("must be positive, got {}", lr));
  }
  bool operator==(const AllTypesConfig& other) const {
    return use_kl == other.use_kl && num_epochs == other.num_epochs && total_steps == other.total_steps &&
           seed == other.seed && lr == other.lr && name == other.name && style == other.style && clip == other.clip &&
           tag == other.tag && betas == other.betas && loggers == other.loggers && flags == other.flags &&
           schedule == other.schedule && stages == other.stages && kwargs.IsNull() == other.kwargs.IsNull() &&
           (kwargs.IsNull() || YAML::Dump(kwargs) == YAML::Dump(other.kwargs));
  }
};

// `path` has no usable default: validate() must run even when the YAML leaves the section out.
struct ModelPathConfig {
  std::string path;
  template <class Fields>
  void fields(Fields& f) {
    f("path", path, "model folder");
  }
  void validate() const {
    if (path.empty()) throw ConfigError("path", "is required");
  }
};

struct RunConfig {
  ModelPathConfig model;
  std::optional<ModelPathConfig> reference;
  template <class Fields>
  void fields(Fields& f) {
    f("model", model, "the policy");
    f("reference", reference, "the reference policy (null: none)");
  }
  // A whole-struct rule reports with an empty key: the error is keyed by the struct's own path.
  void validate() const {
    if (reference && reference->path == model.path) throw ConfigError("", "reference and model are the same folder");
  }
};

}  // namespace rf::config::testing

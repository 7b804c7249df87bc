// RollTranslator: the state of one ROLL file's translation into verl's key tree, handed to every row
// of the ROLL key table (roll_config_keys.h). It reads the ROLL file with ROLL's defaults filled in
// (a row's default applies when the file lacks the key and has the row's section), writes verl keys
// (only those the running row declares, so the generated docs cannot say less than the code does),
// and keys every error by the ROLL path and the file. It knows no ROLL key itself.
#pragma once

#include <yaml-cpp/yaml.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "rl/trainer/roll_device_mapping.h"
#include "config/bind.h"

namespace rf::apps {

struct RollKey;

class RollTranslator {
 public:
  // `roll` is the file with its ${...} references resolved; `source` names it in errors.
  RollTranslator(YAML::Node roll, std::string source);

  // --- the ROLL file
  const YAML::Node& roll() const { return roll_; }
  const std::string& source() const { return source_; }
  // The file's value at the dotted ROLL key, else the table's ROLL default when the key's section is in
  // the file (a top-level key's section always is), else an undefined node.
  YAML::Node value(const std::string& key) const;
  bool in_file(const std::string& key) const;
  // The file has the section as a map (a null section, as ROLL allows, is none).
  bool has_section(const std::string& section) const;
  // value() read as T (config::bind's rules); nullopt when it is undefined or null.
  template <class T>
  std::optional<T> get(const std::string& key) const {
    const YAML::Node node = value(key);
    if (!node.IsDefined() || node.IsNull()) return std::nullopt;
    std::optional<T> out;
    rekeyed(key, [&] { out = config::bind<T>(node, key); });
    return out;
  }

  // --- verl's tree
  void begin_row(const RollKey& row) { row_ = &row; }
  const RollKey& row() const { return *row_; }
  // Sets a verl key the running row declares (RF_CHECK), once.
  void set(const std::string& verl_key, const YAML::Node& value);
  template <class T>
  void set_value(const std::string& verl_key, const T& value) {
    set(verl_key, config::to_yaml(value));
  }
  // A key of rlforge's own block (roll_extension.h), which no row sets; once.
  void set_extension(const std::string& verl_key, const YAML::Node& value);
  const YAML::Node& verl() const { return verl_; }
  rl::RollDeviceMapping& device_mapping() { return device_mapping_; }
  const rl::RollDeviceMapping& device_mapping() const { return device_mapping_; }

  // --- errors and notes
  // ConfigError at the ROLL key, the file named in the message.
  [[noreturn]] void fail(const std::string& key, const std::string& detail) const;
  // Runs `check`; a ConfigError it throws is re-keyed to `key` and the file.
  void rekeyed(const std::string& key, const std::function<void()>& check) const;
  // A key that is accepted but changes nothing here; translate() names them all in one warning.
  void note_no_effect(const std::string& key) { no_effect_.push_back(key); }
  const std::vector<std::string>& no_effect_keys() const { return no_effect_; }

 private:
  YAML::Node roll_;
  std::string source_;
  YAML::Node verl_;
  rl::RollDeviceMapping device_mapping_;
  std::vector<std::string> no_effect_;
  const RollKey* row_ = nullptr;
};


}  // namespace rf::apps

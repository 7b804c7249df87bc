// What the verl-vectors harness reads a case into: its numbers (Result), typed inputs and config
// through a CaseReader that remembers which keys were used, and the implementations to run.
#pragma once

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace rf::testing {

// An output as numbers in row-major order; a scalar has an empty shape.
struct Result {
  std::vector<int64_t> shape;
  std::vector<double> values;
};
using Outputs = std::map<std::string, Result>;

// One implementation of the case's function: the library calls it makes, registry lookups included
// (an error case expects them to throw).
struct Implementation {
  std::string name;
  std::function<Outputs()> run;
};

Result scalar(double value);
Result result_of(const Tensor& tensor);
Result result_of(const std::vector<double>& values);
// A nested JSON list (or a number) as a shape and its row-major numbers; throws unless rectangular.
Result flatten(const nlohmann::json& value, const std::string& what);

// A case's inputs and config, handing out typed values and remembering which keys were read, so a
// key the harness does not understand fails the case instead of being ignored.
class CaseReader {
 public:
  CaseReader(const nlohmann::json& test_case, DType float_dtype);

  bool has_input(const std::string& key) const { return inputs_.contains(key); }
  bool config_contains(const std::string& key) const { return config_.contains(key); }
  bool has_config(const std::string& key) const { return config_.contains(key) && !config_.at(key).is_null(); }

  // Float tensors in the file's float dtype; masks as f32 0/1, as verl was given them; labels i64.
  Tensor floats(const std::string& key);
  Tensor mask(const std::string& key);
  Tensor labels(const std::string& key);
  const nlohmann::json& input(const std::string& key);

  const nlohmann::json& config(const std::string& key);
  double number(const std::string& key) { return config(key).get<double>(); }
  std::optional<double> optional_number(const std::string& key);
  std::string text(const std::string& key) { return config(key).get<std::string>(); }
  bool flag(const std::string& key) { return config(key).get<bool>(); }

  Tensor output_like(const Tensor& like) const { return Tensor(like.shape(), float_dtype_); }
  Tensor output(Shape shape) const { return Tensor(shape, float_dtype_); }

  void expect_all_read(const std::string& function) const;

 private:
  nlohmann::json inputs_, config_;
  DType float_dtype_;
  std::set<std::string> read_inputs_, read_config_;
};

}  // namespace rf::testing

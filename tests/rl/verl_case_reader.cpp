#include "verl_case_reader.h"

#include <gtest/gtest.h>

#include "core/element_access.h"

namespace rf::testing {
namespace {

Tensor tensor_of(const Result& numbers, DType dtype) {
  Tensor tensor(Shape(numbers.shape.begin(), numbers.shape.end()), dtype);
  for (size_t i = 0; i < numbers.values.size(); ++i) store_f64(tensor, int64_t(i), numbers.values[i]);
  return tensor;
}

}  // namespace

Result scalar(double value) { return {{}, {value}}; }

Result result_of(const Tensor& tensor) {
  Result result{std::vector<int64_t>(tensor.shape().begin(), tensor.shape().end()), {}};
  for (int64_t i = 0; i < tensor.numel(); ++i) result.values.push_back(load_f64(tensor, i));
  return result;
}

Result result_of(const std::vector<double>& values) { return {{int64_t(values.size())}, values}; }

Result flatten(const nlohmann::json& value, const std::string& what) {
  Result result;
  for (const nlohmann::json* level = &value; level->is_array(); level = &(*level)[0]) {
    result.shape.push_back(int64_t(level->size()));
    if (level->empty()) break;
  }
  std::function<void(const nlohmann::json&, size_t)> visit = [&](const nlohmann::json& node, size_t depth) {
    if (depth == result.shape.size()) {
      if (!node.is_number()) throw Error(what + ": expected numbers in a rectangular nested list");
      result.values.push_back(node.get<double>());
      return;
    }
    if (!node.is_array() || int64_t(node.size()) != result.shape[depth])
      throw Error(what + ": expected a rectangular nested list");
    for (const nlohmann::json& child : node) visit(child, depth + 1);
  };
  visit(value, 0);
  return result;
}

CaseReader::CaseReader(const nlohmann::json& test_case, DType float_dtype)
    : inputs_(test_case.at("inputs")),
      config_(test_case.value("config", nlohmann::json::object())),
      float_dtype_(float_dtype) {}

Tensor CaseReader::floats(const std::string& key) { return tensor_of(flatten(input(key), key), float_dtype_); }
Tensor CaseReader::mask(const std::string& key) { return tensor_of(flatten(input(key), key), DType::f32); }
Tensor CaseReader::labels(const std::string& key) { return tensor_of(flatten(input(key), key), DType::i64); }

const nlohmann::json& CaseReader::input(const std::string& key) {
  read_inputs_.insert(key);
  return inputs_.at(key);
}

const nlohmann::json& CaseReader::config(const std::string& key) {
  read_config_.insert(key);
  return config_.at(key);
}

std::optional<double> CaseReader::optional_number(const std::string& key) {
  read_config_.insert(key);
  return has_config(key) ? std::optional<double>(config_.at(key).get<double>()) : std::nullopt;
}

void CaseReader::expect_all_read(const std::string& function) const {
  for (const auto& [key, value] : inputs_.items())
    EXPECT_TRUE(read_inputs_.count(key)) << function << ": input '" << key << "' is not understood by the harness";
  for (const auto& [key, value] : config_.items())
    EXPECT_TRUE(read_config_.count(key)) << function << ": config '" << key << "' is not understood by the harness";
}

}  // namespace rf::testing

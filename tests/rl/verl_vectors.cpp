#include "verl_vectors.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>

#include "core/error.h"
#include "support/test_support.h"
#include "verl_functions.h"

namespace rf::testing {
namespace {

using nlohmann::json;

void expect_result_close(const std::string& what, const Result& got, const Result& expected, double rtol, double atol) {
  if (got.shape != expected.shape || got.values.size() != expected.values.size()) {
    ADD_FAILURE() << what << ": shape " << ::testing::PrintToString(got.shape) << ", expected "
                  << ::testing::PrintToString(expected.shape);
    return;
  }
  int64_t num_bad = 0;
  std::string first_bad;
  for (size_t i = 0; i < got.values.size(); ++i) {
    const double error = std::abs(got.values[i] - expected.values[i]);
    if (error <= atol + rtol * std::abs(expected.values[i])) continue;  // NaN fails too
    if (num_bad++ < 5)
      first_bad += fmt::format("\n  [{}] got {:.9g}, expected {:.9g} (error {:.3g}, allowed {:.3g})", i, got.values[i],
                               expected.values[i], error, atol + rtol * std::abs(expected.values[i]));
  }
  EXPECT_EQ(num_bad, 0) << what << ": " << num_bad << " of " << got.values.size() << " elements out of tolerance"
                        << first_bad;
}

void run_implementation(const Implementation& impl, const json& test_case, const std::string& id) {
  const std::string label = id + " (" + impl.name + ")";
  if (test_case.contains("expect_error")) {
    try {
      impl.run();
      ADD_FAILURE() << label << ": expected an error (verl raises " << test_case.at("expect_error").get<std::string>()
                    << ": " << test_case.value("error_message", "") << "), got none";
    } catch (const Error& e) {
      SUCCEED() << e.what();
    }
    return;
  }
  const double rtol = test_case.at("tolerance").at("rtol").get<double>();
  const double atol = test_case.at("tolerance").at("atol").get<double>();
  const Outputs got = impl.run();
  for (const auto& [key, value] : test_case.at("outputs").items()) {
    const auto it = got.find(key);
    if (it == got.end()) {
      ADD_FAILURE() << label << ": output '" << key << "' is not produced";
      continue;
    }
    expect_result_close(label + " " + key, it->second, flatten(value, key), rtol, atol);
  }
  for (const auto& [key, value] : got)
    EXPECT_TRUE(test_case.at("outputs").contains(key)) << label << ": produces '" << key << "', which verl does not";
}

}  // namespace

std::string verl_vectors_path() {
  const char* path = std::getenv("RLFORGE_VERL_VECTORS");
  return path != nullptr && *path != '\0' ? std::string(path) : reference_dir() + "/verl_algos.json";
}

ReferenceVectors load_verl_vectors(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw IoError(path, "cannot open the verl reference vectors (set RLFORGE_VERL_VECTORS to another file)");
  ReferenceVectors vectors;
  try {
    vectors.header = json::parse(in);
  } catch (const json::exception& e) {
    throw IoError(path, std::string("not valid JSON: ") + e.what());
  }
  if (!vectors.header.is_object() || !vectors.header.contains("cases") || !vectors.header.at("cases").is_array())
    throw IoError(path, "expected a JSON object with a \"cases\" list");
  for (json& test_case : vectors.header.at("cases")) vectors.cases.push_back(std::move(test_case));
  vectors.header.erase("cases");
  const std::string dtype = vectors.header.value("float_dtype", "");
  if (dtype == "float32")
    vectors.float_dtype = DType::f32;
  else if (dtype == "float64")
    vectors.float_dtype = DType::f64;
  else
    throw IoError(path, "float_dtype: expected \"float32\" or \"float64\", got \"" + dtype + "\"");
  return vectors;
}

void run_verl_case(const json& test_case, DType float_dtype) {
  const std::string id = test_case.value("id", "<no id>");
  const std::string function = test_case.value("function", "");
  try {
    CaseReader reader(test_case, float_dtype);
    const auto implementations = implementations_of(function, reader, test_case.value("registry_name", ""));
    if (!implementations) {
      ADD_FAILURE() << id << ": no implementation of '" << function << "' in the rl layer";
      return;
    }
    reader.expect_all_read(function);
    for (const Implementation& impl : *implementations) run_implementation(impl, test_case, id);
  } catch (const std::exception& e) {
    ADD_FAILURE() << id << ": " << e.what();
  }
}

}  // namespace rf::testing

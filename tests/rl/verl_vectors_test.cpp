// Every case of the verl reference vectors, one test each (VerlVectors/ReferenceCase.MatchesVerl/<id>), the
// file's header, and tests that the harness itself fails when it should.
// Run alone on another file of the same format:
//   RLFORGE_VERL_VECTORS=/path/file.json build/release/tests/rl/rl_tests --gtest_filter='VerlVectors*'
#include "verl_vectors.h"

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <cctype>
#include <set>

#include "core/error.h"

namespace rf::testing {
namespace {

struct CaseParam {
  std::string name;  // the case id made a test name
  nlohmann::json test_case;
  DType float_dtype = DType::f32;
  std::string load_error;  // the file could not be read: the one test reports it
};

void PrintTo(const CaseParam& param, std::ostream* os) {
  *os << (param.test_case.is_object() ? param.test_case.value("id", param.name) : param.name);
}

// "adv_estimator/grpo/002" -> "adv_estimator_grpo_002"; a clash gets the case's position appended.
std::string test_name(const std::string& id, size_t position, std::set<std::string>& taken) {
  std::string name;
  for (char c : id) name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  if (name.empty() || !taken.insert(name).second) {
    name += "_" + std::to_string(position);
    taken.insert(name);
  }
  return name;
}

std::vector<CaseParam> case_params() {
  try {
    const ReferenceVectors vectors = load_verl_vectors(verl_vectors_path());
    std::vector<CaseParam> params;
    std::set<std::string> taken;
    for (size_t i = 0; i < vectors.cases.size(); ++i)
      params.push_back(
          {test_name(vectors.cases[i].value("id", ""), i, taken), vectors.cases[i], vectors.float_dtype, ""});
    if (params.empty()) return {{"NoCases", {}, DType::f32, verl_vectors_path() + ": the file has no cases"}};
    return params;
  } catch (const std::exception& e) {
    return {{"FileNotLoaded", {}, DType::f32, e.what()}};
  }
}

class ReferenceCase : public ::testing::TestWithParam<CaseParam> {};

TEST_P(ReferenceCase, MatchesVerl) {
  const CaseParam& param = GetParam();
  ASSERT_TRUE(param.load_error.empty()) << param.load_error;
  run_verl_case(param.test_case, param.float_dtype);
}

// Named VerlVectors/ReferenceCase.MatchesVerl/<id>, so that --gtest_filter='VerlVectors*' selects them.
INSTANTIATE_TEST_SUITE_P(VerlVectors, ReferenceCase, ::testing::ValuesIn(case_params()),
                         [](const ::testing::TestParamInfo<CaseParam>& info) { return info.param.name; });

TEST(VerlVectorsFile, HeaderAndCaseList) {
  const ReferenceVectors vectors = load_verl_vectors(verl_vectors_path());
  EXPECT_EQ(vectors.header.value("format", ""), "verl-algos-reference-vectors");
  EXPECT_EQ(vectors.header.value("format_version", 0), 1);
  EXPECT_EQ(vectors.header.value("num_cases", -1), int64_t(vectors.cases.size()));
  std::set<std::string> ids;
  for (const nlohmann::json& test_case : vectors.cases) {
    const std::string id = test_case.value("id", "");
    EXPECT_TRUE(ids.insert(id).second) << "duplicate or missing case id '" << id << "'";
    for (const char* field : {"op", "function", "inputs", "outputs"})
      EXPECT_TRUE(test_case.contains(field)) << id << ": no '" << field << "'";
    EXPECT_TRUE(test_case.contains("expect_error") || test_case.contains("tolerance")) << id << ": no tolerance";
  }
}

// --- the harness fails when it should ------------------------------------------------------------

// A masked_sum case that passes, with `patch` merged into it (RFC 7386: null removes a key).
// (EXPECT_NONFATAL_FAILURE cannot see local variables, so each test passes its patch as a literal.)
nlohmann::json masked_sum_case(const char* patch) {
  nlohmann::json test_case = nlohmann::json::parse(R"({"id": "t", "function": "verl.utils.torch_functional.masked_sum",
      "inputs": {"values": [[1.5, 2.0], [4.0, 8.0]], "mask": [[1, 0], [1, 1]]}, "config": {"axis": -1},
      "outputs": {"result": [1.5, 12.0]}, "tolerance": {"rtol": 0, "atol": 0}})");
  test_case.merge_patch(nlohmann::json::parse(patch));
  return test_case;
}

TEST(VerlVectorsHarness, PassesAMatchingCase) { run_verl_case(masked_sum_case("{}"), DType::f32); }

TEST(VerlVectorsHarness, FailsAnUnknownFunction) {
  EXPECT_NONFATAL_FAILURE(run_verl_case(masked_sum_case(R"({"function": "verl.made_up"})"), DType::f32),
                          "no implementation of 'verl.made_up'");
}

TEST(VerlVectorsHarness, FailsAValueOutOfTolerance) {
  EXPECT_NONFATAL_FAILURE(
      run_verl_case(masked_sum_case(R"({"outputs": {"result": [1.5, 12.001]}, "tolerance": {"rtol": 1e-5}})"),
                    DType::f32),
      "out of tolerance");
}

TEST(VerlVectorsHarness, FailsAnOutputOfAnotherShape) {
  EXPECT_NONFATAL_FAILURE(run_verl_case(masked_sum_case(R"({"outputs": {"result": 13.5}})"), DType::f32), "shape");
}

TEST(VerlVectorsHarness, FailsAnErrorCaseThatDoesNotThrow) {
  EXPECT_NONFATAL_FAILURE(
      run_verl_case(masked_sum_case(R"({"outputs": null, "tolerance": null, "expect_error": "ValueError"})"),
                    DType::f32),
      "expected an error");
}

TEST(VerlVectorsHarness, FailsAConfigKeyItDoesNotUnderstand) {
  EXPECT_NONFATAL_FAILURE(run_verl_case(masked_sum_case(R"({"config": {"new_knob": 2}})"), DType::f32),
                          "config 'new_knob' is not understood");
}

TEST(VerlVectorsHarness, FailsAMissingOutput) {
  EXPECT_NONFATAL_FAILURE(run_verl_case(masked_sum_case(R"({"outputs": {"other": 2.0}})"), DType::f32),
                          "output 'other' is not produced");
}

TEST(VerlVectorsHarness, ReportsAFileThatCannotBeRead) {
  EXPECT_THROW(load_verl_vectors("/nonexistent/verl_algos.json"), IoError);
}

}  // namespace
}  // namespace rf::testing

// The binder: every field type read from YAML, defaults kept for absent keys, every error kind keyed
// by its full dotted path, validate() re-keyed under the struct's path, and to_yaml round trips.
#include "config/bind.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "config/test_configs.h"

namespace rf::config {
namespace {

using testing::AllTypesConfig;
using testing::DecayStyle;
using testing::RunConfig;
using testing::ScheduleConfig;

bool contains(const std::string& text, const std::string& fragment) {
  return text.find(fragment) != std::string::npos;
}

// Binds `yaml` under the path "cfg" and returns the ConfigError it must raise. The call is
// unqualified with a std::string path on purpose: that is the call C++20 ADL could hand to std::bind.
template <class T = AllTypesConfig>
ConfigError bind_error(const std::string& yaml, const std::string& path = "cfg") {
  try {
    bind<T>(YAML::Load(yaml), path);
  } catch (const ConfigError& e) {
    return e;
  }
  ADD_FAILURE() << "no ConfigError for:\n" << yaml;
  return ConfigError("", "");
}

void expect_error(const std::string& yaml, const std::string& key_path, const std::string& message) {
  const ConfigError e = bind_error(yaml);
  EXPECT_EQ(e.key_path(), key_path) << yaml;
  EXPECT_TRUE(contains(e.what(), key_path + ": " + message)) << "expected '" << message << "' in: " << e.what();
}

const char* const kAllFieldsYaml = R"(
use_kl: true
num_epochs: 3
total_steps: -7
seed: 18446744073709551615
lr: 2.5e-5
name: my run
style: cosine
clip: 1.0
tag: null
betas: [0.8, 0.95]
loggers: [console, jsonl]
flags: [true, false, true]
schedule: {warmup_steps: 100, min_lr_ratio: 0.1}
stages:
  - {warmup_steps: 1}
  - {min_lr_ratio: 0.5}
kwargs:
  rope_scaling: {type: linear, factor: 2}
  layers: [1, 2]
)";

AllTypesConfig non_default_config() {
  AllTypesConfig c;
  c.use_kl = true;
  c.num_epochs = -3;
  c.total_steps = std::numeric_limits<int64_t>::min();
  c.seed = std::numeric_limits<uint64_t>::max();
  c.lr = 0.1;
  c.name = "null";  // a string that reads as null if written unquoted
  c.style = DecayStyle::linear;
  c.clip = 1.0 / 3.0;
  c.tag = std::nullopt;
  c.betas = {1e-300, 0.999, 5e-324};
  c.loggers = {"", "true", "123"};
  c.flags = {false, true};
  c.schedule = {.warmup_steps = 0, .min_lr_ratio = 1.0};
  c.stages = {{.warmup_steps = 5, .min_lr_ratio = 0.25}};
  c.kwargs = YAML::Load("{a: [1, {b: null}], c: text}");
  return c;
}

TEST(Bind, ReadsEveryFieldType) {
  const AllTypesConfig c = bind<AllTypesConfig>(YAML::Load(kAllFieldsYaml), "cfg");
  EXPECT_TRUE(c.use_kl);
  EXPECT_EQ(c.num_epochs, 3);
  EXPECT_EQ(c.total_steps, -7);
  EXPECT_EQ(c.seed, std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(c.lr, 2.5e-5);
  EXPECT_EQ(c.name, "my run");
  EXPECT_EQ(c.style, DecayStyle::cosine);
  EXPECT_EQ(c.clip, 1.0);
  EXPECT_EQ(c.tag, std::nullopt);
  EXPECT_EQ(c.betas, (std::vector<double>{0.8, 0.95}));
  EXPECT_EQ(c.loggers, (std::vector<std::string>{"console", "jsonl"}));
  EXPECT_EQ(c.flags, (std::vector<bool>{true, false, true}));
  EXPECT_EQ(c.schedule, (ScheduleConfig{.warmup_steps = 100, .min_lr_ratio = 0.1}));
  // List elements start from the element type's defaults.
  EXPECT_EQ(c.stages, (std::vector<ScheduleConfig>{{.warmup_steps = 1, .min_lr_ratio = 0.0},
                                                   {.warmup_steps = 10, .min_lr_ratio = 0.5}}));
  ASSERT_TRUE(c.kwargs.IsMap());
  EXPECT_EQ(c.kwargs["rope_scaling"]["factor"].as<int>(), 2);
  EXPECT_EQ(c.kwargs["layers"].size(), 2u);
}

TEST(Bind, YamlNodeFieldIsACopyNotAView) {
  YAML::Node source = YAML::Load("kwargs: {x: 1}");
  const AllTypesConfig c = bind<AllTypesConfig>(source, "cfg");
  source["kwargs"]["x"] = 2;
  EXPECT_EQ(c.kwargs["x"].as<int>(), 1);
}

TEST(Bind, AbsentKeysKeepDefaults) {
  EXPECT_EQ(bind<AllTypesConfig>(YAML::Load("{}"), "cfg"), AllTypesConfig{});
  EXPECT_EQ(bind<AllTypesConfig>(YAML::Node(YAML::NodeType::Undefined), "cfg"), AllTypesConfig{});
  // A nested section with only some keys keeps the others.
  const auto c = bind<AllTypesConfig>(YAML::Load("schedule: {min_lr_ratio: 0.5}"), "cfg");
  EXPECT_EQ(c.schedule.warmup_steps, 10);
  EXPECT_EQ(c.schedule.min_lr_ratio, 0.5);
  EXPECT_EQ(c.tag, "main");
}

TEST(Bind, BindIntoStartsFromTheGivenValues) {
  AllTypesConfig c;
  c.name = "from code";
  c.schedule.warmup_steps = 7;
  c.clip = 2.0;
  bind_into(YAML::Load("{seed: 1, schedule: {min_lr_ratio: 0.5}, clip: null}"), "cfg", c);
  EXPECT_EQ(c.name, "from code");
  EXPECT_EQ(c.schedule.warmup_steps, 7);
  EXPECT_EQ(c.schedule.min_lr_ratio, 0.5);
  EXPECT_EQ(c.seed, 1u);
  EXPECT_EQ(c.clip, std::nullopt);
  // A list replaces the previous list; it is not merged.
  c.betas = {0.1, 0.2, 0.3};
  bind_into(YAML::Load("betas: [0.5]"), "cfg", c);
  EXPECT_EQ(c.betas, std::vector<double>{0.5});
}

TEST(Bind, ScalarSpellings) {
  const auto c = bind<AllTypesConfig>(YAML::Load("{lr: +1e-3, num_epochs: +2, clip: -2.5e+2, name: '007'}"), "cfg");
  EXPECT_EQ(c.lr, 1e-3);
  EXPECT_EQ(c.num_epochs, 2);
  EXPECT_EQ(c.clip, -250.0);
  EXPECT_EQ(c.name, "007");
  EXPECT_EQ(bind<AllTypesConfig>(YAML::Load("total_steps: -9223372036854775808"), "cfg").total_steps,
            std::numeric_limits<int64_t>::min());
  EXPECT_EQ(bind<AllTypesConfig>(YAML::Load("lr: 1.7976931348623157e+308"), "cfg").lr,
            std::numeric_limits<double>::max());
}

// Infinities and NaN used to bind (.inf, .nan, and "inf" through from_chars), so `lr=.inf` or a
// temperature of inf passed every `>= 0` check downstream.
TEST(BindErrors, FloatsMustBeFinite) {
  for (const char* text : {".inf", "-.inf", ".Inf", ".NAN", ".nan", "inf", "-infinity", "nan", "1e999", "-1e400"}) {
    expect_error(fmt::format("lr: {}", text), "cfg.lr", fmt::format("expected a finite number, got '{}'", text));
    expect_error(fmt::format("clip: {}", text), "cfg.clip", "expected a finite number");
    expect_error(fmt::format("betas: [0.9, {}]", text), "cfg.betas[1]", "expected a finite number");
  }
}

TEST(BindErrors, NullForANonOptionalField) {
  expect_error("lr: null", "cfg.lr", "expected a finite number, got null");
  expect_error("name: ~", "cfg.name", "expected a string, got null");
  expect_error("schedule:", "cfg.schedule", "expected a map, got null");
  expect_error("betas: null", "cfg.betas", "expected a list, got null");
}

TEST(BindErrors, UnknownKeySuggestsTheNearestField) {
  expect_error("lrr: 0.1", "cfg.lrr", "unknown key; did you mean 'lr'?");
  expect_error("schedule: {warmup_step: 5}", "cfg.schedule.warmup_step", "unknown key; did you mean 'warmup_steps'?");
  expect_error("stages: [{}, {min_lr_ration: 0.1}]", "cfg.stages[1].min_lr_ration",
               "unknown key; did you mean 'min_lr_ratio'?");
}

TEST(BindErrors, UnknownKeyFarFromAnyFieldListsTheKnownKeys) {
  expect_error("schedule: {optimizer: adam}", "cfg.schedule.optimizer",
               "unknown key; known keys: warmup_steps, min_lr_ratio");
}

TEST(BindErrors, RootPathIsEmpty) {
  const ConfigError e = bind_error("lrr: 1", "");
  EXPECT_EQ(e.key_path(), "lrr");
  EXPECT_EQ(bind_error("[1, 2]", "").key_path(), "<root>");
}

TEST(BindErrors, WrongTypeNamesTheValueAndTheExpectation) {
  expect_error("lr: abc", "cfg.lr", "expected a finite number, got 'abc'");
  expect_error("lr: 1.5x", "cfg.lr", "expected a finite number, got '1.5x'");
  expect_error("lr: [1]", "cfg.lr", "expected a finite number, got the list [1]");
  expect_error("name: {a: 1}", "cfg.name", "expected a string, got the map {a: 1}");
}

TEST(BindErrors, IntegersRejectFractionsAndOutOfRangeValues) {
  expect_error("num_epochs: 1.5", "cfg.num_epochs", "expected an integer, got '1.5'");
  expect_error("num_epochs: 1e3", "cfg.num_epochs", "expected an integer, got '1e3'");
  expect_error("num_epochs: 3000000000", "cfg.num_epochs",
               "expected an integer in [-2147483648, 2147483647], got '3000000000'");
  expect_error("total_steps: 9223372036854775808", "cfg.total_steps",
               "expected an integer in [-9223372036854775808, 9223372036854775807], got '9223372036854775808'");
  expect_error("seed: -1", "cfg.seed", "expected an integer in [0, 18446744073709551615], got '-1'");
  expect_error("seed: 18446744073709551616", "cfg.seed", "expected an integer in [0, 18446744073709551615]");
}

TEST(Bind, BoolsTakeTheYaml12CoreSpellings) {
  for (const char* text : {"true", "True", "TRUE"})
    EXPECT_TRUE(bind<AllTypesConfig>(YAML::Load(fmt::format("use_kl: {}", text)), "cfg").use_kl) << text;
  for (const char* text : {"false", "False", "FALSE"})
    EXPECT_FALSE(bind<AllTypesConfig>(YAML::Load(fmt::format("use_kl: {}", text)), "cfg").use_kl) << text;
}

TEST(BindErrors, BoolsAcceptOnlyTrueAndFalse) {
  expect_error("use_kl: yes", "cfg.use_kl", "expected true or false, got 'yes'");
  expect_error("use_kl: tRUE", "cfg.use_kl", "expected true or false, got 'tRUE'");
  expect_error("use_kl: 1", "cfg.use_kl", "expected true or false, got '1'");
  expect_error("flags: [true, on]", "cfg.flags[1]", "expected true or false, got 'on'");
}

TEST(BindErrors, EnumsListTheAllowedNames) {
  expect_error("style: cosin", "cfg.style",
               "expected one of constant, linear, cosine, got 'cosin'; did you mean 'cosine'?");
  expect_error("style: step", "cfg.style", "expected one of constant, linear, cosine, got 'step'");
  EXPECT_FALSE(contains(bind_error("style: step").what(), "did you mean"));
}

TEST(BindErrors, ListsAndSectionsNeedTheRightShape) {
  expect_error("betas: 0.9", "cfg.betas", "expected a list, got '0.9'");
  expect_error("betas: [0.9, x]", "cfg.betas[1]", "expected a finite number, got 'x'");
  expect_error("schedule: 3", "cfg.schedule", "expected a map, got '3'");
  expect_error("stages: {warmup_steps: 1}", "cfg.stages", "expected a list, got the map {warmup_steps: 1}");
  expect_error("stages: [{warmup_steps: 1}, 2]", "cfg.stages[1]", "expected a map, got '2'");
}

TEST(BindErrors, OptionalStillChecksItsValueType) {
  expect_error("clip: big", "cfg.clip", "expected a finite number, got 'big'");
}

TEST(BindValidate, FieldRuleIsKeyedUnderTheStructPath) {
  const ConfigError e = bind_error("lr: -1", "optim");
  EXPECT_EQ(e.key_path(), "optim.lr");
  const std::string what = e.what();
  EXPECT_TRUE(contains(what, "optim.lr: must be positive, got -1")) << what;
  // The re-keyed message carries the prefix once, not the inner error's prefix as well.
  EXPECT_EQ(what.find("config error"), what.rfind("config error")) << what;
  EXPECT_FALSE(contains(what, ": lr: ")) << what;
}

TEST(BindValidate, NestedAndListElementRules) {
  expect_error("schedule: {min_lr_ratio: 2}", "cfg.schedule.min_lr_ratio", "must be in [0, 1], got 2");
  expect_error("stages: [{}, {min_lr_ratio: -0.5}]", "cfg.stages[1].min_lr_ratio", "must be in [0, 1], got -0.5");
}

TEST(BindValidate, RunsOnDefaultsOfAbsentSections) {
  for (const YAML::Node& node : {YAML::Load("{}"), YAML::Node(YAML::NodeType::Undefined)}) {
    try {
      bind<RunConfig>(node, "run");
      ADD_FAILURE() << "no ConfigError";
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.key_path(), "run.model.path");
      EXPECT_TRUE(contains(e.what(), "run.model.path: is required")) << e.what();
    }
  }
  // An optional section that is absent (nullopt) has nothing to validate; a present one does.
  const auto run = bind<RunConfig>(YAML::Load("model: {path: /m}"), "run");
  EXPECT_EQ(run.model.path, "/m");
  EXPECT_FALSE(run.reference.has_value());
  const ConfigError e = bind_error<RunConfig>("{model: {path: /m}, reference: {}}", "run");
  EXPECT_EQ(e.key_path(), "run.reference.path");
}

TEST(BindValidate, WholeStructRuleIsKeyedByTheStructPath) {
  const ConfigError e = bind_error<RunConfig>("{model: {path: /m}, reference: {path: /m}}", "run");
  EXPECT_EQ(e.key_path(), "run");
  EXPECT_TRUE(contains(e.what(), "run: reference and model are the same folder")) << e.what();
}

TEST(ToYaml, WritesEveryFieldIncludingDefaults) {
  const YAML::Node node = to_yaml(AllTypesConfig{});
  ASSERT_TRUE(node.IsMap());
  EXPECT_EQ(node.size(), 15u);
  EXPECT_EQ(node["lr"].Scalar(), "0.001");
  EXPECT_EQ(node["seed"].Scalar(), "42");
  EXPECT_EQ(node["style"].Scalar(), "constant");
  EXPECT_TRUE(node["clip"].IsNull());
  EXPECT_EQ(node["tag"].Scalar(), "main");
  EXPECT_EQ(node["betas"].size(), 2u);
  EXPECT_EQ(node["schedule"]["warmup_steps"].Scalar(), "10");
  EXPECT_EQ(node["schedule"]["min_lr_ratio"].Scalar(), "0.0");
  EXPECT_TRUE(node["kwargs"].IsNull());
}

TEST(ToYaml, RoundTripsExactly) {
  for (const AllTypesConfig& original : {AllTypesConfig{}, non_default_config()}) {
    EXPECT_EQ(bind<AllTypesConfig>(to_yaml(original), "cfg"), original);
    // Through text too: strings such as "null", "" and "true" must come back as strings.
    const std::string text = YAML::Dump(to_yaml(original));
    EXPECT_EQ(bind<AllTypesConfig>(YAML::Load(text), "cfg"), original) << text;
  }
}

TEST(ToYaml, IsACopyOfTheYamlNodeField) {
  AllTypesConfig c;
  c.kwargs = YAML::Load("{x: 1}");
  YAML::Node written = to_yaml(c);
  written["kwargs"]["x"] = 5;
  EXPECT_EQ(c.kwargs["x"].as<int>(), 1);
}

}  // namespace
}  // namespace rf::config

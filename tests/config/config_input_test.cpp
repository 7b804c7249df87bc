// What a config file or override may not hold, each refused naming the file and key: a key given
// twice (yaml-cpp kept the first silently), a key that is not a name, aliases that expand past the
// bound (an alias bomb in a free-form key used to take all memory), an alias inside its own anchor,
// a file over the size cap or that is a device. And yaml_to_json on long and out-of-range scalars,
// which used to overflow the stack (std::regex) or throw std::out_of_range ("stod").
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "config/config_tree.h"
#include "config/yaml_checks.h"
#include "config/yaml_json.h"
#include "core/error.h"

namespace rf::config {
namespace {

bool contains(const std::string& text, const std::string& fragment) {
  return text.find(fragment) != std::string::npos;
}

// The IoError that loading `yaml` as `name` throws (failing the test when it loads).
std::string load_error(const std::string& yaml, const std::string& name = "run.yaml") {
  try {
    ConfigTree::from_string(yaml, name);
  } catch (const IoError& e) {
    EXPECT_EQ(e.path(), name);
    return e.what();
  }
  ADD_FAILURE() << "loaded:\n" << yaml;
  return "";
}

ConfigError override_error(const std::string& assignment) {
  ConfigTree tree = ConfigTree::from_string("data: {task_kwargs: {digits: 2}}\n", "run.yaml");
  try {
    tree.apply_override(assignment);
  } catch (const ConfigError& e) {
    return e;
  }
  ADD_FAILURE() << "accepted " << assignment;
  return ConfigError("", "");
}

// Ten lines whose last anchor names 10^11 values once expanded.
std::string alias_bomb(const std::string& indent) {
  std::string yaml = indent + "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i <= 10; ++i) {
    yaml += fmt::format("{}a{}: &a{} [", indent, i, i);
    for (int j = 0; j < 10; ++j) yaml += fmt::format("{}*a{}", j ? ", " : "", i - 1);
    yaml += "]\n";
  }
  return yaml;
}

TEST(ConfigInput, DuplicateKeyNamesTheKeyAndBothLines) {
  const std::string e = load_error("optim:\n  lr: 0.1\n  betas: [0.9, 0.99]\n  lr: 0.2\ntrainer: {steps: 1}\n");
  EXPECT_TRUE(contains(e, "run.yaml: optim.lr: given twice in one map, on line 2 and on line 4")) << e;
  // Anywhere in the document: the top level, inside a list, in a flow map.
  EXPECT_TRUE(contains(load_error("a: 1\nb: 2\na: 3\n"), "run.yaml: a: given twice in one map, on line 1 and on line 3"));
  EXPECT_TRUE(contains(load_error("stages:\n  - {x: 1}\n  - {x: 1, y: 2, x: 3}\n"),
                       "stages[1].x: given twice in one map, on line 3 and on line 3"));
}

// Found by config_fuzz_yaml: yaml-cpp 0.7's LoadAll never returns on a leading ',' (it reads endless
// empty documents), and Load reads such a value as null.
TEST(ConfigInput, TextThatYamlCppReadsAsEndlessDocumentsIsRefused) {
  const auto start = std::chrono::steady_clock::now();
  for (const char* text : {",", ", a", "a: 1\n---\nb: 2\n"})
    EXPECT_TRUE(contains(load_error(text), "run.yaml: holds more than one YAML document")) << text;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  const ConfigError e = override_error("data.task_kwargs=, a");
  EXPECT_EQ(e.key_path(), "data.task_kwargs");
  EXPECT_TRUE(contains(e.what(), "cannot parse the override value ', a': it is not one YAML value")) << e.what();
}

TEST(ConfigInput, KeysMustBeNames) {
  EXPECT_TRUE(contains(load_error("a: 1\n? [x, y]\n: 2\n"), "(top level): on line 2: a key must be a plain name, got "
                                                            "the list [x, y]"));
  EXPECT_TRUE(contains(load_error("a:\n  ~: 1\n"), "a: on line 2: a key must be a plain name, got null"));
}

TEST(ConfigInput, AliasBombInAFreeFormKeyIsNamedAndFast) {
  const auto start = std::chrono::steady_clock::now();
  const std::string e = load_error("data:\n  task_kwargs:\n" + alias_bomb("    "));
  EXPECT_TRUE(contains(e, "run.yaml: data.task_kwargs.a"));
  EXPECT_TRUE(contains(e, "holds more than 100000 values, counting each alias as a copy")) << e;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  // Ordinary aliases are fine.
  const ConfigTree tree = ConfigTree::from_string("base: &b {lr: 1}\nactor: *b\ncritic: *b\n", "run.yaml");
  EXPECT_EQ(tree.node("critic.lr").as<int>(), 1);
}

TEST(ConfigInput, AliasInsideItsOwnAnchorIsNamed) {
  const std::string e = load_error("data:\n  task_kwargs: &x {a: *x}\n");
  EXPECT_TRUE(contains(e, "nests deeper than 200 levels (an alias used inside its own anchor?)")) << e;
}

TEST(ConfigInput, OverrideValuesAreCheckedLikeFiles) {
  ConfigError e = override_error("data.task_kwargs={digits: 2, digits: 3}");
  EXPECT_EQ(e.key_path(), "data.task_kwargs.digits");
  EXPECT_TRUE(contains(e.what(), "in the override value: given twice in one map, at column 2 and at column 13"))
      << e.what();
  std::string bomb = "[&a0 [x, x, x, x, x, x, x, x, x, x]";
  for (int i = 1; i <= 10; ++i) {
    bomb += fmt::format(", &a{} [", i);
    for (int j = 0; j < 10; ++j) bomb += fmt::format("{}*a{}", j ? ", " : "", i - 1);
    bomb += "]";
  }
  e = override_error("+data.bomb=" + bomb + "]");
  EXPECT_TRUE(contains(e.what(), "data.bomb["));
  EXPECT_TRUE(contains(e.what(), "holds more than 100000 values")) << e.what();
  // A long value is cut in the message.
  e = override_error("data.task_kwargs=[" + std::string(500, '1'));
  EXPECT_TRUE(contains(e.what(), "... (501 characters)")) << e.what();
  EXPECT_LT(std::string(e.what()).size(), 300u);
}

class ConfigInputFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) / fmt::format("rf_config_input_{}", ::getpid());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

std::string file_error(const std::string& path) {
  try {
    ConfigTree::from_file(path);
  } catch (const IoError& e) {
    EXPECT_EQ(e.path(), path);
    return e.what();
  }
  ADD_FAILURE() << "loaded " << path;
  return "";
}

TEST_F(ConfigInputFiles, DeviceIsRefusedAtOnce) {
  // `--config /dev/zero` used to read for ever.
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(contains(file_error("/dev/zero"), "/dev/zero: is a character device, not a file to read a YAML config from"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
  EXPECT_TRUE(contains(file_error(dir_.string()), "is a folder"));
}

TEST_F(ConfigInputFiles, LargerThanTheCapIsRefusedBeforeParsing) {
  const std::string path = (dir_ / "huge.yaml").string();
  std::ofstream(path) << "a: [" << std::string(1 << 20, '1') << "]\n";
  EXPECT_TRUE(contains(file_error(path), "is larger than 1 MiB, the limit for a YAML config")) << file_error(path);
}

TEST(YamlToJson, LongScalarsAndOutOfRangeNumbers) {
  // std::regex used to overflow the stack on a scalar this long.
  const std::string digits(300'000, '1');
  const nlohmann::json j = yaml_to_json(YAML::Load("{n: " + digits + ", s: " + std::string(300'000, 'x') + "}"));
  ASSERT_TRUE(j.at("n").is_number_float());
  EXPECT_TRUE(std::isinf(j.at("n").get<double>()));
  EXPECT_EQ(j.at("s").get<std::string>().size(), 300'000u);
  // std::stod used to throw std::out_of_range; PyYAML reads these as inf and 0.
  EXPECT_EQ(yaml_to_json(YAML::Load("1e999")).get<double>(), std::numeric_limits<double>::infinity());
  EXPECT_EQ(yaml_to_json(YAML::Load("-1e999")).get<double>(), -std::numeric_limits<double>::infinity());
  EXPECT_EQ(yaml_to_json(YAML::Load("1e-999")).get<double>(), 0.0);
  // The core schema, unchanged.
  EXPECT_EQ(yaml_to_json(YAML::Load("+12")), 12);
  EXPECT_EQ(yaml_to_json(YAML::Load("99999999999999999999")).get<double>(), 1e20);
  EXPECT_EQ(yaml_to_json(YAML::Load(".5")).get<double>(), 0.5);
  EXPECT_EQ(yaml_to_json(YAML::Load("1.")).get<double>(), 1.0);
  EXPECT_EQ(yaml_to_json(YAML::Load("2e3")).get<double>(), 2000.0);
  for (const char* text : {".", "1e", "e5", "1.2.3", "0x10", "1_000", "+", ".inf", "'5'"})
    EXPECT_TRUE(yaml_to_json(YAML::Load(text)).is_string()) << text;
}

}  // namespace
}  // namespace rf::config

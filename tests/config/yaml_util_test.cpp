// The one implementation of the dotted-key walk and of "the same YAML value" that the verl and ROLL
// front ends and the override engine share (issue #20, defect 5), and PathList's two spellings.
#include "config/yaml_util.h"

#include <gtest/gtest.h>

#include "config/bind.h"
#include "config/path_list.h"

namespace rf::config {
namespace {

TEST(YamlUtil, SplitDottedKeyKeepsEverySegment) {
  EXPECT_EQ(split_dotted_key("a.b.c"), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(split_dotted_key("a"), (std::vector<std::string>{"a"}));
  EXPECT_EQ(split_dotted_key("a..b"), (std::vector<std::string>{"a", "", "b"}));
  EXPECT_EQ(split_dotted_key(""), (std::vector<std::string>{""}));
}

TEST(YamlUtil, NodeAtPathWalksWithoutInserting) {
  const YAML::Node root = YAML::Load("{a: {b: {c: 3}}, x: 1}");
  EXPECT_EQ(node_at_path(root, "a.b.c").as<int>(), 3);
  EXPECT_TRUE(node_at_path(root, "a.b").IsMap());
  EXPECT_FALSE(node_at_path(root, "a.z.c").IsDefined());
  EXPECT_FALSE(node_at_path(root, "x.y").IsDefined());  // through a scalar: absent, no throw
  EXPECT_EQ(node_at_path(root, "").size(), 2u);
  EXPECT_EQ(YAML::Dump(root), YAML::Dump(YAML::Load("{a: {b: {c: 3}}, x: 1}")));  // nothing inserted
}

TEST(YamlUtil, SameYamlValueReadsAsPythonDoes) {
  const auto same = [](const char* a, const char* b) { return same_yaml_value(YAML::Load(a), YAML::Load(b)); };
  EXPECT_TRUE(same("8", "8.0"));
  EXPECT_TRUE(same("+8", "8"));
  EXPECT_TRUE(same("1e-3", "0.001"));
  EXPECT_TRUE(same("True", "true"));
  EXPECT_TRUE(same("null", "~"));
  EXPECT_TRUE(same("[1, 2.0]", "[1.0, 2]"));
  EXPECT_TRUE(same("{x: 1, y: [a]}", "{y: [a], x: 1.0}"));
  EXPECT_FALSE(same("true", "1"));  // a bool is not a number
  EXPECT_FALSE(same("null", "0"));
  EXPECT_FALSE(same("'8'", "9"));
  EXPECT_FALSE(same("[1]", "[1, 2]"));
  EXPECT_FALSE(same("{x: 1}", "{x: 1, y: 2}"));
  EXPECT_FALSE(same("{x: 1}", "[x]"));
  EXPECT_FALSE(same("abc", "ABC"));
}

struct Files {
  std::optional<PathList> files;
  template <class Fields>
  void fields(Fields& f) {
    f("files", files, "a path or a list");
  }
};

TEST(PathList, OnePathAndAListReadTheSame) {
  EXPECT_EQ(bind<Files>(YAML::Load("{files: a.jsonl}"), "data").files->paths, (std::vector<std::string>{"a.jsonl"}));
  EXPECT_EQ(bind<Files>(YAML::Load("{files: [a.jsonl, b.jsonl]}"), "data").files->paths,
            (std::vector<std::string>{"a.jsonl", "b.jsonl"}));
  EXPECT_FALSE(bind<Files>(YAML::Load("{files: null}"), "data").files.has_value());
  // Written back as the list, which reads back the same.
  const Files one = bind<Files>(YAML::Load("{files: a.jsonl}"), "data");
  EXPECT_EQ(bind<Files>(to_yaml(one), "data").files, one.files);
  EXPECT_TRUE(to_yaml(one)["files"].IsSequence());
}

TEST(PathList, AMapIsRefusedByName) {
  try {
    bind<Files>(YAML::Load("{files: {a: 1}}"), "data");
    FAIL() << "a map bound as a path list";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key_path(), "data.files");
    EXPECT_NE(std::string(e.what()).find("a path or a list of paths"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace rf::config

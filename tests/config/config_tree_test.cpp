// ConfigTree: loading (and its file errors), Hydra-style overrides (replace, +add, ++add-or-replace,
// flow values, every error with its key path), deep copies, and binding a subtree after overrides.
#include "config/config_tree.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "config/bind.h"
#include "config/test_configs.h"
#include "core/error.h"

namespace rf::config {
namespace {

bool contains(const std::string& text, const std::string& fragment) {
  return text.find(fragment) != std::string::npos;
}

const char* const kBaseYaml = R"(
trainer:
  total_epochs: 2
  project_name: demo
  logger: [console]
actor:
  optim:
    lr: 1.0e-6
    betas: [0.9, 0.999]
  profile: null
  ratio: 0.5
)";

ConfigTree base_tree() { return ConfigTree::from_string(kBaseYaml, "base.yaml"); }

ConfigError override_error(const std::string& assignment) {
  ConfigTree tree = base_tree();
  try {
    tree.apply_override(assignment);
  } catch (const ConfigError& e) {
    return e;
  }
  ADD_FAILURE() << "no ConfigError for " << assignment;
  return ConfigError("", "");
}

// A file in a fresh folder under the test temp dir, removed with it.
class TempFile {
 public:
  TempFile(const std::string& name, const std::string& contents)
      : dir_(std::filesystem::path(::testing::TempDir()) / ("rf_config_" + std::to_string(::getpid()))),
        path_((dir_ / name).string()) {
    std::filesystem::create_directories(dir_);
    std::ofstream(path_) << contents;
  }
  ~TempFile() { std::filesystem::remove_all(dir_); }
  const std::string& path() const { return path_; }

 private:
  std::filesystem::path dir_;
  std::string path_;
};

TEST(ConfigTree, NodeLooksUpDottedPaths) {
  const ConfigTree tree = base_tree();
  EXPECT_EQ(tree.node("trainer.total_epochs").as<int>(), 2);
  EXPECT_EQ(tree.node("actor.optim.betas").size(), 2u);
  EXPECT_TRUE(tree.node("actor.profile").IsNull());
  EXPECT_TRUE(tree.node("").IsMap());
  EXPECT_EQ(tree.node("").size(), 2u);
  for (const char* absent : {"critic", "actor.optim.eps", "trainer.total_epochs.x", "actor..optim"}) {
    const YAML::Node node = tree.node(absent);
    EXPECT_FALSE(node.IsDefined()) << absent;
    EXPECT_FALSE(node.IsNull()) << absent;  // a valid node: asking does not throw
  }
}

TEST(ConfigTree, EmptyDocumentIsAnEmptyMap) {
  const ConfigTree tree = ConfigTree::from_string("# nothing\n", "empty.yaml");
  EXPECT_TRUE(tree.root().IsMap());
  EXPECT_EQ(tree.root().size(), 0u);
}

TEST(Overrides, ReplaceAnExistingKeyKeepingItsPlace) {
  ConfigTree tree = base_tree();
  tree.apply_override("trainer.total_epochs=5");
  tree.apply_override("actor.optim=3");  // a section may be replaced by any value
  EXPECT_EQ(tree.node("trainer.total_epochs").as<int>(), 5);
  EXPECT_EQ(tree.node("actor.optim").as<int>(), 3);
  EXPECT_EQ(tree.node("trainer").begin()->first.Scalar(), "total_epochs");
}

TEST(Overrides, PlusAddsAKeyCreatingMapsOnTheWay) {
  ConfigTree tree = base_tree();
  tree.apply_override("+trainer.seed=7");
  tree.apply_override("+critic.optim.lr=1e-5");
  tree.apply_override("+actor.profile.use_profile=true");  // null becomes a map
  EXPECT_EQ(tree.node("trainer.seed").as<int>(), 7);
  EXPECT_TRUE(tree.node("critic").IsMap());
  EXPECT_EQ(tree.node("critic.optim.lr").as<double>(), 1e-5);
  EXPECT_EQ(tree.node("actor.profile.use_profile").Scalar(), "true");
  EXPECT_EQ(tree.node("trainer.total_epochs").as<int>(), 2);  // siblings untouched
}

TEST(Overrides, DoublePlusAddsOrReplaces) {
  ConfigTree tree = base_tree();
  tree.apply_override("++trainer.total_epochs=9");
  tree.apply_override("++trainer.new_key=x");
  tree.apply_override("++ref.model.path=/m");
  EXPECT_EQ(tree.node("trainer.total_epochs").as<int>(), 9);
  EXPECT_EQ(tree.node("trainer.new_key").Scalar(), "x");
  EXPECT_EQ(tree.node("ref.model.path").Scalar(), "/m");
}

TEST(Overrides, ValuesAreYamlScalarsOrFlowCollections) {
  ConfigTree tree = base_tree();
  tree.apply_overrides({
      "trainer.logger=[console,wandb]",
      "actor.optim={lr: 2e-6, betas: [0.8, 0.9]}",
      "actor.ratio=null",
      "trainer.project_name='123'",
      "+a.flag=true",
      "+a.lr=1e-3",
      "+a.text=x=y",
      "+a.empty=",
      "+a.spaced=two words",
  });
  EXPECT_EQ(tree.node("trainer.logger").size(), 2u);
  EXPECT_EQ(tree.node("trainer.logger")[1].Scalar(), "wandb");
  EXPECT_EQ(tree.node("actor.optim.lr").as<double>(), 2e-6);
  EXPECT_EQ(tree.node("actor.optim.betas")[0].as<double>(), 0.8);
  EXPECT_TRUE(tree.node("actor.ratio").IsNull());
  EXPECT_EQ(tree.node("trainer.project_name").Scalar(), "123");
  EXPECT_EQ(tree.node("a.flag").as<bool>(), true);
  EXPECT_EQ(tree.node("a.lr").as<double>(), 1e-3);
  EXPECT_EQ(tree.node("a.text").Scalar(), "x=y");  // split at the first '='
  EXPECT_TRUE(tree.node("a.empty").IsScalar());    // `key=` is the empty string, as in Hydra
  EXPECT_EQ(tree.node("a.empty").Scalar(), "");
  EXPECT_EQ(tree.node("a.spaced").Scalar(), "two words");
}

TEST(Overrides, LaterOverridesWin) {
  ConfigTree tree = base_tree();
  tree.apply_overrides({"trainer.total_epochs=3", "trainer.total_epochs=4"});
  EXPECT_EQ(tree.node("trainer.total_epochs").as<int>(), 4);
}

TEST(OverrideErrors, MissingKeySuggestsTheNearestPath) {
  ConfigError e = override_error("trainer.total_epoch=3");
  EXPECT_EQ(e.key_path(), "trainer.total_epoch");
  EXPECT_TRUE(contains(e.what(), "trainer.total_epoch: no such key to override; did you mean 'trainer.total_epochs'?"))
      << e.what();
  EXPECT_TRUE(contains(e.what(), "'+'")) << e.what();
  // A typo in an intermediate key: the suggestion is the whole corrected path.
  e = override_error("trainr.total_epochs=3");
  EXPECT_EQ(e.key_path(), "trainr.total_epochs");
  EXPECT_TRUE(contains(e.what(), "did you mean 'trainer.total_epochs'?")) << e.what();
}

TEST(OverrideErrors, MissingKeyWithNoNearKeyListsTheKeys) {
  ConfigError e = override_error("actor.optim.weight_decay=0.1");
  EXPECT_EQ(e.key_path(), "actor.optim.weight_decay");
  EXPECT_TRUE(contains(e.what(), "no such key to override ('actor.optim' has keys: lr, betas)")) << e.what();
  e = override_error("critic=1");
  EXPECT_TRUE(contains(e.what(), "the top level has keys: trainer, actor")) << e.what();
}

TEST(OverrideErrors, PlusOnAnExistingKey) {
  const ConfigError e = override_error("+trainer.total_epochs=3");
  EXPECT_EQ(e.key_path(), "trainer.total_epochs");
  EXPECT_TRUE(contains(e.what(), "trainer.total_epochs: already exists")) << e.what();
}

TEST(OverrideErrors, PathThroughANonMap) {
  ConfigError e = override_error("+trainer.total_epochs.x=1");
  EXPECT_EQ(e.key_path(), "trainer.total_epochs.x");
  EXPECT_TRUE(contains(e.what(), "'trainer.total_epochs' holds '2', not a map")) << e.what();
  e = override_error("trainer.logger.x=1");
  EXPECT_TRUE(contains(e.what(), "'trainer.logger' holds the list [console], not a map")) << e.what();
  // Replacing under a null key: it does not exist yet, and '+' is the way to create it.
  e = override_error("actor.profile.use_profile=true");
  EXPECT_EQ(e.key_path(), "actor.profile.use_profile");
  EXPECT_TRUE(contains(e.what(), "'actor.profile' holds null, not a map (a leading '+' creates it)")) << e.what();
}

TEST(OverrideErrors, MalformedAssignmentsAreNamed) {
  for (const char* text : {"trainer.total_epochs", "=3", "trainer..total_epochs=3", ".a=1", "a.=1", "+=1", "++=1",
                           "+++a=1", "a b=1", ""}) {
    const ConfigError e = override_error(text);
    EXPECT_EQ(e.key_path(), text);
    EXPECT_TRUE(contains(e.what(), "malformed override")) << e.what();
  }
}

TEST(OverrideErrors, UnparseableOrBlockValues) {
  ConfigError e = override_error("trainer.logger=[console, wandb");
  EXPECT_EQ(e.key_path(), "trainer.logger");
  EXPECT_TRUE(contains(e.what(), "cannot parse the override value '[console, wandb'")) << e.what();
  e = override_error("trainer.project_name=a: b");
  EXPECT_EQ(e.key_path(), "trainer.project_name");
  EXPECT_TRUE(contains(e.what(), "'a: b' is a block YAML collection")) << e.what();
}

TEST(OverrideErrors, FailedOverrideLeavesTheTreeUnchanged) {
  ConfigTree tree = base_tree();
  const std::string before = tree.to_yaml();
  EXPECT_THROW(tree.apply_override("trainer.total_epochs.x=1"), ConfigError);
  EXPECT_THROW(tree.apply_override("+trainer.total_epochs=1"), ConfigError);
  EXPECT_THROW(tree.apply_override("trainer.logger=[x"), ConfigError);
  EXPECT_EQ(tree.to_yaml(), before);
}

TEST(ConfigTree, CopiesAreIndependent) {
  const ConfigTree original = base_tree();
  ConfigTree copy = original;
  copy.apply_override("trainer.total_epochs=8");
  EXPECT_EQ(original.node("trainer.total_epochs").as<int>(), 2);
  ConfigTree assigned = base_tree();
  assigned = copy;
  copy.apply_override("trainer.total_epochs=9");
  EXPECT_EQ(assigned.node("trainer.total_epochs").as<int>(), 8);
}

TEST(ConfigTree, ToYamlRoundTrips) {
  ConfigTree tree = base_tree();
  tree.apply_overrides({"actor.ratio=null", "+a.empty=", "+a.word='null'"});
  const std::string text = tree.to_yaml();
  EXPECT_TRUE(contains(text, "ratio: null")) << text;
  const ConfigTree again = ConfigTree::from_string(text, "dump.yaml");
  EXPECT_EQ(again.to_yaml(), text);
  EXPECT_EQ(again.node("actor.optim.lr").as<double>(), 1e-6);
  EXPECT_EQ(again.node("a.empty").Scalar(), "");
  EXPECT_EQ(again.node("a.word").Scalar(), "null");
  EXPECT_TRUE(again.node("actor.ratio").IsNull());
}

TEST(ConfigTree, OverriddenSubtreeBindsAndErrorsCarryTheFullPath) {
  ConfigTree tree = ConfigTree::from_string("optim: {lr: 0.01, schedule: {warmup_steps: 3}}\n", "run.yaml");
  tree.apply_overrides({"optim.schedule.warmup_steps=20", "+optim.betas=[0.5, 0.6]"});
  const auto optim = bind<testing::AllTypesConfig>(tree.node("optim"), "optim");
  EXPECT_EQ(optim.lr, 0.01);
  EXPECT_EQ(optim.schedule.warmup_steps, 20);
  EXPECT_EQ(optim.betas, (std::vector<double>{0.5, 0.6}));
  tree.apply_override("optim.lr=abc");
  try {
    bind<testing::AllTypesConfig>(tree.node("optim"), "optim");
    ADD_FAILURE() << "no ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key_path(), "optim.lr");
    EXPECT_TRUE(contains(e.what(), "optim.lr: expected a finite number, got 'abc'")) << e.what();
  }
}

TEST(ConfigFiles, LoadsAFile) {
  const TempFile file("ppo.yaml", kBaseYaml);
  const ConfigTree tree = ConfigTree::from_file(file.path());
  EXPECT_EQ(tree.node("trainer.project_name").Scalar(), "demo");
}

TEST(ConfigFiles, MissingFileIsAnIoErrorNamingIt) {
  const std::string path = "/nonexistent/rf_config_test/ppo.yaml";
  try {
    ConfigTree::from_file(path);
    ADD_FAILURE() << "no IoError";
  } catch (const IoError& e) {
    EXPECT_EQ(e.path(), path);
    EXPECT_TRUE(contains(e.what(), path + ": cannot open: No such file or directory")) << e.what();
  }
}

TEST(ConfigFiles, DirectoryIsAnIoError) {
  const TempFile file("x.yaml", "");
  const std::string dir = std::filesystem::path(file.path()).parent_path().string();
  EXPECT_THROW(ConfigTree::from_file(dir), IoError);
}

TEST(ConfigFiles, SyntaxErrorNamesTheFileAndLine) {
  const TempFile file("broken.yaml", "trainer:\n  total_epochs: 2\n  logger: console: wandb\nactor: {}\n");
  try {
    ConfigTree::from_file(file.path());
    ADD_FAILURE() << "no IoError";
  } catch (const IoError& e) {
    EXPECT_EQ(e.path(), file.path());
    EXPECT_TRUE(contains(e.what(), file.path() + ": line 3, column 18: illegal map value")) << e.what();
  }
}

TEST(ConfigFiles, TopLevelMustBeOneMap) {
  try {
    ConfigTree::from_string("- a\n- b\n", "list.yaml");
    ADD_FAILURE() << "no IoError";
  } catch (const IoError& e) {
    EXPECT_EQ(e.path(), "list.yaml");
    EXPECT_TRUE(contains(e.what(), "the top level must be a map, got the list [a, b]")) << e.what();
  }
  try {
    ConfigTree::from_string("a: 1\n---\na: 2\n", "two.yaml");
    ADD_FAILURE() << "no IoError";
  } catch (const IoError& e) {
    EXPECT_TRUE(contains(e.what(), "two.yaml: holds more than one YAML document")) << e.what();
  }
}

}  // namespace
}  // namespace rf::config

namespace rf::config {
namespace {

TEST(ConfigTree, MergeDefaultsFillsOnlyMissingKeysSoOverridesReachThem) {
  ConfigTree tree = ConfigTree::from_string("trainer: {steps: 5}\nmodel: {config: {hidden: 8}}\n", "test.yaml");
  const YAML::Node defaults = YAML::Load("trainer: {steps: 100, freq: 10}\nmodel: {config: null, path: null}\nextra: 1\n");
  tree.merge_defaults(defaults);
  EXPECT_EQ(tree.node("trainer.steps").as<int>(), 5);  // the document wins
  EXPECT_EQ(tree.node("trainer.freq").as<int>(), 10);  // filled in
  EXPECT_EQ(tree.node("model.config.hidden").as<int>(), 8);  // a map in the document is kept as is
  EXPECT_TRUE(tree.node("model.path").IsNull());
  EXPECT_EQ(tree.node("extra").as<int>(), 1);
  tree.apply_override("trainer.freq=3");  // no '+' needed for a schema key the document omitted
  EXPECT_EQ(tree.node("trainer.freq").as<int>(), 3);
  EXPECT_EQ(defaults["trainer"]["freq"].as<int>(), 10);  // the defaults were cloned, not aliased
}

}  // namespace
}  // namespace rf::config

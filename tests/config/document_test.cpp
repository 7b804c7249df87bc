// document(): one markdown table per struct with each key, its type, its default and its
// description; nested structs (and the element struct of a list) get their own table.
#include <gtest/gtest.h>

#include "config/bind.h"
#include "config/test_configs.h"

namespace rf::config {
namespace {

bool contains(const std::string& text, const std::string& fragment) {
  return text.find(fragment) != std::string::npos;
}

TEST(Document, HasARowPerFieldWithTypeDefaultAndDescription) {
  const std::string doc = document<testing::AllTypesConfig>("cfg", "Test config");
  const std::vector<std::string> rows = {
      "| `use_kl` | bool | `false` | add a KL term |",
      "| `num_epochs` | int | `1` | passes over the data |",
      "| `total_steps` | int64 | `-1` | -1: derived from the epochs |",
      "| `seed` | uint64 | `42` | random seed |",
      "| `lr` | float | `0.001` | peak learning rate |",
      "| `name` | string | `run` | run name |",
      "| `style` | enum: constant, linear, cosine | `constant` | learning-rate decay |",
      "| `clip` | float or null | `null` | gradient clip (null: none) |",
      "| `tag` | string or null | `main` | optional tag |",
      "| `betas` | list[float] | `[0.9, 0.999]` | Adam (beta1, beta2) |",
      "| `loggers` | list[string] | `[console]` | where metrics go |",
      "| `flags` | list[bool] | `[]` | feature switches |",
      "| `schedule` | section | see `cfg.schedule` | the lr schedule |",
      "| `stages` | list[section] | `[]` | extra schedule stages |",
      "| `kwargs` | any | `null` | passed through as is |",
      "| `warmup_steps` | int64 | `10` | linear warm-up length in steps |",
      "| `min_lr_ratio` | float | `0.0` | final lr as a fraction of the peak |",
  };
  for (const std::string& row : rows) EXPECT_TRUE(contains(doc, row)) << "missing row " << row << " in:\n" << doc;
}

TEST(Document, NestedStructsGetTheirOwnTableUnderTheirPath) {
  const std::string doc = document<testing::AllTypesConfig>("cfg", "Test config");
  EXPECT_EQ(doc.rfind("## Test config\n", 0), 0u) << doc;
  const size_t root = doc.find("### `cfg`\n");
  const size_t schedule = doc.find("### `cfg.schedule`\n");
  const size_t stages = doc.find("### `cfg.stages[]`\n");
  ASSERT_NE(root, std::string::npos) << doc;
  ASSERT_NE(schedule, std::string::npos) << doc;
  ASSERT_NE(stages, std::string::npos) << doc;
  EXPECT_LT(root, schedule);
  EXPECT_LT(schedule, stages);
  // The nested table comes after the whole parent table: the parent's last row precedes it.
  EXPECT_LT(doc.find("| `kwargs` |"), schedule);
  const std::string header = "| key | type | default | description |";
  EXPECT_EQ(doc.find(header), doc.find(header, root));
  size_t num_tables = 0;
  for (size_t at = doc.find("| key |"); at != std::string::npos; at = doc.find("| key |", at + 1)) ++num_tables;
  EXPECT_EQ(num_tables, 3u);
}

TEST(Document, OptionalSectionIsDocumentedAtTheTopLevel) {
  const std::string doc = document<testing::RunConfig>("", "Run");
  EXPECT_TRUE(contains(doc, "### `(top level)`")) << doc;
  EXPECT_TRUE(contains(doc, "| `reference` | section or null | `null` | the reference policy (null: none) |")) << doc;
  EXPECT_TRUE(contains(doc, "### `reference`")) << doc;
  EXPECT_TRUE(contains(doc, "### `model`")) << doc;
}

struct SeparatorConfig {
  std::string separator = "a|b";
  template <class Fields>
  void fields(Fields& f) {
    f("separator", separator, "joins fields | splits them back");
  }
};

TEST(Document, PipesInCellsAreEscaped) {
  const std::string doc = document<SeparatorConfig>("io", "IO");
  EXPECT_TRUE(contains(doc, "| `separator` | string | `a\\|b` | joins fields \\| splits them back |\n")) << doc;
}

}  // namespace
}  // namespace rf::config

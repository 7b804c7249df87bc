#include "formats/safetensors_reader.h"

#include <gtest/gtest.h>

#include "support/test_support.h"

namespace rf::formats {
namespace {

TEST(SafetensorsReader, ReadsAReferenceModel) {
  const auto dirs = testing::reference_model_dirs();
  ASSERT_FALSE(dirs.empty()) << "no reference models under " << testing::reference_dir();
  const SafetensorsReader reader(dirs.front() + "/model.safetensors");
  ASSERT_TRUE(reader.contains("model.embed_tokens.weight"));
  const TensorView embed = reader.view("model.embed_tokens.weight");
  EXPECT_EQ(embed.rank(), 2);
  EXPECT_THROW(reader.view("no.such.tensor"), IoError);
}

}  // namespace
}  // namespace rf::formats

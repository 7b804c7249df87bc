// rf::Error and RF_CHECK: the message carries file:line, the rank label, the formatted text and
// the failed condition; ConfigError carries its key path and IoError its path.
#include "core/error.h"

#include <gtest/gtest.h>

namespace rf {
namespace {

bool contains(const std::string& text, const std::string& fragment) {
  return text.find(fragment) != std::string::npos;
}

// Restores the process's rank label when a test that changes it ends.
class RankLabelGuard {
 public:
  RankLabelGuard() : saved_(core::rank_label()) {}
  ~RankLabelGuard() { core::set_rank_label(saved_); }

 private:
  std::string saved_;
};

TEST(Error, CheckMessageHasFileLineRankAndFormattedText) {
  const RankLabelGuard guard;
  core::set_rank_label("rank 3 tp=1 pp=0");
  const int expected_rows = 4, rows = 5;
  int line = 0;
  try {
    line = __LINE__ + 1;
    RF_CHECK(rows == expected_rows, "x_BTC: expected {} rows, got {} ({})", expected_rows, rows, "bf16");
    ADD_FAILURE() << "RF_CHECK did not throw";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_TRUE(contains(what, "[rank 3 tp=1 pp=0]")) << what;
    EXPECT_TRUE(contains(what, "error_test.cpp:" + std::to_string(line))) << what;
    EXPECT_TRUE(contains(what, "x_BTC: expected 4 rows, got 5 (bf16)")) << what;
    EXPECT_TRUE(contains(what, "rows == expected_rows")) << what;
    EXPECT_FALSE(contains(what, "/error_test.cpp")) << "the file is named by its base name: " << what;
  }
}

TEST(Error, PassingCheckDoesNotFormat) {
  int formatted = 0;
  auto count = [&] { return ++formatted; };
  RF_CHECK(1 + 1 == 2, "never shown {}", count());
  EXPECT_EQ(formatted, 0);
  EXPECT_THROW(RF_CHECK(false, "shown {}", count()), Error);
  EXPECT_EQ(formatted, 1);
}

// The fuzz targets tell an internal check reached from input (a bug) from a refusal by its type.
TEST(Error, CheckThrowsACheckFailure) {
  EXPECT_THROW(RF_CHECK(false, "internal"), CheckFailure);
  try {
    throw IoError("a.json", "bad");
  } catch (const CheckFailure&) {
    ADD_FAILURE() << "an IoError is not a CheckFailure";
  } catch (const Error&) {
  }
}

TEST(Error, ConfigErrorCarriesKeyPath) {
  const ConfigError e("actor_rollout_ref.actor.megatron.tensor_model_parallel_size",
                      "3 does not divide num_attention_heads=8");
  EXPECT_EQ(e.key_path(), "actor_rollout_ref.actor.megatron.tensor_model_parallel_size");
  const std::string what = e.what();
  EXPECT_TRUE(contains(what, "actor_rollout_ref.actor.megatron.tensor_model_parallel_size: 3 does not divide "
                             "num_attention_heads=8"))
      << what;
  EXPECT_TRUE(contains(what, "[" + core::rank_label() + "]")) << what;
  const Error& base = e;  // catchable as rf::Error
  EXPECT_TRUE(contains(base.what(), "config error"));
}

TEST(Error, IoErrorCarriesPath) {
  try {
    throw IoError("/data/model.safetensors", "header length 99 exceeds the file size 10");
  } catch (const Error& e) {
    const auto* io = dynamic_cast<const IoError*>(&e);
    ASSERT_NE(io, nullptr);
    EXPECT_EQ(io->path(), "/data/model.safetensors");
    EXPECT_TRUE(contains(e.what(), "/data/model.safetensors: header length 99 exceeds the file size 10"))
        << e.what();
  }
}

}  // namespace
}  // namespace rf

// suggest_nearest: typos within the edit budget get a suggestion, unrelated keys do not.
#include "config/suggest.h"

#include <gtest/gtest.h>

namespace rf::config {
namespace {

const std::vector<std::string> kKeys = {"lr", "betas", "weight_decay", "total_epochs", "lr_decay_style"};

TEST(SuggestNearest, OneEditTyposFindTheKey) {
  EXPECT_EQ(suggest_nearest("lrr", kKeys), "lr");                   // insertion
  EXPECT_EQ(suggest_nearest("bets", kKeys), "betas");               // deletion
  EXPECT_EQ(suggest_nearest("bteas", kKeys), "betas");              // adjacent swap counts as one edit
  EXPECT_EQ(suggest_nearest("total_epoch", kKeys), "total_epochs");
  EXPECT_EQ(suggest_nearest("weight_decy", kKeys), "weight_decay");
}

TEST(SuggestNearest, FarKeysGetNothing) {
  EXPECT_EQ(suggest_nearest("optimizer", kKeys), std::nullopt);
  EXPECT_EQ(suggest_nearest("xy", kKeys), std::nullopt);
  EXPECT_EQ(suggest_nearest("lr", {}), std::nullopt);
}

TEST(SuggestNearest, ClosestWinsAndTiesGoToTheFirst) {
  EXPECT_EQ(suggest_nearest("lr_decay_styles", kKeys), "lr_decay_style");
  EXPECT_EQ(suggest_nearest("ab", {"a", "b"}), "a");
  EXPECT_EQ(suggest_nearest("ab", {"b", "a"}), "b");
}

}  // namespace
}  // namespace rf::config

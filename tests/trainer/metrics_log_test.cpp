// MetricsLog on resume: rows past the resumed step dropped, a line cut by a crash dropped, and the
// resumed step's row restored from its checkpoint when a kill lost it (after the commit, before the line).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "support/scratch_folder.h"
#include "trainer/metrics_log.h"

namespace rf::trainer {
namespace {

class MetricsLogTest : public rf::testing::ScratchFolderTest {
 protected:
  std::string read(const std::string& name) const {
    std::ifstream in(path(name));
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
  }
};

TEST_F(MetricsLogTest, AResumedRunRestoresTheRowItsCheckpointHolds) {
  std::ofstream(path("metrics.jsonl")) << "{\"step\":1,\"x\":1}\n{\"step\":2,\"x\":2}\n{\"step\":3,\"x\":3}\n{\"st";
  const nlohmann::json saved = {{"step", 4}, {"x", 4.5}};
  MetricsLog(path("metrics.jsonl"), 4, {}, saved);
  EXPECT_EQ(read("metrics.jsonl"),
            "{\"step\":1,\"x\":1}\n{\"step\":2,\"x\":2}\n{\"step\":3,\"x\":3}\n{\"step\":4,\"x\":4.5}\n");
}

TEST_F(MetricsLogTest, ARowTheFileHasIsKeptAndLaterOnesDropped) {
  std::ofstream(path("metrics.jsonl")) << "{\"step\":1,\"x\":1}\n{\"step\":2,\"x\":2}\n{\"step\":3,\"x\":3}\n";
  MetricsLog(path("metrics.jsonl"), 2, {}, nlohmann::json{{"step", 2}, {"x", 99}});
  EXPECT_EQ(read("metrics.jsonl"), "{\"step\":1,\"x\":1}\n{\"step\":2,\"x\":2}\n");
}

TEST_F(MetricsLogTest, ALostFileIsStartedFromTheSavedRow) {
  MetricsLog log(path("metrics.jsonl"), 3, {}, nlohmann::json{{"step", 3}});
  log.write(nlohmann::json{{"step", 4}}, false);
  EXPECT_EQ(read("metrics.jsonl"), "{\"step\":3}\n{\"step\":4}\n");
}

}  // namespace
}  // namespace rf::trainer

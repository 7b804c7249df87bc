// RunFolder (trainer/run_folder.h): one run per folder, killed saves' temp files removed at start, the
// step to resume (the tracker's, resume_from_path's as given, never a silent start over checkpoints
// without a tracker), config.yaml written on request only, pruning that never removes a later step.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "support/scratch_folder.h"
#include "support/test_support.h"
#include "trainer/run_folder.h"

namespace rf::trainer {
namespace {

namespace fs = std::filesystem;

class RunFolderTest : public rf::testing::ScratchFolderTest {
 protected:
  void make_step(int64_t step) const { fs::create_directories(path(fmt::format("run/global_step_{}", step))); }
  void write(const std::string& name, const std::string& text) const { std::ofstream(path(name)) << text; }
};

TEST_F(RunFolderTest, ASecondRunOnTheFolderIsRefusedNamingTheHolder) {
  const RunFolder first(path("run"), true);
  try {
    const RunFolder second(path("run"), true);
    ADD_FAILURE() << "a second run took the folder";
  } catch (const IoError& error) {
    EXPECT_NE(std::string(error.what()).find(fmt::format("pid {} on ", ::getpid())), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("trainer.default_local_dir"), std::string::npos) << error.what();
  }
  // Ranks other than the lead do not lock; the lock goes with its holder.
  const RunFolder other_rank(path("run"), false);
}

TEST_F(RunFolderTest, TheLockIsReleasedWithItsHolder) {
  { const RunFolder first(path("run"), true); }
  const RunFolder again(path("run"), true);
}

TEST_F(RunFolderTest, KilledSavesTempFilesAreRemovedAtStartAndNothingElse) {
  make_step(2);
  fs::create_directories(path("run/.global_step_3.tmp.123.456/actor"));
  write("run/.latest_checkpointed_iteration.txt.tmp.123.456", "3");
  write("run/config.yaml.tmp", "x");
  write("run/latest_checkpointed_iteration.txt", "2");
  write("run/metrics.jsonl", "{\"step\":1}\n");
  const RunFolder folder(path("run"), true);
  EXPECT_FALSE(fs::exists(path("run/.global_step_3.tmp.123.456")));
  EXPECT_FALSE(fs::exists(path("run/.latest_checkpointed_iteration.txt.tmp.123.456")));
  EXPECT_FALSE(fs::exists(path("run/config.yaml.tmp")));
  EXPECT_TRUE(fs::is_directory(path("run/global_step_2")));
  EXPECT_TRUE(fs::exists(path("run/latest_checkpointed_iteration.txt")));
  EXPECT_TRUE(fs::exists(path("run/metrics.jsonl")));
}

TEST_F(RunFolderTest, CheckpointsWithoutATrackerAreAnErrorThatSaysHowToGoOn) {
  make_step(3);
  make_step(5);
  const RunFolder folder(path("run"), true);
  rf::testing::expect_error_containing(
      [&] { (void)folder.resume_point(ResumeMode::automatic, std::nullopt, "trainer"); },
      "latest_checkpointed_iteration.txt: missing, but the folder holds global_step_3..5");
  rf::testing::expect_error_containing(
      [&] { (void)folder.resume_point(ResumeMode::automatic, std::nullopt, "trainer"); },
      "trainer.resume_from_path=" + path("run") + "/global_step_5");
  // Starting over is the user's explicit choice.
  EXPECT_FALSE(folder.resume_point(ResumeMode::disable, std::nullopt, "trainer"));
}

TEST_F(RunFolderTest, AutoResumesTheTrackersStepAndAFreshFolderNone) {
  const RunFolder fresh(path("fresh"), true);
  EXPECT_FALSE(fresh.resume_point(ResumeMode::automatic, std::nullopt, "trainer"));
  make_step(4);
  write("run/latest_checkpointed_iteration.txt", "4\n");
  const RunFolder folder(path("run"), true);
  const auto point = folder.resume_point(ResumeMode::automatic, std::nullopt, "trainer");
  ASSERT_TRUE(point);
  EXPECT_EQ(point->root, path("run"));
  EXPECT_EQ(point->step, 4);
}

TEST_F(RunFolderTest, ResumeFromPathIsHonouredAsGiven) {
  fs::create_directories(path("other_run/global_step_7"));
  make_step(3);
  write("run/latest_checkpointed_iteration.txt", "3");
  const RunFolder folder(path("run"), true);
  const auto point = folder.resume_point(ResumeMode::resume_path, path("other_run/global_step_7/"), "trainer");
  ASSERT_TRUE(point);
  EXPECT_EQ(point->root, path("other_run"));  // not this run's folder
  EXPECT_EQ(point->step, 7);
  try {
    (void)folder.resume_point(ResumeMode::resume_path, path("other_run/global_step_abc"), "trainer");
    ADD_FAILURE() << "global_step_abc accepted";
  } catch (const ConfigError& error) {
    EXPECT_EQ(error.key_path(), "trainer.resume_from_path");
    EXPECT_NE(error.detail().find("global_step_<k>"), std::string::npos) << error.detail();
  }
  rf::testing::expect_error_containing(
      [&] { (void)folder.resume_point(ResumeMode::resume_path, path("other_run/global_step_8"), "trainer"); },
      "missing: no such checkpoint folder");
}

TEST_F(RunFolderTest, PruningKeepsTheNewestUpToTheCommittedStepAndNeverALaterOne) {
  for (int64_t step = 1; step <= 6; ++step) make_step(step);
  const RunFolder folder(path("run"), true);
  folder.prune(3, 2);  // resumed from 2 and saved 3: 4..6 are an earlier run's and stay
  EXPECT_EQ(saved_steps(path("run")), (std::vector<int64_t>{2, 3, 4, 5, 6}));
  folder.prune(6, std::nullopt);  // keep all
  EXPECT_EQ(saved_steps(path("run")), (std::vector<int64_t>{2, 3, 4, 5, 6}));
  folder.prune(6, 1);
  EXPECT_EQ(saved_steps(path("run")), (std::vector<int64_t>{6}));
}

TEST_F(RunFolderTest, ConfigIsWrittenOnlyWhenAskedAndOnlyByTheLead) {
  fs::create_directories(path("run"));
  write("run/config.yaml", "old");
  const RunFolder other_rank(path("run"), false);
  other_rank.write_config("new");
  EXPECT_EQ(rf::testing::folder_files(path("run")).at("config.yaml"), "old");
  const RunFolder lead(path("run"), true);  // opening changes nothing
  EXPECT_EQ(rf::testing::folder_files(path("run")).at("config.yaml"), "old");
  lead.write_config("new");
  EXPECT_EQ(rf::testing::folder_files(path("run")).at("config.yaml"), "new");
}

}  // namespace
}  // namespace rf::trainer

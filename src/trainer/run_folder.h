// RunFolder: the run folder (trainer.default_local_dir), held by one run at a time, and the rules that
// keep what it holds whole for `rlforge sft` and `rlforge train` alike:
//   - one run per folder: an advisory lock (flock on <dir>/.rlforge.lock, released by the kernel when the
//     process ends, SIGKILL included); a second run is refused naming the holder's pid and host;
//   - the temp folders and files of saves that were killed (.global_step_<k>.tmp.*, *.tmp) are removed at
//     start: under the lock no other writer can be using them;
//   - the step to resume is the tracker's (resume_mode auto), or resume_from_path's as given (verl's
//     semantics: any run's global_step_<k> folder); checkpoints without a tracker are an error that says how
//     to resume or start over, never a silent start over them;
//   - config.yaml is written (write, then rename) only once the run has been set up and resumed, so a
//     refused config or resume leaves the folder's file as it was;
//   - pruning keeps the newest `keep` steps up to the one just committed and never removes a later one.
// Only the lead rank (world rank 0) locks, cleans and writes; every rank may ask resume_point.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "trainer/run_keys.h"

namespace rf::trainer {

// A checkpoint to load: <root>/global_step_<step>.
struct CheckpointRef {
  std::string root;
  int64_t step = 0;
};

class RunFolder {
 public:
  // `lead`: create the folder, take its lock and clean it (IoError naming the folder when it cannot be
  // created or another run holds it).
  RunFolder(std::string dir, bool lead);
  ~RunFolder();
  RunFolder(const RunFolder&) = delete;
  RunFolder& operator=(const RunFolder&) = delete;

  const std::string& dir() const { return dir_; }

  // The checkpoint the run continues from, per trainer.resume_mode (`key` is the trainer block's path,
  // "trainer"): nullopt for a fresh run. ConfigError at <key>.resume_from_path for a path that does not
  // name a global_step_<k> folder; IoError naming the folder for checkpoints without a tracker.
  std::optional<CheckpointRef> resume_point(ResumeMode mode, const std::optional<std::string>& resume_from_path,
                                            const std::string& key) const;
  // config.yaml, written atomically (lead only).
  void write_config(const std::string& resolved_yaml) const;
  // Deletes all but the newest `keep` of the steps <= `committed` (null or <= 0: keeps all); a step after
  // `committed` (an earlier run's, past the point this one resumed from) stays.
  void prune(int64_t committed, std::optional<int64_t> keep) const;

 private:
  void lock();
  void remove_stale_temps() const;

  std::string dir_;
  bool lead_;
  int lock_fd_ = -1;
};

// The checkpoint a resume_from_path names: root and step of .../global_step_<k> (trailing slashes allowed).
// ConfigError at `key` for any other path; whether the folder exists is not checked here.
CheckpointRef checkpoint_ref(const std::string& path, const std::string& key);

// The step numbers of the global_step_<k> folders in `dir`, ascending.
std::vector<int64_t> saved_steps(const std::string& dir);

}  // namespace rf::trainer

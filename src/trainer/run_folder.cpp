#include "trainer/run_folder.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>

#include "checkpoint/checkpoint_reader.h"
#include "checkpoint/manifest.h"
#include "core/error.h"
#include "core/log.h"
#include "formats/atomic_file.h"

namespace rf::trainer {
namespace {

namespace fs = std::filesystem;

constexpr const char* kLockFileName = ".rlforge.lock";
constexpr std::string_view kStepPrefix = "global_step_";

// k of a folder name global_step_<k> (digits only), else nullopt.
std::optional<int64_t> step_of(std::string_view name) {
  if (!name.starts_with(kStepPrefix) || name.size() == kStepPrefix.size()) return std::nullopt;
  int64_t step = -1;
  const char* first = name.data() + kStepPrefix.size();
  const char* last = name.data() + name.size();
  const auto [end, error] = std::from_chars(first, last, step);
  if (error != std::errc() || end != last || step < 0) return std::nullopt;
  return step;
}

// A save's temp folder (.global_step_<k>.tmp.<pid>.<n>) or a file's (.latest_checkpointed_iteration.txt.tmp.*,
// config.yaml.tmp, metrics.jsonl.tmp): what a killed writer leaves behind.
bool is_stale_temp(const std::string& name) {
  if (name.starts_with(".global_step_") && name.find(".tmp.") != std::string::npos) return true;
  if (name.starts_with(std::string(".") + checkpoint::kLatestFileName + ".tmp.")) return true;
  return name == "config.yaml.tmp" || name == "metrics.jsonl.tmp";
}

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "unknown host";
  return name;
}

}  // namespace

CheckpointRef checkpoint_ref(const std::string& path, const std::string& key) {
  std::string trimmed = path;
  while (trimmed.size() > 1 && trimmed.back() == '/') trimmed.pop_back();
  const fs::path p(trimmed);
  const std::optional<int64_t> step = step_of(p.filename().string());
  if (!step)
    throw ConfigError(key, fmt::format("'{}': expected the path of a checkpoint folder, .../global_step_<k>", path));
  return {p.has_parent_path() ? p.parent_path().string() : ".", *step};
}

std::vector<int64_t> saved_steps(const std::string& dir) {
  std::vector<int64_t> steps;
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) {
    const std::optional<int64_t> step = step_of(entry.path().filename().string());
    if (step && entry.is_directory(ec)) steps.push_back(*step);
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

RunFolder::RunFolder(std::string dir, bool lead) : dir_(std::move(dir)), lead_(lead) {
  if (!lead_) return;
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec || !fs::is_directory(dir_))
    throw IoError(dir_, "cannot create the run folder (trainer.default_local_dir): " +
                            (ec ? ec.message() : std::string("a file is in the way")));
  lock();
  remove_stale_temps();
}

RunFolder::~RunFolder() {
  if (lock_fd_ >= 0) ::close(lock_fd_);  // releases the lock
}

void RunFolder::lock() {
  const std::string path = dir_ + "/" + kLockFileName;
  lock_fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd_ < 0) throw IoError(path, fmt::format("cannot open the run folder's lock: {}", std::strerror(errno)));
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    char holder[256] = {};
    const ssize_t n = ::pread(lock_fd_, holder, sizeof(holder) - 1, 0);
    ::close(lock_fd_);
    lock_fd_ = -1;
    if (error != EWOULDBLOCK)
      throw IoError(path, fmt::format("cannot lock the run folder: {}", std::strerror(error)));
    std::string who = n > 0 ? std::string(holder, size_t(n)) : std::string("another process");
    while (!who.empty() && (who.back() == '\n' || who.back() == ' ')) who.pop_back();
    throw IoError(dir_, fmt::format("another rlforge run ({}) is using this run folder: wait for it to end, or give "
                                    "this run its own trainer.default_local_dir",
                                    who));
  }
  const std::string me = fmt::format("pid {} on {}\n", ::getpid(), host_name());
  if (::ftruncate(lock_fd_, 0) != 0 || ::pwrite(lock_fd_, me.data(), me.size(), 0) != ssize_t(me.size()))
    throw IoError(path, fmt::format("cannot write the run folder's lock: {}", std::strerror(errno)));
}

void RunFolder::remove_stale_temps() const {
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir_, ec)) {
    const std::string name = entry.path().filename().string();
    if (!is_stale_temp(name)) continue;
    fs::remove_all(entry.path(), ec);
    if (ec) throw IoError(entry.path().string(), "cannot remove a killed save's temp files: " + ec.message());
    core::log_info("removed {}, left by a save that did not finish", entry.path().string());
  }
}

std::optional<CheckpointRef> RunFolder::resume_point(ResumeMode mode, const std::optional<std::string>& resume_from_path,
                                                     const std::string& key) const {
  if (mode == ResumeMode::resume_path) {
    const std::string path = resume_from_path.value_or("");
    const CheckpointRef ref = checkpoint_ref(path, key + ".resume_from_path");
    if (!fs::is_directory(path))
      throw IoError(path, fmt::format("missing: no such checkpoint folder ({}.resume_from_path)", key));
    return ref;
  }
  const std::vector<int64_t> steps = saved_steps(dir_);
  if (mode == ResumeMode::disable) {
    if (!steps.empty() && lead_)
      core::log_warning("trainer.resume_mode disable: starting over in {}, which holds global_step_{}..{} of an "
                        "earlier run; each is replaced when this run saves the same step",
                        dir_, steps.front(), steps.back());
    return std::nullopt;
  }
  if (const std::optional<int64_t> latest = checkpoint::CheckpointReader::latest_step(dir_))
    return CheckpointRef{dir_, *latest};
  if (!steps.empty())
    throw IoError(dir_ + "/" + checkpoint::kLatestFileName,
                  fmt::format("missing, but the folder holds global_step_{}..{}: to continue, resume one of them "
                              "({}.resume_mode=resume_path {}.resume_from_path={}/global_step_{}); to start over, "
                              "use another trainer.default_local_dir or {}.resume_mode=disable",
                              steps.front(), steps.back(), key, key, dir_, steps.back(), key));
  return std::nullopt;
}

void RunFolder::write_config(const std::string& resolved_yaml) const {
  if (lead_) formats::write_file_atomically(dir_ + "/config.yaml", resolved_yaml);
}

void RunFolder::prune(int64_t committed, std::optional<int64_t> keep) const {
  if (!lead_ || !keep || *keep <= 0) return;
  std::vector<int64_t> up_to_committed;
  for (int64_t step : saved_steps(dir_))
    if (step <= committed) up_to_committed.push_back(step);
  for (size_t i = 0; i + size_t(*keep) < up_to_committed.size(); ++i) {
    std::error_code ec;
    const std::string path = dir_ + "/" + checkpoint::step_folder_name(up_to_committed[i]);
    fs::remove_all(path, ec);
    if (ec) throw IoError(path, "cannot remove an old checkpoint (max_*_ckpt_to_keep): " + ec.message());
  }
}

}  // namespace rf::trainer

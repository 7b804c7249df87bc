#include "rl/rewards/worker_process.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <thread>

#include "core/error.h"

extern char** environ;

namespace rf::rl {
namespace {

constexpr int kChildSocketFd = 3;

std::string describe_wait_status(int status) {
  if (WIFEXITED(status)) return fmt::format("exited with status {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const char* abbreviation = ::sigabbrev_np(WTERMSIG(status));
    return abbreviation ? fmt::format("killed by SIG{}", abbreviation)
                        : fmt::format("killed by signal {}", WTERMSIG(status));
  }
  return fmt::format("ended with wait status {}", status);
}

[[noreturn]] void throw_spawn_error(const std::string& program, std::string_view step, int error_number) {
  throw Error(fmt::format("[{}] cannot start {}: {}: {}", core::rank_label(), program, step, ::strerror(error_number)));
}

void check_spawn_step(int result, const std::string& program, std::string_view step) {
  if (result != 0) throw_spawn_error(program, step, result);
}

// posix_spawn's attributes and file actions for a worker whose socket end is `child_fd`, destroyed on
// every way out of the constructor.
class SpawnSetup {
 public:
  SpawnSetup(int child_fd, const std::string& program) {
    check_spawn_step(::posix_spawn_file_actions_init(&actions_), program, "posix_spawn_file_actions_init");
    if (const int result = ::posix_spawnattr_init(&attributes_); result != 0) {
      ::posix_spawn_file_actions_destroy(&actions_);
      throw_spawn_error(program, "posix_spawnattr_init", result);
    }
    try {
      // dup2 clears close-on-exec on fd 3 (even when child_fd is 3: glibc >= 2.29 follows POSIX here);
      // closefrom then drops everything else a library opened without close-on-exec.
      check_spawn_step(::posix_spawn_file_actions_adddup2(&actions_, child_fd, kChildSocketFd), program, "dup2");
      check_spawn_step(::posix_spawn_file_actions_addopen(&actions_, STDIN_FILENO, "/dev/null", O_RDONLY, 0), program,
                       "open /dev/null");
      check_spawn_step(::posix_spawn_file_actions_adddup2(&actions_, STDERR_FILENO, STDOUT_FILENO), program,
                       "dup2 stderr");
      check_spawn_step(::posix_spawn_file_actions_addclosefrom_np(&actions_, kChildSocketFd + 1), program, "closefrom");
      // A group of its own (pgid = its pid), and no signal blocked: the mask of the spawning thread
      // (an MPI progress thread may block some) would otherwise carry over exec.
      sigset_t no_signals;
      sigemptyset(&no_signals);
      check_spawn_step(::posix_spawnattr_setflags(&attributes_, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK),
                       program, "setflags");
      check_spawn_step(::posix_spawnattr_setpgroup(&attributes_, 0), program, "setpgroup");
      check_spawn_step(::posix_spawnattr_setsigmask(&attributes_, &no_signals), program, "setsigmask");
    } catch (...) {
      destroy();
      throw;
    }
  }
  ~SpawnSetup() { destroy(); }
  SpawnSetup(const SpawnSetup&) = delete;
  SpawnSetup& operator=(const SpawnSetup&) = delete;

  const posix_spawn_file_actions_t* actions() const { return &actions_; }
  const posix_spawnattr_t* attributes() const { return &attributes_; }

 private:
  void destroy() {
    ::posix_spawnattr_destroy(&attributes_);
    ::posix_spawn_file_actions_destroy(&actions_);
  }

  posix_spawn_file_actions_t actions_;
  posix_spawnattr_t attributes_;
};

}  // namespace

WorkerProcess::WorkerProcess(const std::vector<std::string>& argv) {
  RF_CHECK(!argv.empty(), "WorkerProcess: argv must name the program");
  const std::string& program = argv[0];
  int fds[2];
  // Close-on-exec, so a worker spawned later does not inherit this one's socket (which would keep it
  // from ever reading end of stream).
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) throw_spawn_error(program, "socketpair", errno);
  fd_ = fds[0];
  const int child_fd = fds[1];
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  int result = 0;
  try {
    const SpawnSetup setup(child_fd, program);
    // glibc's posix_spawn returns once the child has exec'd, with exec's error if it failed.
    result = ::posix_spawn(&pid_, program.c_str(), setup.actions(), setup.attributes(), args.data(), environ);
  } catch (...) {
    ::close(child_fd);
    ::close(fd_);
    throw;
  }
  ::close(child_fd);
  if (result != 0) {
    ::close(fd_);
    throw_spawn_error(program, "posix_spawn", result);
  }
}

WorkerProcess::~WorkerProcess() {
  kill();
  ::close(fd_);
}

void WorkerProcess::queue(std::string_view bytes) { outbox_.append(bytes); }

bool WorkerProcess::send_pending() {
  while (!outbox_.empty()) {
    const ssize_t sent = ::send(fd_, outbox_.data(), outbox_.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent > 0) {
      outbox_.erase(0, size_t(sent));
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      return true;
    } else if (errno != EINTR) {
      return false;  // EPIPE, ECONNRESET: nobody reads any more
    }
  }
  return true;
}

bool WorkerProcess::receive() {
  char buffer[1 << 16];
  for (;;) {
    const ssize_t received = ::recv(fd_, buffer, sizeof buffer, MSG_DONTWAIT);
    if (received > 0) {
      inbox_.append(buffer, size_t(received));
    } else if (received == 0) {
      return false;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      return true;
    } else if (errno != EINTR) {
      return false;  // ECONNRESET
    }
  }
}

std::optional<std::string> WorkerProcess::take_line() {
  const size_t end = inbox_.find('\n');
  if (end == std::string::npos) return std::nullopt;
  std::string line = inbox_.substr(0, end);
  inbox_.erase(0, end + 1);
  return line;
}

void WorkerProcess::close_input() { ::shutdown(fd_, SHUT_WR); }

std::string WorkerProcess::wait_until(std::chrono::steady_clock::time_point deadline) {
  while (!ended_ && std::chrono::steady_clock::now() < deadline) {
    // WNOWAIT leaves the child a zombie: kill() below still owns its process group id while it reaps.
    siginfo_t info{};
    const int result = ::waitid(P_PID, id_t(pid_), &info, WEXITED | WNOHANG | WNOWAIT);
    if (result == 0 && info.si_pid == pid_) break;
    if (result != 0 && errno != EINTR) break;  // ECHILD: someone else reaped it
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return kill();
}

std::string WorkerProcess::kill() {
  if (ended_) return *ended_;
  // Until the child is reaped its pid is its process group's id, so this cannot reach another group.
  ::kill(-pid_, SIGKILL);
  int status = 0;
  pid_t reaped = -1;
  do reaped = ::waitpid(pid_, &status, 0);
  while (reaped < 0 && errno == EINTR);
  ended_ = reaped == pid_ ? describe_wait_status(status) : std::string("ended (reaped elsewhere, status unknown)");
  return *ended_;
}

}  // namespace rf::rl

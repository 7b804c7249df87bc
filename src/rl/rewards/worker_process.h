// WorkerProcess: one child process (a Python reward worker) and the Unix stream socket we talk to it
// over, owned together (RAII: the destructor kills and reaps what is still running).
//
// The child is started with posix_spawn, never fork: the trainer runs under MPI, whose libraries do
// not survive a fork of a process that has initialised them, and spawn copies nothing. It runs in a
// process group of its own, so a kill also reaches whatever it started itself (a scorer that runs
// code in a subprocess); the terminal's Ctrl-C reaches the trainer only, and the worker is expected to
// exit by itself when the trainer goes away (end of input on its socket). Its file descriptors: 0 is
// /dev/null, 1 goes to our stderr (a scorer's print() must not mix with the trainer's stdout), 2 is
// our stderr, 3 is the socket, and nothing else is inherited (not MPI's descriptors, not the other
// workers' sockets).
// A socket rather than a pair of pipes because send(MSG_NOSIGNAL) reports a dead reader as EPIPE
// where a pipe write would raise SIGPIPE, whose default action kills the trainer.
// All I/O on our side is non-blocking: a caller polls fd() and never waits on one worker.
// Not here: what is said over the socket (python_reward_pool.h) and any timeout policy.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rf::rl {

class WorkerProcess {
 public:
  // Starts `argv` (argv[0] is the program's path). Throws rf::Error naming the program when it cannot
  // be started (no such file, not executable, out of processes).
  explicit WorkerProcess(const std::vector<std::string>& argv);
  ~WorkerProcess();
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;

  // Our end of the socket, to poll.
  int fd() const { return fd_; }

  // Adds `bytes` to what is waiting to be sent; send_pending sends it.
  void queue(std::string_view bytes);
  bool has_unsent() const { return !outbox_.empty(); }
  // Sends what the socket takes now. False when the child no longer reads: it has exited or closed its end.
  bool send_pending();
  // Reads what has arrived. False at end of stream: the child has exited or closed its end.
  bool receive();
  // The next whole line received, without its newline.
  std::optional<std::string> take_line();

  // Ends the child's input, as closing a pipe to its stdin would: it reads end of stream.
  void close_input();
  // Waits until `deadline` for the child to exit by itself, then kills it. Returns how it ended.
  std::string wait_until(std::chrono::steady_clock::time_point deadline);
  // SIGKILLs the child's process group and reaps the child. Returns how it ended ("exited with status
  // 3", "killed by SIGSEGV"); after the first call, returns the same again.
  std::string kill();

 private:
  pid_t pid_ = -1;
  int fd_ = -1;
  std::string outbox_;  // bytes queued, not yet taken by the socket
  std::string inbox_;   // bytes received, not yet returned as a line
  std::optional<std::string> ended_;  // how the child ended, once reaped
};

}  // namespace rf::rl

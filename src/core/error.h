// rf::Error and the RF_CHECK macro: the one way code below `apps` reports a broken expectation.
// Setup, config and I/O problems throw; kernels validate cheap shape facts on entry and otherwise
// never throw. Messages carry file:line and the process's rank label ("[rank 3 tp=1 pp=0]").
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace rf {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// A configuration value is wrong. `key_path` is the dotted path of the offending key
// (`model.num_attention_heads`), so the user knows what to edit.
class ConfigError : public Error {
 public:
  ConfigError(std::string key_path, const std::string& what_expected);
  const std::string& key_path() const { return key_path_; }
  // The message without the rank and key prefix, for re-keying under an enclosing path.
  const std::string& detail() const { return detail_; }

 private:
  std::string key_path_;
  std::string detail_;
};

// What RF_CHECK throws: an expectation inside rlforge broke. Its message is for developers (file:line and
// the condition), so input that reaches one is a bug of its own; the fuzz targets treat it as a crash.
class CheckFailure : public Error {
 public:
  explicit CheckFailure(const std::string& message) : Error(message) {}
};

// A file could not be read or written, or its contents are malformed.
class IoError : public Error {
 public:
  IoError(std::string path, const std::string& what_went_wrong);
  const std::string& path() const { return path_; }
  // The message without the rank and path prefix, for adding context to it.
  const std::string& detail() const { return detail_; }

 private:
  std::string path_;
  std::string detail_;
};

namespace core {

// The rank label printed in every error, e.g. "rank 0" or "rank 3 tp=1 pp=0". It is process-wide
// identity (like the MPI environment it comes from), set once by the dist layer after MPI starts.
const std::string& rank_label();
void set_rank_label(std::string label);

[[noreturn]] void throw_check_failure(const char* file, int line, const char* condition,
                                      const std::string& message);

}  // namespace core
}  // namespace rf

// RF_CHECK(cond, "x_BTC: expected ({},{}), got {}", a, b, c) throws rf::CheckFailure when cond is false.
#define RF_CHECK(cond, ...)                                                                  \
  do {                                                                                       \
    if (!(cond)) [[unlikely]] {                                                              \
      ::rf::core::throw_check_failure(__FILE__, __LINE__, #cond, ::fmt::format(__VA_ARGS__)); \
    }                                                                                        \
  } while (false)

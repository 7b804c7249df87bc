// Numeric command-line options, parsed strictly. CLI11 2.1 reads integers with strtoll / strtoull in
// base 0 and doubles with strtold, so "010" is 8, "0x10" is 16, an unsigned option wraps "-10" to
// 2^64 - 10 (`convert --max-shard-bytes -10`), and a double option takes "inf" and "nan". Options
// added here read decimal text into their own type and refuse anything else, or anything outside
// the option's range, as a CLI parse error naming the option and what it expects:
//   --max-shard-bytes: expected an integer in [1, 18446744073709551615], got '-10'
// Ranges are the option's own (a count is at least 1); rules across options stay with the command.
#pragma once

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <concepts>
#include <limits>
#include <string>

namespace rf::apps {

template <std::integral T>
T parse_cli_integer(const std::string& option, const std::string& text, T min, T max) {
  T value{};
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (text.empty() || error != std::errc() || stop != end || value < min || value > max)
    throw CLI::ValidationError(option, fmt::format("expected an integer in [{}, {}], got '{}'", min, max, text));
  return value;
}

// Finite only: no option means anything at infinity or NaN. The option's own range check follows.
inline double parse_cli_number(const std::string& option, const std::string& text) {
  double value = 0;
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (text.empty() || error != std::errc() || stop != end || !std::isfinite(value))
    throw CLI::ValidationError(option, fmt::format("expected a finite number, got '{}'", text));
  return value;
}

// Sets `target` when the option is given; `target` must outlive the parse (the commands keep their
// options in a shared_ptr that their run function holds).
template <std::integral T>
CLI::Option* add_integer_option(CLI::App& cmd, const std::string& name, T& target, const std::string& description,
                                T min, T max = std::numeric_limits<T>::max()) {
  return cmd
      .add_option_function<std::string>(
          name, [&target, name, min, max](const std::string& text) { target = parse_cli_integer(name, text, min, max); },
          description)
      ->type_name(fmt::format("INT in [{}, {}]", min, max));
}

inline CLI::Option* add_number_option(CLI::App& cmd, const std::string& name, double& target,
                                      const std::string& description) {
  return cmd
      .add_option_function<std::string>(
          name, [&target, name](const std::string& text) { target = parse_cli_number(name, text); }, description)
      ->type_name("FLOAT");
}

}  // namespace rf::apps

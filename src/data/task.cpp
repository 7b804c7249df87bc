#include "data/task.h"

namespace rf::data {
namespace {

std::string_view trim(std::string_view s) {
  constexpr std::string_view kWhitespace = " \t\r\n\f\v";
  const size_t begin = s.find_first_not_of(kWhitespace);
  if (begin == std::string_view::npos) return {};
  return s.substr(begin, s.find_last_not_of(kWhitespace) - begin + 1);
}

}  // namespace

TaskScore exact_match_score(std::string_view response, std::string_view ground_truth) {
  return {.acc = trim(response) == trim(ground_truth) ? 1.0 : 0.0};
}

}  // namespace rf::data

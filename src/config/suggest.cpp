#include "config/suggest.h"

#include <algorithm>
#include <string_view>

namespace rf::config {
namespace {

size_t edit_distance(std::string_view a, std::string_view b) {
  // d[i][j] = distance between the first i characters of a and the first j of b.
  const size_t num_cols = b.size() + 1;
  std::vector<size_t> d((a.size() + 1) * num_cols);
  auto at = [&](size_t i, size_t j) -> size_t& { return d[i * num_cols + j]; };
  for (size_t i = 0; i <= a.size(); ++i) at(i, 0) = i;
  for (size_t j = 0; j <= b.size(); ++j) at(0, j) = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t substitution = a[i - 1] == b[j - 1] ? 0 : 1;
      at(i, j) = std::min({at(i - 1, j) + 1, at(i, j - 1) + 1, at(i - 1, j - 1) + substitution});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        at(i, j) = std::min(at(i, j), at(i - 2, j - 2) + 1);
    }
  }
  return at(a.size(), b.size());
}

}  // namespace

std::optional<std::string> suggest_nearest(const std::string& key, const std::vector<std::string>& known) {
  std::optional<std::string> best;
  size_t best_distance = 0;
  for (const std::string& candidate : known) {
    const size_t distance = edit_distance(key, candidate);
    const size_t limit = std::max<size_t>(1, std::max(key.size(), candidate.size()) / 3);
    if (distance <= limit && (!best || distance < best_distance)) {
      best = candidate;
      best_distance = distance;
    }
  }
  return best;
}

}  // namespace rf::config

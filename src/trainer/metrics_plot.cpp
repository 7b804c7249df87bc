#include "trainer/metrics_plot.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <vector>

#include "formats/atomic_file.h"

namespace rf::trainer {
namespace {

using Series = std::vector<std::pair<double, double>>;  // (step, value)

constexpr double kWidth = 720, kHeight = 300, kLeft = 60, kRight = 20, kTop = 30, kBottom = 40;

// One panel: a polyline per series, axes with min/max labels.
std::string panel(const std::string& title, const std::map<std::string, Series>& series, double y_offset,
                  double max_step) {
  double lo = 1e300, hi = -1e300;
  for (const auto& [name, points] : series)
    for (const auto& [step, value] : points) {
      lo = std::min(lo, value);
      hi = std::max(hi, value);
    }
  if (hi <= lo) hi = lo + 1;
  const double plot_w = kWidth - kLeft - kRight, plot_h = kHeight - kTop - kBottom;
  auto x = [&](double step) { return kLeft + plot_w * step / std::max(1.0, max_step); };
  auto y = [&](double v) { return y_offset + kTop + plot_h * (1 - (v - lo) / (hi - lo)); };
  std::string out = fmt::format(
      "<text x='{}' y='{}' font-size='14'>{}</text>\n"
      "<rect x='{}' y='{}' width='{}' height='{}' fill='none' stroke='#888'/>\n"
      "<text x='{}' y='{}' font-size='11' text-anchor='end'>{:.3g}</text>\n"
      "<text x='{}' y='{}' font-size='11' text-anchor='end'>{:.3g}</text>\n"
      "<text x='{}' y='{}' font-size='11'>step 0</text>\n"
      "<text x='{}' y='{}' font-size='11' text-anchor='end'>step {:.0f}</text>\n",
      kLeft, y_offset + 20, title, kLeft, y_offset + kTop, plot_w, plot_h, kLeft - 4, y_offset + kTop + 10, hi,
      kLeft - 4, y_offset + kTop + plot_h, lo, kLeft, y_offset + kTop + plot_h + 15, kLeft + plot_w,
      y_offset + kTop + plot_h + 15, max_step);
  const char* colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd"};
  int i = 0;
  for (const auto& [name, points] : series) {
    std::string path;
    for (const auto& [step, value] : points) path += fmt::format("{:.1f},{:.1f} ", x(step), y(value));
    const char* color = colors[i % 4];
    out += fmt::format("<polyline fill='none' stroke='{}' stroke-width='1.5' points='{}'/>\n", color, path);
    if (points.size() == 1 || points.size() < 40)
      for (const auto& [step, value] : points)
        out += fmt::format("<circle cx='{:.1f}' cy='{:.1f}' r='2.5' fill='{}'/>\n", x(step), y(value), color);
    out += fmt::format("<text x='{}' y='{}' font-size='11' fill='{}'>{}</text>\n", kLeft + 8,
                       y_offset + kTop + 15 + 14 * i, color, name);
    ++i;
  }
  return out;
}

}  // namespace

void write_metrics_plot(const std::string& metrics_jsonl, const std::string& svg_path,
                        const std::vector<PlotPanel>& panels) {
  std::ifstream in(metrics_jsonl);
  if (!in) return;
  std::vector<std::map<std::string, Series>> series(panels.size());
  double max_step = 0;
  std::string line;
  while (std::getline(in, line)) {
    const nlohmann::json row = nlohmann::json::parse(line, nullptr, false);
    if (row.is_discarded() || !row.contains("step")) continue;
    const double step = row["step"].get<double>();
    max_step = std::max(max_step, step);
    for (const auto& [key, value] : row.items()) {
      if (!value.is_number()) continue;
      for (size_t p = 0; p < panels.size(); ++p)
        for (const std::string& prefix : panels[p].key_prefixes)
          if (key.starts_with(prefix)) series[p][key].emplace_back(step, value.get<double>());
    }
  }
  std::string body;
  double height = 0;
  for (size_t p = 0; p < panels.size(); ++p) {
    if (series[p].empty()) continue;
    body += panel(panels[p].title, series[p], height, max_step);
    height += kHeight;
  }
  if (body.empty()) return;
  const std::string svg =
      fmt::format("<svg xmlns='http://www.w3.org/2000/svg' width='{}' height='{}' font-family='sans-serif'>\n"
                  "<rect width='100%' height='100%' fill='white'/>\n",
                  kWidth, height) +
      body + "</svg>\n";
  formats::write_file_atomically(svg_path, svg);
}

}  // namespace rf::trainer

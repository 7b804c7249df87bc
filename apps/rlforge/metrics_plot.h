// Writes metrics.svg next to metrics.jsonl: the training loss and the validation accuracy against
// the step, as a self-contained SVG any browser opens. Drawn from metrics.jsonl itself, so a
// resumed run's plot covers the whole run.
#pragma once

#include <string>

namespace rf::apps {

// Plots "train/loss" and every "val-core/..." metric found in `metrics_jsonl`; writes `svg_path`
// atomically. Nothing to plot: no file.
void write_metrics_plot(const std::string& metrics_jsonl, const std::string& svg_path);

}  // namespace rf::apps

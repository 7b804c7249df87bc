// Writes metrics.svg next to metrics.jsonl: panels of metrics against the step (SFT: the training
// loss and the validation accuracy; RL: score, KL, entropy, response length), as a self-contained SVG
// any browser opens. Drawn from metrics.jsonl itself, so a resumed run's plot covers the whole run.
#pragma once

#include <string>
#include <vector>

namespace rf::trainer {

struct PlotPanel {
  std::string title;
  std::vector<std::string> key_prefixes;  // every numeric metric whose name starts with one of these
};

// One panel per entry of `panels` that has data, top to bottom; writes `svg_path` atomically.
// Nothing to plot: no file.
void write_metrics_plot(const std::string& metrics_jsonl, const std::string& svg_path,
                        const std::vector<PlotPanel>& panels);

}  // namespace rf::trainer

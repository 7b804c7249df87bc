#include "trainer/metrics_log.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "formats/atomic_file.h"

namespace rf::trainer {

MetricsLog::MetricsLog(std::string path, int64_t resume_step, std::vector<std::string> console_keys,
                       const std::optional<nlohmann::json>& resumed_row)
    : path_(std::move(path)), console_keys_(std::move(console_keys)) {
  if (path_.empty()) return;
  if (!std::filesystem::exists(path_) && !resumed_row) return;
  std::ifstream in(path_);
  std::string kept, line;
  bool has_resumed_step = false;
  while (std::getline(in, line)) {
    const nlohmann::json row = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    // A line cut by a crash mid-write, or not one of ours.
    if (row.is_discarded() || !row.contains("step") || !row["step"].is_number_integer()) continue;
    const int64_t step = row["step"].get<int64_t>();
    if (step > resume_step || resume_step == 0) continue;  // a fresh run (no checkpoint) starts over
    has_resumed_step = has_resumed_step || step == resume_step;
    kept += line + "\n";
  }
  if (resumed_row && !has_resumed_step) kept += resumed_row->dump() + "\n";
  formats::write_file_atomically(path_, kept);
}

void MetricsLog::write(const nlohmann::json& row, bool to_console) {
  if (!path_.empty()) {
    std::ofstream out(path_, std::ios::app);
    if (!(out << row.dump() << '\n').flush()) throw IoError(path_, "cannot append metrics");
  }
  if (!to_console) return;
  std::string line = fmt::format("step {}", row.value("step", int64_t(0)));
  auto show = [&](const std::string& key, const nlohmann::json& value) {
    if (value.is_number_float())
      line += fmt::format("  {} {:.4g}", key, value.get<double>());
    else
      line += fmt::format("  {} {}", key, value.dump());
  };
  if (console_keys_.empty()) {
    for (const auto& [key, value] : row.items())
      if (key != "step" && !key.starts_with("perf/max_memory") && key != "perf/tokens") show(key, value);
  } else {
    for (const std::string& key : console_keys_)
      if (row.contains(key)) show(key, row[key]);
  }
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

}  // namespace rf::trainer

#include "rl/trainer/rl_generations.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "core/error.h"
#include "core/log.h"
#include "formats/atomic_file.h"

namespace rf::rl {

std::vector<Generation> generations_of(const RlBatch& batch, std::span<const PromptRow> rows,
                                       const data::Tokenizer& tokenizer) {
  std::vector<Generation> generations;
  generations.reserve(batch.size());
  for (const RlResponse& r : batch)
    generations.push_back({tokenizer.decode(r.prompt, data::SpecialTokens::skip),
                           tokenizer.decode(r.response, data::SpecialTokens::skip), rows[size_t(r.group)].ground_truth,
                           r.score, r.reward_extra});
  return generations;
}

void dump_generations(const std::string& dir, int64_t step, std::span<const Generation> generations) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw IoError(dir, fmt::format("cannot create the generations folder: {}", ec.message()));
  std::string lines;
  for (const Generation& g : generations) {
    // verl's key order (ordered_json keeps insertion order).
    nlohmann::ordered_json line = {{"input", g.input}, {"output", g.output}, {"gts", g.ground_truth},
                                   {"score", g.score}, {"step", step}};
    for (const auto& [name, value] : g.reward_extra) line[name] = value;
    // Invalid UTF-8 (a response cut inside a character) is replaced, not an error: it is what was generated.
    lines += line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  }
  formats::write_file_atomically((std::filesystem::path(dir) / fmt::format("{}.jsonl", step)).string(), lines);
}

void log_generations(std::span<const Generation> generations, int64_t count, int64_t step) {
  const auto quoted = [](const std::string& text) {
    return nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  };
  for (size_t i = 0; i < std::min(generations.size(), size_t(std::max<int64_t>(count, 0))); ++i)
    core::log_info("val generation {} at step {}: input {} output {} score {}", i, step, quoted(generations[i].input),
                   quoted(generations[i].output), generations[i].score);
}

}  // namespace rf::rl

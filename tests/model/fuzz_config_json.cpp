// libFuzzer target for a Hugging Face config.json: parse_json_input, ModelConfig::from_json and the
// ParamLayout a model of that config gets, as HfModelFolder::open and the trainers read it. A bad file
// may only raise ConfigError or IoError; anything else (an RF_CHECK's CheckFailure included) escapes
// and libFuzzer reports it. A config it accepts is valid, writes back as a config.json that reads as
// the same config, and lays out its parameters without overlap or overflow (UBSan sees the arithmetic).
// Built with clang by cmake/Fuzzing.cmake; seeds in fuzz_corpus_config_json/.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string_view>

#include "core/error.h"
#include "formats/json_input.h"
#include "model/model_config.h"
#include "model/param_layout.h"

namespace {

void expect(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz_config_json: broken promise: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  rf::model::ModelConfig config;
  try {
    config = rf::model::ModelConfig::from_json(rf::formats::parse_json_input(text, "fuzz/config.json"),
                                               "fuzz/config.json");
  } catch (const rf::ConfigError&) {
    return 0;  // refused naming the key: what a bad config.json should get
  } catch (const rf::IoError&) {
    return 0;  // not JSON, or nested too deep
  }
  config.validate();
  const nlohmann::json written = config.to_json();
  expect(rf::model::ModelConfig::from_json(written, "written").to_json() == written, "to_json reads back the same");

  const rf::model::ParamLayout layout = rf::model::ParamLayout::for_model(config);
  int64_t end = 0, total = 0;
  for (const rf::model::ParamEntry& e : layout.entries()) {
    expect(e.offset >= end, "parameters do not overlap");
    end = e.offset + e.shape.numel();
    total += e.shape.numel();
  }
  expect(total == layout.num_parameters(), "num_parameters is the sum of the entries");
  return 0;
}

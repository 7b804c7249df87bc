// libFuzzer target for a checkpoint's manifest.json: nlohmann's parse, then manifest_from_json, as
// CheckpointReader reads it (read-only use of src/checkpoint). A bad manifest may only raise IoError
// naming the file; anything else (an RF_CHECK's CheckFailure included) escapes and libFuzzer reports
// it. A manifest it accepts keeps the promises the reader relies on (every shard's file is listed,
// every box lies inside its tensor's global shape) and writes back as JSON that reads the same.
// Built with clang by cmake/Fuzzing.cmake; seeds in fuzz_corpus_manifest/.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string_view>

#include "checkpoint/manifest.h"
#include "core/error.h"

namespace {

void expect(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz_manifest: broken promise: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(std::string_view(reinterpret_cast<const char*>(data), size));
  } catch (const nlohmann::json::exception&) {
    return 0;  // CheckpointReader names the file as not valid JSON
  }
  rf::checkpoint::Manifest manifest;
  try {
    manifest = rf::checkpoint::manifest_from_json(json, "fuzz/manifest.json");
  } catch (const rf::IoError&) {
    return 0;  // refused naming the entry: what a bad manifest should get
  }
  for (const auto& [name, component] : manifest.components) {
    for (const auto& [tensor_name, tensor] : component.tensors) {
      for (const rf::checkpoint::ShardRecord& shard : tensor.shards) {
        expect(component.files.count(shard.file) == 1, "a shard's file is listed");
        expect(shard.shape.rank() == tensor.global_shape.rank() && shard.global_offset.rank() == tensor.global_shape.rank(),
               "a box has its tensor's rank");
        for (int d = 0; d < tensor.global_shape.rank(); ++d)
          expect(shard.global_offset[d] >= 0 && shard.shape[d] >= 0 &&
                     shard.global_offset[d] <= tensor.global_shape[d] - shard.shape[d],
                 "a box lies inside the global shape");
      }
    }
    for (const auto& [doc, file] : component.json_files) expect(component.files.count(file) == 1, "a document's file is listed");
  }
  const nlohmann::json written = rf::checkpoint::manifest_to_json(manifest);
  expect(rf::checkpoint::manifest_to_json(rf::checkpoint::manifest_from_json(written, "written")) == written,
         "manifest_to_json reads back the same");
  return 0;
}

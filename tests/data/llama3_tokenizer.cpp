#include "llama3_tokenizer.h"

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/tokenizer_json.h"

namespace rf::testing {
namespace {

// sha256sum (coreutils) of `path`: the 64 hex digits, or "" when it cannot be read.
std::string sha256_of(const std::string& path) {
  FILE* pipe = popen(fmt::format("sha256sum -- '{}' 2>/dev/null", path).c_str(), "r");
  if (pipe == nullptr) return "";
  char digest[65] = {};
  const size_t num_read = std::fread(digest, 1, 64, pipe);
  const int status = pclose(pipe);
  return num_read == 64 && status == 0 ? std::string(digest, 64) : "";
}

}  // namespace

std::string checked_llama3_dir() {
  const std::string dir = RF_LLAMA3_TOKENIZER_DIR;
  for (const char* name : {"tokenizer.json", "tokenizer_config.json"})
    RF_CHECK(std::filesystem::is_regular_file(dir + "/" + name),
             "{}/{} is missing: the Llama-3 parity tests read Meta's Llama-3 tokenizer from "
             "shared/reference/tokenizers/llama3 beside the repository (or under the CMake variable RF_REFERENCE_DIR)",
             dir, name);
  const std::string file = dir + "/tokenizer.json";
  const std::string expected = data::read_json_file(RF_TOKENIZER_PARITY_DIR "/manifest.json")
                                   .at("tokenizer_json_sha256")
                                   .at("llama3")
                                   .get<std::string>();
  const std::string actual = sha256_of(file);
  RF_CHECK(actual == expected,
           "{} has sha256 '{}', but tokenizer_parity/manifest.json records {}: not the Llama-3 tokenizer the "
           "expected data was made from",
           file, actual, expected);
  return dir;
}

}  // namespace rf::testing

// libFuzzer target for JSONL data rows: the input is a JSON Lines file, read by for_each_jsonl_row
// (line cap, nesting check) and turned into Examples by example_from_jsonl_row, as JsonlDataset and
// the RL prompt source read them. A bad row may only raise IoError naming the file and line; anything
// else escapes and libFuzzer reports it. Each example's texts then go through the arith task's
// character tokenizer, which must decode what it encodes back to the text (or refuse with a message;
// an RF_CHECK's CheckFailure escapes too).
// Built with clang by cmake/Fuzzing.cmake; seeds in fuzz_corpus_jsonl/.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "data/char_tokenizer.h"
#include "data/jsonl_dataset.h"

namespace {

void expect(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz_jsonl: broken promise: %s\n", what);
  std::abort();
}

void check_round_trip(const rf::data::CharTokenizer& tokenizer, const std::string& text) {
  std::vector<int64_t> ids;
  try {
    ids = tokenizer.encode(text);
  } catch (const rf::CheckFailure&) {
    throw;  // an internal check reached from a row: a bug
  } catch (const rf::Error&) {
    return;  // refused with a message naming the character
  }
  expect(tokenizer.decode(ids, rf::data::SpecialTokens::keep) == text, "decode(encode(text)) == text");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  std::vector<rf::data::Example> examples;
  try {
    rf::data::for_each_jsonl_row(in, "fuzz.jsonl", [&](const nlohmann::json& row, int64_t line) {
      examples.push_back(rf::data::example_from_jsonl_row(row, "fuzz.jsonl", line));
    });
  } catch (const rf::IoError&) {
    // refused naming the file and line: what a bad row should get
  }
  static const rf::data::CharTokenizer tokenizer = rf::data::CharTokenizer::for_task("arith");
  for (const rf::data::Example& e : examples) {
    check_round_trip(tokenizer, e.prompt);
    check_round_trip(tokenizer, e.response);
    check_round_trip(tokenizer, e.ground_truth);
  }
  return 0;
}

// parse_json_input / check_json_nesting: documents nested deeper than kMaxJsonDepth are refused before
// parsing (dump() and == recurse on what nlohmann parses iteratively), brackets in strings do not count,
// and malformed text is named with nlohmann's message.
#include "formats/json_input.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace rf::formats {
namespace {

std::string error_of(const std::string& text) {
  try {
    parse_json_input(text, "in.json");
  } catch (const IoError& e) {
    EXPECT_EQ(e.path(), "in.json");
    return e.what();
  }
  ADD_FAILURE() << "parsed";
  return "";
}

std::string nested(size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

TEST(JsonInput, RefusesNestingPastTheBoundBeforeParsing) {
  EXPECT_EQ(parse_json_input(nested(kMaxJsonDepth), "in.json").dump().size(), 2 * kMaxJsonDepth);
  EXPECT_NE(error_of(nested(kMaxJsonDepth + 1)).find("in.json: nests arrays and objects deeper than 512 levels"),
            std::string::npos);
  // A million '[' used to parse, then overflow the stack in dump().
  EXPECT_NE(error_of(std::string(1'000'000, '[')).find("deeper than 512"), std::string::npos);
  try {
    check_json_nesting("{\"a\": " + nested(600) + "}", "rows.jsonl", "line 7: ");
    ADD_FAILURE() << "accepted";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("rows.jsonl: line 7: nests"), std::string::npos) << e.what();
  }
}

TEST(JsonInput, BracketsInStringsAreText) {
  const std::string brackets(2000, '[');
  EXPECT_EQ(parse_json_input("{\"a\": \"" + brackets + "\"}", "in.json").at("a"), brackets);
  // An escaped quote does not end the string.
  EXPECT_EQ(parse_json_input("[\"\\\"" + brackets + "\"]", "in.json").at(0), "\"" + brackets);
}

TEST(JsonInput, MalformedTextNamesTheFile) {
  EXPECT_NE(error_of("{\"a\": ").find("in.json: not valid JSON: [json.exception.parse_error"), std::string::npos);
}

}  // namespace
}  // namespace rf::formats

// The Unicode building blocks of the BPE tokenizer: UTF-8 validation and Rust-compatible lossy
// decoding, GPT-2's byte-level alphabet, the Oniguruma-compatible regex layer over PCRE2 (what `\s`
// means, which constructs are refused, how empty matches iterate), and NFC.
#include <gtest/gtest.h>

#include "core/error.h"
#include "data/byte_level.h"
#include "data/normalizer.h"
#include "data/unicode_regex.h"
#include "data/utf8.h"

namespace rf::data {
namespace {

using Matches = std::vector<std::pair<size_t, size_t>>;
const std::string kReplacement = "\xEF\xBF\xBD";

TEST(Utf8, FindsTheFirstInvalidByte) {
  EXPECT_EQ(find_invalid_utf8(""), std::nullopt);
  EXPECT_EQ(find_invalid_utf8("a\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x98\x80\xF4\x8F\xBF\xBF"), std::nullopt);
  EXPECT_EQ(find_invalid_utf8("ab\x80"), 2u);            // a lone continuation byte
  EXPECT_EQ(find_invalid_utf8("\xC1\xBF"), 0u);          // overlong
  EXPECT_EQ(find_invalid_utf8("\xE0\x9F\xBF"), 0u);      // overlong 3-byte
  EXPECT_EQ(find_invalid_utf8("x\xED\xBF\xBF"), 1u);     // surrogate U+DFFF
  EXPECT_EQ(find_invalid_utf8("\xF4\x90\x80\x80"), 0u);  // U+110000
  EXPECT_EQ(find_invalid_utf8("\xF0\x9F\x98"), 0u);      // truncated at the end
}

// The cases of Rust's String::from_utf8_lossy documentation and Unicode's "maximal subpart" examples.
TEST(Utf8, LossyReplacesEachMaximalSubpartOnce) {
  EXPECT_EQ(utf8_lossy("Hello \xF0\x90\x80World"), "Hello " + kReplacement + "World");
  EXPECT_EQ(utf8_lossy("\xC0\xAF"), kReplacement + kReplacement);
  EXPECT_EQ(utf8_lossy("\xE0\x80\x80"), kReplacement + kReplacement + kReplacement);
  EXPECT_EQ(utf8_lossy("\xF1\x80\x80\x41"), kReplacement + "A");
  EXPECT_EQ(
      utf8_lossy("\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64"),
      "a" + kReplacement + kReplacement + kReplacement + "b" + kReplacement + "c" + kReplacement + kReplacement + "d");
  EXPECT_EQ(utf8_lossy("ok \xE4\xB8\xAD"), "ok \xE4\xB8\xAD");
}

TEST(ByteLevel, MapsEveryByteReversibly) {
  std::string all_bytes;
  for (int b = 0; b < 256; ++b) all_bytes += char(b);
  std::string mapped;
  append_byte_level(all_bytes, mapped);
  EXPECT_EQ(bytes_of_byte_level(mapped), all_bytes);
  std::string space, newline, letters;
  append_byte_level(" ", space);
  append_byte_level("\n", newline);
  append_byte_level("Az~", letters);
  EXPECT_EQ(space, "\xC4\xA0");                         // 'Ġ' U+0120
  EXPECT_EQ(newline, "\xC4\x8A");                       // 'Ċ' U+010A
  EXPECT_EQ(letters, "Az~");                            // printable ASCII maps to itself
  EXPECT_EQ(bytes_of_byte_level("a b"), std::nullopt);  // ' ' itself is outside the alphabet
  EXPECT_EQ(bytes_of_byte_level("\xE4\xB8\xAD"), std::nullopt);
}

TEST(UnicodeRegex, WhitespaceIsOnigurumasIncludingNextLine) {
  const UnicodeRegex s = UnicodeRegex::oniguruma("\\s+");
  EXPECT_EQ(s.find_all("a\xC2\x85"
                       "b"),
            (Matches{{1, 3}}));                                                   // U+0085: PCRE2's own \s misses it
  EXPECT_EQ(s.find_all("\xE3\x80\x80x\xE2\x80\xA8"), (Matches{{0, 3}, {4, 7}}));  // U+3000, U+2028
  EXPECT_EQ(s.find_all("\xE2\x80\x8B"), Matches{});                               // U+200B is not White_Space
  EXPECT_EQ(UnicodeRegex::oniguruma("[^\\s\\p{L}]+").find_all("a\xC2\x85-!"), (Matches{{3, 5}}));
  EXPECT_EQ(UnicodeRegex::oniguruma("\\u3000").find_all("a\xE3\x80\x80"), (Matches{{1, 4}}));
  EXPECT_EQ(UnicodeRegex::oniguruma("\\v").find_all("a\x0B\n"), (Matches{{1, 2}}));  // U+000B only, not \n
}

TEST(UnicodeRegex, CaseInsensitiveContractionsAndLiterals) {
  const UnicodeRegex contraction = UnicodeRegex::oniguruma("(?i:'s|'ll)");
  EXPECT_EQ(contraction.find_all("it's IT'S we'LL"), (Matches{{2, 4}, {7, 9}, {12, 15}}));
  EXPECT_EQ(UnicodeRegex::literal("a.b").find_all("a.b axb"), (Matches{{0, 3}}));
}

TEST(UnicodeRegex, EmptyMatchesIterateAsOniguruma) {
  // After a match, an empty match right at its end is skipped: "a*" on "aab" gives (0,2) then (3,3).
  EXPECT_EQ(UnicodeRegex::oniguruma("a*").find_all("aab"), (Matches{{0, 2}, {3, 3}}));
  EXPECT_EQ(UnicodeRegex::oniguruma("x*").find_all("ab"), (Matches{{0, 0}, {1, 1}, {2, 2}}));
  EXPECT_EQ(UnicodeRegex::oniguruma("x*").find_all("\xE4\xB8\xAD"), (Matches{{0, 0}, {3, 3}}));  // whole characters
}

TEST(UnicodeRegex, RefusesConstructsWhoseMeaningDiffers) {
  for (const char* pattern : {"\\w+", "a\\b", "\\h", "[a-z&&[^b]]", "(?m:.)", "\\u30"}) {
    try {
      UnicodeRegex::oniguruma(pattern);
      ADD_FAILURE() << pattern << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("not supported"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(UnicodeRegex::oniguruma("[\\b]").find_all("a\x08"), (Matches{{1, 2}}));  // backspace in a class is fine
}

TEST(Normalizer, Nfc) {
  EXPECT_EQ(normalize_nfc("plain ascii"), "plain ascii");
  EXPECT_EQ(normalize_nfc("e\xCC\x81"), "\xC3\xA9");                     // e + U+0301 -> é
  EXPECT_EQ(normalize_nfc("\xE2\x84\xAB"), "\xC3\x85");                  // U+212B ANGSTROM SIGN -> Å
  EXPECT_EQ(normalize_nfc("\xE1\x84\x80\xE1\x85\xA1"), "\xEA\xB0\x80");  // Hangul jamo -> 가
}

}  // namespace
}  // namespace rf::data

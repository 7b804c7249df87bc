// UnicodeRegex: the regexes of tokenizer.json (Split patterns, ByteLevel's GPT-2 regex), which
// Hugging Face compiles with Oniguruma (Ruby syntax), run here on PCRE2 in UTF + UCP mode with JIT.
// A pattern is translated where the two differ in meaning: `\s`/`\S` become Unicode White_Space
// (Oniguruma's \s; PCRE2's UCP \s lacks U+0085), `\v` is U+000B, `\uHHHH` becomes `\x{HHHH}`, and `^`/`$`
// match at line boundaries as in Ruby. Constructs whose Oniguruma meaning we do not reproduce (`\w \W
// \b \B \h \H \R \X \K \N \O`, class intersection `&&`, the Ruby `m` option) are refused with an
// rf::Error rather than silently matching differently.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

struct pcre2_real_code_8;  // pcre2.h's compiled pattern; only unicode_regex.cpp includes pcre2.h

namespace rf::data {

class UnicodeRegex {
 public:
  // Where a pattern comes from, for the errors of matching it: an IoError naming the file and key
  // (an rf::Error when `path` is empty).
  struct Origin {
    std::string path;  // the tokenizer.json
    std::string key;   // "pre_tokenizer.pretokenizers[0].pattern"
  };

  // rf::Error naming the construct, or PCRE2's message and the offset, when `pattern` cannot be used.
  static UnicodeRegex oniguruma(std::string_view pattern, Origin origin = {});
  // Matches `text` verbatim (Hugging Face's Split with a String pattern).
  static UnicodeRegex literal(std::string_view text, Origin origin = {});

  // Calls on_match(start, end) for the successive matches in valid UTF-8 `text`, as Oniguruma's
  // find_iter yields them: each search starts at the previous match's end, and an empty match right at
  // that end is skipped by moving one character on. A pattern that PCRE2 gives up on (its match limit:
  // catastrophic backtracking such as "(a+)+$") is an error naming the origin and the pattern.
  void for_each_match(std::string_view text, const std::function<void(size_t, size_t)>& on_match) const;
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view text) const;

 private:
  using Code = std::unique_ptr<pcre2_real_code_8, void (*)(pcre2_real_code_8*)>;
  UnicodeRegex(const std::string& pcre2_pattern, bool literal, std::string_view shown, Origin origin);
  [[noreturn]] void throw_match_failure(int pcre2_error, size_t text_bytes) const;
  Code code_;
  std::string shown_;  // the pattern as written
  Origin origin_;
};

}  // namespace rf::data

#include "data/unicode_regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <fmt/format.h>
#include <pcre2.h>

#include <algorithm>
#include <cctype>

#include "core/error.h"

namespace rf::data {
namespace {

// Rewrites an Oniguruma (Ruby syntax) pattern into PCRE2 syntax with the same meaning, or throws.
std::string translate_oniguruma(std::string_view p) {
  std::string out;
  out.reserve(p.size() + 32);
  bool in_class = false;
  const auto refuse = [&](size_t pos, std::string_view what) {
    throw Error(
        fmt::format("regex \"{}\": {} at offset {} is not supported (its Oniguruma meaning differs from "
                    "PCRE2's and is not translated)",
                    p, what, pos));
  };
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const char e = p[++i];
      switch (e) {
        case 's':
          out += "\\p{White_Space}";
          break;
        case 'S':
          out += "\\P{White_Space}";
          break;
        case 'v':
          out += "\\x0B";
          break;
        case 'u':
          if (i + 4 >= p.size() ||
              !std::all_of(p.begin() + i + 1, p.begin() + i + 5, [](char h) { return std::isxdigit(uint8_t(h)); }))
            refuse(i - 1, "a \\u escape without four hex digits");
          out += "\\x{" + std::string(p.substr(i + 1, 4)) + "}";
          i += 4;
          break;
        case 'b':
          if (in_class) {
            out += "\\x08";  // backspace inside a class in both dialects
            break;
          }
          refuse(i - 1, "\\b");
          break;
        case 'w':
        case 'W':
        case 'B':
        case 'h':
        case 'H':
        case 'R':
        case 'X':
        case 'K':
        case 'N':
        case 'O':
          refuse(i - 1, fmt::format("\\{}", e));
          break;
        default:
          out += '\\';
          out += e;
      }
      continue;
    }
    if (in_class) {
      if (c == ']') in_class = false;
      if (c == '&' && i + 1 < p.size() && p[i + 1] == '&') refuse(i, "class intersection &&");
      if (c == '[') refuse(i, "a nested character class");
      out += c;
      continue;
    }
    if (c == '[') {
      in_class = true;
      out += c;
      // A ']' right after '[' or '[^' is a literal member, not the end of the class.
      if (i + 1 < p.size() && p[i + 1] == '^') out += p[++i];
      if (i + 1 < p.size() && p[i + 1] == ']') out += p[++i];
      continue;
    }
    if (c == '(' && i + 2 < p.size() && p[i + 1] == '?') {
      // Inline options "(?imx-imx)" or "(?imx-imx:": Ruby's `m` is PCRE2's `s`; refuse rather than guess.
      size_t j = i + 2;
      while (j < p.size() && (std::isalpha(uint8_t(p[j])) || p[j] == '-')) {
        if (p[j] == 'm' || p[j] == 's') refuse(j, fmt::format("the inline option '{}'", p[j]));
        ++j;
      }
    }
    out += c;
  }
  return out;
}

}  // namespace

UnicodeRegex::UnicodeRegex(const std::string& pcre2_pattern, bool literal, std::string_view shown, Origin origin)
    : code_(nullptr, pcre2_code_free_8), shown_(shown), origin_(std::move(origin)) {
  pcre2_compile_context* context = pcre2_compile_context_create(nullptr);
  pcre2_set_newline(context, PCRE2_NEWLINE_LF);  // Ruby: '.', '^' and '$' know only '\n'
  int error = 0;
  PCRE2_SIZE offset = 0;
  const uint32_t options = PCRE2_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP | PCRE2_MULTILINE);
  code_.reset(pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pcre2_pattern.data()), pcre2_pattern.size(), options, &error,
                            &offset, context));
  pcre2_compile_context_free(context);
  if (!code_) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    throw Error(fmt::format("regex \"{}\" does not compile: {} at offset {}", shown,
                            reinterpret_cast<const char*>(message), offset));
  }
  // JIT is a speed-up only: where it is unavailable pcre2_match interprets the same pattern.
  pcre2_jit_compile(code_.get(), PCRE2_JIT_COMPLETE);
}

UnicodeRegex UnicodeRegex::oniguruma(std::string_view pattern, Origin origin) {
  return UnicodeRegex(translate_oniguruma(pattern), false, pattern, std::move(origin));
}

UnicodeRegex UnicodeRegex::literal(std::string_view text, Origin origin) {
  return UnicodeRegex(std::string(text), true, text, std::move(origin));
}

void UnicodeRegex::throw_match_failure(int pcre2_error, size_t text_bytes) const {
  PCRE2_UCHAR message[256];
  pcre2_get_error_message(pcre2_error, message, sizeof(message));
  const std::string what =
      fmt::format("regex \"{}\" failed on a text of {} bytes: {} (PCRE2 error {}); a pattern that backtracks "
                  "without bound, such as (a+)+$?",
                  shown_, text_bytes, reinterpret_cast<const char*>(message), pcre2_error);
  if (origin_.path.empty()) throw Error(what);
  throw IoError(origin_.path, fmt::format("{}: {}", origin_.key, what));
}

std::vector<std::pair<size_t, size_t>> UnicodeRegex::find_all(std::string_view text) const {
  std::vector<std::pair<size_t, size_t>> matches;
  for_each_match(text, [&](size_t start, size_t end) { matches.emplace_back(start, end); });
  return matches;
}

void UnicodeRegex::for_each_match(std::string_view text, const std::function<void(size_t, size_t)>& on_match) const {
  std::unique_ptr<pcre2_match_data, void (*)(pcre2_match_data*)> data(
      pcre2_match_data_create_from_pattern(code_.get(), nullptr), pcre2_match_data_free);
  RF_CHECK(data != nullptr, "out of memory for regex match data");
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t search_from = 0;
  bool have_last = false;
  size_t last_end = 0;
  while (search_from <= text.size()) {
    // The caller validated the UTF-8 once; PCRE2 would otherwise re-check the whole subject per call.
    const int rc = pcre2_match(code_.get(), subject, text.size(), search_from, PCRE2_NO_UTF_CHECK, data.get(), nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc <= 0) throw_match_failure(rc, text.size());
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(data.get());
    const size_t start = ovector[0], end = ovector[1];
    if (start == end && have_last && end == last_end) {
      if (search_from == text.size()) break;
      size_t length = 1;
      while (search_from + length < text.size() && (uint8_t(text[search_from + length]) & 0xC0) == 0x80) ++length;
      search_from += length;
      continue;
    }
    on_match(start, end);
    search_from = end;
    have_last = true;
    last_end = end;
  }
}

}  // namespace rf::data

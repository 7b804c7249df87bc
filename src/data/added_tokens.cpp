#include "data/added_tokens.h"

#include <algorithm>

#include "data/utf8.h"

namespace rf::data {

AddedTokenMatcher::AddedTokenMatcher(std::vector<AddedTokenSpec> tokens)
    // Rust's regex crate: \w = Alphabetic + Mark + Decimal_Number + Connector_Punctuation + Join_Control.
    : word_char_(UnicodeRegex::oniguruma("\\A[\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\p{Join_Control}]\\z")) {
  std::erase_if(tokens, [](const AddedTokenSpec& t) { return t.content.empty(); });
  tokens_ = std::move(tokens);
  for (size_t i = 0; i < tokens_.size(); ++i) by_first_byte_[uint8_t(tokens_[i].content[0])].push_back(uint32_t(i));
  for (auto& candidates : by_first_byte_)
    std::stable_sort(candidates.begin(), candidates.end(),
                     [&](uint32_t a, uint32_t b) { return tokens_[a].content.size() > tokens_[b].content.size(); });
}

std::optional<AddedTokenMatcher::Match> AddedTokenMatcher::find_leftmost_longest(std::string_view text,
                                                                                 size_t from) const {
  // The earliest start wins, then the longest token starting there (aho-corasick's LeftmostLongest).
  for (size_t pos = from; pos < text.size(); ++pos)
    for (const uint32_t t : by_first_byte_[uint8_t(text[pos])])
      if (text.substr(pos).starts_with(tokens_[t].content)) return Match{t, pos, pos + tokens_[t].content.size()};
  return std::nullopt;
}

bool AddedTokenMatcher::is_word_char_at(std::string_view text, size_t pos) const {
  size_t length = 0;
  decode_utf8(text, pos, length);
  return !word_char_.find_all(text.substr(pos, length)).empty();
}

void AddedTokenMatcher::split(std::string_view text, std::vector<TextPiece>& pieces) const {
  size_t start_offset = 0;  // where the text not yet emitted begins
  for (size_t search_from = 0; const auto match = find_leftmost_longest(text, search_from);) {
    search_from = match->end;  // the next search starts after this match even if it is discarded or stripped
    const AddedTokenSpec& token = tokens_[match->token];
    size_t start = match->start, stop = match->end;
    if (token.single_word) {
      const bool word_before = start > 0 && is_word_char_at(text, last_code_point_start(text.substr(0, start)));
      const bool word_after = stop < text.size() && is_word_char_at(text, stop);
      if (word_before || word_after) continue;
    }
    if (token.lstrip) {
      size_t new_start = start;
      while (new_start > 0) {
        const size_t prev = last_code_point_start(text.substr(0, new_start));
        size_t length = 0;
        if (!is_unicode_white_space(decode_utf8(text, prev, length))) break;
        new_start = prev;
      }
      start = std::max(new_start, start_offset);  // spaces an earlier token already took stay with it
    }
    if (token.rstrip) {
      size_t length = 0;
      while (stop < text.size() && is_unicode_white_space(decode_utf8(text, stop, length))) stop += length;
    }
    if (start_offset < start) pieces.push_back({text.substr(start_offset, start - start_offset), std::nullopt});
    pieces.push_back({text.substr(start, stop - start), token.id});
    start_offset = stop;
  }
  if (start_offset < text.size()) pieces.push_back({text.substr(start_offset), std::nullopt});
}

}  // namespace rf::data

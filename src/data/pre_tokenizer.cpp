#include "data/pre_tokenizer.h"

#include <fmt/format.h>

#include "core/error.h"
#include "data/byte_level.h"

namespace rf::data {
namespace {

// GPT-2's split (openai/gpt-2 encoder.py), which Hugging Face's ByteLevel applies when use_regex is set.
constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

using RangeSink = std::function<void(size_t start, size_t end)>;

// Hugging Face's NormalizedString::split as a stream: fed the text's alternating runs of non-match
// and match in order, it emits the ranges `behavior` keeps as soon as each is final. HF folds over
// the whole list (MergedWithNext backwards); keeping one range pending gives the same ranges.
class BehaviorSplitter {
 public:
  BehaviorSplitter(SplitBehavior behavior, const RangeSink& emit) : behavior_(behavior), emit_(emit) {}

  void push(size_t start, size_t end, bool is_match) {
    switch (behavior_) {
      case SplitBehavior::isolated:
        emit_(start, end);
        break;
      case SplitBehavior::removed:
        if (!is_match) emit_(start, end);
        break;
      case SplitBehavior::contiguous:  // runs of matches, and runs of non-matches, become one range each
        extend_or_start(start, end, is_match == previous_match_);
        break;
      case SplitBehavior::merged_with_previous:  // a match joins the non-match before it
        extend_or_start(start, end, is_match && !previous_match_);
        break;
      case SplitBehavior::merged_with_next:  // a match joins the non-match after it
        if (pending_ && previous_match_ && !is_match) {
          emit_(pending_->first, end);
          pending_.reset();
        } else {
          flush();
          if (is_match)
            pending_ = {start, end};
          else
            emit_(start, end);
        }
        break;
    }
    previous_match_ = is_match;
  }
  void flush() {
    if (pending_) emit_(pending_->first, pending_->second);
    pending_.reset();
  }

 private:
  void extend_or_start(size_t start, size_t end, bool extend) {
    if (extend && pending_) {
      pending_->second = end;
      return;
    }
    flush();
    pending_ = {start, end};
  }

  SplitBehavior behavior_;
  const RangeSink& emit_;
  std::optional<std::pair<size_t, size_t>> pending_;
  bool previous_match_ = false;
};

// Cuts `text` at the matches of `regex` (HF's Pattern::find_matches: alternating runs of non-match
// and match covering the text; an empty text is one empty non-match) and emits what `behavior` keeps.
void split_ranges(const UnicodeRegex& regex, std::string_view text, bool invert, SplitBehavior behavior,
                  const RangeSink& emit) {
  BehaviorSplitter splitter(behavior, emit);
  if (text.empty()) {
    splitter.push(0, 0, invert);
  } else {
    size_t prev = 0;
    regex.for_each_match(text, [&](size_t start, size_t end) {
      if (prev != start) splitter.push(prev, start, invert);
      splitter.push(start, end, !invert);
      prev = end;
    });
    if (prev != text.size()) splitter.push(prev, text.size(), invert);
  }
  splitter.flush();
}

}  // namespace

PreTokenizer::PreTokenizer(const std::vector<PreTokenizerStep>& steps, const std::string& path) {
  for (const PreTokenizerStep& step : steps) {
    if (const auto* split = std::get_if<SplitStep>(&step)) {
      try {
        UnicodeRegex::Origin origin{path, split->key + ".pattern"};
        UnicodeRegex regex = split->pattern_kind == PatternKind::regex
                                 ? UnicodeRegex::oniguruma(split->pattern, std::move(origin))
                                 : UnicodeRegex::literal(split->pattern, std::move(origin));
        steps_.push_back({Split{std::move(regex), split->behavior, split->invert}, std::nullopt});
      } catch (const Error& e) {
        throw IoError(path, fmt::format("{}.pattern: {}", split->key, e.what()));
      }
    } else {
      const auto& byte_level = std::get<ByteLevelStep>(step);
      steps_.push_back({std::nullopt, ByteLevel{byte_level.add_prefix_space, byte_level.use_regex}});
      if (byte_level.use_regex && !gpt2_regex_)
        gpt2_regex_ = UnicodeRegex::oniguruma(kGpt2Pattern, {path, "pre_tokenizer (ByteLevel's GPT-2 regex)"});
    }
  }
}

void PreTokenizer::apply(size_t step_index, std::string_view piece, const WordSink& on_word) const {
  if (piece.empty()) return;
  if (step_index == steps_.size()) {
    on_word(piece);
    return;
  }
  const Step& step = steps_[step_index];
  if (step.split) {
    split_ranges(step.split->regex, piece, step.split->invert, step.split->behavior,
                 [&](size_t start, size_t end) { apply(step_index + 1, piece.substr(start, end - start), on_word); });
    return;
  }
  // ByteLevel: the prefix space goes on every piece (Hugging Face applies it per split, not per text).
  std::string spaced;
  if (step.byte_level->add_prefix_space && !piece.starts_with(' ')) {
    spaced = " " + std::string(piece);
    piece = spaced;
  }
  std::string mapped;
  const RangeSink map_and_continue = [&](size_t start, size_t end) {
    mapped.clear();
    append_byte_level(piece.substr(start, end - start), mapped);
    apply(step_index + 1, mapped, on_word);
  };
  if (step.byte_level->use_regex)
    split_ranges(*gpt2_regex_, piece, false, SplitBehavior::isolated, map_and_continue);
  else
    map_and_continue(0, piece.size());
}

void PreTokenizer::split(std::string_view text, const WordSink& on_word) const { apply(0, text, on_word); }

}  // namespace rf::data

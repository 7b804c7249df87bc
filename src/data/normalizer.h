// Unicode normalization for tokenizer.json's `normalizer` (Qwen2/Qwen3 use NFC), on utf8proc.
// Not here: the other Hugging Face normalizers (Lowercase, Strip, Replace, Precompiled, ...);
// tokenizer_json.cpp refuses them.
#pragma once

#include <string>
#include <string_view>

namespace rf::data {

// The NFC form of valid UTF-8 `text`. Only the stretches around characters that may change are
// handed to utf8proc; the rest (ASCII, Latin-1, CJK, Hangul syllables) is copied.
std::string normalize_nfc(std::string_view text);

}  // namespace rf::data

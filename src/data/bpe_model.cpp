#include "data/bpe_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <mutex>

#include "core/error.h"
#include "data/utf8.h"

namespace rf::data {

// Hugging Face's cache policy (utils/cache.rs): words shorter than 256 bytes, no eviction once full.
struct BpeModel::WordCache {
  static constexpr size_t kCapacity = 10'000;
  static constexpr size_t kMaxWordBytes = 256;
  std::mutex mutex;
  std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> words;
};

BpeModel::BpeModel(const BpeModelSpec& spec, const std::string& path)
    : path_(path), fuse_unk_(spec.fuse_unk), ignore_merges_(spec.ignore_merges), cache_(std::make_unique<WordCache>()) {
  vocab_.reserve(spec.vocab.size());
  std::unordered_map<int64_t, const std::string*> token_of_id;
  for (const auto& [token, id] : spec.vocab) {
    if (const auto [it, fresh] = token_of_id.emplace(id, &token); !fresh)
      throw IoError(path, fmt::format("model.vocab[\"{}\"]: id {} is also the id of \"{}\"", token, id, *it->second));
    vocab_.emplace(token, int32_t(id));
  }
  const auto id_or_fail = [&](const std::string& token, size_t rank) {
    const auto it = vocab_.find(token);
    if (it == vocab_.end())
      throw IoError(path, fmt::format("model.merges[{}]: \"{}\" is not in the vocabulary", rank, token));
    return it->second;
  };
  merges_.reserve(spec.merges.size());
  for (size_t rank = 0; rank < spec.merges.size(); ++rank) {
    const auto& [a, b] = spec.merges[rank];
    const int32_t a_id = id_or_fail(a, rank), b_id = id_or_fail(b, rank), new_id = id_or_fail(a + b, rank);
    merges_.insert_or_assign(pair_key(a_id, b_id),
                             Merge{int32_t(rank), new_id});  // a repeated pair: the last wins, as in HF
  }
  id_of_small_char_.fill(-1);
  for (const auto& [token, id] : vocab_) {
    size_t length = 0;
    if (token.empty()) continue;
    const char32_t c = decode_utf8(token, 0, length);
    if (length == token.size() && c < id_of_small_char_.size()) id_of_small_char_[c] = id;
  }
  if (spec.unk_token) {
    const auto it = vocab_.find(*spec.unk_token);
    if (it == vocab_.end())
      throw IoError(path, fmt::format("model.unk_token: \"{}\" is not in the vocabulary", *spec.unk_token));
    unk_id_ = it->second;
  }
}

BpeModel::BpeModel(BpeModel&&) noexcept = default;
BpeModel& BpeModel::operator=(BpeModel&&) noexcept = default;
BpeModel::~BpeModel() = default;

std::optional<int64_t> BpeModel::id_of(std::string_view token) const {
  const auto it = vocab_.find(token);
  return it == vocab_.end() ? std::nullopt : std::optional<int64_t>(it->second);
}

std::vector<int32_t> BpeModel::merge_word(std::string_view word) const {
  struct Symbol {
    int32_t id;
    int32_t prev, next;  // neighbours in the linked list; -1 at the ends
    uint32_t bytes;      // 0 once merged into its left neighbour
  };
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  const auto add = [&](int32_t id, uint32_t bytes) {
    const auto index = int32_t(symbols.size());
    if (!symbols.empty()) symbols.back().next = index;
    symbols.push_back({id, index - 1, -1, bytes});
  };
  // Hugging Face adds an unk only when the next known character (or the end) comes, so that
  // fuse_unk can grow it first. 0: no unk pending (every character has at least one byte).
  uint32_t pending_unk_bytes = 0;
  const auto flush_unk = [&] {
    if (pending_unk_bytes != 0) add(*unk_id_, pending_unk_bytes);
    pending_unk_bytes = 0;
  };
  for (size_t pos = 0; pos < word.size();) {
    size_t length = 0;
    const char32_t c = decode_utf8(word, pos, length);
    int32_t id = c < id_of_small_char_.size() ? id_of_small_char_[c] : -1;
    if (id < 0 && c >= id_of_small_char_.size()) {
      const auto it = vocab_.find(word.substr(pos, length));
      if (it != vocab_.end()) id = it->second;
    }
    if (id >= 0) {
      flush_unk();
      add(id, uint32_t(length));
    } else if (unk_id_) {
      if (!fuse_unk_) flush_unk();
      pending_unk_bytes += uint32_t(length);
    } else {
      throw IoError(path_, fmt::format("model.vocab has no token for the character '{}' (U+{:04X}) and model.unk_token "
                                       "is null, so it cannot be encoded (Hugging Face would drop it silently)",
                                       word.substr(pos, length), uint32_t(c)));
    }
    pos += length;
  }
  flush_unk();

  struct Candidate {
    int32_t rank, pos, new_id;
    // std::push_heap keeps the largest on top: the lowest rank, then the leftmost position, is "largest".
    bool operator<(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::vector<Candidate> heap;
  const auto push_pair = [&](int32_t left) {
    const int32_t right = symbols[size_t(left)].next;
    if (right < 0) return;
    const auto it = merges_.find(pair_key(symbols[size_t(left)].id, symbols[size_t(right)].id));
    if (it == merges_.end()) return;
    heap.push_back({it->second.rank, left, it->second.new_id});
    std::push_heap(heap.begin(), heap.end());
  };
  for (int32_t i = 0; i + 1 < int32_t(symbols.size()); ++i) push_pair(i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end());
    const Candidate top = heap.back();
    heap.pop_back();
    Symbol& left = symbols[size_t(top.pos)];
    if (left.bytes == 0 || left.next < 0) continue;  // merged away, or nothing on its right any more
    Symbol& right = symbols[size_t(left.next)];
    const auto it = merges_.find(pair_key(left.id, right.id));
    if (it == merges_.end() || it->second.new_id != top.new_id) continue;  // the pair changed since it was queued
    left.id = top.new_id;
    left.bytes += right.bytes;
    left.next = right.next;
    right.bytes = 0;
    if (left.next >= 0) symbols[size_t(left.next)].prev = top.pos;
    if (left.prev >= 0) push_pair(left.prev);
    push_pair(top.pos);
  }
  std::vector<int32_t> ids;
  for (const Symbol& s : symbols)
    if (s.bytes != 0) ids.push_back(s.id);
  return ids;
}

void BpeModel::encode_word(std::string_view word, std::vector<int64_t>& ids) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    if (const auto it = vocab_.find(word); it != vocab_.end()) {
      ids.push_back(it->second);
      return;
    }
  }
  {
    const std::lock_guard lock(cache_->mutex);
    if (const auto it = cache_->words.find(word); it != cache_->words.end()) {
      ids.insert(ids.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> merged = merge_word(word);
  ids.insert(ids.end(), merged.begin(), merged.end());
  if (word.size() < WordCache::kMaxWordBytes) {
    const std::lock_guard lock(cache_->mutex);
    if (cache_->words.size() < WordCache::kCapacity) cache_->words.emplace(word, std::move(merged));
  }
}

}  // namespace rf::data

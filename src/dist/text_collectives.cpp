#include "dist/text_collectives.h"

#include <cstring>

#include "core/tensor.h"

namespace rf::dist {
namespace {

Tensor bytes_of(const std::string& text) {
  Tensor bytes({int64_t(text.size())}, DType::u8);
  if (!text.empty()) std::memcpy(bytes.data<uint8_t>(), text.data(), text.size());
  return bytes;
}

}  // namespace

std::string broadcast_text(ProcessGroup& group, const std::string& text, int root) {
  Tensor length({1}, DType::i64);
  length.data<int64_t>()[0] = int64_t(text.size());
  group.broadcast(length, root);
  Tensor bytes = group.rank() == root ? bytes_of(text) : Tensor({length.data<int64_t>()[0]}, DType::u8);
  if (bytes.numel() > 0) group.broadcast(bytes, root);
  return std::string(reinterpret_cast<const char*>(bytes.data<uint8_t>()), size_t(bytes.numel()));
}

std::vector<std::string> all_gather_texts(ProcessGroup& group, const std::string& text) {
  const int ranks = group.size();
  Tensor mine({1}, DType::i64), lengths({ranks}, DType::i64);
  mine.data<int64_t>()[0] = int64_t(text.size());
  group.all_gather(mine, lengths);
  const std::vector<int64_t> counts(lengths.data<int64_t>(), lengths.data<int64_t>() + ranks);
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  const Tensor all({total}, DType::u8);
  group.all_gather_v(bytes_of(text), all, counts);
  std::vector<std::string> texts;
  const char* next = reinterpret_cast<const char*>(all.data<uint8_t>());
  for (int64_t c : counts) {
    texts.emplace_back(next, size_t(c));
    next += c;
  }
  return texts;
}

}  // namespace rf::dist

#include "engine/tensor_map.h"

#include <fmt/format.h>

namespace rf::engine {

void TensorMap::set(const std::string& name, Tensor tensor) { tensors_[name] = std::move(tensor); }

TensorView TensorMap::get(const std::string& name) const {
  auto it = tensors_.find(name);
  RF_CHECK(it != tensors_.end(), "micro-batch has no '{}' (it has: {})", name, fmt::join(names(), ", "));
  return it->second.view();
}

std::vector<std::string> TensorMap::names() const {
  std::vector<std::string> out;
  for (const auto& [name, tensor] : tensors_) out.push_back(name);
  return out;
}

std::span<const int32_t> TensorMap::cu_seqlens() const {
  const TensorView cu = get("cu_seqlens");
  return {cu.data<int32_t>(), size_t(cu.numel())};
}

}  // namespace rf::engine

#include "rl/group_index.h"

#include <unordered_map>

namespace rf::rl {

GroupIndex::GroupIndex(std::span<const int64_t> labels_B) {
  std::vector<std::string> labels;
  labels.reserve(labels_B.size());
  for (int64_t label : labels_B) labels.push_back(std::to_string(label));
  assign(std::move(labels));
}

GroupIndex::GroupIndex(std::span<const std::string> labels_B) {
  assign(std::vector<std::string>(labels_B.begin(), labels_B.end()));
}

void GroupIndex::assign(std::vector<std::string> labels_B) {
  std::unordered_map<std::string, int64_t> group_of_label;
  group_B_.reserve(labels_B.size());
  for (std::string& label : labels_B) {
    const auto [it, inserted] = group_of_label.try_emplace(label, num_groups());
    if (inserted) {
      label_G_.push_back(std::move(label));
      size_G_.push_back(0);
    }
    group_B_.push_back(it->second);
    ++size_G_[size_t(it->second)];
  }
}

}  // namespace rf::rl

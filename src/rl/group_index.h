// GroupIndex: the group (verl's uid: one per prompt, shared by its n responses) of each of B samples,
// as dense ids 0..num_groups-1 in order of first appearance. Only the labels' equality matters: they
// need not be contiguous or sorted (verl's balance_batch reorders samples before advantages).
// Labels are integers or strings (verl's uuid4 strings); the original label is kept for messages.
#pragma once

#include <span>
#include <string>
#include <vector>

namespace rf::rl {

class GroupIndex {
 public:
  explicit GroupIndex(std::span<const int64_t> labels_B);
  explicit GroupIndex(std::span<const std::string> labels_B);

  int64_t size() const { return int64_t(group_B_.size()); }  // B
  int64_t num_groups() const { return int64_t(label_G_.size()); }
  int64_t group_of(int64_t b) const { return group_B_[size_t(b)]; }
  int64_t group_size(int64_t g) const { return size_G_[size_t(g)]; }
  const std::string& label(int64_t g) const { return label_G_[size_t(g)]; }

 private:
  void assign(std::vector<std::string> labels_B);

  std::vector<int64_t> group_B_;
  std::vector<int64_t> size_G_;
  std::vector<std::string> label_G_;
};

}  // namespace rf::rl

// Shape: a tensor's extents (or strides), up to kMaxDims dimensions, stored inline so that making
// a view never allocates.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

namespace rf {

inline constexpr int kMaxDims = 6;

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims);
  template <class It>
  Shape(It first, It last) {
    for (; first != last; ++first) push_back(int64_t(*first));
  }

  int rank() const { return rank_; }
  int64_t operator[](int dim) const { return dims_[size_t(dim)]; }
  int64_t& operator[](int dim) { return dims_[size_t(dim)]; }
  void push_back(int64_t extent);
  int64_t numel() const;
  const int64_t* begin() const { return dims_.data(); }
  const int64_t* end() const { return dims_.data() + rank_; }

  bool operator==(const Shape& other) const;
  std::string to_string() const;  // "[2, 3, 4]"

 private:
  std::array<int64_t, kMaxDims> dims_{};
  int rank_ = 0;
};

// Row-major strides (in elements) of a contiguous tensor of this shape.
Shape contiguous_strides(const Shape& shape);

}  // namespace rf

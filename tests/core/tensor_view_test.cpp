// Shape and TensorView: contiguous strides, the extents, strides and data offsets of slice /
// select / reshape / transpose, is_contiguous, and the errors on bad dims and indices.
#include "core/tensor_view.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "support/test_support.h"

namespace rf {
namespace {

using rf::testing::expect_error_containing;

// Distance of a view's data pointer from the buffer start, in elements.
template <class T>
int64_t element_offset(const TensorView& view, const std::vector<T>& buffer) {
  return static_cast<const T*>(view.raw()) - buffer.data();
}

TEST(Shape, BasicsAndContiguousStrides) {
  const Shape s{2, 3, 4};
  EXPECT_EQ(s.rank(), 3);
  EXPECT_EQ(s.numel(), 24);
  EXPECT_EQ(s.to_string(), "[2, 3, 4]");
  EXPECT_EQ(contiguous_strides(s), (Shape{12, 4, 1}));
  EXPECT_EQ(contiguous_strides(Shape{5}), (Shape{1}));
  EXPECT_EQ(contiguous_strides(Shape{3, 0, 2}), (Shape{0, 2, 1}));
  EXPECT_EQ(Shape{}.numel(), 1);  // a scalar
  EXPECT_EQ(Shape{}.to_string(), "[]");
  EXPECT_FALSE((Shape{2, 3}) == (Shape{2, 3, 1}));
  EXPECT_FALSE((Shape{2, 3}) == (Shape{3, 2}));
  const std::vector<int> v{7, 1, 9};
  EXPECT_EQ(Shape(v.begin(), v.end()), (Shape{7, 1, 9}));
  Shape full{1, 1, 1, 1, 1, 1};
  expect_error_containing([&] { full.push_back(1); }, "more than 6 dimensions");
}

TEST(TensorView, ContiguousViewAndElementAccess) {
  std::vector<float> buffer(24);
  std::iota(buffer.begin(), buffer.end(), 0.0f);
  const TensorView v(buffer.data(), DType::f32, Shape{2, 3, 4});
  EXPECT_EQ(v.strides(), (Shape{12, 4, 1}));
  EXPECT_TRUE(v.is_contiguous());
  EXPECT_TRUE(v.inner_contiguous());
  EXPECT_EQ(v.size(-1), 4);
  EXPECT_EQ(v.size(-3), 2);
  EXPECT_EQ(v.stride(0), 12);
  EXPECT_EQ(v.nbytes(), 96u);
  EXPECT_EQ(v.at<float>({1, 2, 3}), 23.0f);
  EXPECT_EQ(v.at<float>({1, 0, 2}), 14.0f);
  EXPECT_EQ(v.describe(), "f32[2, 3, 4] strides [12, 4, 1]");
  EXPECT_TRUE(TensorView().empty());
  EXPECT_FALSE(v.empty());
}

TEST(TensorView, SliceSelectTransposeExtentsAndOffsets) {
  std::vector<float> buffer(60);
  std::iota(buffer.begin(), buffer.end(), 0.0f);
  const TensorView v(buffer.data(), DType::f32, Shape{3, 4, 5});  // value = 20a + 5b + c

  const TensorView s1 = v.slice(1, 1, 2);  // [3, 2, 5]
  EXPECT_EQ(s1.shape(), (Shape{3, 2, 5}));
  EXPECT_EQ(s1.strides(), (Shape{20, 5, 1}));
  EXPECT_EQ(element_offset(s1, buffer), 5);
  EXPECT_EQ(s1.at<float>({2, 1, 3}), 20 * 2 + 5 * 2 + 3);

  const TensorView s2 = v.slice(-1, 2, 3);  // negative dim: the last one
  EXPECT_EQ(s2.shape(), (Shape{3, 4, 3}));
  EXPECT_EQ(element_offset(s2, buffer), 2);
  EXPECT_EQ(s2.at<float>({1, 3, 2}), 20 + 15 + 4);

  const TensorView row = v.select(0, 2);  // [4, 5]
  EXPECT_EQ(row.shape(), (Shape{4, 5}));
  EXPECT_EQ(row.strides(), (Shape{5, 1}));
  EXPECT_EQ(element_offset(row, buffer), 40);

  const TensorView col = v.select(2, 3);  // [3, 4], strides [20, 5]
  EXPECT_EQ(col.shape(), (Shape{3, 4}));
  EXPECT_EQ(col.strides(), (Shape{20, 5}));
  EXPECT_EQ(element_offset(col, buffer), 3);
  EXPECT_EQ(col.at<float>({2, 1}), 40 + 5 + 3);

  const TensorView t = v.transpose(0, 2);  // [5, 4, 3]
  EXPECT_EQ(t.shape(), (Shape{5, 4, 3}));
  EXPECT_EQ(t.strides(), (Shape{1, 5, 20}));
  EXPECT_EQ(t.at<float>({4, 1, 2}), 40 + 5 + 4);
  EXPECT_EQ(v.transpose(-1, 0).shape(), t.shape());

  // Views compose: a slice of a transpose of a select.
  const TensorView c = v.select(1, 1).transpose(0, 1).slice(0, 2, 2);  // [2, 3]: (c, a)
  EXPECT_EQ(c.shape(), (Shape{2, 3}));
  EXPECT_EQ(c.at<float>({1, 2}), 40 + 5 + 3);

  const TensorView empty_slice = v.slice(0, 3, 0);
  EXPECT_EQ(empty_slice.numel(), 0);
}

TEST(TensorView, Reshape) {
  std::vector<float> buffer(24);
  std::iota(buffer.begin(), buffer.end(), 0.0f);
  const TensorView v(buffer.data(), DType::f32, Shape{2, 3, 4});
  const TensorView r = v.reshape(Shape{6, 4});
  EXPECT_EQ(r.strides(), (Shape{4, 1}));
  EXPECT_EQ(r.at<float>({5, 3}), 23.0f);
  // A leading-dim slice is contiguous and can be reshaped; its data pointer moves with it.
  const TensorView tail = v.slice(0, 1, 1).reshape(Shape{12});
  EXPECT_EQ(element_offset(tail, buffer), 12);
  EXPECT_EQ(tail.at<float>({0}), 12.0f);
  expect_error_containing([&] { (void)v.reshape(Shape{5, 5}); }, "changes the element count");
  expect_error_containing([&] { (void)v.transpose(0, 1).reshape(Shape{24}); }, "non-contiguous");
  expect_error_containing([&] { (void)v.slice(2, 0, 3).reshape(Shape{18}); }, "non-contiguous");
}

TEST(TensorView, IsContiguous) {
  std::vector<float> buffer(60);
  const TensorView v(buffer.data(), DType::f32, Shape{3, 4, 5});
  EXPECT_TRUE(v.slice(0, 1, 2).is_contiguous());   // leading dim
  EXPECT_FALSE(v.slice(1, 1, 2).is_contiguous());  // middle dim: gaps between blocks
  EXPECT_FALSE(v.slice(2, 0, 4).is_contiguous());  // inner dim: gaps between rows
  EXPECT_TRUE(v.slice(2, 0, 4).inner_contiguous());
  EXPECT_TRUE(v.slice(1, 0, 4).is_contiguous());   // full extent
  EXPECT_TRUE(v.select(0, 1).is_contiguous());
  EXPECT_TRUE(v.select(0, 1).select(0, 2).is_contiguous());
  EXPECT_FALSE(v.select(2, 1).is_contiguous());
  EXPECT_FALSE(v.select(2, 1).inner_contiguous());
  EXPECT_FALSE(v.transpose(1, 2).is_contiguous());
  // Size-1 dims do not break contiguity whatever their stride.
  EXPECT_TRUE(v.slice(1, 2, 1).slice(0, 0, 1).is_contiguous());
  EXPECT_TRUE(TensorView(buffer.data(), DType::f32, Shape{4, 1, 5}, Shape{5, 99, 1}).is_contiguous());
  EXPECT_TRUE(v.transpose(0, 1).slice(0, 0, 1).slice(1, 0, 1).is_contiguous());  // [1, 1, 5]
}

TEST(TensorView, ErrorsOnBadDimsAndIndices) {
  std::vector<float> buffer(12);
  const TensorView v(buffer.data(), DType::f32, Shape{3, 4});
  expect_error_containing([&] { (void)v.size(2); }, "dim 2 out of range for a rank-2 tensor");
  expect_error_containing([&] { (void)v.size(-3); }, "dim -3 out of range");
  expect_error_containing([&] { (void)v.slice(2, 0, 1); }, "out of range");
  expect_error_containing([&] { (void)v.slice(1, 3, 2); }, "slice [3, 5) out of range [0, 4) in dim 1");
  expect_error_containing([&] { (void)v.slice(0, -1, 1); }, "out of range");
  expect_error_containing([&] { (void)v.select(0, 3); }, "out of range");
  expect_error_containing([&] { (void)v.transpose(0, 2); }, "dim 2 out of range");
  expect_error_containing([&] { (void)v.at<float>({3, 0}); }, "index 3 out of range [0, 3) in dim 0");
  expect_error_containing([&] { (void)v.at<float>({0}); }, "index of rank 1 into a rank-2 tensor");
  expect_error_containing([&] { (void)v.data<double>(); }, "tensor holds f32, accessed as f64");
  expect_error_containing([&] { TensorView(buffer.data(), DType::f32, Shape{3, 4}, Shape{4}); },
                          "differ in rank");
}

TEST(TensorView, CheckShapeAndDtypeNameTheTensor) {
  std::vector<float> buffer(12);
  const TensorView v(buffer.data(), DType::f32, Shape{3, 4});
  check_shape(v, Shape{3, 4}, "x_NC");
  check_dtype(v, DType::f32, "x_NC");
  expect_error_containing([&] { check_shape(v, Shape{4, 3}, "x_NC"); }, "x_NC: expected shape [4, 3], got [3, 4]");
  expect_error_containing([&] { check_dtype(v, DType::bf16, "w_C"); }, "w_C: expected dtype bf16, got f32");
}

}  // namespace
}  // namespace rf

// Fast token embedding for f32 and bf16 (contract in kernels/embedding.h).
// Forward copies one row per token, tokens spread over threads.
// Backward scatters `+=` into dtable. Repeated ids make that a race if tokens are split over
// threads, so the work is split over dtable instead: tiles of (vocab range x column block), each
// owned by one thread, which walks all tokens in order and adds those whose id falls in its rows.
// Every dtable element is thus updated by one thread in token order, so the result is the same for
// any thread count (and equals the ref's, which adds in the same order).
// Legend: N tokens, C hidden, V vocab rows held here.
#include <omp.h>

#include <algorithm>
#include <cstring>

#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/rowwise_op_checks.h"

namespace rf::kernels::RF_CPU_NS {
namespace {

constexpr int64_t kColumnsPerTile = 256;

template <class Id>
void forward_tokens(int64_t vocab_start, const Id* ids, int64_t id_stride, TensorView table_VC, TensorView out_NC) {
  const int64_t N = out_NC.size(0), V = table_VC.size(0), C = table_VC.size(1);
  const auto* table = static_cast<const std::byte*>(table_VC.raw());
  auto* out = static_cast<std::byte*>(out_NC.raw());
  const int64_t row_bytes = C * int64_t(table_VC.element_size());
  const int64_t table_stride_bytes = table_VC.stride(0) * int64_t(table_VC.element_size());
  const int64_t out_stride_bytes = out_NC.stride(0) * int64_t(out_NC.element_size());
#pragma omp parallel for schedule(static) if (N * C >= kMinParallelElements)
  for (int64_t n = 0; n < N; ++n) {
    const int64_t row = int64_t(ids[n * id_stride]) - vocab_start;
    std::byte* dst = out + n * out_stride_bytes;
    // All-zero bits are +0 in f32, bf16 and f64 alike.
    if (row >= 0 && row < V)
      std::memcpy(dst, table + row * table_stride_bytes, size_t(row_bytes));
    else
      std::memset(dst, 0, size_t(row_bytes));
  }
}

template <class Id, class T>
void backward_tiles(int64_t vocab_start, const Id* ids, int64_t id_stride, TensorView dout_NC, TensorView dtable_VC) {
  const int64_t N = dout_NC.size(0), V = dtable_VC.size(0), C = dtable_VC.size(1);
  const T* dout = dout_NC.data<T>();
  float* dtable = dtable_VC.data<float>();
  const int64_t dout_stride = dout_NC.stride(0), dtable_stride = dtable_VC.stride(0);
  const int64_t num_column_blocks = (C + kColumnsPerTile - 1) / kColumnsPerTile;
  // Enough vocab ranges to give every thread a couple of tiles; the split does not change results.
  const int64_t num_vocab_ranges =
      std::clamp<int64_t>(2 * omp_get_max_threads() / num_column_blocks, 1, std::max<int64_t>(V, 1));
#pragma omp parallel for schedule(static) if (N * C >= kMinParallelElements)
  for (int64_t tile = 0; tile < num_vocab_ranges * num_column_blocks; ++tile) {
    const int64_t range = tile / num_column_blocks, column_block = tile % num_column_blocks;
    const int64_t row_begin = V * range / num_vocab_ranges, row_end = V * (range + 1) / num_vocab_ranges;
    const int64_t c0 = column_block * kColumnsPerTile, len = std::min(kColumnsPerTile, C - c0);
    for (int64_t n = 0; n < N; ++n) {
      const int64_t row = int64_t(ids[n * id_stride]) - vocab_start;
      if (row < row_begin || row >= row_end) continue;
      float* dst = dtable + row * dtable_stride + c0;
      const T* src = dout + n * dout_stride + c0;
#pragma omp simd
      for (int64_t j = 0; j < len; ++j) dst[j] += load(src[j]);
    }
  }
}

template <class Id>
void backward_any(int64_t vocab_start, const Id* ids, int64_t id_stride, TensorView dout_NC, TensorView dtable_VC) {
  switch (dout_NC.dtype()) {
    case DType::f32: return backward_tiles<Id, float>(vocab_start, ids, id_stride, dout_NC, dtable_VC);
    case DType::bf16: return backward_tiles<Id, bf16>(vocab_start, ids, id_stride, dout_NC, dtable_VC);
    default: RF_CHECK(false, "cpu embedding_backward: {} runs on ref", dtype_name(dout_NC.dtype()));
  }
}

}  // namespace

void embedding_forward(const EmbeddingParams& p, TensorView ids_N, TensorView table_VC, TensorView out_NC) {
  check_embedding_forward(ids_N, table_VC, out_NC);
  RF_CHECK(table_VC.dtype() != DType::f64, "cpu embedding_forward: f64 runs on ref");
  if (ids_N.dtype() == DType::i32)
    forward_tokens(p.vocab_start, ids_N.data<int32_t>(), ids_N.stride(0), table_VC, out_NC);
  else
    forward_tokens(p.vocab_start, ids_N.data<int64_t>(), ids_N.stride(0), table_VC, out_NC);
}

void embedding_backward(const EmbeddingParams& p, TensorView ids_N, TensorView dout_NC, TensorView dtable_VC) {
  check_embedding_backward(ids_N, dout_NC, dtable_VC);
  if (ids_N.dtype() == DType::i32)
    backward_any(p.vocab_start, ids_N.data<int32_t>(), ids_N.stride(0), dout_NC, dtable_VC);
  else
    backward_any(p.vocab_start, ids_N.data<int64_t>(), ids_N.stride(0), dout_NC, dtable_VC);
}

}  // namespace rf::kernels::RF_CPU_NS

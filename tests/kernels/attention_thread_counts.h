// What the attention tests check of every fast table: forward then backward at 1, 2 and 3 threads give the same
// bits (every output element is written by one task in a fixed order, whatever the thread count).
// Legend: B batch, Tq / Tk query and key lengths, H query heads, K kv heads, D head dim.
#pragma once

#include <gtest/gtest.h>
#include <omp.h>

#include <cstring>
#include <vector>

#include "core/tensor.h"
#include "kernels/kernel_table.h"

namespace rf::kernels {

// q [B, Tq, H, D], k and v [B, Tk, K, D], dout like q, of one dtype.
inline void expect_thread_count_independent(const KernelTable& table, const AttentionParams& params, TensorView q,
                                            TensorView k, TensorView v, TensorView dout) {
  const int64_t B = q.size(0), Tq = q.size(1), H = q.size(2), D = q.size(3), Tk = k.size(1), K = k.size(2);
  const DType dtype = q.dtype();
  const int saved_threads = omp_get_max_threads();
  std::vector<std::vector<Tensor>> runs;  // per thread count: out, lse, dq, dk, dv
  for (int threads : {1, 2, 3}) {
    omp_set_num_threads(threads);
    std::vector<Tensor> run;
    run.emplace_back(Shape{B, Tq, H, D}, dtype);
    run.emplace_back(Shape{B, H, Tq}, DType::f32);
    run.emplace_back(Shape{B, Tq, H, D}, dtype);
    run.emplace_back(Shape{B, Tk, K, D}, dtype);
    run.emplace_back(Shape{B, Tk, K, D}, dtype);
    table.attention_forward(params, q, k, v, run[0], run[1]);
    table.attention_backward(params, q, k, v, run[0], run[1], dout, run[2], run[3], run[4]);
    runs.push_back(std::move(run));
  }
  omp_set_num_threads(saved_threads);
  const char* names[] = {"out", "lse", "dq", "dk", "dv"};
  for (size_t r = 1; r < runs.size(); ++r)
    for (size_t i = 0; i < runs[0].size(); ++i)
      EXPECT_EQ(std::memcmp(runs[0][i].view().raw(), runs[r][i].view().raw(), runs[0][i].nbytes()), 0)
          << names[i] << " differs with " << r + 1 << " threads";
}

}  // namespace rf::kernels

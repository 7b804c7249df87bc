// Fast paged attention and KV-cache write for f32 and bf16 (contract in kernels/paged_attention.h).
//
// Batch invariance by construction. The unit of work is a "row", one (query, head) pair, and its
// arithmetic is a function of that row alone, written out in this file so that no library or
// compiler choice can make it depend on the batch:
//  - the row walks its positions 0..p in logical tiles of kTile positions (t0 = 0, kTile, ...),
//    whatever the cache's block size and wherever its blocks lie: a position's key and value rows are
//    found through the block table, one lookup per position;
//  - a score is scale * dot(q, k), the dot over D in kLanes partial sums (lane l takes d = l mod
//    kLanes, in ascending d), then added pairwise in a fixed tree (lanes l and l + 8, then + 4, ...);
//  - per tile, flash-attention's online softmax: m' = max(m, max of the tile's scores),
//    alpha = exp(m - m'), l = l alpha + (sum of the tile's exp(score - m') in position order),
//    acc = acc alpha + (the tile's p v added position by position, elementwise over D);
//  - out = acc * (1 / l), rounded to the dtype once.
// A task takes every head of up to kRowBlock / H consecutive queries of one sequence, so that it reads
// each position's keys and values of all kv heads as one contiguous [K, D] run of the pool (decode
// tasks hold one query); the G query heads of a kv head go in groups of 4 rows that share each key
// and value row they load. Grouping rows only interleaves independent computations: a query's rows
// stop at its own p (they never see, not even masked, a tile they would not see alone), so a row's
// operations are exactly those it performs alone. Tasks are spread over threads dynamically; no row
// is split, so the thread count changes nothing.
// Where the cpu variants differ (vector width), each is invariant on its own.
//
// bf16: keys, values and queries are widened to f32 (exact) and all arithmetic is f32, as for f32;
// only out is rounded. (The compiler contracts a * b + c into FMAs; that too is fixed per variant.)
// Speed: decode reaches 20-40% of the machine's read bandwidth (bench/rollout_kernel_bench.cpp), so it
// is bound by its arithmetic, not by the cache read; a faster version must keep each row's order. Not here: a dpbf16 or AMX path, sliding windows, ALiBi,
// soft-capping, writing lse for cascade attention.
// Legend: N query rows, S sequences, P cache blocks, Z tokens per block, H query heads, K kv heads,
// D head dim (Dp: D rounded up to kLanes), G = H / K; R rows of a task, j a position of a tile.
#include <algorithm>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/paged_attention_args.h"

namespace rf::kernels::RF_CPU_NS {
namespace {

constexpr int64_t kLanes = 16;     // partial sums of a dot product: one AVX-512 vector of f32
constexpr int64_t kTile = 32;      // positions per online-softmax step
constexpr int64_t kRowBlock = 64;  // (query, head) rows a task takes together (at least H)
// Below this many score multiply-adds a call stays on the calling thread.
constexpr int64_t kMinParallelWork = int64_t(1) << 15;
constexpr float kMinusInf = -std::numeric_limits<float>::infinity();

int64_t round_up(int64_t x, int64_t multiple) { return (x + multiple - 1) / multiple * multiple; }

// The lanes' partial sums added pairwise: lanes l and l + 8, then l + 4, l + 2, l + 1.
float reduce_lanes(float* part) {
  for (int64_t width = kLanes / 2; width > 0; width /= 2) {
#pragma omp simd
    for (int64_t l = 0; l < width; ++l) part[l] += part[l + width];
  }
  return part[0];
}

// score[r] = scale * (q_r . k) for kRows rows of q (row stride Dp, a multiple of kLanes), each dot in
// the fixed order described at the top: lane l sums q[d] k[d] over d = l mod kLanes in ascending d, then
// reduce_lanes. kRows rows at once only share the loads of k (their sums stay separate), so a row's
// score is the same in a group of 4 as alone.
template <int kRows>
void score_rows(const float* q, int64_t Dp, const float* k, float scale, float* score, int64_t score_stride) {
  float part[kRows][kLanes] = {};
  for (int64_t d0 = 0; d0 < Dp; d0 += kLanes) {
    for (int r = 0; r < kRows; ++r) {
#pragma omp simd
      for (int64_t l = 0; l < kLanes; ++l) part[r][l] += q[r * Dp + d0 + l] * k[d0 + l];
    }
  }
  for (int r = 0; r < kRows; ++r) score[r * score_stride] = reduce_lanes(part[r]) * scale;
}

// acc_r[d] += p_r[j] v_j[d] for positions j in [j0, j1), in ascending j, for kRows rows (acc row stride
// Dp, p row stride kTile). Chunk by chunk of kLanes elements, so a chunk of each row's accumulator stays
// in registers over the positions; each element still takes its additions in ascending j, the same
// sequence as one row alone.
template <int kRows, class T>
void accumulate_rows(float* acc, int64_t Dp, const float* p, const T* const* v_rows, int64_t j0, int64_t j1) {
  for (int64_t d0 = 0; d0 < Dp; d0 += kLanes) {
    float a[kRows][kLanes];
    for (int r = 0; r < kRows; ++r)
      for (int64_t l = 0; l < kLanes; ++l) a[r][l] = acc[r * Dp + d0 + l];
    for (int64_t j = j0; j < j1; ++j) {
      const T* v = v_rows[j] + d0;
      for (int r = 0; r < kRows; ++r) {
        const float pr = p[r * kTile + j];
#pragma omp simd
        for (int64_t l = 0; l < kLanes; ++l) a[r][l] += pr * load(v[l]);
      }
    }
    for (int r = 0; r < kRows; ++r)
      for (int64_t l = 0; l < kLanes; ++l) acc[r * Dp + d0 + l] = a[r][l];
  }
}

// The call's tensors and sizes.
template <class T>
struct Call {
  const PagedAttentionParams& params;
  PagedAttentionDims dims;
  int64_t G, Dp;
  float scale;
  const T* q;
  const T* k_cache;
  const T* v_cache;
  T* out;
  int64_t q_stride[2], out_stride[2], cache_stride[3];
};

// Queries [q0, q0 + num_queries) of sequence s, all heads.
struct Task {
  int32_t s, q0, num_queries;
};

// One thread's scratch, sized once per call: the rows (num_queries x H) of queries, accumulators and
// scores, one widened key row and a tile of widened value rows. Zeroed once, so the padding of every
// row past D stays 0.
struct Scratch {
  Scratch(int64_t num_queries, int64_t H, int64_t Dp)
      : q(size_t(num_queries * H * Dp), 0.0f),
        acc(size_t(num_queries * H * Dp), 0.0f),
        kv_row(size_t(Dp), 0.0f),
        v_tile(size_t(kTile * Dp), 0.0f),
        score(size_t(num_queries * H * kTile)),
        m(size_t(num_queries * H)),
        l(size_t(num_queries * H)),
        position(size_t(num_queries)),
        visible(size_t(num_queries)) {}
  std::vector<float> q, acc, kv_row, v_tile, score, m, l;
  std::vector<int64_t> position, visible;
};

// A cache row as f32 values over Dp: read in place for f32 rows of Dp elements, else widened into
// `buffer` (whose tail past D is 0). The values, and so every result, are the same either way.
template <class T>
const float* widened(const T* row, int64_t D, int64_t Dp, float* buffer) {
  if constexpr (std::is_same_v<T, float>) {
    if (D == Dp) return row;
  }
#pragma omp simd
  for (int64_t d = 0; d < D; ++d) buffer[d] = load(row[d]);
  return buffer;
}

template <class T>
void run_task(const Call<T>& c, const Task& task, Scratch& w) {
  const PagedAttentionDims& dims = c.dims;
  const int64_t G = c.G, Dp = c.Dp, D = dims.D, Z = dims.Z, H = dims.H, K = dims.K;
  const int64_t nq = task.num_queries, R = nq * H;
  const int64_t first = c.params.query_start[size_t(task.s)];
  const int64_t q_len = c.params.query_start[size_t(task.s) + 1] - first;
  const int64_t context = c.params.context_len[size_t(task.s)];
  const int32_t* table_row = c.params.block_table_SW.template data<int32_t>() + task.s * c.params.block_table_SW.stride(0);
  auto position_row = [&](const T* cache, int64_t t) {  // kv head 0 of position t
    return cache + table_row[t / Z] * c.cache_stride[0] + (t % Z) * c.cache_stride[1];
  };

  // Row r: query q0 + r / H, head r % H (the G heads of kv head h / G are rows kv * G .. of a query).
  for (int64_t r = 0; r < R; ++r) {
    const int64_t i = task.q0 + r / H, h = r % H;
    const T* q_row = c.q + (first + i) * c.q_stride[0] + h * c.q_stride[1];
    float* qf = w.q.data() + r * Dp;
#pragma omp simd
    for (int64_t d = 0; d < D; ++d) qf[d] = load(q_row[d]);
    std::fill_n(w.acc.data() + r * Dp, Dp, 0.0f);
    w.m[size_t(r)] = kMinusInf;
    w.l[size_t(r)] = 0.0f;
  }
  for (int64_t qi = 0; qi < nq; ++qi) w.position[size_t(qi)] = context - q_len + task.q0 + qi;
  const int64_t t_end = w.position[size_t(nq - 1)] + 1;  // the last query sees the most positions

  // A query's G rows of one kv head go in groups of 4 rows (then singly), sharing each key and value
  // row they load.
  auto for_each_group = [G](const auto& fn) {
    for (int64_t g0 = 0; g0 < G; g0 += G - g0 >= 4 ? 4 : 1) fn(g0, G - g0 >= 4 ? 4 : 1);
  };
  for (int64_t t0 = 0; t0 < t_end; t0 += kTile) {
    const int64_t n = std::min(kTile, t_end - t0);
    for (int64_t qi = 0; qi < nq; ++qi)
      w.visible[size_t(qi)] = std::clamp<int64_t>(w.position[size_t(qi)] + 1 - t0, 0, n);
    // Scores: each key row read once for the rows that see it.
    for (int64_t j = 0; j < n; ++j) {
      const T* k_position = position_row(c.k_cache, t0 + j);
      for (int64_t kv = 0; kv < K; ++kv) {
        const float* k = widened(k_position + kv * c.cache_stride[2], D, Dp, w.kv_row.data());
        for (int64_t qi = 0; qi < nq; ++qi) {
          if (j >= w.visible[size_t(qi)]) continue;
          for_each_group([&](int64_t g0, int64_t rows) {
            const int64_t r = qi * H + kv * G + g0;
            float* score = w.score.data() + r * kTile + j;
            if (rows == 4)
              score_rows<4>(w.q.data() + r * Dp, Dp, k, c.scale, score, kTile);
            else
              score_rows<1>(w.q.data() + r * Dp, Dp, k, c.scale, score, kTile);
          });
        }
      }
    }
    // Online softmax step of every row that sees this tile.
    for (int64_t r = 0; r < R; ++r) {
      const int64_t nv = w.visible[size_t(r / H)];
      if (nv == 0) continue;
      float* s = w.score.data() + r * kTile;
      float tile_max = kMinusInf;
      for (int64_t j = 0; j < nv; ++j) tile_max = std::max(tile_max, s[j]);
      const float m_new = std::max(w.m[size_t(r)], tile_max);
      // exp(-inf) = 0 on a row's first tile, where acc and l are still 0.
      const float alpha = exp_nonpositive(w.m[size_t(r)] - m_new);
#pragma omp simd
      for (int64_t j = 0; j < nv; ++j) s[j] = exp_nonpositive(s[j] - m_new);
      float sum = 0.0f;
      for (int64_t j = 0; j < nv; ++j) sum += s[j];
      w.m[size_t(r)] = m_new;
      w.l[size_t(r)] = w.l[size_t(r)] * alpha + sum;
      float* acc = w.acc.data() + r * Dp;
#pragma omp simd
      for (int64_t d = 0; d < Dp; ++d) acc[d] *= alpha;
    }
    // Values, kv head by kv head: each row adds its visible positions in ascending order.
    for (int64_t kv = 0; kv < K; ++kv) {
      auto accumulate = [&](const auto* const* v_rows) {
        using E = std::remove_cvref_t<decltype(*v_rows[0])>;
        for (int64_t qi = 0; qi < nq; ++qi)
          for_each_group([&](int64_t g0, int64_t rows) {
            const int64_t r = qi * H + kv * G + g0;
            float* acc = w.acc.data() + r * Dp;
            const float* p = w.score.data() + r * kTile;
            if (rows == 4)
              accumulate_rows<4, E>(acc, Dp, p, v_rows, 0, w.visible[size_t(qi)]);
            else
              accumulate_rows<1, E>(acc, Dp, p, v_rows, 0, w.visible[size_t(qi)]);
          });
      };
      const int64_t kv_offset = kv * c.cache_stride[2];
      if (D == Dp) {  // the cache rows as they are (bf16 widened as they are loaded)
        const T* v_rows[kTile];
        for (int64_t j = 0; j < n; ++j) v_rows[j] = position_row(c.v_cache, t0 + j) + kv_offset;
        accumulate(v_rows);
      } else {  // widened into rows of Dp with a zero tail, so no read passes the end of a cache row
        const float* v_rows[kTile];
        for (int64_t j = 0; j < n; ++j)
          v_rows[j] = widened(position_row(c.v_cache, t0 + j) + kv_offset, D, Dp, w.v_tile.data() + j * Dp);
        accumulate(v_rows);
      }
    }
  }

  for (int64_t r = 0; r < R; ++r) {
    const int64_t i = task.q0 + r / H, h = r % H;
    T* out_row = c.out + (first + i) * c.out_stride[0] + h * c.out_stride[1];
    const float* acc = w.acc.data() + r * Dp;
    const float inv_l = 1.0f / w.l[size_t(r)];
#pragma omp simd
    for (int64_t d = 0; d < D; ++d) store(out_row[d], acc[d] * inv_l);
  }
}

template <class T>
void forward(const PagedAttentionParams& params, const PagedAttentionDims& dims, TensorView q_NHD,
             TensorView k_cache_PZKD, TensorView v_cache_PZKD, TensorView out_NHD) {
  const int64_t G = dims.H / dims.K;
  const Call<T> c{params,
                  dims,
                  G,
                  round_up(dims.D, kLanes),
                  float(dims.scale),
                  q_NHD.data<T>(),
                  k_cache_PZKD.data<T>(),
                  v_cache_PZKD.data<T>(),
                  out_NHD.data<T>(),
                  {q_NHD.stride(0), q_NHD.stride(1)},
                  {out_NHD.stride(0), out_NHD.stride(1)},
                  {k_cache_PZKD.stride(0), k_cache_PZKD.stride(1), k_cache_PZKD.stride(2)}};
  RF_CHECK(v_cache_PZKD.strides() == k_cache_PZKD.strides(), "cpu paged_attention: k and v caches must share strides, "
           "got {} and {}", k_cache_PZKD.describe(), v_cache_PZKD.describe());
  const int64_t queries_per_task = std::max<int64_t>(1, kRowBlock / dims.H);
  std::vector<Task> tasks;
  int64_t work = 0;
  for (int64_t s = 0; s < dims.S; ++s) {
    const int64_t q_len = params.query_start[size_t(s) + 1] - params.query_start[size_t(s)];
    for (int64_t q0 = 0; q0 < q_len; q0 += queries_per_task)
      tasks.push_back({int32_t(s), int32_t(q0), int32_t(std::min(queries_per_task, q_len - q0))});
    work += q_len * params.context_len[size_t(s)] * dims.H * dims.D;
  }
  const int64_t num_tasks = int64_t(tasks.size());
#pragma omp parallel if (work >= kMinParallelWork && num_tasks > 1)
  {
    Scratch scratch(queries_per_task, dims.H, c.Dp);
#pragma omp for schedule(dynamic)
    for (int64_t t = 0; t < num_tasks; ++t) run_task(c, tasks[size_t(t)], scratch);
  }
}

}  // namespace

void paged_attention_forward(const PagedAttentionParams& p, TensorView q_NHD, TensorView k_cache_PZKD,
                             TensorView v_cache_PZKD, TensorView out_NHD) {
  const PagedAttentionDims dims = check_paged_attention_args(p, q_NHD, k_cache_PZKD, v_cache_PZKD, out_NHD);
  switch (q_NHD.dtype()) {
    case DType::f32: return forward<float>(p, dims, q_NHD, k_cache_PZKD, v_cache_PZKD, out_NHD);
    case DType::bf16: return forward<bf16>(p, dims, q_NHD, k_cache_PZKD, v_cache_PZKD, out_NHD);
    default: RF_CHECK(false, "cpu paged_attention_forward: {} runs on ref", dtype_name(q_NHD.dtype()));
  }
}

// A row copy per (token, kv head): K*D elements of the dtype, no arithmetic.
void kv_cache_write(TensorView k_NKD, TensorView v_NKD, TensorView slot_mapping_N, TensorView k_cache_PZKD,
                    TensorView v_cache_PZKD) {
  const int64_t N = check_kv_cache_write_args(k_NKD, v_NKD, slot_mapping_N, k_cache_PZKD, v_cache_PZKD);
  RF_CHECK(k_cache_PZKD.dtype() != DType::f64, "cpu kv_cache_write: f64 runs on ref");
  const int64_t Z = k_cache_PZKD.size(1), K = k_cache_PZKD.size(2), D = k_cache_PZKD.size(3);
  const size_t es = k_cache_PZKD.element_size(), row_bytes = size_t(D) * es;
  auto* const k_dst = static_cast<std::byte*>(k_cache_PZKD.raw());
  auto* const v_dst = static_cast<std::byte*>(v_cache_PZKD.raw());
  const auto* const k_src = static_cast<const std::byte*>(k_NKD.raw());
  const auto* const v_src = static_cast<const std::byte*>(v_NKD.raw());
#pragma omp parallel for schedule(static) if (N * K * D >= kMinParallelElements)
  for (int64_t n = 0; n < N; ++n) {
    const int64_t slot = slot_of(slot_mapping_N, n);
    if (slot < 0) continue;
    for (int64_t kv = 0; kv < K; ++kv) {
      const int64_t src_at = n * k_NKD.stride(0) + kv * k_NKD.stride(1);
      const int64_t v_src_at = n * v_NKD.stride(0) + kv * v_NKD.stride(1);
      const int64_t k_at = (slot / Z) * k_cache_PZKD.stride(0) + (slot % Z) * k_cache_PZKD.stride(1) +
                           kv * k_cache_PZKD.stride(2);
      const int64_t v_at = (slot / Z) * v_cache_PZKD.stride(0) + (slot % Z) * v_cache_PZKD.stride(1) +
                           kv * v_cache_PZKD.stride(2);
      std::memcpy(k_dst + k_at * int64_t(es), k_src + src_at * int64_t(es), row_bytes);
      std::memcpy(v_dst + v_at * int64_t(es), v_src + v_src_at * int64_t(es), row_bytes);
    }
  }
}

}  // namespace rf::kernels::RF_CPU_NS

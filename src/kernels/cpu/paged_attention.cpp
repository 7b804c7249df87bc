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
//  - out = acc * (1 / l), rounded to the dtype once; lse (when asked for) = m + log(l).
// A task takes every head of up to kRowBlock / H consecutive queries of one sequence, so that it reads
// each position's keys and values of all kv heads as one contiguous [K, D] run of the pool (decode
// tasks hold one query). Per tile it computes the scores of all its (position, row) pairs, kPairs at a
// time (on AVX-512 the 16 dot products' lane trees are added together by shuffles, each pair getting
// exactly the additions of the tree above), keeps them position-major so the online softmax runs
// across rows with each row's own sequence of operations, and adds the values with the G query heads
// of a kv head in groups of 4, 2 or 1 rows sharing each value row they load. Grouping only interleaves
// independent computations: a row's softmax takes only the positions it sees (the scores of the
// others, computed for a later query of the task, are left out, never masked in), and a query's rows
// skip the tiles they would not see alone, so a row's operations are exactly those it performs alone.
// Tasks are spread over threads dynamically; no row is split, so the thread count changes nothing.
// Where the cpu variants differ (vector width), each is invariant on its own.
//
// bf16: keys, values and queries are widened to f32 (exact) and all arithmetic is f32, as for f32;
// only out is rounded. (The compiler contracts a * b + c into FMAs; that too is fixed per variant.)
// Speed (bench/rollout_kernel_bench.cpp): a decode step reads every cached position of its sequences
// once, from blocks anywhere in the pool, which the hardware prefetcher finds late; the scores no
// longer pay a horizontal add and a call per (position, head), so the next tile's rows are requested
// while this tile's scores are computed. Not here: a dpbf16 or AMX path, sliding windows, ALiBi,
// soft-capping.
// Legend: N query rows, S sequences, P cache blocks, Z tokens per block, H query heads, K kv heads,
// D head dim (Dp: D rounded up to kLanes), G = H / K; R rows of a task, j a position of a tile.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
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
constexpr int64_t kPairs = 16;     // (position, row) scores computed together
// Below this many score multiply-adds a call stays on the calling thread.
constexpr int64_t kMinParallelWork = int64_t(1) << 15;
constexpr float kMinusInf = -std::numeric_limits<float>::infinity();

int64_t round_up(int64_t x, int64_t multiple) { return (x + multiple - 1) / multiple * multiple; }

#if defined(__AVX512F__)
// GCC 12's AVX-512 shuffle and permute intrinsics start from _mm512_undefined_ps(), which
// -Wmaybe-uninitialized reports at every use.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// Keys as they are in the cache: each dot product loads its key row's chunks itself (masked past D,
// widened from bf16 in registers).
constexpr bool kKeysInPlace = true;

template <class T>
__m512 load_chunk(const T* x, __mmask16 mask) {
  if constexpr (std::is_same_v<T, float>) {
    return _mm512_maskz_loadu_ps(mask, x);
  } else {
    const __m512i widened = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(mask, x));
    return _mm512_castsi512_ps(_mm512_slli_epi32(widened, 16));
  }
}

// score[i] = scale * (q[i] . k[i]) for kPairs (query row, key row) pairs: q rows of Dp (zero past D),
// k rows of D elements. Each dot in the fixed order described at the top (lane l sums q[d] k[d] over
// d = l mod kLanes in ascending d, then the pairwise tree: lanes l and l + 8, then l + 4, l + 2, l + 1),
// the 16 trees evaluated together: each step adds, for every pair, exactly the lanes the tree adds
// (the portable reduce_lanes below does the same one pair at a time).
template <class T>
void score_pairs(const float* const* q, const T* const* k, int64_t D, int64_t Dp, float scale, float* score) {
  __m512 part[kPairs];
  for (int64_t i = 0; i < kPairs; ++i) part[i] = _mm512_setzero_ps();
  for (int64_t d0 = 0; d0 < Dp; d0 += kLanes) {
    const __mmask16 mask = D - d0 >= kLanes ? __mmask16(0xffff) : __mmask16((1u << (D - d0)) - 1);
    for (int64_t i = 0; i < kPairs; ++i)
      part[i] = _mm512_fmadd_ps(_mm512_loadu_ps(q[i] + d0), load_chunk(k[i] + d0, mask), part[i]);
  }
  // Lanes l + (l + 8): pairs 2i and 2i + 1 side by side, 8 lanes each.
  __m512 half[8];
  for (int i = 0; i < 8; ++i)
    half[i] = _mm512_add_ps(_mm512_shuffle_f32x4(part[2 * i], part[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                            _mm512_shuffle_f32x4(part[2 * i], part[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  // l + (l + 4): 128-bit lane m of quarter[i] holds pair 4i + m.
  __m512 quarter[4];
  for (int i = 0; i < 4; ++i)
    quarter[i] = _mm512_add_ps(_mm512_shuffle_f32x4(half[2 * i], half[2 * i + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                               _mm512_shuffle_f32x4(half[2 * i], half[2 * i + 1], _MM_SHUFFLE(3, 1, 3, 1)));
  // l + (l + 2): lane m of eighth[i] holds pairs 8i + m (elements 0, 1) and 8i + 4 + m (2, 3).
  __m512 eighth[2];
  for (int i = 0; i < 2; ++i)
    eighth[i] = _mm512_add_ps(_mm512_shuffle_ps(quarter[2 * i], quarter[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                              _mm512_shuffle_ps(quarter[2 * i], quarter[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  // l + (l + 1): element 4m + e holds pair m + 4e; put pair i at element i.
  const __m512 sums = _mm512_add_ps(_mm512_shuffle_ps(eighth[0], eighth[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                    _mm512_shuffle_ps(eighth[0], eighth[1], _MM_SHUFFLE(3, 1, 3, 1)));
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  _mm512_storeu_ps(score, _mm512_mul_ps(_mm512_permutexvar_ps(order, sums), _mm512_set1_ps(scale)));
}
#pragma GCC diagnostic pop
#else
// Keys widened to f32 rows of Dp (zero past D) first, unless they are f32 rows of Dp already.
constexpr bool kKeysInPlace = false;

// The lanes' partial sums added pairwise: lanes l and l + 8, then l + 4, l + 2, l + 1.
float reduce_lanes(float* part) {
  for (int64_t width = kLanes / 2; width > 0; width /= 2) {
#pragma omp simd
    for (int64_t l = 0; l < width; ++l) part[l] += part[l + width];
  }
  return part[0];
}

// score[i] = scale * (q[i] . k[i]) for kPairs (query row, key row) pairs, rows of Dp: lane l sums
// q[d] k[d] over d = l mod kLanes in ascending d, then reduce_lanes.
void score_pairs(const float* const* q, const float* const* k, int64_t, int64_t Dp, float scale, float* score) {
  for (int64_t i = 0; i < kPairs; ++i) {
    float part[kLanes] = {};
    for (int64_t d0 = 0; d0 < Dp; d0 += kLanes) {
#pragma omp simd
      for (int64_t l = 0; l < kLanes; ++l) part[l] += q[i][d0 + l] * k[i][d0 + l];
    }
    score[i] = reduce_lanes(part) * scale;
  }
}
#endif

// acc_r[d] += p_r[j] v_j[d] for positions j in [0, n), in ascending j, for kRows consecutive rows
// (acc row stride Dp; p_r[j] = p[j * p_stride + r]), over kWidth elements from d0. The chunk of each
// row's accumulator stays in registers over the positions, and a position's kWidth values are read
// at once; each element still takes its additions in ascending j, the same sequence as one row alone.
template <int kRows, int64_t kWidth, class T>
void accumulate_chunk(float* acc, int64_t Dp, int64_t d0, const float* p, int64_t p_stride, const T* const* v_rows,
                      int64_t n) {
  float a[kRows][kWidth];
  for (int r = 0; r < kRows; ++r)
    for (int64_t l = 0; l < kWidth; ++l) a[r][l] = acc[r * Dp + d0 + l];
  for (int64_t j = 0; j < n; ++j) {
    const T* v = v_rows[j] + d0;
    for (int r = 0; r < kRows; ++r) {
      const float pr = p[j * p_stride + r];
#pragma omp simd
      for (int64_t l = 0; l < kWidth; ++l) a[r][l] += pr * load(v[l]);
    }
  }
  for (int r = 0; r < kRows; ++r)
    for (int64_t l = 0; l < kWidth; ++l) acc[r * Dp + d0 + l] = a[r][l];
}

// All Dp elements: chunks of 4 kLanes (a 256-byte f32 row of 64 in one pass over the positions),
// then of kLanes.
template <int kRows, class T>
void accumulate_rows(float* acc, int64_t Dp, const float* p, int64_t p_stride, const T* const* v_rows, int64_t n) {
  constexpr int64_t kWide = 4 * kLanes;
  int64_t d0 = 0;
  for (; d0 + kWide <= Dp; d0 += kWide) accumulate_chunk<kRows, kWide>(acc, Dp, d0, p, p_stride, v_rows, n);
  for (; d0 < Dp; d0 += kLanes) accumulate_chunk<kRows, kLanes>(acc, Dp, d0, p, p_stride, v_rows, n);
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

// One thread's scratch, sized once per call: the rows R = num_queries x H of queries and
// accumulators, a tile's scores position-major (score_t[j * R + r]), the rows' softmax state, a tile
// of widened key rows (K per position) and of value rows. Zeroed once, so the padding of every row
// past D stays 0.
struct Scratch {
  Scratch(int64_t num_queries, int64_t H, int64_t K, int64_t Dp)
      : q(size_t(num_queries * H * Dp), 0.0f),
        acc(size_t(num_queries * H * Dp), 0.0f),
        k_tile(kKeysInPlace ? 0 : size_t(kTile * K * Dp), 0.0f),
        v_tile(size_t(kTile * Dp), 0.0f),
        score_t(size_t(kTile * num_queries * H + kPairs)),
        m(size_t(num_queries * H)),
        l(size_t(num_queries * H)),
        alpha(size_t(num_queries * H)),
        sum(size_t(num_queries * H)),
        visible(size_t(num_queries * H)),
        key_offset(size_t(num_queries * H)),
        widened_key_offset(size_t(num_queries * H)),
        position(size_t(num_queries)) {}
  std::vector<float> q, acc, k_tile, v_tile, score_t, m, l, alpha, sum;
  std::vector<int32_t> visible;  // per row: positions of the tile it sees (32 bits, as the floats it masks)
  std::vector<int64_t> key_offset, widened_key_offset;  // per row: its kv head in a position's keys
  std::vector<int64_t> position;
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

// The tile's scores, score_t[j * R + r] = scale * (q_r . k_r(j)), for every (position, row) pair of
// the tile, kPairs at a time, position-major (a row's score depends on its own pair alone, so the
// grouping is free). Row r's key at position j is position_rows[j] + key_offset[r] (its kv head's).
// Pairs a row does not see are computed from keys of the tile all the same (their positions are in
// the cache: a later query of the task sees them) and left out by the softmax.
template <class E, class Hook>
void tile_scores(const float* q, int64_t R, int64_t D, int64_t Dp, float scale, int64_t n,
                 const E* const* position_rows, const int64_t* key_offset, float* score_t, const Hook& after_group) {
  const int64_t num_pairs = n * R;
  int64_t j = 0, r = 0;  // the pair f0 + i
  for (int64_t f0 = 0; f0 < num_pairs; f0 += kPairs) {
    const float* qs[kPairs];
    const E* ks[kPairs];
    for (int64_t i = 0; i < kPairs; ++i) {
      qs[i] = q + r * Dp;
      ks[i] = position_rows[j] + key_offset[r];
      if (f0 + i + 1 < num_pairs && ++r == R) {  // the last group repeats its last pair
        r = 0;
        ++j;
      }
    }
    score_pairs(qs, ks, D, Dp, scale, score_t + f0);  // score_t has kPairs floats of slack
    after_group();
  }
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
  for (int64_t r = 0; r < R; ++r) {  // where row r's kv head starts in a position's keys
    w.key_offset[size_t(r)] = (r % H) / G * c.cache_stride[2];
    w.widened_key_offset[size_t(r)] = (r % H) / G * Dp;
  }
  for (int64_t qi = 0; qi < nq; ++qi) w.position[size_t(qi)] = context - q_len + task.q0 + qi;
  const int64_t t_end = w.position[size_t(nq - 1)] + 1;  // the last query sees the most positions

  // A query's G rows of one kv head go in groups of 4, then 2, then 1 rows, sharing each value row
  // they load.
  auto for_each_group = [G](const auto& fn) {
    for (int64_t g0 = 0; g0 < G;) {
      const int64_t rows = G - g0 >= 4 ? 4 : G - g0 >= 2 ? 2 : 1;
      fn(g0, rows);
      g0 += rows;
    }
  };
  float* const score_t = w.score_t.data();
  // The next tile's cache rows (keys and values, line by line) are requested while this tile's scores
  // are computed, a few lines after each group of pairs, rather than all at once (which measured no
  // better than not at all): decode is bound by these reads.
  const int64_t row_lines = (K * c.cache_stride[2] * int64_t(sizeof(T)) + 63) / 64;  // a position's K heads
  const int64_t groups_per_tile = (std::min(kTile, t_end) * R + kPairs - 1) / kPairs;
  const int64_t lines_per_group = std::max<int64_t>(1, (2 * row_lines * kTile + groups_per_tile - 1) / groups_per_tile);
  int64_t prefetch_t = 0, prefetch_end = 0, prefetch_line = 0;  // position t's line; positions < end
  const char* prefetch_rows[2] = {nullptr, nullptr};              // position t's keys and values
  auto prefetch_some = [&] {
    for (int64_t i = 0; i < lines_per_group && prefetch_t < prefetch_end; ++i) {
      if (prefetch_line == 0) {
        prefetch_rows[0] = reinterpret_cast<const char*>(position_row(c.k_cache, prefetch_t));
        prefetch_rows[1] = reinterpret_cast<const char*>(position_row(c.v_cache, prefetch_t));
      }
      __builtin_prefetch(prefetch_rows[prefetch_line & 1] + (prefetch_line >> 1) * 64);
      if (++prefetch_line == 2 * row_lines) {
        prefetch_line = 0;
        ++prefetch_t;
      }
    }
  };
  for (int64_t t0 = 0; t0 < t_end; t0 += kTile) {
    const int64_t n = std::min(kTile, t_end - t0);
    prefetch_t = t0 + kTile;  // lines of this tile not requested by now are left to the hardware
    prefetch_end = std::min(t0 + 2 * kTile, t_end);
    prefetch_line = 0;
    for (int64_t r = 0; r < R; ++r)
      w.visible[size_t(r)] = int32_t(std::clamp<int64_t>(w.position[size_t(r / H)] + 1 - t0, 0, n));
    if constexpr (kKeysInPlace) {
      const T* position_rows[kTile];
      for (int64_t j = 0; j < n; ++j) position_rows[j] = position_row(c.k_cache, t0 + j);
      tile_scores(w.q.data(), R, D, Dp, c.scale, n, position_rows, w.key_offset.data(), score_t, prefetch_some);
    } else if (std::is_same_v<T, float> && D == Dp) {
      const float* position_rows[kTile];
      for (int64_t j = 0; j < n; ++j) position_rows[j] = reinterpret_cast<const float*>(position_row(c.k_cache, t0 + j));
      tile_scores(w.q.data(), R, D, Dp, c.scale, n, position_rows, w.key_offset.data(), score_t, prefetch_some);
    } else {  // widened: position j's kv heads at k_tile[(j * K + kv) * Dp], so the offsets are Dp apart
      const float* position_rows[kTile];
      for (int64_t j = 0; j < n; ++j) {
        for (int64_t kv = 0; kv < K; ++kv)
          widened(position_row(c.k_cache, t0 + j) + kv * c.cache_stride[2], D, Dp, w.k_tile.data() + (j * K + kv) * Dp);
        position_rows[j] = w.k_tile.data() + j * K * Dp;
      }
      tile_scores(w.q.data(), R, D, Dp, c.scale, n, position_rows, w.widened_key_offset.data(), score_t,
                  prefetch_some);
    }
    // Online softmax step of every row, across rows (each row's values in the order of the definition:
    // positions ascending); a row that sees none of the tile keeps its state.
    float* const m = w.m.data();
    float* const l = w.l.data();
    float* const alpha = w.alpha.data();
    float* const sum = w.sum.data();
    const int32_t* const visible = w.visible.data();
#pragma omp simd
    for (int64_t r = 0; r < R; ++r) sum[r] = kMinusInf;  // the tile's max, for now
    for (int32_t j = 0; j < int32_t(n); ++j) {
      const float* s = score_t + j * R;
#pragma omp simd
      for (int64_t r = 0; r < R; ++r) sum[r] = select((j < visible[r]) & (s[r] > sum[r]), s[r], sum[r]);
    }
#pragma omp simd
    for (int64_t r = 0; r < R; ++r) {
      const float m_new = select(sum[r] > m[r], sum[r], m[r]);
      // exp(-inf) = 0 on a row's first tile, where acc and l are still 0.
      alpha[r] = select(visible[r] > 0, exp_nonpositive(m[r] - m_new), 1.0f);
      m[r] = m_new;
      sum[r] = 0.0f;
    }
    for (int32_t j = 0; j < int32_t(n); ++j) {
      float* s = score_t + j * R;
#pragma omp simd
      for (int64_t r = 0; r < R; ++r) {
        const float p = exp_nonpositive(s[r] - m[r]);
        s[r] = p;
        sum[r] += select(j < visible[r], p, 0.0f);  // + 0 leaves a sum of positive terms as it is
      }
    }
#pragma omp simd
    for (int64_t r = 0; r < R; ++r) l[r] = select(visible[r] > 0, l[r] * alpha[r] + sum[r], l[r]);
    for (int64_t r = 0; r < R; ++r) {
      if (visible[r] == 0) continue;
      float* acc = w.acc.data() + r * Dp;
      const float a = alpha[r];
#pragma omp simd
      for (int64_t d = 0; d < Dp; ++d) acc[d] *= a;
    }
    // Values, kv head by kv head: each row adds its visible positions in ascending order.
    for (int64_t kv = 0; kv < K; ++kv) {
      auto accumulate = [&](const auto* const* v_rows) {
        using E = std::remove_cvref_t<decltype(*v_rows[0])>;
        for (int64_t qi = 0; qi < nq; ++qi) {
          const int64_t nv = w.visible[size_t(qi * H)];
          if (nv == 0) continue;
          for_each_group([&](int64_t g0, int64_t rows) {
            const int64_t r = qi * H + kv * G + g0;
            float* acc = w.acc.data() + r * Dp;
            const float* p = score_t + r;
            if (rows == 4)
              accumulate_rows<4, E>(acc, Dp, p, R, v_rows, nv);
            else if (rows == 2)
              accumulate_rows<2, E>(acc, Dp, p, R, v_rows, nv);
            else
              accumulate_rows<1, E>(acc, Dp, p, R, v_rows, nv);
          });
        }
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
  const TensorView& lse = c.params.lse_NH;
  if (!lse.empty()) {
    float* const lse_data = lse.data<float>();
    for (int64_t r = 0; r < R; ++r)
      lse_data[(first + task.q0 + r / H) * lse.stride(0) + (r % H) * lse.stride(1)] =
          w.m[size_t(r)] + std::log(w.l[size_t(r)]);
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
    Scratch scratch(queries_per_task, dims.H, dims.K, c.Dp);
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

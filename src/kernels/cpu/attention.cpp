// Fast GQA attention on the CPU, causal or in span mode (attention.h): a tiled online-softmax kernel
// in the manner of flash-attention 2, forward and backward, for f32 and bf16 tensors, with f32
// softmax statistics and accumulators. The T x T score matrix never exists: a task walks key tiles, and the backward
// recomputes the probabilities from the saved lse.
//
// Tiling. A task works on one (b, kv head) and its "query rows", the (query, head) pairs of the G
// heads sharing the kv head (row r is query t0 + r / G of head g = r % G), so each key/value tile
// serves the whole group. Key tiles hold kKeyBlock keys, start at multiples of it and are clipped to
// documents, so no tile needs a document mask and only tiles on the causal diagonal a causal one.
// Against a key tile, the query rows that see it go in panels of kPanel lanes. Score tiles are S^T:
// keys on the rows, query rows on the vector lanes, so a row's softmax statistics (max, sum, lse,
// delta) are per-lane values with no horizontal reductions, the query side is transposed once per
// task, and key/value tiles are only copied, never transposed. On the diagonal the GEMMs
// skip the masked part in 4-key x 16-lane blocks and the softmax its masked 16-lane blocks.
// GEMM microkernels: attention_gemm.h; packing and scratch: attention_tiles.h; softmax steps:
// attention_softmax.h.
//
// Forward, per task: Q^T packed once; for each key tile from the document start of the task's first
// query up to its last query: S^T = K Q^T; the running max m and sum l of each query row;
// O = diag(alpha) O + P V. Then out = O / l, rounded to the dtype once, and lse = m + log(l) (natural
// log of the scaled scores, as the ref kernel).
// Backward (FA2), per task, owning dK and dV of its keys: Q and dO of every query row that sees its
// keys packed once (transposed, and as rows), lse and delta = rowsum(dO * O); for each key tile and
// panel: S^T = K Q^T, P^T = exp(scale S^T - lse), dP^T = V dO^T, dS^T = P^T (dP^T - delta);
// dV += P^T dO and dK += scale dS^T Q (summed over the group's heads), dQ += scale dS K.
//
// Tasks and determinism: every output element is written by exactly one task, which sums in a fixed
// order, so results are bitwise identical whatever the thread count. With B*K >= kMinTasks (the
// training shapes) a task is a whole (b, kv): the backward task adds dQ of all its queries in a
// private buffer. With fewer (b, kv) pairs (B = 1 with long rows) each row is split into chunks of
// key blocks of about equal causal work, so that every thread has work: forward chunks of queries are
// independent; backward chunks of keys each add into their own dQ buffer and a last pass sums a
// query's chunks in chunk order. The chunk count depends on the shapes only, never on the threads.
//
// Span mode (params.spans) runs on the same tiles, panels, GEMMs and softmax steps with no mask: a
// task's key tiles are kKeyBlock keys of its span's key range, and every lane of the span's query
// rows sees every key of a tile (visible count nk, nothing skipped). Forward tasks are chunks of a
// span's queries against all its keys; backward tasks chunks of a span's keys with all its queries,
// adding dQ into the task's scratch (one chunk) or a buffer per chunk summed in chunk order (split
// spans). The chunk count depends on the spans' shapes only, so results are again bitwise the same
// whatever the thread count. Rows no span covers are written directly: out 0 and lse -inf, zero
// gradients.
//
// RoPE fused into the load (params.rope): a task copies the query rows it packs, and each key tile
// its keys, into a small per-thread stage, rotating them with the call's angle table
// (rope_angles.h) on the way, and packs from there; dQ and dK are rotated back as they are written
// from their f32 accumulators. So q and k are read from memory once, as without RoPE, instead of the
// separate kernel's read-rotate-write pass over each, forward and backward. The rotation is the
// RoPE kernel's own (same f32 angles, same expression), so f32 results match rope_forward +
// attention bit for bit in the forward; the backward rounds dQ and dK once instead of twice.
//
// bf16: tiles stay bf16 and the GEMMs run on _mm512_dpbf16_ps (AVX512-BF16) with f32 accumulation;
// P and dS are rounded to bf16 before their GEMMs, as flash-attention does on GPUs (the softmax sum and
// dS take the unrounded P). Builds without AVX512-BF16 widen bf16 into f32 tiles and round P and dS the
// same way. This CPU (Zen 4) has AVX512-BF16 but no AMX; an AMX tile path would be another GEMM format
// in attention_gemm.h, with the same packing.
//
// Scratch, per thread and sized once per call: a task's packed query rows (forward: Q^T and O;
// backward: Q and dO in two layouts, and dQ), O(T G D) each, plus one score tile and one key tile.
// Not here: dropout, sliding windows, f64 (the ref kernel serves f64), RoPE in span mode (its q and k
// come rotated), and a split of very long rows' query side that would bound that scratch.
// Legend: B batch, T sequence, H query heads, K kv heads, D head dim, G = H/K heads per kv head;
// Dp = D padded to a multiple of kLaneBlock (16); P elements per GEMM word (1 for f32, 2 for bf16
// pairs); M query rows of a task, `lanes` = M padded to kLaneBlock; c a key of a tile, L0/L a panel's
// first lane and lanes.
#include <algorithm>
#include <cmath>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/attention_args.h"
#include "kernels/cpu/attention_gemm.h"
#include "kernels/cpu/attention_softmax.h"
#include "kernels/cpu/attention_tiles.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/rope_angles.h"

namespace rf::kernels::RF_CPU_NS {
namespace {

#if defined(__AVX512F__)
using F32Ops = F32x16;
#elif defined(__AVX2__) && defined(__FMA__)
using F32Ops = F32x8;
#else
using F32Ops = F32x4;
#endif
#if defined(__AVX512BF16__)
using Bf16Ops = Bf16Pairs;
#else
using Bf16Ops = F32Ops;  // bf16 widened into f32 tiles
#endif
template <class E>
using OpsFor = std::conditional_t<std::is_same_v<E, bf16>, Bf16Ops, F32Ops>;

constexpr int64_t kMinTasks = 8;  // see num_chunks (kernel_bench's config has B*K = 32)
// Below this many score multiply-adds a call runs on one thread: waking the pool costs more.
constexpr int64_t kMinParallelWork = int64_t(1) << 15;

// Multiply-adds of the causal scores if each row were one document (an upper bound).
int64_t score_work(const AttentionDims& dims) { return dims.B * dims.H * dims.T * (dims.T + 1) / 2 * dims.D; }

// How a task's query rows see a key tile: causally (a query sees the keys up to itself, inside its
// document), or all of it (span mode: a span's queries see every key of the span).
enum class Mask : uint8_t { causal, none };

// The call's tensors and sizes.
template <class E>
struct Call {
  Call(const AttentionParams& params, const AttentionDims& dims, const TensorView& q_BTHD, const TensorView& k_BTKD,
       const TensorView& v_BTKD, const TensorView& out_BTHD, const TensorView& lse_BHT, const RopeAngleTable* rope)
      : cu_seqlens(params.cu_seqlens),
        spans(params.spans),
        mask(params.spans.empty() ? Mask::causal : Mask::none),
        dims(dims),
        G(dims.H / dims.K),
        Dp(round_up(dims.D, kLaneBlock)),
        scale(float(dims.scale)),
        q(q_BTHD),
        k(k_BTKD),
        v(v_BTKD),
        out(out_BTHD),
        lse(lse_BHT),
        rope(rope) {}
  DocumentSpan document(int64_t b, int64_t t) const { return document_of(cu_seqlens, b, dims.T, t); }
  // Token (b, t)'s cosines then sines, when RoPE is fused.
  const float* angles(int64_t b, int64_t t) const { return rope->row(b * dims.T + t); }

  std::span<const int32_t> cu_seqlens;
  std::span<const AttentionSpan> spans;
  Mask mask;
  AttentionDims dims;
  int64_t G, Dp;
  float scale;
  Rows<E> q, k, v, out;
  LseRows lse;
  const RopeAngleTable* rope;  // null unless RoPE is fused into the load
};

template <class E>
struct Grads {
  Rows<E> dout, dq, dk, dv;
};

// ---------------------------------------------------------------------------------------------
// Tasks and tiles

// Chunks per row: each row's queries (forward) or keys (backward) are split until there are
// kMinTasks tasks, so one long row still keeps every thread busy. Shapes only, not the thread count.
int64_t num_chunks(const AttentionDims& dims) {
  const int64_t num_blocks = (dims.T + kKeyBlock - 1) / kKeyBlock;
  return std::min(num_blocks, (kMinTasks + dims.B * dims.K - 1) / (dims.B * dims.K));
}

enum class ChunkOf : uint8_t { queries, keys };

// The first token of each of num_chunks chunks of kKeyBlock blocks, then T: runs of at least one
// block and about equal causal work, each ending at the block boundary nearest its share. Query
// block j sees the keys of blocks 0..j (weighs j + 1); key block j is seen by blocks j.. (num_blocks - j).
std::vector<int64_t> chunk_starts(int64_t T, int64_t num_chunks, ChunkOf what) {
  const int64_t num_blocks = (T + kKeyBlock - 1) / kKeyBlock;
  const int64_t total = num_blocks * (num_blocks + 1) / 2;
  auto weight = [&](int64_t block) { return what == ChunkOf::queries ? block + 1 : num_blocks - block; };
  std::vector<int64_t> starts{0};
  int64_t block = 0, done = 0;
  for (int64_t c = 1; c < num_chunks; ++c) {
    // Take blocks while the next one's midpoint is still short of c / num_chunks of the work.
    do done += weight(block++);
    while (block < num_blocks - (num_chunks - c) && (2 * done + weight(block)) * num_chunks < 2 * c * total);
    starts.push_back(block * kKeyBlock);
  }
  starts.push_back(T);
  return starts;
}

// What one task works on: queries [q_lo, q_hi) and keys [k_lo, k_hi) of row b (row-local positions;
// k's row b has Tk keys).
struct Block {
  int64_t b, q_lo, q_hi, k_lo, k_hi;
};

// Part of a task's query rows (lanes; row r is query t_base + r / G of head r % G of the group) that
// one key tile meets: lanes [L0, L0 + L), starting on a lane block, of which rows [row_lo, row_hi)
// see the tile; they see its first nk keys at most (the others are masked for every lane). Key c
// of the tile is seen from lane key_lane + c G of the panel on (causality).
struct Panel {
  int64_t L0, L, row_lo, row_hi, nk, key_lane;
};

// What causality leaves of a panel's GEMMs, per block of rows (see BlockRange): GEMMs with the keys on
// the rows skip the lanes (columns, or words of P lanes) before a block's first key is seen; GEMMs
// with the panel's rows on the rows (from row_lo) reduce over the keys the block's last row sees.
struct KeysSkipLanes {
  BlockRange operator()(int64_t c0, int64_t) const { return {.column = key_lane + c0 * G}; }
  int64_t key_lane, G;
};
struct KeysSkipLaneWords {
  BlockRange operator()(int64_t c0, int64_t) const {
    return {.word_begin = std::max<int64_t>(0, key_lane + c0 * G) / P};
  }
  int64_t key_lane, G, P;
};
struct RowsSeeKeyWords {
  BlockRange operator()(int64_t i0, int64_t rows) const { return {.word_end = (n[i0 + rows - 1] + P - 1) / P}; }
  const int32_t* n;  // visible keys of the GEMM's first row on
  int64_t P;
};

// Visible keys of each lane of the panel in a key tile starting at s0: causal, a query sees the keys
// up to itself; unmasked, all nk; rows outside [row_lo, row_hi) (an earlier query, another document,
// padding) none.
void visible_keys(const Panel& panel, Mask mask, int64_t t_base, int64_t G, int64_t s0, int32_t* n) {
  if (mask == Mask::none) {
    for (int64_t r = panel.L0; r < panel.L0 + panel.L; ++r)
      n[r - panel.L0] = r >= panel.row_lo && r < panel.row_hi ? int32_t(panel.nk) : 0;
    return;
  }
  for_each_row(t_base, 0, G, panel.L0, panel.L0 + panel.L, [&](int64_t r, int64_t t, int64_t) {
    n[r - panel.L0] = r >= panel.row_lo && r < panel.row_hi ? int32_t(std::min(t - s0 + 1, panel.nk)) : 0;
  });
}

// One key tile of a task: keys [s0, s0 + nk), and the task's query rows [r_first, r_end) that see
// them (causal: queries from max(s0, t_base) to the end of the keys' document or of the task's
// queries; unmasked: all of them).
struct KeyTile {
  int64_t s0, nk, r_first, r_end;
  Mask mask;
};

// Calls on_tile(tile) for the key tiles of [k_lo, k_hi) of row b, for a task whose query rows start
// at query t_base and end before query q_end. Causal: tiles clipped to kKeyBlock blocks and to
// documents (so no tile needs a document mask, and only tiles on the diagonal a causal one). Span
// mode: kKeyBlock keys from k_lo on (the span's keys: no mask, every query row sees every tile).
template <class E, class OnTile>
void for_each_key_tile(const Call<E>& call, int64_t b, int64_t k_lo, int64_t k_hi, int64_t t_base, int64_t q_end,
                       const OnTile& on_tile) {
  if (call.mask == Mask::none) {
    for (int64_t s0 = k_lo; s0 < k_hi; s0 += kKeyBlock)
      on_tile(KeyTile{s0, std::min(kKeyBlock, k_hi - s0), 0, (q_end - t_base) * call.G, Mask::none});
    return;
  }
  for (int64_t s0 = k_lo; s0 < k_hi;) {
    const DocumentSpan doc = call.document(b, s0);
    const int64_t s1 = std::min({k_hi, doc.end, (s0 / kKeyBlock + 1) * kKeyBlock});
    on_tile(KeyTile{s0, s1 - s0, (std::max(s0, t_base) - t_base) * call.G, (std::min(doc.end, q_end) - t_base) * call.G,
                    Mask::causal});
    s0 = s1;
  }
}

// Calls on_panel(panel) for the panels of a key tile's query rows (the task has `lanes` lanes from
// query t_base), with each lane's visible key count in n.
template <class OnPanel>
void for_each_panel(const KeyTile& tile, int64_t t_base, int64_t G, int64_t lanes, int32_t* n,
                    const OnPanel& on_panel) {
  for (int64_t L0 = tile.r_first / kLaneBlock * kLaneBlock; L0 < tile.r_end; L0 += kPanel) {
    // Unmasked: every lane sees every key (key_lane + c G <= 0 for all c), so the GEMMs skip nothing.
    Panel panel{L0, std::min(kPanel, lanes - L0), std::max(L0, tile.r_first), 0, tile.nk, -tile.nk * G};
    panel.row_hi = std::min(L0 + panel.L, tile.r_end);
    if (tile.mask == Mask::causal) {
      panel.nk = std::min(tile.nk, t_base + (panel.row_hi - 1) / G - tile.s0 + 1);
      panel.key_lane = (tile.s0 - t_base) * G - L0;
    }
    visible_keys(panel, tile.mask, t_base, G, tile.s0, n);
    on_panel(panel);
  }
}

// The keys and values of the tile after the current one (from s1, before k_hi), into L2 while the
// current tile's panels run.
template <class E>
void prefetch_next_tile(const Call<E>& call, int64_t b, int64_t kv, int64_t s1, int64_t k_hi) {
  const int64_t n = std::min(kKeyBlock, k_hi - s1);
  prefetch_rows<_MM_HINT_T1>(GroupRows<E>{call.k, b, s1, kv, 1}, 0, n, call.dims.D);
  prefetch_rows<_MM_HINT_T1>(GroupRows<E>{call.v, b, s1, kv, 1}, 0, n, call.dims.D);
}

// Where a GEMM reads probabilities or their gradients: the f32 score tile itself for f32 words, its
// bf16 copy (written by the softmax step) for bf16 pairs.
template <class Elem>
const Elem* gemm_operand(const float* f32_tile, const Elem* bf16_copy) {
  if constexpr (std::is_same_v<Elem, float>)
    return f32_tile;
  else
    return bf16_copy;
}

// ---------------------------------------------------------------------------------------------
// RoPE fused into the load and the gradient store

// Per-thread staging of rotated rows: a task's query rows (M x D) and one key tile (kKeyBlock x D),
// in the tensors' dtype (what the separate RoPE kernel would have stored). Empty without RoPE.
template <class E>
struct RopeStage {
  E* query_rows = nullptr;
  E* key_rows = nullptr;
};

template <class E>
RopeStage<E> carve_rope_stage(Arena& arena, bool fused, int64_t max_rows, int64_t D) {
  if (!fused) return {};
  RopeStage<E> stage;
  stage.query_rows = arena.take<E>(max_rows * D);
  stage.key_rows = arena.take<E>(kKeyBlock * D);
  return stage;
}

// The rows a pack reads: rows r < n of `rows_of` as they are, or with RoPE fused a copy in `stage`
// (row r at stage + r D), each rotated by its token's angles.
template <class E>
GroupRows<E> load_rows(const Call<E>& call, const GroupRows<E>& rows_of, int64_t n, E* stage) {
  if (call.rope == nullptr) return rows_of;
  const int64_t D = call.dims.D, F = call.rope->num_frequencies();
  for_each_row(rows_of.t0, rows_of.h0, rows_of.G, 0, n, [&](int64_t r, int64_t t, int64_t h) {
    const E* src = rows_of.x(rows_of.b, t, h);
    E* dst = stage + r * D;
    std::copy(src, src + D, dst);
    rotate_head(dst, F, call.angles(rows_of.b, t));
  });
  return GroupRows<E>{Rows<E>(stage, 0, rows_of.G * D, D), 0, 0, 0, rows_of.G};
}

// dst = scale * acc (D values of token (b, t)), rotated back by the token's angles when RoPE is
// fused: the gradient w.r.t. the un-rotated q or k.
template <class E>
void store_scaled_row(const Call<E>& call, int64_t b, int64_t t, const float* acc, E* dst) {
  const float scale = call.scale;
  int64_t d = 0;
  if (call.rope != nullptr) {
    const int64_t F = call.rope->num_frequencies();
    const float* cos_a = call.angles(b, t);
    const float* sin_a = cos_a + F;
#pragma omp simd
    for (int64_t i = 0; i < F; ++i) {
      const float x1 = scale * acc[i], x2 = scale * acc[F + i];
      store(dst[i], x1 * cos_a[i] + x2 * sin_a[i]);
      store(dst[F + i], x2 * cos_a[i] - x1 * sin_a[i]);
    }
    d = 2 * F;
  }
  for (; d < call.dims.D; ++d) store(dst[d], scale * acc[d]);
}

// ---------------------------------------------------------------------------------------------
// Forward

template <class Elem>
struct ForwardTiles {
  Elem* qt;      // [Dw / P][lanes][P]: the task's query rows on the lanes (Dw = D rounded up to P)
  Elem* k;       // [kKeyBlock][Dp]: the key tile (A of S^T = K Q^T)
  Elem* v;       // [kKeyBlock / P][Dp][P]: the value tile, P rows interleaved (B of P V)
  float* s;      // [kKeyBlock][kPanel]: S^T, then P^T
  Elem* p;       // [kKeyBlock / 2][kPanel][2]: P^T rows paired in bf16 (A of P V; bf16 pairs only)
  float* o;      // [lanes][Dp]: the output accumulator
  float *m, *l;  // [lanes]: running max and sum of each query row
  float* alpha;  // [kPanel]: the accumulator's rescale for the current tile
  int32_t* n;    // [kPanel]: visible keys of each lane in the current tile
};

template <class Elem>
ForwardTiles<Elem> carve_forward(Arena& arena, int64_t lanes, int64_t Dp) {
  ForwardTiles<Elem> t;
  t.qt = arena.take<Elem>(Dp * lanes);
  t.k = arena.take<Elem>(kKeyBlock * Dp);
  t.v = arena.take<Elem>(kKeyBlock * Dp);
  t.s = arena.take<float>(kKeyBlock * kPanel);
  t.p = arena.take<Elem>(kKeyBlock * kPanel);
  t.o = arena.take<float>(lanes * Dp);
  t.m = arena.take<float>(lanes);
  t.l = arena.take<float>(lanes);
  t.alpha = arena.take<float>(kPanel);
  t.n = arena.take<int32_t>(kPanel);
  return t;
}

// One key tile (in tiles.k, tiles.v) against one panel: S^T = K Q^T, the online softmax, and
// O = diag(alpha) O + P V for the rows that see the tile.
template <class Ops, class E>
void forward_panel(const Call<E>& call, const Panel& panel, int64_t lanes,
                   const ForwardTiles<typename Ops::Elem>& tiles) {
  using Elem = typename Ops::Elem;
  constexpr int64_t P = Ops::kPack;
  const int64_t Dp = call.Dp, words_d = round_up(call.dims.D, P) / P;
  gemm<Ops, Out::overwrite>({tiles.k, Dp / P, 1}, {tiles.qt + panel.L0 * P, lanes}, words_d, {tiles.s, kPanel},
                            panel.nk, panel.L, KeysSkipLanes{panel.key_lane, call.G});
  const Elem* probs = gemm_operand(tiles.s, tiles.p);
#if defined(__AVX512F__)
  online_softmax_16(tiles.s, int32_t(panel.nk), panel.L, tiles.n, call.scale, tiles.m + panel.L0, tiles.l + panel.L0,
                    tiles.alpha, tiles.p);
#else
  online_softmax<std::is_same_v<E, bf16>>(tiles.s, int32_t(panel.nk), panel.L, tiles.n, call.scale, tiles.m + panel.L0,
                                          tiles.l + panel.L0, tiles.alpha);
#endif
  // P^T read transposed: one word per (row, key pair).
  const int64_t skip = panel.row_lo - panel.L0;
  gemm<Ops, Out::scale_rows>({probs + skip * P, 1, kPanel}, {tiles.v, Dp}, round_up(panel.nk, P) / P,
                             {tiles.o + panel.row_lo * Dp, Dp, tiles.alpha + skip}, panel.row_hi - panel.row_lo, Dp,
                             RowsSeeKeyWords{tiles.n + skip, P});
}

// The block's queries for the G heads of kv head kv against its keys: out and lse.
template <class Ops, class E>
void forward_chunk(const Call<E>& call, const Block& block, int64_t kv, const ForwardTiles<typename Ops::Elem>& tiles,
                   const RopeStage<E>& stage) {
  constexpr int64_t P = Ops::kPack;
  const int64_t G = call.G, D = call.dims.D, Dp = call.Dp, b = block.b, q_lo = block.q_lo, q_hi = block.q_hi;
  const int64_t M = (q_hi - q_lo) * G, lanes = round_up(M, kLaneBlock);
  pack_transposed<P>(load_rows(call, GroupRows<E>{call.q, b, q_lo, kv * G, G}, M, stage.query_rows), M, lanes, D,
                     tiles.qt);
  std::fill(tiles.m, tiles.m + lanes, kMinusInf);
  std::fill(tiles.l, tiles.l + lanes, 0.0f);
  std::fill(tiles.o, tiles.o + M * Dp, 0.0f);
  for_each_key_tile(call, b, block.k_lo, block.k_hi, q_lo, q_hi, [&](const KeyTile& tile) {
    pack_key_tile<P>(load_rows(call, GroupRows<E>{call.k, b, tile.s0, kv, 1}, tile.nk, stage.key_rows), tile.nk, D,
                     Dp, KeyOperand::a_rows, tiles.k);
    pack_key_tile<P>(GroupRows<E>{call.v, b, tile.s0, kv, 1}, tile.nk, D, Dp, KeyOperand::b_rows, tiles.v);
    prefetch_next_tile(call, b, kv, tile.s0 + tile.nk, block.k_hi);
    for_each_panel(tile, q_lo, G, lanes, tiles.n,
                   [&](const Panel& panel) { forward_panel<Ops>(call, panel, lanes, tiles); });
  });
  for_each_row(q_lo, kv * G, G, 0, M, [&](int64_t r, int64_t t, int64_t h) {
    const float inv_sum = 1.0f / tiles.l[r];
    E* out = call.out(b, t, h);
    for (int64_t d = 0; d < D; ++d) store(out[d], tiles.o[r * Dp + d] * inv_sum);
    call.lse(b, h, t) = tiles.m[r] + std::log(tiles.l[r]);
  });
}

template <class E>
void forward_impl(const Call<E>& call) {
  using Ops = OpsFor<E>;
  const int64_t B = call.dims.B, T = call.dims.T, K = call.dims.K;
  const int64_t chunks = num_chunks(call.dims);
  const std::vector<int64_t> chunk_start = chunk_starts(T, chunks, ChunkOf::queries);
  const int64_t max_lanes = round_up(T * call.G, kLaneBlock);
#pragma omp parallel if (score_work(call.dims) >= kMinParallelWork)
  {
    AlignedBytes storage;
    const auto [tiles, stage] = carve_tiles<std::pair<ForwardTiles<typename Ops::Elem>, RopeStage<E>>>(
        [&](Arena& arena) {
          return std::pair(carve_forward<typename Ops::Elem>(arena, max_lanes, call.Dp),
                           carve_rope_stage<E>(arena, call.rope != nullptr, T * call.G, call.dims.D));
        },
        storage);
#pragma omp for collapse(3) schedule(dynamic)
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t kv = 0; kv < K; ++kv) {
        for (int64_t c = 0; c < chunks; ++c) {
          // Late queries see the most keys: hand them out first.
          const int64_t chunk = chunks - 1 - c;
          const int64_t q_lo = chunk_start[size_t(chunk)], q_hi = chunk_start[size_t(chunk + 1)];
          forward_chunk<Ops>(call, Block{b, q_lo, q_hi, call.document(b, q_lo).start, q_hi}, kv, tiles, stage);
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Backward

template <class Elem>
struct BackwardTiles {
  Elem *qt, *dot;      // [Dw / P][lanes][P]: the task's query rows and their dO on the lanes
  Elem *qb, *dob;      // [lanes / P][Dp][P]: the same, P rows interleaved (B of dK and dV)
  float *lse, *delta;  // [lanes]: per query row, delta = rowsum(dO * O)
  Elem *k, *v;         // [kKeyBlock][Dp]: the key tile's keys and values (A of S^T and dP^T)
  Elem* kb;            // [kKeyBlock / 2][Dp][2]: its keys, rows paired (B of dQ; bf16 pairs only)
  float *s, *dp;       // [kKeyBlock][kPanel]: S^T then P^T; dP^T then dS^T
  Elem *pt, *dst;      // [kKeyBlock][kPanel]: P^T and dS^T in bf16 (A of dV and dK; bf16 pairs only)
  Elem* ds_pairs;      // [kKeyBlock / 2][kPanel][2]: dS^T rows paired (A of dQ; bf16 pairs only)
  float *dk, *dv;      // [kKeyBlock][Dp]: the key tile's gradient accumulators
  float* dq;           // [lanes][Dp]: dQ of the task's query rows, when it owns them (one key chunk)
  int32_t* n;          // [kPanel]: visible keys of each lane in the current tile
};

template <class Elem>
BackwardTiles<Elem> carve_backward(Arena& arena, int64_t lanes, int64_t Dp, bool owns_dq) {
  BackwardTiles<Elem> t;
  t.qt = arena.take<Elem>(Dp * lanes);
  t.dot = arena.take<Elem>(Dp * lanes);
  t.qb = arena.take<Elem>(lanes * Dp);
  t.dob = arena.take<Elem>(lanes * Dp);
  t.lse = arena.take<float>(lanes);
  t.delta = arena.take<float>(lanes);
  t.k = arena.take<Elem>(kKeyBlock * Dp);
  t.v = arena.take<Elem>(kKeyBlock * Dp);
  t.kb = arena.take<Elem>(kKeyBlock * Dp);
  t.s = arena.take<float>(kKeyBlock * kPanel);
  t.dp = arena.take<float>(kKeyBlock * kPanel);
  t.pt = arena.take<Elem>(kKeyBlock * kPanel);
  t.dst = arena.take<Elem>(kKeyBlock * kPanel);
  t.ds_pairs = arena.take<Elem>(kKeyBlock * kPanel);
  t.dk = arena.take<float>(kKeyBlock * Dp);
  t.dv = arena.take<float>(kKeyBlock * Dp);
  t.dq = arena.take<float>(owns_dq ? lanes * Dp : 0);
  t.n = arena.take<int32_t>(kPanel);
  return t;
}

// lse and delta = rowsum(dO * O) of the task's query rows r < M (zero on the padding lanes).
template <class E>
void pack_row_stats(const Call<E>& call, const Grads<E>& grads, int64_t b, int64_t kv, int64_t t0, int64_t M,
                    int64_t lanes, float* lse, float* delta) {
  const int64_t D = call.dims.D;
  const GroupRows<E> out_rows{call.out, b, t0, kv * call.G, call.G};
  for_each_row(t0, kv * call.G, call.G, 0, M, [&](int64_t r, int64_t t, int64_t h) {
    prefetch_ahead(out_rows, r, M, D);
    const E* dout = grads.dout(b, t, h);
    const E* out = call.out(b, t, h);
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int64_t d = 0; d < D; ++d) sum += load(dout[d]) * load(out[d]);
    lse[r] = call.lse(b, h, t);
    delta[r] = sum;
  });
  std::fill(lse + M, lse + lanes, 0.0f);
  std::fill(delta + M, delta + lanes, 0.0f);
}

// One key tile (in tiles.k, tiles.kb, tiles.v) against one panel: S^T, dP^T, then P^T and dS^T,
// and dV += P^T dO, dK += dS^T Q (both summed over the panel's rows, every head of the group),
// dQ += dS K.
template <class Ops, class E>
void backward_panel(const Call<E>& call, const Panel& panel, int64_t lanes, const typename Ops::Elem* kb, float* dq_acc,
                    const BackwardTiles<typename Ops::Elem>& tiles) {
  using Elem = typename Ops::Elem;
  constexpr int64_t P = Ops::kPack;
  const int64_t Dp = call.Dp, words_d = round_up(call.dims.D, P) / P, L0 = panel.L0, L = panel.L, nk = panel.nk;
  const KeysSkipLanes skip_lanes{panel.key_lane, call.G};
  gemm<Ops, Out::overwrite>({tiles.k, Dp / P, 1}, {tiles.qt + L0 * P, lanes}, words_d, {tiles.s, kPanel}, nk, L,
                            skip_lanes);
  gemm<Ops, Out::overwrite>({tiles.v, Dp / P, 1}, {tiles.dot + L0 * P, lanes}, words_d, {tiles.dp, kPanel}, nk, L,
                            skip_lanes);
  const Elem* p_rows = gemm_operand(tiles.s, tiles.pt);
  const Elem* ds_rows = gemm_operand(tiles.dp, tiles.dst);
  const Elem* ds_pairs = gemm_operand(tiles.dp, tiles.ds_pairs);
#if defined(__AVX512F__)
  probability_grads_16(tiles.s, tiles.dp, int32_t(nk), L, tiles.n, call.scale, tiles.lse + L0, tiles.delta + L0,
                       tiles.pt, tiles.dst, tiles.ds_pairs);
#else
  probability_grads<std::is_same_v<E, bf16>>(tiles.s, tiles.dp, int32_t(nk), L, tiles.n, call.scale, tiles.lse + L0,
                                             tiles.delta + L0);
#endif
  const KeysSkipLaneWords skip_lane_words{panel.key_lane, call.G, P};
  gemm<Ops, Out::accumulate>({p_rows, kPanel / P, 1}, {tiles.dob + L0 * Dp, Dp}, L / P, {tiles.dv, Dp}, nk, Dp,
                             skip_lane_words);
  gemm<Ops, Out::accumulate>({ds_rows, kPanel / P, 1}, {tiles.qb + L0 * Dp, Dp}, L / P, {tiles.dk, Dp}, nk, Dp,
                             skip_lane_words);
  // dS^T read transposed: one word per (row, key pair).
  const int64_t skip = panel.row_lo - L0;
  gemm<Ops, Out::accumulate>({ds_pairs + skip * P, 1, kPanel}, {kb, Dp}, round_up(nk, P) / P,
                             {dq_acc + panel.row_lo * Dp, Dp}, panel.row_hi - panel.row_lo, Dp,
                             RowsSeeKeyWords{tiles.n + skip, P});
}

// One key tile of a backward task whose keys end before k_hi (its query rows packed, from query
// t_base): the tile's dK and dV, written out, and its share of dQ added into dq_acc.
template <class Ops, class E>
void backward_key_tile(const Call<E>& call, const Grads<E>& grads, int64_t b, int64_t kv, const KeyTile& tile,
                       int64_t t_base, int64_t k_hi, int64_t lanes, float* dq_acc,
                       const BackwardTiles<typename Ops::Elem>& tiles, const RopeStage<E>& stage) {
  using Elem = typename Ops::Elem;
  constexpr int64_t P = Ops::kPack;
  const int64_t D = call.dims.D, Dp = call.Dp, s0 = tile.s0, nk = tile.nk;
  const GroupRows<E> keys = load_rows(call, GroupRows<E>{call.k, b, s0, kv, 1}, nk, stage.key_rows);
  pack_key_tile<P>(keys, nk, D, Dp, KeyOperand::a_rows, tiles.k);
  pack_key_tile<P>(GroupRows<E>{call.v, b, s0, kv, 1}, nk, D, Dp, KeyOperand::a_rows, tiles.v);
  // f32 words read dQ's B in the same plain rows; bf16 pairs need them interleaved.
  const Elem* kb = tiles.k;
  if constexpr (P > 1) {
    pack_key_tile<P>(keys, nk, D, Dp, KeyOperand::b_rows, tiles.kb);
    kb = tiles.kb;
  }
  prefetch_next_tile(call, b, kv, s0 + nk, k_hi);
  std::fill(tiles.dk, tiles.dk + nk * Dp, 0.0f);
  std::fill(tiles.dv, tiles.dv + nk * Dp, 0.0f);
  for_each_panel(tile, t_base, call.G, lanes, tiles.n,
                 [&](const Panel& panel) { backward_panel<Ops>(call, panel, lanes, kb, dq_acc, tiles); });
  for (int64_t c = 0; c < nk; ++c) {
    store_scaled_row(call, b, s0 + c, tiles.dk + c * Dp, grads.dk(b, s0 + c, kv));
    E* dv = grads.dv(b, s0 + c, kv);
    for (int64_t d = 0; d < D; ++d) store(dv[d], tiles.dv[c * Dp + d]);
  }
}

// The block's keys, kv head kv: writes their dK and dV, and adds their share of dQ of the block's
// queries (those that see them) into dq_acc (f32 rows of Dp, row r = query q_lo + r / G of head g = r % G).
template <class Ops, class E>
void backward_chunk(const Call<E>& call, const Grads<E>& grads, const Block& block, int64_t kv, float* dq_acc,
                    const BackwardTiles<typename Ops::Elem>& tiles, const RopeStage<E>& stage) {
  constexpr int64_t P = Ops::kPack;
  const int64_t G = call.G, D = call.dims.D, Dp = call.Dp, b = block.b, q_lo = block.q_lo;
  const int64_t M = (block.q_hi - q_lo) * G, lanes = round_up(M, kLaneBlock);
  const GroupRows<E> queries = load_rows(call, GroupRows<E>{call.q, b, q_lo, kv * G, G}, M, stage.query_rows);
  const GroupRows<E> dout_rows{grads.dout, b, q_lo, kv * G, G};
  pack_transposed<P>(queries, M, lanes, D, tiles.qt);
  pack_transposed<P>(dout_rows, M, lanes, D, tiles.dot);
  pack_row_groups<P>(queries, M, lanes, D, Dp, tiles.qb);
  pack_row_groups<P>(dout_rows, M, lanes, D, Dp, tiles.dob);
  pack_row_stats(call, grads, b, kv, q_lo, M, lanes, tiles.lse, tiles.delta);
  std::fill(dq_acc, dq_acc + M * Dp, 0.0f);
  for_each_key_tile(call, b, block.k_lo, block.k_hi, q_lo, block.q_hi, [&](const KeyTile& tile) {
    backward_key_tile<Ops>(call, grads, b, kv, tile, q_lo, block.k_hi, lanes, dq_acc, tiles, stage);
  });
}

// dQ rows r < M (query t0 + r / G, head kv G + r % G) = scale * dq_acc (rotated back with RoPE fused).
template <class E>
void store_dq(const Call<E>& call, const Grads<E>& grads, int64_t b, int64_t kv, int64_t t0, int64_t M,
              const float* dq_acc) {
  for_each_row(t0, kv * call.G, call.G, 0, M,
               [&](int64_t r, int64_t t, int64_t h) { store_scaled_row(call, b, t, dq_acc + r * call.Dp, grads.dq(b, t, h)); });
}

template <class E>
void backward_impl(const Call<E>& call, const Grads<E>& grads) {
  using Ops = OpsFor<E>;
  const int64_t B = call.dims.B, T = call.dims.T, K = call.dims.K, G = call.G, Dp = call.Dp;
  const int64_t chunks = num_chunks(call.dims);
  const std::vector<int64_t> chunk_start = chunk_starts(T, chunks, ChunkOf::keys);
  const bool owns_dq = chunks == 1;
  // Split keys: one dQ buffer per (b, kv, chunk), summed in chunk order at the end.
  const AlignedBytes partial_storage = allocate_aligned(owns_dq ? 0 : sizeof(float) * B * K * chunks * T * G * Dp);
  float* partial_dq = reinterpret_cast<float*>(partial_storage.get());
  auto partial_row = [&](int64_t b, int64_t kv, int64_t c, int64_t row) {
    return partial_dq + (((b * K + kv) * chunks + c) * T * G + row) * Dp;
  };
  const int64_t max_lanes = round_up(T * G, kLaneBlock);
#pragma omp parallel if (score_work(call.dims) >= kMinParallelWork)
  {
    AlignedBytes storage;
    const auto [tiles, stage] = carve_tiles<std::pair<BackwardTiles<typename Ops::Elem>, RopeStage<E>>>(
        [&](Arena& arena) {
          return std::pair(carve_backward<typename Ops::Elem>(arena, max_lanes, Dp, owns_dq),
                           carve_rope_stage<E>(arena, call.rope != nullptr, T * G, call.dims.D));
        },
        storage);
#pragma omp for collapse(3) schedule(dynamic)
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t kv = 0; kv < K; ++kv) {
        for (int64_t c = 0; c < chunks; ++c) {
          const int64_t k_lo = chunk_start[size_t(c)], k_hi = chunk_start[size_t(c + 1)];
          float* dq_acc = owns_dq ? tiles.dq : partial_row(b, kv, c, k_lo * G);
          // The queries that see these keys: from the first key to the end of the last key's document.
          const Block block{b, k_lo, call.document(b, k_hi - 1).end, k_lo, k_hi};
          backward_chunk<Ops>(call, grads, block, kv, dq_acc, tiles, stage);
          if (owns_dq) store_dq(call, grads, b, kv, 0, T * G, dq_acc);
        }
      }
    }
    if (!owns_dq) {
      // (after the loop's barrier) dQ of query t sums, in chunk order, the chunks that start at or
      // before it and whose last key's document reaches it (at least the chunk holding key t).
#pragma omp for collapse(3) schedule(static)
      for (int64_t b = 0; b < B; ++b) {
        for (int64_t kv = 0; kv < K; ++kv) {
          for (int64_t t = 0; t < T; ++t) {
            float* sum = nullptr;
            for (int64_t c = 0; c < chunks && chunk_start[size_t(c)] <= t; ++c) {
              if (t >= call.document(b, chunk_start[size_t(c + 1)] - 1).end) continue;
              float* part = partial_row(b, kv, c, t * G);
              if (sum == nullptr) {
                sum = part;
                continue;
              }
#pragma omp simd
              for (int64_t i = 0; i < G * Dp; ++i) sum[i] += part[i];
            }
            store_dq(call, grads, b, kv, t, G, sum);
          }
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Span mode

// One task of span mode: a block of one span (forward: a chunk of its queries against all its keys;
// backward: a chunk of its keys with all its queries), its place among the span's chunks, and for
// the backward of a split span where its dQ rows start in each kv head's partial dQ buffer.
struct SpanTask {
  Block block;
  int64_t chunk, num_chunks, dq_row;
};

// Span mode's work in one direction: the tasks; the idle blocks, the rows no task writes (queries in
// no span that has keys: forward out 0 and lse -inf, backward dQ 0; backward, keys in no span that has
// queries: dK and dV 0), as blocks with the other range empty; the most query rows a task packs; the
// partial dQ rows per kv head; and the score multiply-adds.
struct SpanWork {
  std::vector<SpanTask> tasks;
  std::vector<Block> idle;
  int64_t max_rows = 0, partial_rows = 0, work = 0;
};

// Calls fn(b, lo, hi) for the row-local runs of [0, N) (rows of T) that lie on none of the sorted,
// disjoint ranges `covered`.
template <class Fn>
void for_each_uncovered(const std::vector<std::pair<int64_t, int64_t>>& covered, int64_t N, int64_t T, const Fn& fn) {
  int64_t at = 0;
  auto up_to = [&](int64_t end) {
    for (; at < end;) {
      const int64_t b = at / T, row_end = std::min(end, (b + 1) * T);
      fn(b, at - b * T, row_end - b * T);
      at = row_end;
    }
  };
  for (const auto& [lo, hi] : covered) {
    up_to(lo);
    at = hi;
  }
  up_to(N);
}

// The tasks of the spans that have both queries and keys, each split (queries forward, keys backward)
// into chunks of whole kKeyBlock blocks until there are about kMinTasks tasks: every query of a span
// sees all its keys, so equal chunks are equal work. Shapes only, not the thread count.
template <class E>
SpanWork plan_span_work(const Call<E>& call, ChunkOf what) {
  const AttentionDims& dims = call.dims;
  std::vector<AttentionSpan> active;
  for (const AttentionSpan& s : call.spans)
    if (s.q_begin < s.q_end && s.k_begin < s.k_end) active.push_back(s);
  const int64_t pairs = std::max<int64_t>(1, int64_t(active.size()) * dims.K);
  const int64_t per_span = (kMinTasks + pairs - 1) / pairs;
  SpanWork work;
  std::vector<std::pair<int64_t, int64_t>> queries, keys;
  for (const AttentionSpan& s : active) {
    const int64_t b = s.q_begin / dims.T;
    const Block span{b, s.q_begin - b * dims.T, s.q_end - b * dims.T, s.k_begin - b * dims.Tk, s.k_end - b * dims.Tk};
    const int64_t lo = what == ChunkOf::queries ? span.q_lo : span.k_lo;
    const int64_t hi = what == ChunkOf::queries ? span.q_hi : span.k_hi;
    const int64_t num_blocks = (hi - lo + kKeyBlock - 1) / kKeyBlock, n = std::min(num_blocks, per_span);
    for (int64_t c = 0; c < n; ++c) {
      Block chunk = span;
      int64_t& chunk_lo = what == ChunkOf::queries ? chunk.q_lo : chunk.k_lo;
      int64_t& chunk_hi = what == ChunkOf::queries ? chunk.q_hi : chunk.k_hi;
      chunk_lo = lo + c * num_blocks / n * kKeyBlock;
      chunk_hi = std::min(hi, lo + (c + 1) * num_blocks / n * kKeyBlock);
      work.tasks.push_back({chunk, c, n, work.partial_rows});
      if (what == ChunkOf::keys && n > 1) work.partial_rows += (span.q_hi - span.q_lo) * call.G;
      work.max_rows = std::max(work.max_rows, (chunk.q_hi - chunk.q_lo) * call.G);
    }
    work.work += (span.q_hi - span.q_lo) * (span.k_hi - span.k_lo) * dims.H * dims.D;
    queries.emplace_back(s.q_begin, s.q_end);
    keys.emplace_back(s.k_begin, s.k_end);
  }
  for_each_uncovered(queries, dims.B * dims.T, dims.T,
                     [&](int64_t b, int64_t lo, int64_t hi) { work.idle.push_back({b, lo, hi, 0, 0}); });
  if (what == ChunkOf::keys)
    for_each_uncovered(keys, dims.B * dims.Tk, dims.Tk,
                       [&](int64_t b, int64_t lo, int64_t hi) { work.idle.push_back({b, 0, 0, lo, hi}); });
  return work;
}

// An idle block in the forward: its queries see no key, out 0 and lse -inf (every head).
template <class E>
void clear_forward(const Call<E>& call, const Block& idle) {
  for (int64_t t = idle.q_lo; t < idle.q_hi; ++t)
    for (int64_t h = 0; h < call.dims.H; ++h) {
      E* out = call.out(idle.b, t, h);
      for (int64_t d = 0; d < call.dims.D; ++d) store(out[d], 0.0f);
      call.lse(idle.b, h, t) = kMinusInf;
    }
}

// An idle block in the backward: dQ of its queries, dK and dV of its keys, 0.
template <class E>
void clear_backward(const Call<E>& call, const Grads<E>& grads, const Block& idle) {
  auto clear = [&](E* row) {
    for (int64_t d = 0; d < call.dims.D; ++d) store(row[d], 0.0f);
  };
  for (int64_t t = idle.q_lo; t < idle.q_hi; ++t)
    for (int64_t h = 0; h < call.dims.H; ++h) clear(grads.dq(idle.b, t, h));
  for (int64_t s = idle.k_lo; s < idle.k_hi; ++s)
    for (int64_t kv = 0; kv < call.dims.K; ++kv) {
      clear(grads.dk(idle.b, s, kv));
      clear(grads.dv(idle.b, s, kv));
    }
}

template <class E>
void forward_spans(const Call<E>& call) {
  using Ops = OpsFor<E>;
  const SpanWork work = plan_span_work(call, ChunkOf::queries);
  const int64_t K = call.dims.K, num_tasks = int64_t(work.tasks.size()), num_idle = int64_t(work.idle.size());
#pragma omp parallel if (work.work >= kMinParallelWork)
  {
    AlignedBytes storage;
    const auto tiles = carve_tiles<ForwardTiles<typename Ops::Elem>>(
        [&](Arena& arena) {
          return carve_forward<typename Ops::Elem>(arena, round_up(work.max_rows, kLaneBlock), call.Dp);
        },
        storage);
    const RopeStage<E> no_rope;  // span mode takes q and k rotated
#pragma omp for collapse(2) schedule(dynamic) nowait
    for (int64_t i = 0; i < num_tasks; ++i)
      for (int64_t kv = 0; kv < K; ++kv) forward_chunk<Ops>(call, work.tasks[size_t(i)].block, kv, tiles, no_rope);
#pragma omp for schedule(static)
    for (int64_t i = 0; i < num_idle; ++i) clear_forward(call, work.idle[size_t(i)]);
  }
}

template <class E>
void backward_spans(const Call<E>& call, const Grads<E>& grads) {
  using Ops = OpsFor<E>;
  const SpanWork work = plan_span_work(call, ChunkOf::keys);
  const int64_t K = call.dims.K, G = call.G, Dp = call.Dp;
  const int64_t num_tasks = int64_t(work.tasks.size()), num_idle = int64_t(work.idle.size());
  // Split spans: one dQ buffer per (kv, chunk), summed in chunk order at the end; a span in one
  // chunk adds its dQ in the task's own scratch and stores it there.
  const AlignedBytes partial_storage = allocate_aligned(sizeof(float) * K * work.partial_rows * Dp);
  float* partial_dq = reinterpret_cast<float*>(partial_storage.get());
  auto partial_row = [&](int64_t kv, int64_t row) { return partial_dq + (kv * work.partial_rows + row) * Dp; };
#pragma omp parallel if (work.work >= kMinParallelWork)
  {
    AlignedBytes storage;
    const auto tiles = carve_tiles<BackwardTiles<typename Ops::Elem>>(
        [&](Arena& arena) {
          return carve_backward<typename Ops::Elem>(arena, round_up(work.max_rows, kLaneBlock), Dp, true);
        },
        storage);
    const RopeStage<E> no_rope;
#pragma omp for collapse(2) schedule(dynamic) nowait
    for (int64_t i = 0; i < num_tasks; ++i) {
      for (int64_t kv = 0; kv < K; ++kv) {
        const SpanTask& task = work.tasks[size_t(i)];
        const Block& block = task.block;
        float* dq_acc = task.num_chunks == 1 ? tiles.dq : partial_row(kv, task.dq_row);
        backward_chunk<Ops>(call, grads, block, kv, dq_acc, tiles, no_rope);
        if (task.num_chunks == 1) store_dq(call, grads, block.b, kv, block.q_lo, (block.q_hi - block.q_lo) * G, dq_acc);
      }
    }
#pragma omp for schedule(static)
    for (int64_t i = 0; i < num_idle; ++i) clear_backward(call, grads, work.idle[size_t(i)]);
    // (after the loops' barrier) dQ of a split span: its first chunk's rows plus the others', in order.
#pragma omp for collapse(2) schedule(static)
    for (int64_t i = 0; i < num_tasks; ++i) {
      for (int64_t kv = 0; kv < K; ++kv) {
        const SpanTask& task = work.tasks[size_t(i)];
        if (task.num_chunks == 1 || task.chunk != 0) continue;
        const Block& block = task.block;
        const int64_t rows = (block.q_hi - block.q_lo) * G;
        float* sum = partial_row(kv, task.dq_row);
        for (int64_t c = 1; c < task.num_chunks; ++c) {
          const float* part = partial_row(kv, work.tasks[size_t(i + c)].dq_row);
#pragma omp simd
          for (int64_t j = 0; j < rows * Dp; ++j) sum[j] += part[j];
        }
        store_dq(call, grads, block.b, kv, block.q_lo, rows, sum);
      }
    }
  }
}

void check_cpu_dtype(DType dtype) {
  RF_CHECK(dtype == DType::f32 || dtype == DType::bf16, "cpu attention: f32 or bf16 inputs, got {}", dtype_name(dtype));
}

// The angles q and k are rotated by as they load, when RoPE is fused.
std::optional<RopeAngleTable> fused_rope_angles(const AttentionParams& params, int64_t D) {
  if (!params.rope) return std::nullopt;
  const RopeParams& p = params.rope->params;
  return RopeAngleTable(p, params.rope->positions_N, p.rotary_dim == 0 ? D : p.rotary_dim, 1.0);
}

template <class E>
void forward_typed(const AttentionParams& params, const AttentionDims& dims, TensorView q_BTHD, TensorView k_BTKD,
                   TensorView v_BTKD, TensorView out_BTHD, TensorView lse_BHT) {
  const std::optional<RopeAngleTable> angles = fused_rope_angles(params, dims.D);
  const Call<E> call(params, dims, q_BTHD, k_BTKD, v_BTKD, out_BTHD, lse_BHT, angles ? &*angles : nullptr);
  if (call.mask == Mask::none)
    forward_spans(call);
  else
    forward_impl(call);
}

template <class E>
void backward_typed(const AttentionParams& params, const AttentionDims& dims, TensorView q_BTHD, TensorView k_BTKD,
                    TensorView v_BTKD, TensorView out_BTHD, TensorView lse_BHT, TensorView dout_BTHD,
                    TensorView dq_BTHD, TensorView dk_BTKD, TensorView dv_BTKD) {
  const std::optional<RopeAngleTable> angles = fused_rope_angles(params, dims.D);
  const Call<E> call(params, dims, q_BTHD, k_BTKD, v_BTKD, out_BTHD, lse_BHT, angles ? &*angles : nullptr);
  const Grads<E> grads{Rows<E>(dout_BTHD), Rows<E>(dq_BTHD), Rows<E>(dk_BTKD), Rows<E>(dv_BTKD)};
  if (call.mask == Mask::none)
    backward_spans(call, grads);
  else
    backward_impl(call, grads);
}

}  // namespace

void attention_forward(const AttentionParams& params, TensorView q_BTHD, TensorView k_BTKD, TensorView v_BTKD,
                       TensorView out_BTHD, TensorView lse_BHT) {
  const AttentionDims dims = check_attention_args(params, q_BTHD, k_BTKD, v_BTKD, out_BTHD, lse_BHT);
  check_cpu_dtype(q_BTHD.dtype());
  if (dims.B * dims.T * dims.H == 0) return;  // (span mode too: nothing to write)
  if (q_BTHD.dtype() == DType::f32)
    forward_typed<float>(params, dims, q_BTHD, k_BTKD, v_BTKD, out_BTHD, lse_BHT);
  else
    forward_typed<bf16>(params, dims, q_BTHD, k_BTKD, v_BTKD, out_BTHD, lse_BHT);
}

void attention_backward(const AttentionParams& params, TensorView q_BTHD, TensorView k_BTKD, TensorView v_BTKD,
                        TensorView out_BTHD, TensorView lse_BHT, TensorView dout_BTHD, TensorView dq_BTHD,
                        TensorView dk_BTKD, TensorView dv_BTKD) {
  const AttentionDims dims = check_attention_args(params, q_BTHD, k_BTKD, v_BTKD, out_BTHD, lse_BHT);
  check_attention_grads(dims, q_BTHD.dtype(), dout_BTHD, dq_BTHD, dk_BTKD, dv_BTKD);
  check_cpu_dtype(q_BTHD.dtype());
  // (Span mode with no query still owes dk = dv = 0.)
  if (dims.B * dims.T * dims.H == 0 && params.spans.empty()) return;
  if (q_BTHD.dtype() == DType::f32)
    backward_typed<float>(params, dims, q_BTHD, k_BTKD, v_BTKD, out_BTHD, lse_BHT, dout_BTHD, dq_BTHD, dk_BTKD, dv_BTKD);
  else
    backward_typed<bf16>(params, dims, q_BTHD, k_BTKD, v_BTKD, out_BTHD, lse_BHT, dout_BTHD, dq_BTHD, dk_BTKD, dv_BTKD);
}

}  // namespace rf::kernels::RF_CPU_NS

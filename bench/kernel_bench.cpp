// Per-op speed of every kernel variant against the `ref` oracle, measured in one run, on the
// shapes of a small Llama-style model (hidden 512, 8 heads / 4 kv heads of dim 64, FFN 1408,
// vocab 8192, batch 8 x 256 tokens). For each (op, dtype) it times `ref` and every cpu variant this
// CPU can run, and prints one line each:
//   RESULT kernel <op> <dtype> <variant> time_ms=<t> ratio_vs_ref=<ref time / t> <rate>
// with the rate in GFLOP/s (and % of the GEMM peak measured at start) for GEMM-like ops, in GB/s
// (the minimal bytes the op must move) for memory-bound ones.
//   usage: kernel_bench [--threads N]   (default: one thread per core)
// Timing: one warm-up call, then the median of at least 5 calls (the GEMM peak: the best of 10).
// The `ref` kernels are naive and single-threaded, so `ref` runs on a leading-dim slice of the same
// tensors (1/d of the tokens, of the batch, or of the AdamW buffer; every op's cost is linear in
// that dim) and its time is multiplied by d; each ref line says which slice it timed. Everything
// else runs on the full shape.
// The MoE ops run on an expert layer of the same widths: E = 8 local experts with FFN 1408 each and
// J = 2048 routed rows in uneven per-expert counts (one expert empty) for the grouped GEMM; N/2 tokens
// routed to 2 experts each (J rows again) for permute and unpermute. The grouped GEMM's lines compare
// with the linear lines of the same shape (gate_up, down at N = J rows): what grouping costs.
// What is not here: the whole training step (train_step_bench) and per-shape GEMM detail
// (gemm_bench).
// Legend: B batch, T sequence, N = B*T tokens, C hidden, H heads, K kv heads, D head dim, F FFN,
// V vocab, E experts, J routed rows.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "bench_args.h"
#include "bench_timing.h"
#include "core/philox.h"
#include "core/stopwatch.h"
#include "core/tensor.h"
#include "core/thread_pool.h"
#include "kernels/kernel_registry.h"

namespace {

using rf::DType;
using rf::Shape;
using rf::Tensor;
using rf::TensorView;
using namespace rf::kernels;

constexpr int64_t kB = 8, kT = 256, kN = kB * kT, kC = 512, kH = 8, kK = 4, kD = 64, kF = 1408, kV = 8192;
// AdamW and the grad norm sweep one flat buffer of 2^24 elements: the order of the model's
// parameter count (4.2M each for the embedding and the untied head, 2.95M per layer).
constexpr int64_t kNumParams = int64_t(1) << 24;
constexpr int64_t kE = 8, kJ = kN, kTopk = 2;
// Rows per expert, summing to kJ, uneven and with an empty expert; multiples of 32 so that ref's
// 1/32 slice keeps the same proportions (group_sizes_for).
constexpr int64_t kGroupSizes[kE] = {416, 96, 352, 0, 288, 480, 160, 256};
constexpr int kMinReps = 5;
constexpr int kPeakReps = 10;
// `ref` takes kMinReps calls; fast kernels repeat until about 0.25 s (at most 25 calls), so
// millisecond ops get a steadier median.
constexpr rf::bench::Repetitions kRefReps{kMinReps, kMinReps, 0.0};
constexpr rf::bench::Repetitions kFastReps{kMinReps, 25, 0.25};

using rf::bench::median_seconds;
using rf::bench::seconds_of;

// Best wall time of kPeakReps calls after a warm-up: a peak is the rate the machine reaches, and
// other processes on a shared machine only ever slow a call down.
double best_seconds(const std::function<void()>& fn) {
  seconds_of(fn);
  double best = 1e30;
  for (int i = 0; i < kPeakReps; ++i) best = std::min(best, seconds_of(fn));
  return best;
}

Tensor random(Shape shape, DType dtype, uint64_t seed, double low = -1.0, double high = 1.0) {
  Tensor t(shape, dtype);
  rf::fill_uniform(t, rf::Philox(seed, 0), low, high);
  return t;
}

Tensor random_ids(int64_t count, int64_t bound, uint64_t seed) {
  Tensor ids({count}, DType::i64);
  const rf::Philox rng(seed, 1);
  for (int64_t i = 0; i < count; ++i) ids.data<int64_t>()[i] = int64_t(rng.uniform(uint64_t(i)) * double(bound));
  return ids;
}

// Rows [0, rows) of a view along its leading dim.
TensorView head(TensorView x, int64_t rows) { return x.slice(0, 0, rows); }

const KernelTable& table_of(KernelVariant variant) {
  switch (variant) {
    case KernelVariant::ref: return ref::table();
    case KernelVariant::cpu_generic: return cpu_generic::table();
    case KernelVariant::cpu_avx2: return cpu_avx2::table();
    case KernelVariant::cpu_avx512: return cpu_avx512::table();
  }
  return ref::table();
}

// One benchmarked op on one dtype. `run(table, rows)` calls the op on the first `rows` of its
// scaled dim (full_rows for the fast kernels, full_rows / ref_divisor for ref).
struct OpCase {
  std::string op;
  double flops = 0;  // of the full shape; 0 for memory-bound ops
  double bytes = 0;  // minimal bytes the full shape moves
  int64_t full_rows = 0;
  int64_t ref_divisor = 1;
  const char* scaled_dim = "N";
  std::function<void(const KernelTable&, int64_t rows)> run;
};

// The tensors of every op for one dtype, filled once; ops that need a forward's saved state
// (rmsnorm's rstd, attention's out and lse, logprob's lse and entropy) get it from `prepare`.
struct Workload {
  DType dtype;
  size_t es;  // element size of the compute dtype
  // embedding
  Tensor ids_N, table_VC, emb_out_NC, dtable_VC;
  // linear: one shape per distinct GEMM family of the model (see kLinearShapes)
  std::vector<Tensor> lin_x, lin_w, lin_y, lin_dy, lin_dx, lin_dw;
  // rmsnorm
  Tensor x_NC, w_C, y_NC, rstd_N, dy_NC, dx_NC, dw_C;
  // rope (on q: N x H x D) and attention
  Tensor pos_N, rope_NHD;
  Tensor q_BTHD, k_BTKD, v_BTKD, out_BTHD, lse_BHT, dout_BTHD, dq_BTHD, dk_BTKD, dv_BTKD;
  // swiglu
  Tensor gate_NF, up_NF, h_NF, dh_NF, dgate_NF, dup_NF;
  // logprob
  Tensor logits_NV, targets_N, logp_N, entropy_N, lse_N, dlogp_N, dentropy_N, dlogits_NV;
  // moe: the grouped GEMM's fc1 (C -> 2F, gate and up fused) and fc2 (F -> C) over kJ routed rows;
  // permute / unpermute of kJ / kTopk tokens
  Tensor fc1_x_JC, fc1_w_EOI, fc1_y_JO, fc1_dy_JO, fc1_dx_JC, fc1_dw_EOI;
  Tensor fc2_x_JF, fc2_w_EOI, fc2_y_JC, fc2_dy_JC, fc2_dx_JF, fc2_dw_EOI;
  Tensor moe_tokens_NC, routing_map_NE, probs_NE, permuted_JC, permuted_probs_J, sorted_indices_J, tokens_per_expert_E,
      combined_NC;
  // adamw / sum_squares: f32 masters always; the bf16 run writes the bf16 model copy too
  Tensor param, grad, exp_avg, exp_avg_sq, param_copy, sq_x;
};

struct LinearShape {
  const char* layer;
  int64_t I, O;
  int64_t ref_divisor;  // the naive triple loop over all 2048 tokens would take minutes
};
// q/k/v fused: 512 -> 8*64 + 2*4*64; gate/up fused: 512 -> 2*1408; down: 1408 -> 512; head: 512 -> 8192.
constexpr LinearShape kLinearShapes[] = {
    {"qkv", kC, kH * kD + 2 * kK * kD, 16},
    {"gate_up", kC, 2 * kF, 32},
    {"down", kF, kC, 32},
    {"lm_head", kC, kV, 64},
};

Workload make_workload(DType dtype) {
  Workload w;
  w.dtype = dtype;
  w.es = rf::dtype_size(dtype);
  const DType grad_dtype = DType::f32;
  w.ids_N = random_ids(kN, kV, 1);
  w.table_VC = random({kV, kC}, dtype, 2);
  w.emb_out_NC = Tensor({kN, kC}, dtype);
  w.dtable_VC = Tensor({kV, kC}, grad_dtype);
  for (const LinearShape& s : kLinearShapes) {
    w.lin_x.push_back(random({kN, s.I}, dtype, 3));
    w.lin_w.push_back(random({s.O, s.I}, dtype, 4, -0.05, 0.05));
    w.lin_y.emplace_back(Shape{kN, s.O}, dtype);
    w.lin_dy.push_back(random({kN, s.O}, dtype, 5));
    w.lin_dx.emplace_back(Shape{kN, s.I}, dtype);
    w.lin_dw.emplace_back(Shape{s.O, s.I}, grad_dtype);
  }
  w.x_NC = random({kN, kC}, dtype, 6);
  w.w_C = random({kC}, dtype, 7, 0.5, 1.5);
  w.y_NC = Tensor({kN, kC}, dtype);
  w.rstd_N = Tensor({kN}, DType::f32);
  w.dy_NC = random({kN, kC}, dtype, 8);
  w.dx_NC = Tensor({kN, kC}, dtype);
  w.dw_C = Tensor({kC}, grad_dtype);
  w.pos_N = Tensor({kN}, DType::i64);
  for (int64_t n = 0; n < kN; ++n) w.pos_N.data<int64_t>()[n] = n % kT;
  w.rope_NHD = random({kN, kH, kD}, dtype, 9);
  w.q_BTHD = random({kB, kT, kH, kD}, dtype, 10);
  w.k_BTKD = random({kB, kT, kK, kD}, dtype, 11);
  w.v_BTKD = random({kB, kT, kK, kD}, dtype, 12);
  w.out_BTHD = Tensor({kB, kT, kH, kD}, dtype);
  w.lse_BHT = Tensor({kB, kH, kT}, DType::f32);
  w.dout_BTHD = random({kB, kT, kH, kD}, dtype, 13);
  w.dq_BTHD = Tensor({kB, kT, kH, kD}, dtype);
  w.dk_BTKD = Tensor({kB, kT, kK, kD}, dtype);
  w.dv_BTKD = Tensor({kB, kT, kK, kD}, dtype);
  w.gate_NF = random({kN, kF}, dtype, 14, -4.0, 4.0);
  w.up_NF = random({kN, kF}, dtype, 15);
  w.h_NF = Tensor({kN, kF}, dtype);
  w.dh_NF = random({kN, kF}, dtype, 16);
  w.dgate_NF = Tensor({kN, kF}, dtype);
  w.dup_NF = Tensor({kN, kF}, dtype);
  w.logits_NV = random({kN, kV}, dtype, 17, -8.0, 8.0);
  w.targets_N = random_ids(kN, kV, 18);
  w.logp_N = Tensor({kN}, DType::f32);
  w.entropy_N = Tensor({kN}, DType::f32);
  w.lse_N = Tensor({kN}, DType::f32);
  w.dlogp_N = random({kN}, DType::f32, 19);
  w.dentropy_N = random({kN}, DType::f32, 20);
  w.dlogits_NV = Tensor({kN, kV}, dtype);
  w.fc1_x_JC = random({kJ, kC}, dtype, 24);
  w.fc1_w_EOI = random({kE, 2 * kF, kC}, dtype, 25, -0.05, 0.05);
  w.fc1_y_JO = Tensor({kJ, 2 * kF}, dtype);
  w.fc1_dy_JO = random({kJ, 2 * kF}, dtype, 26);
  w.fc1_dx_JC = Tensor({kJ, kC}, dtype);
  w.fc1_dw_EOI = Tensor({kE, 2 * kF, kC}, grad_dtype);
  w.fc2_x_JF = random({kJ, kF}, dtype, 27);
  w.fc2_w_EOI = random({kE, kC, kF}, dtype, 28, -0.05, 0.05);
  w.fc2_y_JC = Tensor({kJ, kC}, dtype);
  w.fc2_dy_JC = random({kJ, kC}, dtype, 29);
  w.fc2_dx_JF = Tensor({kJ, kF}, dtype);
  w.fc2_dw_EOI = Tensor({kE, kC, kF}, grad_dtype);
  const int64_t num_tokens = kJ / kTopk;
  w.moe_tokens_NC = random({num_tokens, kC}, dtype, 30);
  w.routing_map_NE = Tensor({num_tokens, kE}, DType::boolean);
  for (int64_t n = 0; n < num_tokens; ++n) {  // experts n mod E and (3n + 1) mod E: distinct, every expert used
    w.routing_map_NE.data<bool>()[n * kE + n % kE] = true;
    w.routing_map_NE.data<bool>()[n * kE + (3 * n + 1) % kE] = true;
  }
  w.probs_NE = random({num_tokens, kE}, DType::f32, 31, 0.0, 1.0);
  w.permuted_JC = Tensor({kJ, kC}, dtype);
  w.permuted_probs_J = Tensor({kJ}, DType::f32);
  w.sorted_indices_J = Tensor({kJ}, DType::i64);
  w.tokens_per_expert_E = Tensor({kE}, DType::i64);
  w.combined_NC = Tensor({num_tokens, kC}, dtype);
  w.param = random({kNumParams}, DType::f32, 21);
  w.grad = random({kNumParams}, DType::f32, 22, -1e-2, 1e-2);
  w.exp_avg = Tensor({kNumParams}, DType::f32);
  w.exp_avg_sq = Tensor({kNumParams}, DType::f32);
  if (dtype == DType::bf16) w.param_copy = Tensor({kNumParams}, DType::bf16);
  w.sq_x = random({kNumParams}, dtype, 23);
  return w;
}

// The saved state the backward ops read, from one forward of the fastest kernels.
void prepare(const KernelRegistry& registry, const Workload& w) {
  RmsNormSaved saved{w.rstd_N};
  registry.rmsnorm_forward({}, w.x_NC, w.w_C, w.y_NC, saved);
  registry.attention_forward({}, w.q_BTHD, w.k_BTKD, w.v_BTKD, w.out_BTHD, w.lse_BHT);
  registry.logprob_forward({}, w.logits_NV, w.targets_N, w.logp_N, w.entropy_N, w.lse_N);
  registry.moe_permute(w.moe_tokens_NC, w.routing_map_NE, w.probs_NE, w.permuted_JC, w.permuted_probs_J,
                       w.sorted_indices_J, w.tokens_per_expert_E);
}

// kGroupSizes scaled down to a call of `rows` of the kJ rows (ref's slice).
std::vector<int64_t> group_sizes_for(int64_t rows) {
  std::vector<int64_t> sizes;
  for (int64_t size : kGroupSizes) sizes.push_back(size / (kJ / rows));
  return sizes;
}

// Causal attention multiply-adds: each of the B*H rows of queries sees T(T+1)/2 keys, and each
// (query, key) pair costs D multiply-adds per GEMM; forward has 2 GEMMs (q k^T, p v), backward 5
// (the recomputed q k^T, dO v^T, dS k, dS^T q, p^T dO).
double attention_flops(int num_gemms) { return 2.0 * num_gemms * kB * kH * kD * (kT * (kT + 1) / 2.0); }

std::vector<OpCase> make_cases(const Workload& w) {
  const double es = double(w.es), n = double(kN);
  std::vector<OpCase> cases;
  auto add = [&](std::string op, double flops, double bytes, int64_t full_rows, int64_t ref_divisor,
                 const char* scaled_dim, std::function<void(const KernelTable&, int64_t)> run) {
    cases.push_back({std::move(op), flops, bytes, full_rows, ref_divisor, scaled_dim, std::move(run)});
  };

  add("embedding_fwd", 0, n * 8 + 2 * n * kC * es, kN, 1, "N", [&w](const KernelTable& t, int64_t rows) {
    t.embedding_forward({}, head(w.ids_N, rows), w.table_VC, head(w.emb_out_NC, rows));
  });
  add("embedding_bwd", 0, n * 8 + n * kC * (es + 8), kN, 1, "N", [&w](const KernelTable& t, int64_t rows) {
    t.embedding_backward({}, head(w.ids_N, rows), head(w.emb_out_NC, rows), w.dtable_VC);
  });

  for (size_t i = 0; i < std::size(kLinearShapes); ++i) {
    const LinearShape& s = kLinearShapes[i];
    const double flops = 2.0 * n * double(s.I) * double(s.O);
    const std::string tag = std::string("/") + s.layer;
    const double bytes_x = n * s.I * es, bytes_w = double(s.O * s.I) * es, bytes_y = n * s.O * es;
    add("linear_fwd" + tag, flops, bytes_x + bytes_w + bytes_y, kN, s.ref_divisor, "N",
        [&w, i](const KernelTable& t, int64_t rows) {
          t.linear_forward(head(w.lin_x[i], rows), w.lin_w[i], TensorView(), head(w.lin_y[i], rows));
        });
    add("linear_dgrad" + tag, flops, bytes_x + bytes_w + bytes_y, kN, s.ref_divisor, "N",
        [&w, i](const KernelTable& t, int64_t rows) {
          t.linear_dgrad(head(w.lin_dy[i], rows), w.lin_w[i], head(w.lin_dx[i], rows), Accumulate::overwrite);
        });
    add("linear_wgrad" + tag, flops, bytes_x + double(s.O * s.I) * 8 + bytes_y, kN, s.ref_divisor, "N",
        [&w, i](const KernelTable& t, int64_t rows) {
          t.linear_wgrad(head(w.lin_dy[i], rows), head(w.lin_x[i], rows), w.lin_dw[i], TensorView(), Accumulate::add);
        });
  }

  // Both expert GEMMs of the layer; each expert's weight is read once per call whatever its rows.
  struct GroupedCase {
    const char* layer;
    int64_t I, O;
    const Tensor *x, *w, *y, *dy, *dx, *dw;
  };
  const GroupedCase grouped[] = {
      {"fc1", kC, 2 * kF, &w.fc1_x_JC, &w.fc1_w_EOI, &w.fc1_y_JO, &w.fc1_dy_JO, &w.fc1_dx_JC, &w.fc1_dw_EOI},
      {"fc2", kF, kC, &w.fc2_x_JF, &w.fc2_w_EOI, &w.fc2_y_JC, &w.fc2_dy_JC, &w.fc2_dx_JF, &w.fc2_dw_EOI},
  };
  for (const GroupedCase& g : grouped) {
    const double flops = 2.0 * double(kJ) * double(g.I) * double(g.O);
    const double bytes_x = double(kJ * g.I) * es, bytes_w = double(kE * g.O * g.I) * es;
    const double bytes_y = double(kJ * g.O) * es;
    const std::string tag = std::string("/") + g.layer;
    add("grouped_gemm_fwd" + tag, flops, bytes_x + bytes_w + bytes_y, kJ, 32, "J",
        [g](const KernelTable& t, int64_t rows) {
          t.grouped_gemm_forward(head(*g.x, rows), *g.w, group_sizes_for(rows), head(*g.y, rows));
        });
    add("grouped_gemm_dgrad" + tag, flops, bytes_x + bytes_w + bytes_y, kJ, 32, "J",
        [g](const KernelTable& t, int64_t rows) {
          t.grouped_gemm_dgrad(head(*g.dy, rows), *g.w, group_sizes_for(rows), head(*g.dx, rows), Accumulate::overwrite);
        });
    add("grouped_gemm_wgrad" + tag, flops, bytes_x + double(kE * g.O * g.I) * 8 + bytes_y, kJ, 32, "J",
        [g](const KernelTable& t, int64_t rows) {
          t.grouped_gemm_wgrad(head(*g.dy, rows), head(*g.x, rows), group_sizes_for(rows), *g.dw, Accumulate::add);
        });
  }
  // Permute reads the map and the routed tokens' rows and writes the J rows, probs and indices;
  // unpermute reads the J rows and writes the N/2 combined ones. ref runs the full shape (the copies
  // are cheap even as element loops).
  const double num_tokens = double(kJ / kTopk), row_bytes = kC * es;
  add("moe_permute", 0, num_tokens * kE * 5 + kJ * (2 * row_bytes + 12), kJ, 1, "J",
      [&w](const KernelTable& t, int64_t) {
        t.moe_permute(w.moe_tokens_NC, w.routing_map_NE, w.probs_NE, w.permuted_JC, w.permuted_probs_J,
                      w.sorted_indices_J, w.tokens_per_expert_E);
      });
  add("moe_unpermute", 0, kJ * (row_bytes + 8) + num_tokens * row_bytes, kJ, 1, "J",
      [&w](const KernelTable& t, int64_t) {
        t.moe_unpermute(w.permuted_JC, w.sorted_indices_J, w.combined_NC, Accumulate::overwrite);
      });

  add("rmsnorm_fwd", 0, 2 * n * kC * es + n * 4, kN, 8, "N", [&w](const KernelTable& t, int64_t rows) {
    RmsNormSaved saved{head(w.rstd_N, rows)};
    t.rmsnorm_forward({}, head(w.x_NC, rows), w.w_C, head(w.y_NC, rows), saved);
  });
  add("rmsnorm_bwd", 0, 3 * n * kC * es + n * 4, kN, 8, "N", [&w](const KernelTable& t, int64_t rows) {
    const RmsNormSaved saved{head(w.rstd_N, rows)};
    t.rmsnorm_backward({}, head(w.dy_NC, rows), head(w.x_NC, rows), w.w_C, saved, head(w.dx_NC, rows), w.dw_C,
                       Accumulate::overwrite);
  });

  // In place: repeated calls keep rotating the same tensor, which stays bounded.
  add("rope_fwd", 0, 2 * n * kH * kD * es + n * 8, kN, 8, "N", [&w](const KernelTable& t, int64_t rows) {
    t.rope_forward({}, head(w.pos_N, rows), head(w.rope_NHD, rows));
  });
  add("rope_bwd", 0, 2 * n * kH * kD * es + n * 8, kN, 8, "N", [&w](const KernelTable& t, int64_t rows) {
    t.rope_backward({}, head(w.pos_N, rows), head(w.rope_NHD, rows));
  });

  const double qkvo_bytes = 2.0 * (kB * kT * (kH + kK) * kD) * es;
  add("attention_fwd", attention_flops(2), qkvo_bytes, kB, 8, "B", [&w](const KernelTable& t, int64_t rows) {
    t.attention_forward({}, head(w.q_BTHD, rows), head(w.k_BTKD, rows), head(w.v_BTKD, rows), head(w.out_BTHD, rows),
                        head(w.lse_BHT, rows));
  });
  add("attention_bwd", attention_flops(5), 2 * qkvo_bytes, kB, 8, "B", [&w](const KernelTable& t, int64_t rows) {
    t.attention_backward({}, head(w.q_BTHD, rows), head(w.k_BTKD, rows), head(w.v_BTKD, rows),
                         head(w.out_BTHD, rows), head(w.lse_BHT, rows), head(w.dout_BTHD, rows),
                         head(w.dq_BTHD, rows), head(w.dk_BTKD, rows), head(w.dv_BTKD, rows));
  });

  add("swiglu_fwd", 0, 3 * n * kF * es, kN, 8, "N", [&w](const KernelTable& t, int64_t rows) {
    t.swiglu_forward(head(w.gate_NF, rows), head(w.up_NF, rows), head(w.h_NF, rows));
  });
  add("swiglu_bwd", 0, 5 * n * kF * es, kN, 8, "N", [&w](const KernelTable& t, int64_t rows) {
    t.swiglu_backward(head(w.gate_NF, rows), head(w.up_NF, rows), head(w.dh_NF, rows), head(w.dgate_NF, rows),
                      head(w.dup_NF, rows));
  });

  add("logprob_fwd", 0, n * kV * es + n * 20, kN, 16, "N", [&w](const KernelTable& t, int64_t rows) {
    t.logprob_forward({}, head(w.logits_NV, rows), head(w.targets_N, rows), head(w.logp_N, rows),
                      head(w.entropy_N, rows), head(w.lse_N, rows));
  });
  add("logprob_bwd", 0, 2 * n * kV * es + n * 24, kN, 16, "N", [&w](const KernelTable& t, int64_t rows) {
    t.logprob_backward({}, head(w.logits_NV, rows), head(w.targets_N, rows), head(w.lse_N, rows),
                       head(w.entropy_N, rows), head(w.dlogp_N, rows), head(w.dentropy_N, rows),
                       head(w.dlogits_NV, rows));
  });

  // AdamW reads param, grad and both moments and writes param and the moments (7 f32 streams),
  // plus the bf16 model copy in the bf16 run.
  const double p = double(kNumParams);
  add("adamw", 0, 7 * 4 * p + (w.param_copy.empty() ? 0 : 2 * p), kNumParams, 16, "elements",
      [&w](const KernelTable& t, int64_t rows) {
        const TensorView copy = w.param_copy.empty() ? TensorView() : head(w.param_copy, rows);
        t.adamw_step({}, head(w.param, rows), head(w.grad, rows), head(w.exp_avg, rows), head(w.exp_avg_sq, rows),
                     copy);
      });
  add("sum_squares", 0, p * es, kNumParams, 16, "elements", [&w](const KernelTable& t, int64_t rows) {
    volatile double sink = t.sum_squares(head(w.sq_x, rows));
    (void)sink;
  });
  return cases;
}

struct Peaks {
  double f32_gflops, bf16_gflops;
};

// The GEMM peak this machine reaches: a square 2048^3 product through the registry's gemm (f32 on
// the library KernelConfig::f32_gemm picks, oneDNN by default; bf16 x bf16 -> bf16 on oneDNN; all
// variants call the same libraries).
Peaks measure_peaks(const KernelRegistry& registry) {
  constexpr int64_t kSize = 2048;
  const double flops = 2.0 * kSize * kSize * kSize;
  Peaks peaks{};
  for (DType dtype : {DType::f32, DType::bf16}) {
    const Tensor a = random({kSize, kSize}, dtype, 31), b = random({kSize, kSize}, dtype, 32);
    const Tensor c({kSize, kSize}, dtype);
    const double seconds = best_seconds([&] { registry.gemm({}, a, b, c); });
    (dtype == DType::f32 ? peaks.f32_gflops : peaks.bf16_gflops) = flops / seconds * 1e-9;
  }
  return peaks;
}

void report(const OpCase& c, DType dtype, KernelVariant variant, double seconds, double ref_seconds,
            const Peaks& peaks) {
  std::string line = fmt::format("RESULT kernel {} {} {} time_ms={:.3f} ratio_vs_ref={:.2f}", c.op,
                                 rf::dtype_name(dtype), kernel_variant_name(variant), seconds * 1e3,
                                 ref_seconds / seconds);
  if (c.flops > 0) {
    const double gflops = c.flops / seconds * 1e-9;
    line += fmt::format(" GFLOP/s={:.1f} %peak={:.1f}", gflops, 100.0 * gflops / peaks.f32_gflops);
    if (dtype == DType::bf16) line += fmt::format(" %peak_bf16={:.1f}", 100.0 * gflops / peaks.bf16_gflops);
  } else {
    line += fmt::format(" GB/s={:.2f}", c.bytes / seconds * 1e-9);
  }
  if (variant == KernelVariant::ref && c.ref_divisor > 1)
    line += fmt::format(" (ref timed on {}={} of {}, time x{})", c.scaled_dim, c.full_rows / c.ref_divisor,
                        c.full_rows, c.ref_divisor);
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = rf::bench::parse_threads(argc, argv);
  if (threads < 0) {
    std::fprintf(stderr, "usage: kernel_bench [--threads N]   (N = 0: one thread per core)\n");
    return 2;
  }
  const rf::ThreadPool pool(threads, "--threads");
  const KernelRegistry registry;
  const char* coretype = std::getenv("OPENBLAS_CORETYPE");
  std::string about = pool.describe() + "\n" + registry.describe();
  for (size_t at = about.find('\n'); at != std::string::npos; at = about.find('\n', at + 1)) about.insert(at + 1, "# ");
  std::printf("# %s\n# OPENBLAS_CORETYPE=%s\n", about.c_str(), coretype ? coretype : "(unset)");
  std::printf("# config: B=%ld T=%ld (N=%ld) C=%ld H=%ld K=%ld D=%ld F=%ld V=%ld; adamw/sum_squares over %ld elements\n",
              long(kB), long(kT), long(kN), long(kC), long(kH), long(kK), long(kD), long(kF), long(kV),
              long(kNumParams));
  std::printf("# time: median of >= %d calls after a warm-up (peak: best of %d); ratio_vs_ref = ref time / this time\n",
              kMinReps, kPeakReps);
  const rf::Stopwatch total;

  const Peaks peaks = measure_peaks(registry);
  std::printf("RESULT peak f32_gemm_gflops=%.1f bf16_gemm_gflops=%.1f\n", peaks.f32_gflops, peaks.bf16_gflops);

  std::vector<KernelVariant> fast;
  for (KernelVariant v : {KernelVariant::cpu_generic, KernelVariant::cpu_avx2, KernelVariant::cpu_avx512})
    if (registry.can_run(v)) fast.push_back(v);

  for (DType dtype : {DType::f32, DType::bf16}) {
    const Workload workload = make_workload(dtype);
    prepare(registry, workload);
    for (const OpCase& c : make_cases(workload)) {
      const int64_t ref_rows = c.full_rows / c.ref_divisor;
      const double ref_seconds =
          median_seconds([&] { c.run(ref::table(), ref_rows); }, kRefReps) * double(c.ref_divisor);
      report(c, dtype, KernelVariant::ref, ref_seconds, ref_seconds, peaks);
      for (KernelVariant v : fast) {
        const KernelTable& table = table_of(v);
        report(c, dtype, v, median_seconds([&] { c.run(table, c.full_rows); }, kFastReps), ref_seconds, peaks);
      }
    }
  }
  std::printf("# total %.1f s\n", total.seconds());
  return 0;
}

#include "model/context_attention.h"

#include <cstring>
#include <limits>

#include "core/element_access.h"
#include "core/stopwatch.h"

namespace rf::model {
namespace {

using dist::CommHandle;
using dist::ProcessGroup;

// Message tags on the CP group: each kind keeps its order between two ranks (MPI's non-overtaking rule).
enum Tag : int { kKeys = 1, kValues = 2, kKeyGrads = 3, kValueGrads = 4 };

// Whose keys a block holds, as seen from rank r (context_split.h).
enum class Block : uint8_t { own, earlier, later };
Block block_of(int owner, int r) { return owner == r ? Block::own : owner < r ? Block::earlier : Block::later; }

DType accumulator_dtype(DType dtype) { return dtype == DType::f64 ? DType::f64 : DType::f32; }

TensorView as_bthd(TensorView x_nXD) { return x_nXD.reshape({1, x_nXD.size(0), x_nXD.size(1), x_nXD.size(2)}); }
TensorView lse_view(TensorView lse, int64_t heads, int64_t n) {
  return lse.slice(0, 0, heads * n).reshape({1, heads, n});
}

// The merge's starting point: no keys seen, so the first block's result is taken as it is.
void fill_minus_infinity(TensorView lse_BHT) {
  const TensorView flat = lse_BHT.reshape({lse_BHT.numel()});
  for (int64_t i = 0; i < flat.numel(); ++i) store_f64(flat, i, -std::numeric_limits<double>::infinity());
}

// The kernel's arguments for one block: the own block is causal over the local documents, another rank's a
// list of unmasked spans.
kernels::AttentionParams block_params(const ContextSplit& split, Block block) {
  kernels::AttentionParams p;
  if (block == Block::own)
    p.cu_seqlens = split.local_cu_seqlens();
  else
    p.spans = block == Block::earlier ? split.earlier_rank_spans() : split.later_rank_spans();
  return p;
}

// acc += part, element by element (acc f32 or f64; part any float dtype); both contiguous, same count.
void add_into(TensorView part, TensorView acc) {
  const int64_t count = part.numel();
  RF_CHECK(count == acc.numel() && part.is_contiguous() && acc.is_contiguous(),
           "context attention: adding {} into {}", part.describe(), acc.describe());
  if (acc.dtype() == DType::f32 && part.dtype() == DType::f32) {
    const float* from = part.data<float>();
    float* to = acc.data<float>();
    for (int64_t i = 0; i < count; ++i) to[i] += from[i];
  } else if (acc.dtype() == DType::f32 && part.dtype() == DType::bf16) {
    const bf16* from = part.data<bf16>();
    float* to = acc.data<float>();
    for (int64_t i = 0; i < count; ++i) to[i] += to_f32(from[i]);
  } else {
    for (int64_t i = 0; i < count; ++i) store_f64(acc, i, load_f64(acc, i) + load_f64(part, i));
  }
}

// Row i of a buffer of rows of `row_bytes` bytes.
std::byte* row_of(const TensorView& buffer, int64_t i, size_t row_bytes) {
  return static_cast<std::byte*>(buffer.raw()) + size_t(i) * row_bytes;
}

// Heads [p X/P, (p+1) X/P) of token t of x_nXD: X/P D contiguous elements.
std::byte* head_group(const TensorView& x_nXD, int64_t t, int64_t p, int P) {
  const int64_t X = x_nXD.size(1), D = x_nXD.size(2);
  return static_cast<std::byte*>(x_nXD.raw()) + size_t((t * X + p * (X / P)) * D) * x_nXD.element_size();
}

// The rows of x_nXD [n, X, D] for the a2a layout: chunk p of `send` holds heads [p X/P, (p+1) X/P) of every local
// token; after the all-to-all chunk s of `recv` holds this rank's heads of rank s's tokens, which go to their place
// in the padded natural order, nat [P n, X/P, D].
void to_head_layout(ProcessGroup& cp, const ContextSplit& split, TensorView x_nXD, TensorView send, TensorView recv,
                    TensorView nat) {
  const int P = cp.size();
  const int64_t n = x_nXD.size(0), X = x_nXD.size(1), D = x_nXD.size(2);
  const size_t row = size_t(X / P * D) * x_nXD.element_size();
  for (int p = 0; p < P; ++p)
    for (int64_t t = 0; t < n; ++t) std::memcpy(row_of(send, p * n + t, row), head_group(x_nXD, t, p, P), row);
  cp.all_to_all(send.slice(0, 0, n * X * D), recv.slice(0, 0, n * X * D));
  for (int src = 0; src < P; ++src)
    for (int64_t t = 0; t < n; ++t)
      std::memcpy(row_of(nat, split.padded_position(src, t), row), row_of(recv, src * n + t, row), row);
}

// The inverse: nat [P n, X/P, D] in natural order back to this rank's tokens with all heads, x_nXD.
void from_head_layout(ProcessGroup& cp, const ContextSplit& split, TensorView nat, TensorView send, TensorView recv,
                      TensorView x_nXD) {
  const int P = cp.size();
  const int64_t n = x_nXD.size(0), X = x_nXD.size(1), D = x_nXD.size(2);
  const size_t row = size_t(X / P * D) * x_nXD.element_size();
  for (int dst = 0; dst < P; ++dst)
    for (int64_t t = 0; t < n; ++t)
      std::memcpy(row_of(send, dst * n + t, row), row_of(nat, split.padded_position(dst, t), row), row);
  cp.all_to_all(send.slice(0, 0, n * X * D), recv.slice(0, 0, n * X * D));
  for (int p = 0; p < P; ++p)
    for (int64_t t = 0; t < n; ++t) std::memcpy(head_group(x_nXD, t, p, P), row_of(recv, p * n + t, row), row);
}

// The keys and values going around the ring, to rank `to` and from rank `from`: the block held, the next one arriving
// into one of three buffers, and the previous step's sends. A send completes only once its receiver takes it, inside
// that rank's wait after its own compute: waiting for it one step later, into a third buffer, keeps a rank from
// waiting for its neighbour's compute on top of its own.
class KeyRing {
 public:
  KeyRing(ProcessGroup& cp, ContextAttentionScratch& s, int64_t n, TensorView k, TensorView v, int to, int from)
      : cp_(cp), s_(s), n_(n), to_(to), from_(from), held_k_(k), held_v_(v) {}
  KeyRing(const KeyRing&) = delete;
  KeyRing& operator=(const KeyRing&) = delete;
  ~KeyRing() {
    for (CommHandle& h : sending_) h.wait();
  }

  TensorView keys() const { return held_k_; }
  TensorView values() const { return held_v_; }
  // Step `step` posts the receive of the next block and the send of the held one (before its compute).
  void pass_on(int step) {
    next_k_ = rows(s_.k_in[step % 3], n_);
    next_v_ = rows(s_.v_in[step % 3], n_);
    arriving_[0] = cp_.irecv(next_k_, from_, kKeys);
    arriving_[1] = cp_.irecv(next_v_, from_, kValues);
    sent_now_[0] = cp_.isend(held_k_, to_, kKeys);
    sent_now_[1] = cp_.isend(held_v_, to_, kValues);
  }
  // After the compute: the next block is held; the step before's sends are done (the step after next receives into
  // their buffer).
  void arrive() {
    for (CommHandle& h : arriving_) h.wait();
    for (CommHandle& h : sending_) h.wait();
    for (int i = 0; i < 2; ++i) sending_[i] = std::move(sent_now_[i]);
    held_k_ = next_k_;
    held_v_ = next_v_;
  }

 private:
  ProcessGroup& cp_;
  ContextAttentionScratch& s_;
  int64_t n_;
  int to_, from_;
  TensorView held_k_, held_v_, next_k_, next_v_;
  CommHandle arriving_[2], sent_now_[2], sending_[2];
};

}  // namespace

ContextAttention::ContextAttention(int64_t H, int64_t K, int64_t D, int cp_size, dist::CpCommType type)
    : H_(H), K_(K), D_(D), cp_size_(cp_size), type_(type) {
  RF_CHECK(cp_size >= 1, "context attention: {} ranks", cp_size);
  if (type == dist::CpCommType::a2a && cp_size > 1)
    RF_CHECK(H % cp_size == 0 && K % cp_size == 0,
             "cp_comm_type a2a: the {} query heads and {} kv heads of a TP rank must divide by "
             "context_parallel_size = {} (Ulysses gives each CP rank a share of the heads)",
             H, K, cp_size);
}

void ContextAttention::reserve(ContextAttentionScratch& s, int64_t n, DType dtype, TensorAccount a) const {
  if (cp_size_ == 1) return;
  const DType acc = accumulator_dtype(dtype);
  const int64_t P = cp_size_;
  switch (type_) {
    case dist::CpCommType::p2p:
      for (int b = 0; b < 3; ++b) {
        s.k_in[b] = Tensor({n, K_, D_}, dtype, a);
        s.v_in[b] = Tensor({n, K_, D_}, dtype, a);
      }
      for (int b = 0; b < 2; ++b) {
        s.dk_out[b] = Tensor({n, K_, D_}, acc, a);
        s.dv_out[b] = Tensor({n, K_, D_}, acc, a);
      }
      for (Tensor* t : {&s.dk_in, &s.dv_in, &s.dk_own, &s.dv_own}) *t = Tensor({n, K_, D_}, acc, a);
      break;
    case dist::CpCommType::all_gather:
      s.k_all = Tensor({P * n, K_, D_}, dtype, a);
      s.v_all = Tensor({P * n, K_, D_}, dtype, a);
      s.dk_all = Tensor({P * n, K_, D_}, acc, a);
      s.dv_all = Tensor({P * n, K_, D_}, acc, a);
      s.dk_mine = Tensor({n, K_, D_}, acc, a);
      s.dv_mine = Tensor({n, K_, D_}, acc, a);
      break;
    case dist::CpCommType::a2a:
      s.heads[0] = Tensor({n, H_, D_}, dtype, a);
      s.heads[1] = Tensor({n, K_, D_}, dtype, a);
      s.heads[2] = Tensor({n, K_, D_}, dtype, a);
      s.heads[3] = Tensor({n, H_, D_}, dtype, a);
      s.heads[4] = Tensor({n, H_, D_}, dtype, a);
      s.sendbuf = Tensor({n * H_ * D_}, dtype, a);
      s.recvbuf = Tensor({n * H_ * D_}, dtype, a);
      break;
  }
  if (type_ != dist::CpCommType::a2a) {
    s.part_out = Tensor({n, H_, D_}, dtype, a);
    s.part_lse = Tensor({H_ * n}, acc, a);
    s.acc_out = Tensor({n, H_, D_}, acc, a);
  }
  s.dq_part = Tensor({n, H_, D_}, dtype, a);
  s.dk_part = Tensor({n, K_, D_}, dtype, a);
  s.dv_part = Tensor({n, K_, D_}, dtype, a);
}

void ContextAttention::forward(const LayerContext& ctx, const ContextSplit& split, TensorView q, TensorView k,
                               TensorView v, TensorView out, TensorView lse, ContextAttentionScratch& s) const {
  RF_CHECK(split.cp_size() == cp_size_ && split.local_tokens() == q.size(0),
           "context attention: a split of {} local tokens over {} ranks for {} queries over {} ranks",
           split.local_tokens(), split.cp_size(), q.size(0), cp_size_);
  switch (type_) {
    case dist::CpCommType::p2p: return ring_forward(ctx, split, q, k, v, out, lse, s);
    case dist::CpCommType::all_gather: return gathered_forward(ctx, split, q, k, v, out, lse, s);
    case dist::CpCommType::a2a: return ulysses_forward(ctx, split, q, k, v, out, lse, s);
  }
}

void ContextAttention::backward(const LayerContext& ctx, const ContextSplit& split, TensorView q, TensorView k,
                                TensorView v, TensorView out, TensorView lse, TensorView dout, TensorView dq,
                                TensorView dk, TensorView dv, ContextAttentionScratch& s) const {
  switch (type_) {
    case dist::CpCommType::p2p: return ring_backward(ctx, split, q, k, v, out, lse, dout, dq, dk, dv, s);
    case dist::CpCommType::all_gather: return gathered_backward(ctx, split, q, k, v, out, lse, dout, dq, dk, dv, s);
    case dist::CpCommType::a2a: return ulysses_backward(ctx, split, q, k, v, out, lse, dout, dq, dk, dv, s);
  }
}

void ContextAttention::ring_forward(const LayerContext& ctx, const ContextSplit& split, TensorView q, TensorView k,
                                    TensorView v, TensorView out, TensorView lse, ContextAttentionScratch& s) const {
  ProcessGroup& cp = ctx.parallel.cp();
  const int P = cp.size(), r = cp.rank();
  const int64_t n = q.size(0);
  const TensorView acc_out = rows(s.acc_out, n), part_out = rows(s.part_out, n);
  const TensorView acc_lse = lse_view(lse, H_, n), part_lse = lse_view(s.part_lse, H_, n);
  fill_zero(acc_out);
  fill_minus_infinity(acc_lse);
  KeyRing ring(cp, s, n, k, v, (r + 1) % P, (r - 1 + P) % P);
  for (int i = 0; i < P; ++i) {
    const int owner = (r - i + P) % P;
    if (i + 1 < P) ring.pass_on(i);  // the next block travels while this one computes
    const Stopwatch compute;
    ctx.kernels.attention_forward(block_params(split, block_of(owner, r)), as_bthd(q), as_bthd(ring.keys()),
                                  as_bthd(ring.values()), as_bthd(part_out), part_lse);
    ctx.kernels.attention_merge(as_bthd(part_out), part_lse, as_bthd(acc_out), acc_lse);
    s.times.compute_s += compute.seconds();
    const Stopwatch wait;
    if (i + 1 < P) ring.arrive();
    s.times.wait_s += wait.seconds();
    ++s.times.steps;
  }
  copy_convert(acc_out, out);
}

void ContextAttention::ring_backward(const LayerContext& ctx, const ContextSplit& split, TensorView q, TensorView k,
                                     TensorView v, TensorView out, TensorView lse, TensorView dout, TensorView dq,
                                     TensorView dk, TensorView dv, ContextAttentionScratch& s) const {
  ProcessGroup& cp = ctx.parallel.cp();
  const int P = cp.size(), r = cp.rank(), next = (r + 1) % P, previous = (r - 1 + P) % P;
  const int64_t n = q.size(0);
  const TensorView dq_acc = rows(s.acc_out, n), lse_BHT = lse_view(lse, H_, n);
  const TensorView dq_part = rows(s.dq_part, n), dk_part = rows(s.dk_part, n), dv_part = rows(s.dv_part, n);
  const TensorView dk_own = rows(s.dk_own, n), dv_own = rows(s.dv_own, n);
  const TensorView dk_in = rows(s.dk_in, n), dv_in = rows(s.dv_in, n);
  fill_zero(dq_acc);
  // What the ring waits for, after the compute that could hide it.
  auto waited = [&](auto&& wait_for) {
    const Stopwatch wait;
    wait_for();
    s.times.wait_s += wait.seconds();
  };
  CommHandle grads_leaving[2][2];  // per buffer: the dk and dv sends still in flight from it
  KeyRing ring(cp, s, n, k, v, previous, next);
  for (int i = 0; i < P; ++i) {
    // Backward runs the ring the other way: at step i this rank holds rank r + i's block.
    const int owner = (r + i) % P;
    CommHandle grads_arriving[2];
    if (i + 1 < P) ring.pass_on(i);
    // From step 2 on, the block's gradients so far come from the neighbour that held it one step earlier.
    if (i >= 2) {
      grads_arriving[0] = cp.irecv(dk_in, next, kKeyGrads);
      grads_arriving[1] = cp.irecv(dv_in, next, kValueGrads);
    }
    const Stopwatch compute;
    ctx.kernels.attention_backward(block_params(split, block_of(owner, r)), as_bthd(q), as_bthd(ring.keys()),
                                   as_bthd(ring.values()), as_bthd(out), lse_BHT, as_bthd(dout), as_bthd(dq_part),
                                   as_bthd(dk_part), as_bthd(dv_part));
    add_into(dq_part, dq_acc);
    s.times.compute_s += compute.seconds();
    if (i == 0) {
      copy_convert(dk_part, dk_own);
      copy_convert(dv_part, dv_own);
    } else {
      const int b = i % 2;
      waited([&] {
        for (CommHandle& h : grads_leaving[b]) h.wait();  // its previous contents have left
      });
      const TensorView dk_out = rows(s.dk_out[b], n), dv_out = rows(s.dv_out[b], n);
      copy_convert(dk_part, dk_out);
      copy_convert(dv_part, dv_out);
      if (i >= 2) {
        waited([&] {
          for (CommHandle& h : grads_arriving) h.wait();
        });
        add_into(dk_in, dk_out);
        add_into(dv_in, dv_out);
      }
      grads_leaving[b][0] = cp.isend(dk_out, previous, kKeyGrads);
      grads_leaving[b][1] = cp.isend(dv_out, previous, kValueGrads);
    }
    if (i + 1 < P) waited([&] { ring.arrive(); });
    ++s.times.steps;
  }
  if (P > 1) {  // the own block's gradients from every other rank, summed along the ring
    waited([&] {
      cp.recv(dk_in, next, kKeyGrads);
      cp.recv(dv_in, next, kValueGrads);
    });
    add_into(dk_in, dk_own);
    add_into(dv_in, dv_own);
  }
  for (auto& pair : grads_leaving)
    for (CommHandle& h : pair) h.wait();
  copy_convert(dq_acc, dq);
  copy_convert(dk_own, dk);
  copy_convert(dv_own, dv);
}

void ContextAttention::gathered_forward(const LayerContext& ctx, const ContextSplit& split, TensorView q,
                                        TensorView k, TensorView v, TensorView out, TensorView lse,
                                        ContextAttentionScratch& s) const {
  ProcessGroup& cp = ctx.parallel.cp();
  const int P = cp.size(), r = cp.rank();
  const int64_t n = q.size(0);
  const TensorView k_all = rows(s.k_all, P * n), v_all = rows(s.v_all, P * n);
  cp.all_gather(k, k_all);
  cp.all_gather(v, v_all);
  const TensorView acc_out = rows(s.acc_out, n), part_out = rows(s.part_out, n);
  const TensorView acc_lse = lse_view(lse, H_, n), part_lse = lse_view(s.part_lse, H_, n);
  fill_zero(acc_out);
  fill_minus_infinity(acc_lse);
  for (int i = 0; i < P; ++i) {  // the ring's order, so both merge the same blocks in the same order
    const int owner = (r - i + P) % P;
    ctx.kernels.attention_forward(block_params(split, block_of(owner, r)), as_bthd(q),
                                  as_bthd(k_all.slice(0, owner * n, n)), as_bthd(v_all.slice(0, owner * n, n)),
                                  as_bthd(part_out), part_lse);
    ctx.kernels.attention_merge(as_bthd(part_out), part_lse, as_bthd(acc_out), acc_lse);
  }
  copy_convert(acc_out, out);
}

void ContextAttention::gathered_backward(const LayerContext& ctx, const ContextSplit& split, TensorView q,
                                         TensorView k, TensorView v, TensorView out, TensorView lse,
                                         TensorView dout, TensorView dq, TensorView dk, TensorView dv,
                                         ContextAttentionScratch& s) const {
  ProcessGroup& cp = ctx.parallel.cp();
  const int P = cp.size(), r = cp.rank();
  const int64_t n = q.size(0);
  const TensorView k_all = rows(s.k_all, P * n), v_all = rows(s.v_all, P * n);
  cp.all_gather(k, k_all);
  cp.all_gather(v, v_all);
  const TensorView dq_acc = rows(s.acc_out, n), lse_BHT = lse_view(lse, H_, n);
  const TensorView dq_part = rows(s.dq_part, n), dk_part = rows(s.dk_part, n), dv_part = rows(s.dv_part, n);
  const TensorView dk_all = rows(s.dk_all, P * n), dv_all = rows(s.dv_all, P * n);
  fill_zero(dq_acc);
  for (int i = 0; i < P; ++i) {
    const int owner = (r - i + P) % P;
    ctx.kernels.attention_backward(block_params(split, block_of(owner, r)), as_bthd(q),
                                   as_bthd(k_all.slice(0, owner * n, n)), as_bthd(v_all.slice(0, owner * n, n)),
                                   as_bthd(out), lse_BHT, as_bthd(dout), as_bthd(dq_part), as_bthd(dk_part),
                                   as_bthd(dv_part));
    add_into(dq_part, dq_acc);
    copy_convert(dk_part, dk_all.slice(0, owner * n, n));
    copy_convert(dv_part, dv_all.slice(0, owner * n, n));
  }
  const TensorView dk_mine = rows(s.dk_mine, n), dv_mine = rows(s.dv_mine, n);
  cp.reduce_scatter(dk_all, dk_mine);
  cp.reduce_scatter(dv_all, dv_mine);
  copy_convert(dq_acc, dq);
  copy_convert(dk_mine, dk);
  copy_convert(dv_mine, dv);
}

void ContextAttention::ulysses_forward(const LayerContext& ctx, const ContextSplit& split, TensorView q,
                                       TensorView k, TensorView v, TensorView out, TensorView lse,
                                       ContextAttentionScratch& s) const {
  ProcessGroup& cp = ctx.parallel.cp();
  const int64_t P = cp.size(), n = q.size(0), Np = P * n, Hp = H_ / P, Kp = K_ / P;
  auto nat = [&](Tensor& buffer, int64_t heads) { return buffer.view().slice(0, 0, n).reshape({Np, heads, D_}); };
  const TensorView q_nat = nat(s.heads[0], Hp), k_nat = nat(s.heads[1], Kp), v_nat = nat(s.heads[2], Kp),
                   out_nat = nat(s.heads[3], Hp);
  to_head_layout(cp, split, q, s.sendbuf, s.recvbuf, q_nat);
  to_head_layout(cp, split, k, s.sendbuf, s.recvbuf, k_nat);
  to_head_layout(cp, split, v, s.sendbuf, s.recvbuf, v_nat);
  ctx.kernels.attention_forward({.cu_seqlens = split.padded_cu_seqlens()}, as_bthd(q_nat), as_bthd(k_nat),
                                as_bthd(v_nat), as_bthd(out_nat), lse_view(lse, Hp, Np));
  from_head_layout(cp, split, out_nat, s.sendbuf, s.recvbuf, out);
}

void ContextAttention::ulysses_backward(const LayerContext& ctx, const ContextSplit& split, TensorView q,
                                        TensorView k, TensorView v, TensorView out, TensorView lse, TensorView dout,
                                        TensorView dq, TensorView dk, TensorView dv,
                                        ContextAttentionScratch& s) const {
  ProcessGroup& cp = ctx.parallel.cp();
  const int64_t P = cp.size(), n = q.size(0), Np = P * n, Hp = H_ / P, Kp = K_ / P;
  auto nat = [&](Tensor& buffer, int64_t heads) { return buffer.view().slice(0, 0, n).reshape({Np, heads, D_}); };
  const TensorView q_nat = nat(s.heads[0], Hp), k_nat = nat(s.heads[1], Kp), v_nat = nat(s.heads[2], Kp),
                   out_nat = nat(s.heads[3], Hp), dout_nat = nat(s.heads[4], Hp);
  const TensorView dq_nat = nat(s.dq_part, Hp), dk_nat = nat(s.dk_part, Kp), dv_nat = nat(s.dv_part, Kp);
  to_head_layout(cp, split, q, s.sendbuf, s.recvbuf, q_nat);
  to_head_layout(cp, split, k, s.sendbuf, s.recvbuf, k_nat);
  to_head_layout(cp, split, v, s.sendbuf, s.recvbuf, v_nat);
  to_head_layout(cp, split, out, s.sendbuf, s.recvbuf, out_nat);
  to_head_layout(cp, split, dout, s.sendbuf, s.recvbuf, dout_nat);
  ctx.kernels.attention_backward({.cu_seqlens = split.padded_cu_seqlens()}, as_bthd(q_nat), as_bthd(k_nat),
                                 as_bthd(v_nat), as_bthd(out_nat), lse_view(lse, Hp, Np), as_bthd(dout_nat),
                                 as_bthd(dq_nat), as_bthd(dk_nat), as_bthd(dv_nat));
  from_head_layout(cp, split, dq_nat, s.sendbuf, s.recvbuf, dq);
  from_head_layout(cp, split, dk_nat, s.sendbuf, s.recvbuf, dk);
  from_head_layout(cp, split, dv_nat, s.sendbuf, s.recvbuf, dv);
}

}  // namespace rf::model

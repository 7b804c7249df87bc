"""PyTorch baseline of bench/train_step_bench.cpp: the same Llama-style model and training step in
plain torch (no transformers), timed the same way. bench/run_train_step_bench.sh runs both.

    usage: /usr/bin/python3 torch_train_step.py --config large|tiny --dtype f32|bf16 [--steps N] [--threads 1,2]

A step is forward + backward + gradient clipping + AdamW (+ zero_grad) on B rows of T random tokens,
matching ours: token-mean cross-entropy over every next-token target inside a row (a row's last
token has no target), global grad-norm clipping to 1.0 (the trainer's default clip_grad), AdamW
with lr 1e-4 and weight decay 0.01 on the matrices only (Megatron skips norm gains). bf16 is
torch.autocast("cpu", torch.bfloat16) over forward and loss: bf16 compute, f32 weights, as ours.
After 2 warm-up steps, --steps steps are timed one by one; tok/s = B*T / the median step time.
Each thread count in --threads runs on a fresh model, one line each:
    torch_train_step config=<c> dtype=<d> threads=<n> attention=<sdpa|masked_softmax> tokens=<B*T>
        step_ms=<median> tok_s=<r> flops_per_token=<f> spread=<(slowest - fastest step) / median>
Not here: the GEMM peak (the shell script takes it from our binary, measured in the same run).
Legend: B rows, T tokens per row, C hidden, F FFN, V vocab, L layers, H heads, K kv heads, D head dim.
"""
import argparse
import statistics
import time

import torch
import torch.nn.functional as F

WARMUP_STEPS = 2
IGNORE_TARGET = -100
SHAPES = {  # C, L, H, K, F, V, T, B
    "large": dict(C=512, L=8, H=8, K=4, F=1408, V=8192, T=256, B=8),
    "tiny": dict(C=128, L=2, H=4, K=2, F=352, V=512, T=64, B=16),
}
HAS_SDPA = hasattr(F, "scaled_dot_product_attention")  # torch >= 2.0


class RmsNorm(torch.nn.Module):
    def __init__(self, C, eps=1e-6):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(C))
        self.eps = eps

    def forward(self, x_BTC):
        # In f32 whatever the autocast dtype, as HF Llama does.
        x = x_BTC.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(x_BTC.dtype)


def rope_tables(T, D, theta=10000.0):
    inv_freq = 1.0 / (theta ** (torch.arange(0, D, 2).float() / D))
    angles_TD = torch.outer(torch.arange(T).float(), inv_freq).repeat(1, 2)
    return angles_TD.cos(), angles_TD.sin()


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def causal_attention(q_BHTD, k_BHTD, v_BHTD):
    if HAS_SDPA:
        return F.scaled_dot_product_attention(q_BHTD, k_BHTD, v_BHTD, is_causal=True)
    T, D = q_BHTD.shape[-2], q_BHTD.shape[-1]
    scores_BHTT = (q_BHTD @ k_BHTD.transpose(-1, -2)) / D**0.5
    mask_TT = torch.ones(T, T, dtype=torch.bool).triu(1)
    probs_BHTT = scores_BHTT.masked_fill(mask_TT, float("-inf")).softmax(-1).to(v_BHTD.dtype)
    return probs_BHTT @ v_BHTD


class Block(torch.nn.Module):
    def __init__(self, C, H, K, F):
        super().__init__()
        self.H, self.K, self.D = H, K, C // H
        self.input_layernorm = RmsNorm(C)
        self.q_proj = torch.nn.Linear(C, H * self.D, bias=False)
        self.k_proj = torch.nn.Linear(C, K * self.D, bias=False)
        self.v_proj = torch.nn.Linear(C, K * self.D, bias=False)
        self.o_proj = torch.nn.Linear(H * self.D, C, bias=False)
        self.post_attention_layernorm = RmsNorm(C)
        self.gate_proj = torch.nn.Linear(C, F, bias=False)
        self.up_proj = torch.nn.Linear(C, F, bias=False)
        self.down_proj = torch.nn.Linear(F, C, bias=False)

    def forward(self, x_BTC, cos_TD, sin_TD):
        B, T, _ = x_BTC.shape
        h = self.input_layernorm(x_BTC)
        q_BHTD = self.q_proj(h).view(B, T, self.H, self.D).transpose(1, 2)
        k_BKTD = self.k_proj(h).view(B, T, self.K, self.D).transpose(1, 2)
        v_BKTD = self.v_proj(h).view(B, T, self.K, self.D).transpose(1, 2)
        q_BHTD = q_BHTD * cos_TD + rotate_half(q_BHTD) * sin_TD
        k_BKTD = k_BKTD * cos_TD + rotate_half(k_BKTD) * sin_TD
        # GQA: each kv head serves H/K query heads.
        k_BHTD = k_BKTD.repeat_interleave(self.H // self.K, dim=1)
        v_BHTD = v_BKTD.repeat_interleave(self.H // self.K, dim=1)
        a_BTC = causal_attention(q_BHTD, k_BHTD, v_BHTD).transpose(1, 2).reshape(B, T, -1)
        x_BTC = x_BTC + self.o_proj(a_BTC)
        h = self.post_attention_layernorm(x_BTC)
        return x_BTC + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


class LlamaLm(torch.nn.Module):
    def __init__(self, C, L, H, K, F, V, T, **_):
        super().__init__()
        self.embed_tokens = torch.nn.Embedding(V, C)
        self.layers = torch.nn.ModuleList(Block(C, H, K, F) for _ in range(L))
        self.norm = RmsNorm(C)
        self.lm_head = torch.nn.Linear(C, V, bias=False)  # untied
        cos_TD, sin_TD = rope_tables(T, C // H)
        self.register_buffer("cos_TD", cos_TD, persistent=False)
        self.register_buffer("sin_TD", sin_TD, persistent=False)
        for p in self.parameters():
            if p.dim() == 2:
                torch.nn.init.normal_(p, std=0.02)

    def forward(self, tokens_BT):
        x_BTC = self.embed_tokens(tokens_BT)
        for layer in self.layers:
            x_BTC = layer(x_BTC, self.cos_TD, self.sin_TD)
        return self.lm_head(self.norm(x_BTC))


def flops_per_token(C, L, H, K, F, V, T, **_):
    """6 x matmul params + 6 L T C (causal attention), as train_step_bench.cpp counts."""
    D = C // H
    matmul_params = L * (C * D * (2 * H + 2 * K) + 3 * C * F) + V * C
    return 6 * matmul_params + 6 * L * T * H * D


def run(config, dtype, num_steps, threads):
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    s = SHAPES[config]
    model = LlamaLm(**s)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}], lr=1e-4)
    tokens_BT = torch.randint(0, s["V"], (s["B"], s["T"]))
    targets_BT = torch.cat([tokens_BT[:, 1:], torch.full((s["B"], 1), IGNORE_TARGET)], dim=1)

    def step():
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == "bf16"):
            logits_BTV = model(tokens_BT)
            loss = F.cross_entropy(logits_BTV.float().view(-1, s["V"]), targets_BT.view(-1),
                                   ignore_index=IGNORE_TARGET)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss.item()

    times = []
    for i in range(WARMUP_STEPS + num_steps):
        start = time.perf_counter()
        loss = step()
        seconds = time.perf_counter() - start
        if i >= WARMUP_STEPS:
            times.append(seconds)
            print(f"step {i - WARMUP_STEPS} threads={threads} ms={seconds * 1e3:.1f} loss={loss:.4f}", flush=True)
    median = statistics.median(times)
    tokens = s["B"] * s["T"]
    print(f"torch_train_step config={config} dtype={dtype} threads={threads} "
          f"attention={'sdpa' if HAS_SDPA else 'masked_softmax'} tokens={tokens} step_ms={median * 1e3:.1f} "
          f"tok_s={tokens / median:.1f} flops_per_token={flops_per_token(**s)} "
          f"spread={(max(times) - min(times)) / median:.3f}", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", choices=sorted(SHAPES), default="large")
    parser.add_argument("--dtype", choices=["f32", "bf16"], default="f32")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--threads", default="1,2", help="comma-separated thread counts, one run each")
    args = parser.parse_args()
    print(f"# torch {torch.__version__}, attention "
          f"{'F.scaled_dot_product_attention(is_causal=True)' if HAS_SDPA else 'explicit masked softmax (no SDPA in this torch)'}",
          flush=True)
    for threads in (int(t) for t in args.threads.split(",")):
        run(args.config, args.dtype, max(1, args.steps), threads)


if __name__ == "__main__":
    main()

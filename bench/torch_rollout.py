"""PyTorch baseline of bench/rollout_bench.cpp: the same rollout workload on the same Llama-style model
in plain torch (no transformers), generated the way a plain generate loop does it.
bench/run_rollout_bench.sh runs both.

    usage: /usr/bin/python3 torch_rollout.py --dtype f32|bf16 [--threads N]

The model is torch_train_step.py's (large config, random weights: only throughput is compared, the
tokens differ from ours). The workload is rollout_workload.h's, drawn from the same LCG: 64 prompts of
64 tokens, n = 8, each prompt's max_tokens in [16, 256].
 - Static batching: all 512 sequences in one batch, decoded until the longest max_tokens; finished
   rows keep computing (as HF generate does with ignore_eos), only each sample's own max_tokens
   count as generated tokens: tok/s = sum of the samples' max_tokens / wall time.
 - The prompt is prefilled once per prompt (64 rows of 64 tokens, one causal forward) and its keys
   and values copied into its 8 samples' cache rows.
 - The KV cache is preallocated per layer: [B, K, T_max, D] keys and values, T_max = 64 + 256; a step
   writes position t and attends over [0, t].
 - GQA without repeat_interleave: the queries of a step as [B, K, G, D] (G = H / K query heads per
   kv head), multiplied against the K cached heads in one batched matmul.
 - Each step draws every row's token with torch.multinomial at temperature 1 (one seeded
   torch.Generator) and its log-prob (log_softmax, gathered), as ours reports.
 - bf16: the model and cache in bf16 (faster here than autocast, which re-casts the f32 weights at
   every step); softmax and sampling in f32.
After a warm-up generate (4 prompts, 8 tokens), one timed generate; inference_mode throughout.
Output:
    RESULT torch_rollout/<dtype> tok_s=<r> seconds=<wall> generated_tokens=<n> steps=<decode steps + 1>
Legend: B batch rows (sequences), T positions, C hidden, H heads, K kv heads, G = H / K, D head dim,
V vocab, P prompts.
"""
import argparse
import time

import torch
import torch.nn.functional as F

from torch_train_step import SHAPES, LlamaLm, rotate_half

NUM_PROMPTS, PROMPT_LEN, SAMPLES_PER_PROMPT = 64, 64, 8
MAX_TOKENS_LOW, MAX_TOKENS_HIGH = 16, 256
WORKLOAD_SEED = 2024
MASK64 = (1 << 64) - 1


def rollout_workload(V):
    """rollout_workload.h's LCG: per prompt, 64 token draws then one max_tokens draw."""
    state = WORKLOAD_SEED

    def draw():
        nonlocal state
        state = (state * 6364136223846793005 + 1442695040888963407) & MASK64
        return state >> 33

    prompts, max_tokens = [], []
    for _ in range(NUM_PROMPTS):
        prompts.append([draw() % V for _ in range(PROMPT_LEN)])
        max_tokens.append(MAX_TOKENS_LOW + draw() % (MAX_TOKENS_HIGH - MAX_TOKENS_LOW + 1))
    return prompts, max_tokens


def rope(x_BXTD, cos_TD, sin_TD):
    return x_BXTD * cos_TD + rotate_half(x_BXTD) * sin_TD


def prefill_block(block, x_PTC, cos_TD, sin_TD, cache_k, cache_v, G):
    """Causal forward over the prompts; their keys and values go to each of the G sample rows."""
    P, T, _ = x_PTC.shape
    h = block.input_layernorm(x_PTC)
    q_PHTD = rope(block.q_proj(h).view(P, T, block.H, block.D).transpose(1, 2), cos_TD, sin_TD)
    k_PKTD = rope(block.k_proj(h).view(P, T, block.K, block.D).transpose(1, 2), cos_TD, sin_TD)
    v_PKTD = block.v_proj(h).view(P, T, block.K, block.D).transpose(1, 2)
    cache_k[:, :, :T] = k_PKTD.repeat_interleave(G, dim=0)
    cache_v[:, :, :T] = v_PKTD.repeat_interleave(G, dim=0)
    # [P, K, H/K * T, D] queries against the K heads: GQA without repeating the keys.
    q = q_PHTD.reshape(P, block.K, block.H // block.K, T, block.D)
    scores = (q @ k_PKTD.unsqueeze(2).transpose(-1, -2)) / block.D**0.5
    mask_TT = torch.ones(T, T, dtype=torch.bool).triu(1)
    probs = scores.float().masked_fill(mask_TT, float("-inf")).softmax(-1).to(v_PKTD.dtype)
    a_PTC = (probs @ v_PKTD.unsqueeze(2)).reshape(P, block.H, T, block.D).transpose(1, 2).reshape(P, T, -1)
    x_PTC = x_PTC + block.o_proj(a_PTC)
    h = block.post_attention_layernorm(x_PTC)
    return x_PTC + block.down_proj(F.silu(block.gate_proj(h)) * block.up_proj(h))


def decode_block(block, x_BC, t, cos_D, sin_D, cache_k, cache_v):
    """One new token per row at position t, against the cache's positions [0, t]."""
    B = x_BC.shape[0]
    h = block.input_layernorm(x_BC)
    q_BHD = rope(block.q_proj(h).view(B, block.H, block.D), cos_D, sin_D)
    cache_k[:, :, t] = rope(block.k_proj(h).view(B, block.K, block.D), cos_D, sin_D)
    cache_v[:, :, t] = block.v_proj(h).view(B, block.K, block.D)
    q_BKGD = q_BHD.view(B, block.K, block.H // block.K, block.D)
    k_BKTD, v_BKTD = cache_k[:, :, : t + 1], cache_v[:, :, : t + 1]
    scores_BKGT = (q_BKGD @ k_BKTD.transpose(-1, -2)) / block.D**0.5
    probs_BKGT = scores_BKGT.float().softmax(-1).to(v_BKTD.dtype)
    a_BC = (probs_BKGT @ v_BKTD).reshape(B, -1)
    x_BC = x_BC + block.o_proj(a_BC)
    h = block.post_attention_layernorm(x_BC)
    return x_BC + block.down_proj(F.silu(block.gate_proj(h)) * block.up_proj(h))


def draw(logits_BV, generator):
    """Temperature-1 multinomial draws and their log-probs, in f32."""
    logp_BV = logits_BV.float().log_softmax(-1)
    tokens_B = torch.multinomial(logp_BV.exp(), 1, generator=generator).squeeze(1)
    return tokens_B, logp_BV.gather(1, tokens_B.unsqueeze(1)).squeeze(1)


def generate(model, prompts, max_tokens, dtype, generator):
    """Static batching: every sample decodes until the longest max_tokens. Returns the decode steps."""
    P, T0, G = len(prompts), len(prompts[0]), SAMPLES_PER_PROMPT
    B, steps = P * G, max(max_tokens)
    layer0 = model.layers[0]
    T_max = T0 + steps
    caches = [(torch.empty(B, layer0.K, T_max, layer0.D, dtype=dtype), torch.empty(B, layer0.K, T_max, layer0.D, dtype=dtype))
              for _ in model.layers]
    x_PTC = model.embed_tokens(torch.tensor(prompts))
    for layer, (k, v) in zip(model.layers, caches):
        x_PTC = prefill_block(layer, x_PTC, model.cos_TD[:T0], model.sin_TD[:T0], k, v, G)
    logits_PV = model.lm_head(model.norm(x_PTC[:, -1]))
    tokens_B, logp_B = draw(logits_PV.repeat_interleave(G, dim=0), generator)
    generated, logprobs = [tokens_B], [logp_B]
    for step in range(1, steps):
        t = T0 + step - 1  # the position of the token drawn last
        x_BC = model.embed_tokens(tokens_B)
        for layer, (k, v) in zip(model.layers, caches):
            x_BC = decode_block(layer, x_BC, t, model.cos_TD[t], model.sin_TD[t], k, v)
        tokens_B, logp_B = draw(model.lm_head(model.norm(x_BC)), generator)
        generated.append(tokens_B)
        logprobs.append(logp_B)
    return torch.stack(generated, 1), torch.stack(logprobs, 1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", choices=["f32", "bf16"], default="f32")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    shape = dict(SHAPES["large"], T=PROMPT_LEN + MAX_TOKENS_HIGH)  # rope tables for the longest sample
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    model = LlamaLm(**shape).to(dtype).eval()
    prompts, max_tokens = rollout_workload(shape["V"])
    generator = torch.Generator().manual_seed(0)
    print(f"# torch {torch.__version__}, {args.threads} threads, {args.dtype}, {len(prompts)} prompts x "
          f"{PROMPT_LEN} tokens x n={SAMPLES_PER_PROMPT}, max_tokens {min(max_tokens)}..{max(max_tokens)}", flush=True)
    with torch.inference_mode():
        generate(model, prompts[:4], [8] * 4, dtype, generator)
        start = time.perf_counter()
        tokens, _ = generate(model, prompts, max_tokens, dtype, generator)
        seconds = time.perf_counter() - start
    assert tokens.shape == (len(prompts) * SAMPLES_PER_PROMPT, max(max_tokens))
    useful = SAMPLES_PER_PROMPT * sum(max_tokens)
    print(f"RESULT torch_rollout/{args.dtype} tok_s={useful / seconds:.1f} seconds={seconds:.3f} "
          f"generated_tokens={useful} steps={max(max_tokens)} computed_tokens={tokens.numel()}", flush=True)


if __name__ == "__main__":
    main()

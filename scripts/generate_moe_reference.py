#!/usr/bin/env python3
# Hugging Face parity data for the MoE models (issue #25): tiny random Qwen3-MoE, Qwen2-MoE and
# DeepSeek-V3 folders with float64 log-probs, entropies and gradients computed by transformers' own
# modeling code, plus block-level references of DeepseekV3MoE alone. Writes tests/reference/moe/.
# Run it through scripts/generate_moe_reference.sh, which makes the throwaway venv with the pinned
# torch / transformers; the build and the tests never run it.
#
# Not here: any modeling code of our own. Every number comes from transformers' modules; the only
# intervention is F64Everywhere below, which turns HF's explicit float32 casts (RMSNorm variance, RoPE
# tables, attention and router softmax, DeepSeek's router logits) into float64 ones while the expected
# values are computed, so that the oracle is float64 throughout. `--check` measures what that changes.
#
# Legend: T tokens, C hidden, E experts, V vocab.
import argparse
import contextlib
import copy
import json
import math
import os
import shutil
import sys

import torch
import torch.nn.functional as F
import transformers
from safetensors.torch import load_file, save_file
from transformers import (DeepseekV3Config, DeepseekV3ForCausalLM, Qwen2MoeConfig, Qwen2MoeForCausalLM,
                          Qwen3MoeConfig, Qwen3MoeForCausalLM)
from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3MoE
from transformers.models.qwen3_moe.modeling_qwen3_moe import load_balancing_loss_func

ORACLE_VERSION = "1"
VOCAB = 320
SEQUENCE_LENGTHS = [2, 9, 31, 64]  # as shared/reference/hf_models/tokens.json
TOKEN_SEED = 2025
# The smallest gap between the k-th and (k+1)-th routing score (and, for DeepSeek, between the
# topk_group-th and next group score) that a case may have, 100x the float32 rounding of a probability:
# a near-tie would make a float32 port pick another expert legitimately. A seed that gives less is skipped (recorded as min_routing_margin).
MIN_MARGIN = 1e-5


@contextlib.contextmanager
def f64_everywhere():
    """While active, every explicit cast to float32 (Tensor.float / .to / .type, softmax's dtype=)
    gives float64 instead. HF computes RMSNorm, RoPE, the attention softmax and the routers in float32
    even for a float64 model; these are the only places its code names float32."""
    tensor_float, tensor_to, tensor_type, softmax = torch.Tensor.float, torch.Tensor.to, torch.Tensor.type, F.softmax

    def swap(v):
        return torch.float64 if v is torch.float32 else v

    def to(self, *args, **kwargs):
        args = tuple(swap(a) for a in args)
        if "dtype" in kwargs:
            kwargs["dtype"] = swap(kwargs["dtype"])
        return tensor_to(self, *args, **kwargs)

    def type_(self, dtype=None, *args, **kwargs):
        if dtype is None:
            return tensor_type(self)
        return tensor_type(self, swap(dtype), *args, **kwargs)

    def softmax_(input, dim=None, _stacklevel=3, dtype=None):
        return softmax(input, dim=dim, dtype=swap(dtype))

    torch.Tensor.float = lambda self, *a, **k: tensor_to(self, torch.float64)
    torch.Tensor.to, torch.Tensor.type, F.softmax = to, type_, softmax_
    try:
        yield
    finally:
        torch.Tensor.float, torch.Tensor.to, torch.Tensor.type, F.softmax = tensor_float, tensor_to, tensor_type, softmax


def to_f64(model):
    """model.double(), with the RoPE inverse frequencies recomputed in float64 (HF builds them in float32)."""
    model = model.double()
    for module in model.modules():
        if hasattr(module, "inv_freq") and hasattr(module, "rope_init_fn"):
            with f64_everywhere(), torch.no_grad():
                inv_freq, _ = module.rope_init_fn(module.config, "cpu")
            module.inv_freq = inv_freq.to(torch.float64)
            module.original_inv_freq = module.inv_freq
    return model


def randomize(model, seed, std=0.1, router_std=0.5):
    """Weights away from HF's init so every term shows: norm gains ~ U(0.5, 1.5), biases ~ U(-0.1, 0.1),
    DeepSeek's e_score_correction_bias ~ U(0, 0.2) (keeping scores + bias > 0, see README), routers ~ N(0, 0.5)
    so that routing is decisive, embeddings ~ N(0, 0.3) (tied heads give
    logits of a few nats), everything else ~ N(0, std); all float32 values."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in list(model.named_parameters()) + list(model.named_buffers()):
            if name.endswith("inv_freq") or name.endswith("original_inv_freq"):
                continue
            shape = p.shape
            if name.endswith("norm.weight") or "layernorm" in name and name.endswith("weight"):
                v = torch.rand(shape, generator=g, dtype=torch.float64) + 0.5
            elif name.endswith("e_score_correction_bias"):
                v = torch.rand(shape, generator=g, dtype=torch.float64) * 0.2
            elif name.endswith("bias"):
                v = (torch.rand(shape, generator=g, dtype=torch.float64) - 0.5) * 0.2
            elif name.endswith("gate.weight") and "gate_proj" not in name:  # a router (Qwen's shared_expert_gate too)
                v = torch.randn(shape, generator=g, dtype=torch.float64) * router_std
            elif "embed_tokens" in name:
                v = torch.randn(shape, generator=g, dtype=torch.float64) * 0.3
            else:
                v = torch.randn(shape, generator=g, dtype=torch.float64) * std
            p.copy_(v.to(torch.float32).to(p.dtype))


def softmax_topk_margin(router_logits_TE, k):
    p = torch.softmax(router_logits_TE.double(), dim=-1).sort(dim=-1, descending=True).values
    return float((p[:, k - 1] - p[:, k]).min())


def deepseek_margin(router, x_TC):
    """Smallest gap in DeepSeek's two selections: the topk_group-th group score against the next, and
    the top_k-th bias-corrected score among the kept groups against the next."""
    scores = torch.sigmoid(F.linear(x_TC.double(), router.weight.double()))
    choice = scores + router.e_score_correction_bias.double()
    T, E, G = choice.shape[0], router.n_routed_experts, router.n_group
    groups = choice.view(T, G, E // G).topk(2, dim=-1).values.sum(-1).sort(dim=-1, descending=True).values
    margin = float("inf")
    if router.topk_group < G:
        margin = float((groups[:, router.topk_group - 1] - groups[:, router.topk_group]).min())
    group_idx = choice.view(T, G, E // G).topk(2, dim=-1).values.sum(-1).topk(router.topk_group, dim=-1).indices
    keep = torch.zeros(T, G, dtype=torch.bool).scatter_(1, group_idx, True).repeat_interleave(E // G, dim=1)
    kept = choice.masked_fill(~keep, -math.inf).sort(dim=-1, descending=True).values
    margin = min(margin, float((kept[:, router.top_k - 1] - kept[:, router.top_k]).min()))
    assert float(choice.min()) > 0, "scores + e_score_correction_bias must stay > 0 (HF masks dropped groups with 0.0)"
    return margin


def token_sequences():
    g = torch.Generator().manual_seed(TOKEN_SEED)
    return [torch.randint(0, VOCAB, (n,), generator=g).tolist() for n in SEQUENCE_LENGTHS]


# ---------------------------------------------------------------------------------------------------
# Causal-LM folders


def lm_cases():
    common = dict(vocab_size=VOCAB, bos_token_id=1, eos_token_id=2, max_position_embeddings=4096, rms_norm_eps=1e-6,
                  initializer_range=0.1, attn_implementation="eager")
    return [
        ("qwen3_moe", Qwen3MoeForCausalLM, Qwen3MoeConfig(
            hidden_size=32, intermediate_size=64, moe_intermediate_size=16, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, head_dim=8, num_experts=8, num_experts_per_tok=2,
            norm_topk_prob=True, decoder_sparse_step=1, mlp_only_layers=[], router_aux_loss_coef=0.001,
            rope_theta=10000.0, tie_word_embeddings=False, **common),
         "8 experts top-2, norm_topk_prob true, every layer sparse, untied"),
        ("qwen3_moe_dense_layer", Qwen3MoeForCausalLM, Qwen3MoeConfig(
            hidden_size=32, intermediate_size=48, moe_intermediate_size=12, num_hidden_layers=3,
            num_attention_heads=4, num_key_value_heads=1, head_dim=12, num_experts=6, num_experts_per_tok=3,
            norm_topk_prob=False, decoder_sparse_step=1, mlp_only_layers=[1], router_aux_loss_coef=0.02,
            rope_theta=1000000.0, tie_word_embeddings=True, **common),
         "6 experts top-3, norm_topk_prob false, layer 1 dense (mlp_only_layers [1]), head_dim 12, tied"),
        ("qwen2_moe", Qwen2MoeForCausalLM, Qwen2MoeConfig(
            hidden_size=32, intermediate_size=48, moe_intermediate_size=16, shared_expert_intermediate_size=24,
            num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, num_experts=8,
            num_experts_per_tok=2, norm_topk_prob=False, decoder_sparse_step=1, mlp_only_layers=[],
            router_aux_loss_coef=0.001, rope_theta=1000000.0, tie_word_embeddings=False, **common),
         "8 experts top-2 + shared expert (24) with sigmoid gate, q/k/v bias, norm_topk_prob false, untied"),
        ("deepseek_v3_mla", DeepseekV3ForCausalLM, DeepseekV3Config(
            hidden_size=32, intermediate_size=48, moe_intermediate_size=12, num_hidden_layers=3,
            num_attention_heads=4, num_key_value_heads=4, n_shared_experts=1, n_routed_experts=8,
            num_experts_per_tok=2, n_group=4, topk_group=2, routed_scaling_factor=2.5, norm_topk_prob=True,
            first_k_dense_replace=1, kv_lora_rank=16, q_lora_rank=None, qk_rope_head_dim=4,
            qk_nope_head_dim=8, v_head_dim=8, rope_theta=10000.0, rope_interleave=True,
            tie_word_embeddings=False, **common),
         "MLA (q_lora_rank null, kv_lora_rank 16), layer 0 dense, 8 experts in 4 groups, top-2 of 2 groups, "
         "scaling 2.5, 1 shared expert"),
        ("deepseek_v3_mla_qlora", DeepseekV3ForCausalLM, DeepseekV3Config(
            hidden_size=32, intermediate_size=48, moe_intermediate_size=12, num_hidden_layers=2,
            num_attention_heads=2, num_key_value_heads=2, n_shared_experts=2, n_routed_experts=8,
            num_experts_per_tok=3, n_group=2, topk_group=1, routed_scaling_factor=1.5, norm_topk_prob=False,
            first_k_dense_replace=0, kv_lora_rank=12, q_lora_rank=20, qk_rope_head_dim=8,
            qk_nope_head_dim=8, v_head_dim=12, rope_theta=10000.0, rope_interleave=True,
            tie_word_embeddings=True, **common),
         "MLA with q_lora_rank 20, every layer MoE, 8 experts in 2 groups, top-3 of 1 group, "
         "norm_topk_prob false, scaling 1.5, 2 shared experts, tied"),
    ]


def run_lm(model, arch, sequences, k):
    """f64 forward per sequence (each alone, as one packed document is), log-probs, entropies, the
    losses, the routing margin (DeepSeek's router logits are not returned, so hooks measure it), and for
    Qwen the routing and the per-sequence and pooled router aux losses."""
    margins, hooks = [], []
    if arch == "deepseek_v3":
        for m in model.modules():
            if type(m).__name__ == "DeepseekV3TopkRouter":
                hooks.append(m.register_forward_hook(
                    lambda mod, inp, out: margins.append(deepseek_margin(mod, inp[0].detach().view(-1, mod.config.hidden_size)))))
    result, loss_seq_sum, all_logp, per_layer_logits = [], 0, [], None
    for tokens in sequences:
        ids = torch.tensor([tokens])
        kwargs = {"output_router_logits": True} if arch != "deepseek_v3" else {}
        out = model(input_ids=ids, use_cache=False, **kwargs)
        logits = out.logits[0, :-1].double()
        logp_all = torch.log_softmax(logits, dim=-1)
        logp = logp_all.gather(1, ids[0, 1:, None])[:, 0]
        entropy = -(logp_all.exp() * logp_all).sum(-1)
        seq_loss = -logp.mean()
        loss_seq_sum = loss_seq_sum + seq_loss
        all_logp.append(logp)
        entry = {"tokens": tokens, "logprobs": logp.tolist(), "entropy": entropy.tolist(), "loss": float(seq_loss)}
        if arch != "deepseek_v3":
            entry["aux_loss"] = float(out.aux_loss)
            entry["routing"] = [r.topk(k, dim=-1).indices.tolist() for r in out.router_logits]
            margins.append(min(softmax_topk_margin(r, k) for r in out.router_logits))
            if per_layer_logits is None:
                per_layer_logits = [[] for _ in out.router_logits]
            for layer, r in enumerate(out.router_logits):
                per_layer_logits[layer].append(r)
        result.append(entry)
    for h in hooks:
        h.remove()
    logp_cat = torch.cat(all_logp)
    summary = {"num_predicted_tokens": int(logp_cat.numel()), "loss": float(-logp_cat.mean()),
               "loss_token_mean": float(-logp_cat.mean()),
               "loss_seq_mean": float(loss_seq_sum) / len(sequences), "loss_seq_sum": float(loss_seq_sum),
               "min_routing_margin": min(margins)}
    pooled_aux = None
    if per_layer_logits is not None:
        pooled_aux = load_balancing_loss_func(tuple(torch.cat(l) for l in per_layer_logits),
                                              model.config.num_experts, k, None)
        summary["aux_loss_pooled"] = float(pooled_aux)
    return result, summary, loss_seq_sum, pooled_aux


def grads_of(model, loss):
    model.zero_grad(set_to_none=True)
    loss.backward(retain_graph=True)
    return {n: (p.grad.detach().clone() if p.grad is not None else torch.zeros_like(p)).to(torch.float64).contiguous()
            for n, p in model.named_parameters()}


def write_lm_case(out_dir, name, cls, config, note, sequences, seed):
    arch = config.model_type
    k = config.num_experts_per_tok
    for attempt in range(50):
        torch.manual_seed(seed + attempt)
        model = cls(config).to(torch.float32).eval()
        randomize(model, seed + attempt)
        model.tie_weights()
        m64 = to_f64(copy.deepcopy(model))
        with f64_everywhere():
            seqs, summary, loss_seq_sum, pooled_aux = run_lm(m64, arch, sequences, k)
        if summary["min_routing_margin"] >= MIN_MARGIN:
            break
    else:
        raise RuntimeError(f"{name}: no seed with a routing margin >= {MIN_MARGIN}")
    seed_used = seed + attempt
    with f64_everywhere():
        grads = grads_of(m64, loss_seq_sum)
        grads["loss"] = torch.tensor([float(loss_seq_sum)], dtype=torch.float64)
        aux_grads = None
        if pooled_aux is not None:
            aux_grads = grads_of(m64, pooled_aux)
            aux_grads["aux_loss_pooled"] = torch.tensor([float(pooled_aux)], dtype=torch.float64)

    d = os.path.join(out_dir, name)
    shutil.rmtree(d, ignore_errors=True)
    model.save_pretrained(d, safe_serialization=True)
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    cfg.pop("attn_implementation", None)
    cfg.setdefault("torch_dtype", cfg.get("dtype", "float32"))  # rlforge and older transformers read torch_dtype
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
        f.write("\n")
    save_file(grads, os.path.join(d, "expected_grads.safetensors"))
    if aux_grads is not None:
        save_file(aux_grads, os.path.join(d, "expected_aux_grads.safetensors"))
    doc = {"oracle_version": ORACLE_VERSION, "arch": arch, "precision": "float64", "note": note,
           "seed": seed_used, **summary, "sequences": seqs}
    if arch != "deepseek_v3":
        doc["router_aux_loss_coef"] = config.router_aux_loss_coef
    with open(os.path.join(d, "expected_logprobs.json"), "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print(f"{name}: seed {seed_used}, loss_seq_sum {float(loss_seq_sum):.12f}, "
          f"min routing margin {summary['min_routing_margin']:.3g}")


# ---------------------------------------------------------------------------------------------------
# DeepseekV3MoE alone


def block_cases():
    return [
        ("deepseek_v3_moe_block", dict(
            hidden_size=32, moe_intermediate_size=16, n_routed_experts=16, num_experts_per_tok=4, n_group=4,
            topk_group=2, routed_scaling_factor=2.5, norm_topk_prob=True, n_shared_experts=1),
         "16 experts in 4 groups, top-4 within the best 2 groups, norm_topk_prob true, scaling 2.5, 1 shared"),
        ("deepseek_v3_moe_block_ungrouped", dict(
            hidden_size=24, moe_intermediate_size=8, n_routed_experts=8, num_experts_per_tok=3, n_group=1,
            topk_group=1, routed_scaling_factor=1.0, norm_topk_prob=False, n_shared_experts=2),
         "8 experts, one group, top-3, norm_topk_prob false, scaling 1.0, 2 shared (intermediate 16)"),
    ]


BLOCK_SHAPE = (3, 11)  # (batch, sequence): 33 tokens


def write_block_case(out_dir, name, kwargs, note, seed):
    config = DeepseekV3Config(vocab_size=VOCAB, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4,
                              num_key_value_heads=4, kv_lora_rank=16, q_lora_rank=None, qk_rope_head_dim=4,
                              qk_nope_head_dim=8, v_head_dim=8, **kwargs)
    for attempt in range(50):
        torch.manual_seed(seed + attempt)
        block = DeepseekV3MoE(config).to(torch.float32)
        randomize(block, seed + attempt)
        g = torch.Generator().manual_seed(seed + attempt + 1000)
        x = torch.randn(*BLOCK_SHAPE, config.hidden_size, generator=g).to(torch.float32).double()
        dout = torch.randn(*BLOCK_SHAPE, config.hidden_size, generator=g).to(torch.float32).double()
        block = block.double()
        margin = deepseek_margin(block.gate, x.view(-1, config.hidden_size))
        if margin >= MIN_MARGIN:
            break
    else:
        raise RuntimeError(f"{name}: no seed with a routing margin >= {MIN_MARGIN}")
    seed_used = seed + attempt
    x.requires_grad_(True)
    with f64_everywhere():
        topk_indices, topk_weights = block.gate(x)
        out = block(x)
        loss = (out * dout).sum()
        block.zero_grad(set_to_none=True)
        loss.backward()
    grads = {n: p.grad.detach().contiguous() for n, p in block.named_parameters()}
    order = topk_indices.sort(dim=-1)
    io = {"x": x.detach(), "dout": dout, "out": out.detach().contiguous(), "dx": x.grad.detach().contiguous(),
          "topk_indices": order.values.contiguous(),
          "topk_weights": topk_weights.detach().gather(1, order.indices).contiguous()}
    d = os.path.join(out_dir, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    save_file({n: t.detach().contiguous() for n, t in block.state_dict().items()}, os.path.join(d, "weights.safetensors"))
    save_file(io, os.path.join(d, "io.safetensors"))
    save_file(grads, os.path.join(d, "expected_grads.safetensors"))
    desc = {"oracle_version": ORACLE_VERSION, "module": "transformers.models.deepseek_v3.modeling_deepseek_v3.DeepseekV3MoE",
            "precision": "float64", "note": note, "seed": seed_used, "min_routing_margin": margin,
            "shape_x": list(x.shape), "loss": "sum(out * dout)", "loss_value": float(loss),
            "config": {k_: getattr(config, k_) for k_ in ["hidden_size", "moe_intermediate_size", "n_routed_experts",
                                                          "num_experts_per_tok", "n_group", "topk_group",
                                                          "routed_scaling_factor", "norm_topk_prob",
                                                          "n_shared_experts", "hidden_act"]}}
    with open(os.path.join(d, "block.json"), "w") as f:
        json.dump(desc, f, indent=1)
        f.write("\n")
    print(f"{name}: seed {seed_used}, loss {float(loss):.12f}, min routing margin {margin:.3g}")


# ---------------------------------------------------------------------------------------------------
# --check: reload every folder with transformers and recompute


def directional_fd(model, arch, sequences, k, grads, eps=1e-5, seed=7):
    """Central difference of loss_seq_sum along a random direction (every parameter), against the
    stored gradient's dot product with it: an independent check of the gradients' correctness."""
    g = torch.Generator().manual_seed(seed)
    params = dict(model.named_parameters())
    dirs = {n: torch.randn(p.shape, generator=g, dtype=torch.float64) for n, p in params.items()}
    predicted = sum(float((grads[n] * dirs[n]).sum()) for n in params)

    def loss_at(sign):
        with torch.no_grad():
            for n, p in params.items():
                p.add_(sign * eps * dirs[n])
            loss = run_lm(model, arch, sequences, k)[1]["loss_seq_sum"]
            for n, p in params.items():
                p.sub_(sign * eps * dirs[n])
        return loss

    fd = (loss_at(1) - loss_at(-1)) / (2 * eps)
    return abs(fd - predicted) / abs(predicted)


def padded_batch(model, sequences, expected):
    """HF's own batched path: the four sequences right-padded into one batch with an attention mask.
    Its log-probs must equal the one-at-a-time ones, and its aux_loss (HF masks the padding out of
    load_balancing_loss_func) must equal aux_loss_pooled."""
    T = max(len(s) for s in sequences)
    ids = torch.zeros(len(sequences), T, dtype=torch.long)
    mask = torch.zeros(len(sequences), T, dtype=torch.long)
    for i, s in enumerate(sequences):
        ids[i, :len(s)] = torch.tensor(s)
        mask[i, :len(s)] = 1
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=mask, output_router_logits=True, use_cache=False)
    worst = 0.0
    for i, s in enumerate(sequences):
        logp = torch.log_softmax(out.logits[i, :len(s) - 1].double(), -1).gather(1, ids[i, 1:len(s), None])[:, 0]
        worst = max(worst, float((logp - torch.tensor(expected["sequences"][i]["logprobs"], dtype=torch.float64)).abs().max()))
    return {"padded batch logprobs": worst,
            "padded batch aux_loss vs aux_loss_pooled": abs(float(out.aux_loss) - expected["aux_loss_pooled"])}


def deepseek_block_by_hand(block, x_TC):
    """DeepseekV3MoE written out from its definition (sigmoid scores, bias only for the choice, groups
    scored by their top-2 sum, top_k among the kept groups, weights from the raw scores, optional
    normalisation, scaling, plus the shared experts), to check the block reference independently."""
    r = block.gate
    T, E, G = x_TC.shape[0], r.n_routed_experts, r.n_group
    scores = torch.sigmoid(x_TC @ r.weight.T)
    choice = scores + r.e_score_correction_bias
    group_score = choice.view(T, G, E // G).topk(2, dim=-1).values.sum(-1)
    keep = torch.zeros(T, G, dtype=torch.bool).scatter_(1, group_score.topk(r.topk_group, -1).indices, True)
    idx = choice.masked_fill(~keep.repeat_interleave(E // G, dim=1), -math.inf).topk(r.top_k, -1).indices
    w = scores.gather(1, idx)
    if r.norm_topk_prob:
        w = w / w.sum(-1, keepdim=True)
    w = w * r.routed_scaling_factor

    def mlp(m, h):
        return (F.silu(h @ m.gate_proj.weight.T) * (h @ m.up_proj.weight.T)) @ m.down_proj.weight.T

    out = mlp(block.shared_experts, x_TC)
    for t in range(T):
        for j in range(r.top_k):
            out[t] = out[t] + w[t, j] * mlp(block.experts[int(idx[t, j])], x_TC[t:t + 1])[0]
    return out, idx.sort(-1).values


def check(out_dir):
    worst = {}
    sequences = json.load(open(os.path.join(out_dir, "tokens.json")))["sequences"]
    for name, cls, _, _ in lm_cases():
        d = os.path.join(out_dir, name)
        expected = json.load(open(os.path.join(d, "expected_logprobs.json")))
        model = cls.from_pretrained(d, torch_dtype=torch.float32, attn_implementation="eager").eval()
        assert [s["tokens"] for s in expected["sequences"]] == sequences
        exp = torch.tensor([v for s in expected["sequences"] for v in s["logprobs"]], dtype=torch.float64)
        k = model.config.num_experts_per_tok
        arch = model.config.model_type
        with torch.no_grad():
            f32 = torch.cat([torch.tensor(s["logprobs"]) for s in run_lm(model, arch, sequences, k)[0]]).double()
            m64 = to_f64(cls.from_pretrained(d, torch_dtype=torch.float32, attn_implementation="eager").eval())
            try:
                plain64, _, _, _ = run_lm(m64, arch, sequences, k)
            except RuntimeError as e:  # DeepSeek-V3 as shipped: float32 router weights into a float64 index_add_
                plain64, plain_error = None, str(e).splitlines()[0]
            with f64_everywhere():
                pure64, summary, _, _ = run_lm(m64, arch, sequences, k)
        pure = torch.tensor([v for s in pure64 for v in s["logprobs"]], dtype=torch.float64)
        if plain64 is not None:
            plain = torch.tensor([v for s in plain64 for v in s["logprobs"]], dtype=torch.float64)
        w = {"f64 (float32 casts lifted)": float((pure - exp).abs().max()),
             "f64 (HF as shipped)": float((plain - exp).abs().max()) if plain64 is not None else plain_error,
             "f32 (HF as shipped)": float((f32 - exp).abs().max())}
        if arch != "deepseek_v3":
            w["aux_loss_pooled"] = abs(summary["aux_loss_pooled"] - expected["aux_loss_pooled"])
            w["routing equal"] = all(a["routing"] == b["routing"] for a, b in zip(pure64, expected["sequences"]))
        grads = load_file(os.path.join(d, "expected_grads.safetensors"))
        assert set(grads) - {"loss"} == {n for n, _ in model.named_parameters()}, name
        with f64_everywhere():
            w["grad: directional FD rel. error"] = directional_fd(m64, arch, sequences, k, grads)
            if arch != "deepseek_v3":
                w.update(padded_batch(m64, sequences, expected))
        worst[name] = w
        print(name, w)
        assert w["f64 (float32 casts lifted)"] <= 1e-12 and w["f32 (HF as shipped)"] <= 1e-4, name
        assert w["grad: directional FD rel. error"] <= 1e-6, name
        if arch != "deepseek_v3":
            assert w["padded batch logprobs"] <= 1e-12, name
            assert w["padded batch aux_loss vs aux_loss_pooled"] <= 1e-12, name
    for name, kwargs, _ in block_cases():
        d = os.path.join(out_dir, name)
        desc = json.load(open(os.path.join(d, "block.json")))
        config = DeepseekV3Config(**desc["config"])
        block = DeepseekV3MoE(config).double()
        block.load_state_dict(load_file(os.path.join(d, "weights.safetensors")))
        io = load_file(os.path.join(d, "io.safetensors"))
        x = io["x"].clone().requires_grad_(True)
        with f64_everywhere():
            out = block(x)
            (out * io["dout"]).sum().backward()
        try:
            plain = float((block(io["x"]).detach() - io["out"]).abs().max())
        except RuntimeError as e:
            plain = str(e).splitlines()[0]
        grads = load_file(os.path.join(d, "expected_grads.safetensors"))
        with torch.no_grad():
            by_hand, idx = deepseek_block_by_hand(block, io["x"].view(-1, config.hidden_size))
        w = {"out by hand": float((by_hand.view_as(io["out"]) - io["out"]).abs().max()),
             "routing by hand equal": bool(torch.equal(idx, io["topk_indices"])),
             "out f64 (casts lifted)": float((out.detach() - io["out"]).abs().max()),
             "dx": float((x.grad - io["dx"]).abs().max()),
             "grads": max(float((p.grad - grads[n]).abs().max()) for n, p in block.named_parameters()),
             "out f64 (HF as shipped)": plain}
        print(name, w)
        assert w["out f64 (casts lifted)"] <= 1e-13 and w["grads"] <= 1e-12, name
        assert w["out by hand"] <= 1e-12 and w["routing by hand equal"], name
        worst[name] = w
    with open(os.path.join(out_dir, "check.json"), "w") as f:
        json.dump({"torch": torch.__version__, "transformers": transformers.__version__, "max_abs_diff": worst},
                  f, indent=1)
        f.write("\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests", "reference", "moe"))
    ap.add_argument("--check", action="store_true", help="reload the folders and recompute, do not write")
    ap.add_argument("--seed", type=int, default=1234)
    args = ap.parse_args()
    torch.set_num_threads(1)
    out_dir = os.path.abspath(args.out)
    if args.check:
        check(out_dir)
        return
    os.makedirs(out_dir, exist_ok=True)
    sequences = token_sequences()
    with open(os.path.join(out_dir, "tokens.json"), "w") as f:
        json.dump({"seed": TOKEN_SEED, "sequences": sequences}, f)
        f.write("\n")
    for i, (name, cls, config, note) in enumerate(lm_cases()):
        write_lm_case(out_dir, name, cls, config, note, sequences, args.seed + 100 * i)
    for i, (name, kwargs, note) in enumerate(block_cases()):
        write_block_case(out_dir, name, kwargs, note, args.seed + 1000 + 100 * i)
    with open(os.path.join(out_dir, "provenance.json"), "w") as f:
        json.dump({"torch": torch.__version__, "transformers": transformers.__version__,
                   "python": sys.version.split()[0], "seed": args.seed, "token_seed": TOKEN_SEED,
                   "threads": 1}, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()

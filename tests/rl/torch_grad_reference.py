#!/usr/bin/python3
"""Reference gradients of the actor's loss from torch autograd, for tests/rl/torch_grad_reference_test.cpp.

Writes torch_grad_reference.json next to this file. The losses are written here in torch the way verl
b178a3c writes them in verl/trainer/ppo/core_algos.py (the same torch ops: clamp, maximum, min, where,
sign, sigmoid, detach), so autograd applies the subgradients verl's training gets; the aggregation is
rlforge's global form (src/rl/agg_loss.h), which is linear and carries no convention of its own. The C++
gradients are derived by hand (src/rl/*_losses.cpp, kl_penalty.cpp); this file checks them independently.

Cases: every policy-loss mode x every agg mode on random inputs (some with rollout IS weights), inputs at
and beyond the clamps (the +-20 log-ratio clamp, a ratio bound of exactly 1, gspo's cap at 10, |d| at 0),
every KL estimator at points around its clamps, and the composed actor loss (pg - entropy_coeff * entropy
+ kl_loss_coef * kl) per KL estimator. Everything in float64.

Run:  /usr/bin/python3 tests/rl/torch_grad_reference.py   (written with torch 1.13, numpy 1.24)
"""

import json
import os
import platform

import numpy as np
import torch

DTYPE = torch.float64
AGG_MODES = ["token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"]
MODES = ["vanilla", "gspo", "cispo", "sapo", "geo_mean", "gpg", "kl_cov"]
KL_TYPES = ["k1", "abs", "k2", "k3"]


def aggregate(loss, mask, mode, num_tokens, num_seqs, norm_length):
    """rlforge's LossAggregation::global (agg_loss.h)."""
    if mode == "token-mean":
        return (loss * mask).sum() / num_tokens
    if mode == "seq-mean-token-sum":
        return (loss * mask).sum() / num_seqs
    if mode == "seq-mean-token-mean":
        return ((loss * mask).sum(-1) / (mask.sum(-1) + 1e-8)).sum() / num_seqs
    if mode == "seq-mean-token-sum-norm":
        return (loss * mask).sum() / (norm_length * num_seqs)
    raise ValueError(mode)


def bounds(cfg):
    low = cfg["clip_ratio_low"] if cfg.get("clip_ratio_low") is not None else cfg["clip_ratio"]
    high = cfg["clip_ratio_high"] if cfg.get("clip_ratio_high") is not None else cfg["clip_ratio"]
    return low, high


def policy_loss(mode, old, logp, adv, mask, weights, cfg, agg):
    """The mode's aggregated loss as a differentiable function of logp."""
    low, high = bounds(cfg)
    if mode in ("gspo", "sapo"):
        agg = dict(agg, mode="seq-mean-token-mean")

    def finish(token_loss):
        if weights is not None:
            token_loss = token_loss * weights
        return aggregate(token_loss, mask, **agg)

    if mode == "vanilla":
        log_ratio = torch.clamp(logp - old, min=-20.0, max=20.0)
        ratio = torch.exp(log_ratio)
        unclipped = -adv * ratio
        clipped = -adv * torch.clamp(ratio, 1 - low, 1 + high)
        ppo = torch.maximum(unclipped, clipped)
        dual = torch.min(-adv * cfg["clip_ratio_c"], ppo)
        return finish(torch.where(adv < 0, dual, ppo))
    if mode == "gspo":
        lengths = mask.sum(-1).clamp(min=1)
        seq_log_ratio = ((logp - old) * mask).sum(-1) / lengths
        token_log_ratio = logp - logp.detach() + seq_log_ratio.detach().unsqueeze(-1)
        ratio = torch.exp(torch.clamp(token_log_ratio, max=10.0))
        return finish(torch.maximum(-adv * ratio, -adv * torch.clamp(ratio, 1 - low, 1 + high)))
    if mode == "cispo":
        ratio = torch.exp(torch.clamp(logp - old, min=-20.0, max=20.0))
        held = torch.clamp(ratio, 1 - low, 1 + high).detach()
        return finish(-held * adv * logp)
    if mode == "sapo":
        ratio = torch.exp(torch.clamp(logp - old, min=-20.0, max=20.0))
        tau = torch.where(adv > 0, torch.tensor(cfg["tau_pos"], dtype=DTYPE), torch.tensor(cfg["tau_neg"], dtype=DTYPE))
        gate = torch.sigmoid(tau * (ratio - 1.0)) * (4.0 / tau)
        return finish(-gate * adv)
    if mode == "gpg":
        return finish(-logp * adv)
    if mode == "kl_cov":
        log_ratio = logp - old
        plain = -adv * torch.exp(log_ratio)
        penalised = plain + cfg["ppo_kl_coef"] * log_ratio.abs()
        flat_valid = torch.nonzero(mask.reshape(-1) > 0, as_tuple=True)[0]
        valid_adv = adv.reshape(-1)[flat_valid].detach()
        valid_logp = logp.reshape(-1)[flat_valid].detach()
        covariance = (valid_adv - valid_adv.mean()) * (valid_logp - valid_logp.mean())
        count = max(1, int(len(covariance) * cfg["kl_cov_ratio"]))
        chosen = torch.zeros(mask.numel(), dtype=torch.bool)
        chosen[flat_valid[torch.topk(covariance, count).indices]] = True
        return finish(torch.where(chosen.reshape(mask.shape), penalised, plain))
    if mode == "geo_mean":
        log_ratio = logp - old
        sign = torch.sign(adv)
        held = torch.clamp(log_ratio, -low, high)
        token_log_ratio = sign * torch.min(sign * log_ratio, sign * held)
        lengths = mask.sum(-1)
        seq_ratio = torch.exp((token_log_ratio * mask).sum(-1) / (lengths + 1e-8))
        seq_adv = (adv * mask).sum(-1) / (lengths + 1e-8)
        seq_loss = -seq_adv * seq_ratio
        if weights is not None:
            seq_loss = seq_loss * torch.exp((torch.log(weights + 1e-10) * mask).sum(-1) / (lengths + 1e-8))
        return seq_loss.sum() / agg["num_seqs"]
    raise ValueError(mode)


def kl_penalty(logp, ref, kind):
    if kind == "k1":
        return logp - ref
    if kind == "abs":
        return (logp - ref).abs()
    if kind == "k2":
        return 0.5 * (logp - ref).square()
    if kind == "k3":
        k = torch.clamp(ref - logp, min=-20, max=20)
        return torch.clamp(torch.exp(k) - k - 1, min=-10, max=10)
    raise ValueError(kind)


def tensor(x, grad=False):
    return torch.tensor(np.asarray(x, dtype=np.float64), dtype=DTYPE, requires_grad=grad)


def listed(t):
    return t.detach().numpy().tolist()


def random_mask(rng, B, T):
    mask = np.zeros((B, T))
    for b in range(B):
        if b == B - 1 and B > 2:
            continue  # a fully masked row
        length = 1 + rng.integers(T)
        mask[b, :length] = 1
        if length > 2:
            mask[b, 1 + rng.integers(length - 2)] = 0  # a hole (a multi-turn observation token)
    mask[0, 0] = 1
    return mask


def random_inputs(rng, B, T, with_weights):
    logp = rng.uniform(-3.0, -0.05, (B, T))
    return {
        "old_log_prob": logp - rng.uniform(-0.6, 0.6, (B, T)),
        "log_prob": logp,
        "advantages": rng.choice([-1.0, 1.0], (B, T)) * rng.uniform(0.1, 1.5, (B, T)),
        "response_mask": random_mask(rng, B, T),
        "rollout_is_weights": rng.uniform(0.5, 1.5, (B, T)) if with_weights else None,
    }


BASE_CONFIG = {"clip_ratio": 0.2, "clip_ratio_low": 0.2, "clip_ratio_high": 0.28, "clip_ratio_c": 3.0,
               "tau_pos": 1.0, "tau_neg": 1.05, "kl_cov_ratio": 0.2, "ppo_kl_coef": 0.1}


def policy_case(case_id, mode, agg_mode, inputs, cfg, counts):
    logp = tensor(inputs["log_prob"], grad=True)
    weights = None if inputs["rollout_is_weights"] is None else tensor(inputs["rollout_is_weights"])
    agg = dict(mode=agg_mode, **counts)
    loss = policy_loss(mode, tensor(inputs["old_log_prob"]), logp, tensor(inputs["advantages"]),
                       tensor(inputs["response_mask"]), weights, cfg, agg)
    loss.backward()
    return {"id": case_id, "loss_mode": mode, "loss_agg_mode": agg_mode, "config": cfg, "counts": counts,
            "inputs": {k: (None if v is None else np.asarray(v).tolist()) for k, v in inputs.items()},
            "pg_loss": loss.item(), "dlog_prob": listed(logp.grad)}


def boundary_inputs(mode):
    """Log-ratios at and beyond the clamps, one token each, in two rows."""
    # Columns: the +-20 clamp passing at its bound and holding beyond it, a ratio of exactly 1 (the
    # bound when clip_ratio_low = 0), and a plain token.
    deltas = np.array([[20.0, -20.0, 25.0, -25.0, 0.0, 0.1], [-20.0, 20.0, -25.0, 25.0, 0.0, -0.1]])
    advantages = np.array([[1.0, -1.0, 1.0, -1.0, 0.7, -0.4], [1.0, -1.0, 1.0, 1.0, -0.7, 0.4]])
    if mode == "gspo":  # the sequence log-ratio at gspo's cap (passes) and beyond it (held)
        deltas = np.array([[10.0] * 6, [10.5] * 6])
        advantages = np.array([[-1.0, -0.5, 0.3, -2.0, -1.0, 0.2], [-1.0, -0.5, 0.3, -2.0, -1.0, 0.2]])
    logp = np.full((2, 6), -0.5) + np.minimum(deltas, 0.0)
    return {"old_log_prob": logp - deltas, "log_prob": logp, "advantages": advantages,
            "response_mask": np.ones((2, 6)), "rollout_is_weights": None}


def kl_cases():
    cases = []
    diffs = [-25.0, -20.0, -15.0, -9.0, -2.5, -1.0, -0.3, 0.0, 0.3, 1.0, 2.0, 3.0, 20.0, 25.0]  # ref - logp
    ref = np.linspace(-4.0, -0.5, len(diffs))
    for kind in KL_TYPES:
        logp = tensor(ref - np.array(diffs), grad=True)
        kl = kl_penalty(logp, tensor(ref), kind)
        kl.sum().backward()
        cases.append({"id": "kl/" + kind, "kl_loss_type": kind, "logprob": listed(logp), "ref_logprob": ref.tolist(),
                      "kl": listed(kl), "dkl": listed(logp.grad)})
    return cases


def actor_cases(rng):
    cases = []
    combinations = [("vanilla", "token-mean", "k3"), ("vanilla", "seq-mean-token-mean", "k1"),
                    ("gspo", "seq-mean-token-sum", "abs"), ("geo_mean", "token-mean", "k2"),
                    ("sapo", "seq-mean-token-sum-norm", "k3"), ("cispo", "token-mean", "k2")]
    for i, (mode, agg_mode, kind) in enumerate(combinations):
        B, T = 4, 6
        inputs = random_inputs(rng, B, T, with_weights=i % 2 == 1)
        entropy = rng.uniform(0.1, 3.0, (B, T))
        ref = inputs["log_prob"] + rng.uniform(-1.5, 1.5, (B, T))
        ref[0, 0] = inputs["log_prob"][0, 0] + 3.0  # k3 beyond its outer clamp: no gradient there
        counts = {"num_tokens": float(inputs["response_mask"].sum() + 5), "num_seqs": float(B + 2), "norm_length": 6.0}
        cfg = dict(BASE_CONFIG, entropy_coeff=0.01 * (i + 1), kl_loss_coef=0.05 * (i + 1))
        logp = tensor(inputs["log_prob"], grad=True)
        ent = tensor(entropy, grad=True)
        mask = tensor(inputs["response_mask"])
        weights = None if inputs["rollout_is_weights"] is None else tensor(inputs["rollout_is_weights"])
        agg = dict(mode=agg_mode, **counts)
        pg = policy_loss(mode, tensor(inputs["old_log_prob"]), logp, tensor(inputs["advantages"]), mask, weights,
                         cfg, agg)
        entropy_loss = aggregate(ent, mask, **agg)
        kl_loss = aggregate(kl_penalty(logp, tensor(ref), kind), mask, **agg)
        loss = pg - cfg["entropy_coeff"] * entropy_loss + cfg["kl_loss_coef"] * kl_loss
        loss.backward()
        cases.append({"id": "actor/%d_%s_%s_%s" % (i, mode, agg_mode, kind), "loss_mode": mode,
                      "loss_agg_mode": agg_mode, "kl_loss_type": kind, "config": cfg, "counts": counts,
                      "inputs": {k: (None if v is None else np.asarray(v).tolist()) for k, v in inputs.items()},
                      "entropy": entropy.tolist(), "ref_log_prob": ref.tolist(),
                      "loss": loss.item(), "pg_loss": pg.item(), "entropy_loss": entropy_loss.item(),
                      "kl_loss": kl_loss.item(), "dlog_prob": listed(logp.grad), "dentropy": listed(ent.grad)})
    return cases


def main():
    torch.set_num_threads(1)
    rng = np.random.default_rng(20260901)
    policy = []
    for mode in MODES:
        for j, agg_mode in enumerate(AGG_MODES):
            inputs = random_inputs(rng, 5, 7, with_weights=j % 2 == 1)
            counts = {"num_tokens": float(inputs["response_mask"].sum() + 9), "num_seqs": 8.0, "norm_length": 7.0}
            policy.append(policy_case("policy/%s/%s" % (mode, agg_mode), mode, agg_mode, inputs, BASE_CONFIG, counts))
        counts = {"num_tokens": 12.0, "num_seqs": 2.0, "norm_length": 6.0}
        policy.append(policy_case("policy/%s/boundaries" % mode, mode, "token-mean", boundary_inputs(mode),
                                  dict(BASE_CONFIG, clip_ratio_low=0.0), counts))
    out = {
        "format": "rlforge-torch-grad-reference",
        "produced_with": {"python": platform.python_version(), "torch": torch.__version__, "numpy": np.__version__,
                          "threads": 1, "dtype": "float64"},
        "policy_loss": policy,
        "kl_penalty": kl_cases(),
        "actor_loss": actor_cases(rng),
    }
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_grad_reference.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=None, separators=(",", ":"))
        f.write("\n")
    print("wrote", path, len(policy), "policy cases,", len(out["kl_penalty"]), "kl cases,", len(out["actor_loss"]),
          "actor cases with torch", torch.__version__)


if __name__ == "__main__":
    main()

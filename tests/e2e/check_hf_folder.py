#!/usr/bin/env python3
"""Checks a Hugging Face model folder at the format level, without numpy or safetensors (plain Python).

  check_hf_folder.py DIR ARCH DTYPE TIED [SHARDED]
      ARCH llama / qwen2 / qwen3, DTYPE f32 / bf16, TIED and SHARDED 0 / 1: config.json's architecture,
      torch_dtype, tying and model keys; every tensor the architecture has and no other, with its shape
      and dtype; each file's __metadata__; one model.safetensors, or shards and an index whose
      weight_map agrees with them.
Prints one line and exits 0, or fails an assertion.
"""
import glob, json, os, struct, sys
d, arch, dtype, tied = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"
sharded = len(sys.argv) > 5 and sys.argv[5] == "1"
c = json.load(open(os.path.join(d, "config.json")))
arch_name = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM"}[arch]
assert c["architectures"] == [arch_name] and c["model_type"] == arch, c
assert c["torch_dtype"] == {"f32": "float32", "bf16": "bfloat16"}[dtype], c["torch_dtype"]
assert c["tie_word_embeddings"] == tied
for key in ["vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
            "num_key_value_heads", "rms_norm_eps", "rope_theta", "max_position_embeddings"]:
    assert key in c, key
tensors = {}
files = sorted(glob.glob(os.path.join(d, "*.safetensors")))
for f in files:
    b = open(f, "rb").read()
    (n,) = struct.unpack("<Q", b[:8])
    h = json.loads(b[8:8 + n])
    assert h.get("__metadata__") == {"format": "pt"}, h.get("__metadata__")
    h.pop("__metadata__", None)
    for k, v in h.items():
        assert k not in tensors, f"{k} in two files"
        tensors[k] = (v, os.path.basename(f))
index = os.path.join(d, "model.safetensors.index.json")
if sharded:
    assert len(files) > 1 and os.path.exists(index), files
    weight_map = json.load(open(index))["weight_map"]
    assert weight_map == {k: f for k, (v, f) in tensors.items()}, "index disagrees with the shards"
else:
    assert files == [os.path.join(d, "model.safetensors")] and not os.path.exists(index), files
C, V, F, L = c["hidden_size"], c["vocab_size"], c["intermediate_size"], c["num_hidden_layers"]
H, K = c["num_attention_heads"], c["num_key_value_heads"]
D = c.get("head_dim") or C // H
want = {"model.embed_tokens.weight": [V, C], "model.norm.weight": [C]}
if not tied:
    want["lm_head.weight"] = [V, C]
for l in range(L):
    p = f"model.layers.{l}."
    want.update({p + "input_layernorm.weight": [C], p + "post_attention_layernorm.weight": [C],
                 p + "self_attn.q_proj.weight": [H * D, C], p + "self_attn.k_proj.weight": [K * D, C],
                 p + "self_attn.v_proj.weight": [K * D, C], p + "self_attn.o_proj.weight": [C, H * D],
                 p + "mlp.gate_proj.weight": [F, C], p + "mlp.up_proj.weight": [F, C], p + "mlp.down_proj.weight": [C, F]})
    if arch == "qwen2":
        want.update({p + "self_attn.q_proj.bias": [H * D], p + "self_attn.k_proj.bias": [K * D],
                     p + "self_attn.v_proj.bias": [K * D]})
    if arch == "qwen3":
        want.update({p + "self_attn.q_norm.weight": [D], p + "self_attn.k_norm.weight": [D]})
assert sorted(tensors) == sorted(want), sorted(set(tensors) ^ set(want))
st_dtype = {"f32": "F32", "bf16": "BF16"}[dtype]
for k, (v, _) in tensors.items():
    assert v["shape"] == want[k] and v["dtype"] == st_dtype, (k, v)
print(f"ok format {d}: {arch} {dtype} tied={tied} sharded={sharded}, {len(tensors)} tensors in {len(files)} file(s)")

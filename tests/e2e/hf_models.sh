#!/usr/bin/env bash
# The model commands end to end on tiny folders: init-model (deterministic, a tokenizer src/data loads,
# all three archs), convert HF -> native -> HF byte for byte (f32 and bf16, tied and untied, one file
# and sharded, its split kept), logprobs and generate on the results. SFT on such a folder and its
# export (the walk-through of docs/models.md) is sft_hf_model.sh.
source "$(dirname "$0")/common.sh"
COMPARE="$REPO/tests/e2e/compare_outputs.py"

# format_check DIR ARCH DTYPE TIED [SHARDED]: config keys, tensor names / dtypes / shapes, index.
format_check() { python3 "$REPO/tests/e2e/check_hf_folder.py" "$@"; }

# Scores a few token sequences (ids below 256: bytes in every tokenizer here) to show the folder loads.
echo '{"sequences": [[72, 101, 108, 108, 111], [49, 50, 43, 51, 52, 61]]}' > "$SCRATCH/seqs.json"
loads() { quiet "$RLFORGE" logprobs --model "$1" --input "$SCRATCH/seqs.json" --out "$SCRATCH/lp.json"; }

# --- init-model: every arch, deterministic, a tokenizer that round-trips text -------------------
for arch in llama qwen2 qwen3; do
  for dtype in f32 bf16; do
    for tie in 0 1; do
      out="$SCRATCH/init_${arch}_${dtype}_${tie}"
      quiet "$RLFORGE" init-model --arch $arch --out "$out" --seed 3 --vocab 384 --hidden 32 --layers 2 --heads 4 \
        --kv-heads 2 --ffn 48 --tie $tie --dtype $dtype
      format_check "$out" $arch $dtype $tie
      for f in config.json generation_config.json tokenizer.json tokenizer_config.json special_tokens_map.json; do
        [ -f "$out/$f" ] || fail "$out has no $f"
      done
      loads "$out"
    done
  done
  quiet "$RLFORGE" init-model --arch $arch --out "$SCRATCH/again_$arch" --seed 3 --vocab 384 --hidden 32 --layers 2 \
    --heads 4 --kv-heads 2 --ffn 48 --tie 1 --dtype bf16
  diff -r "$SCRATCH/init_${arch}_bf16_1" "$SCRATCH/again_$arch" > /dev/null || fail "init-model $arch is not deterministic"
  quiet "$RLFORGE" init-model --arch $arch --out "$SCRATCH/seed4_$arch" --seed 4 --vocab 384 --hidden 32 --layers 2 \
    --heads 4 --kv-heads 2 --ffn 48 --tie 1 --dtype bf16
  cmp -s "$SCRATCH/init_${arch}_bf16_1/model.safetensors" "$SCRATCH/seed4_$arch/model.safetensors" \
    && fail "init-model $arch: seeds 3 and 4 gave the same weights"
  text='Hello world! 12 + 34 = 46, said the café. Ünïcödé 😀'
  ids=$("$RLFORGE" tokenize --tokenizer "$SCRATCH/init_${arch}_f32_1" --text "$text")
  back=$("$RLFORGE" tokenize --tokenizer "$SCRATCH/init_${arch}_f32_1" --decode --text "$ids")
  [ "$back" == "$text" ] || fail "$arch tokenizer round trip: '$back'"
  python3 -c "import sys; ids = eval(sys.argv[1]); assert len(ids) < len(sys.argv[2].encode()), ids" "$ids" "$text" \
    || fail "$arch tokenizer merges nothing: $ids"
done
echo "ok init-model: 3 archs x f32/bf16 x tied/untied, deterministic, tokenizers round-trip"
# --tokenizer: a copy of a real tokenizer (Qwen3's, vendored for the tokenizer parity tests); the
# vocabulary defaults to its size, and generate renders Qwen3's thinking chat template with it.
qwen3_tok="$REPO/tests/data/tokenizer_parity/qwen3"
quiet "$RLFORGE" init-model --arch qwen3 --out "$SCRATCH/q3tok" --seed 2 --hidden 32 --layers 1 --heads 2 --kv-heads 1 \
  --ffn 48 --tokenizer "$qwen3_tok"
for f in tokenizer.json tokenizer_config.json; do cmp -s "$qwen3_tok/$f" "$SCRATCH/q3tok/$f" || fail "$f not copied as is"; done
python3 -c "import json, sys; c = json.load(open(sys.argv[1])); assert c['vocab_size'] == 151669 and c['eos_token_id'] == 151645, c" \
  "$SCRATCH/q3tok/config.json" || fail "config of a model with a copied tokenizer"
echo '{"prompt": [{"role": "user", "content": "Hi"}]}' > "$SCRATCH/q3.jsonl"
quiet "$RLFORGE" generate --model "$SCRATCH/q3tok" --prompts "$SCRATCH/q3.jsonl" --max-new-tokens 3 --temperature 0 \
  --out "$SCRATCH/q3.out.jsonl"
python3 -c "import json, sys; r = json.loads(open(sys.argv[1]).read()); assert r['num_prompt_tokens'] == 9, r" \
  "$SCRATCH/q3.out.jsonl" || fail "Qwen3's chat template: <|im_start|>user\\nHi<|im_end|>\\n<|im_start|>assistant\\n is 9 tokens"

# --- convert: HF -> native -> HF is the same folder, byte for byte ------------------------------
for src in "$SCRATCH"/init_*; do
  name=$(basename "$src")
  quiet "$RLFORGE" convert --from "$src" --to "$SCRATCH/native_$name"
  [ -f "$SCRATCH/native_$name/latest_checkpointed_iteration.txt" ] || fail "$name: no native checkpoint"
  quiet "$RLFORGE" convert --from "$SCRATCH/native_$name" --to "$SCRATCH/back_$name"
  diff -r "$src" "$SCRATCH/back_$name" > /dev/null || fail "$name: HF -> native -> HF changed the folder"
done
# Sharded: export with small shards; HF -> native -> HF keeps that split (and the index) byte for
# byte; asking for a size re-shards (here back to one file).
quiet "$RLFORGE" convert --from "$SCRATCH/native_init_qwen2_f32_0" --to "$SCRATCH/sharded" --max-shard-bytes 20000
format_check "$SCRATCH/sharded" qwen2 f32 0 1
python3 "$COMPARE" same-tensors "$SCRATCH/init_qwen2_f32_0" "$SCRATCH/sharded" > /dev/null || fail "sharded export"
quiet "$RLFORGE" convert --from "$SCRATCH/sharded" --to "$SCRATCH/sharded_native"
quiet "$RLFORGE" convert --from "$SCRATCH/sharded_native/global_step_0" --to "$SCRATCH/sharded_back"
diff -r "$SCRATCH/sharded" "$SCRATCH/sharded_back" > /dev/null || fail "sharded -> native -> sharded changed the folder"
quiet "$RLFORGE" convert --from "$SCRATCH/sharded_native" --to "$SCRATCH/unsharded" --max-shard-bytes 5000000000
diff -r "$SCRATCH/init_qwen2_f32_0" "$SCRATCH/unsharded" > /dev/null || fail "sharded -> native -> one file changed"
# --dtype: f32 -> bf16 rounds; bf16 -> f32 -> bf16 is exact.
quiet "$RLFORGE" convert --from "$SCRATCH/native_init_qwen3_bf16_0" --to "$SCRATCH/widened" --dtype f32
format_check "$SCRATCH/widened" qwen3 f32 0
quiet "$RLFORGE" convert --from "$SCRATCH/widened" --to "$SCRATCH/widened_native" --dtype bf16
quiet "$RLFORGE" convert --from "$SCRATCH/widened_native" --to "$SCRATCH/narrowed"
python3 "$COMPARE" same-tensors "$SCRATCH/init_qwen3_bf16_0" "$SCRATCH/narrowed" > /dev/null || fail "bf16 -> f32 -> bf16"
echo "ok convert: HF -> native -> HF byte for byte for 12 folders; sharded; dtype changes"

# --- logprobs agrees between a folder and its bf16 -> f32 widening ----------------------------------
"$RLFORGE" logprobs --model "$SCRATCH/init_qwen3_bf16_0" --input "$SCRATCH/seqs.json" --out "$SCRATCH/a.json" --dtype f64 > /dev/null
"$RLFORGE" logprobs --model "$SCRATCH/widened" --input "$SCRATCH/seqs.json" --out "$SCRATCH/b.json" --dtype f64 > /dev/null
python3 -c "
import json, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert a['logprobs'] == b['logprobs'] and a['entropy'] == b['entropy'], 'widening changed the log-probs'
assert all(len(r) == n - 1 for r, n in zip(a['logprobs'], [5, 6]))
assert abs(a['loss'] + sum(sum(r) for r in a['logprobs']) / 9) < 1e-12" "$SCRATCH/a.json" "$SCRATCH/b.json" \
  || fail "logprobs of a widened folder"

# --- generate ------------------------------------------------------------------------------------
model="$SCRATCH/init_qwen2_f32_1"
g() { "$RLFORGE" generate --model "$model" --max-new-tokens 12 "$@"; }
[ "$(g --prompt 'Hello' --temperature 0)" == "$(g --prompt 'Hello' --temperature 0 --seed 9)" ] \
  || fail "greedy generation depends on the seed"
[ "$(g --prompt 'Hello' --seed 5 --top-k 20 --top-p 0.9)" == "$(g --prompt 'Hello' --seed 5 --top-k 20 --top-p 0.9)" ] \
  || fail "sampled generation is not reproducible"
printf '%s\n' '"What is 2 + 2?"' '{"prompt": [{"role": "user", "content": "Hi"}], "data_source": "x"}' '' \
  '{"prompt": "plain text"}' > "$SCRATCH/prompts.jsonl"
quiet g --prompts "$SCRATCH/prompts.jsonl" --chat --n 3 --seed 1 --out "$SCRATCH/gen.jsonl"
python3 -c "
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
eos = json.load(open(sys.argv[2] + '/generation_config.json'))['eos_token_id']
assert len(rows) == 9, len(rows)
assert [(r['prompt_index'], r['sample_index']) for r in rows] == [(i, j) for i in range(3) for j in range(3)]
for r in rows:
    ids = r['response_ids']
    assert 0 < len(ids) <= 12 and all(0 <= i < 384 for i in ids), r
    assert not any(i in eos for i in ids[:-1]), ('generation went on past an eos', r)
    assert r['finish_reason'] == ('stop' if ids[-1] in eos else 'length'), r
    assert r['finish_reason'] == 'stop' or len(ids) == 12, r
assert rows[3]['prompt']['data_source'] == 'x'
assert rows[0]['num_prompt_tokens'] > 5  # the chat template wrapped the text
assert len(set(tuple(r['response_ids']) for r in rows[:3])) > 1, 'three samples of one prompt are all equal'
" "$SCRATCH/gen.jsonl" "$model" || fail "generate --prompts output"
for arch in llama qwen3; do
  quiet "$RLFORGE" generate --model "$SCRATCH/init_${arch}_bf16_0" --prompt 'Hi' --chat --max-new-tokens 4 --dtype bf16
done
echo "ok generate: greedy, seeded sampling, JSONL with chat messages and --n"

echo "PASS: init-model, convert, logprobs and generate"

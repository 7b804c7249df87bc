#!/usr/bin/env bash
# `rlforge sft` on a Hugging Face folder with its own byte-level BPE tokenizer: the walk-through of
# docs/models.md (generate, SFT, export) on a tiny qwen3 folder made by init-model, so no download.
# The folder is made to look downloaded (a config.json field rlforge does not read, sharded weights
# with an index); SFT reads JSONL data in four scripts, tokenized by the folder's tokenizer.json (the
# logged token counts are checked against `rlforge tokenize`); the loss must fall; the export keeps
# everything but the weights byte for byte (config.json, tokenizer and generation files, shard names,
# index), passes the format check, and reloads in logprobs (lower loss on the training data) and
# generate. Then a tokenizer named for a new model, and the combinations SFT refuses, each a
# ConfigError naming the keys.
source "$(dirname "$0")/common.sh"

# --- a "downloaded" folder --------------------------------------------------------------------------
quiet "$RLFORGE" init-model --arch qwen3 --out "$SCRATCH/init" --seed 5 --vocab 512 --hidden 32 --layers 2 --heads 4 \
  --kv-heads 2 --ffn 64 --tie 0 --dtype bf16
python3 - "$SCRATCH/init/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["transformers_version"] = "4.51.0"
c["layer_types_note"] = {"kept": [1, "x", None]}  # a field rlforge does not read
json.dump(c, open(sys.argv[1], "w"), indent=2, sort_keys=True)
PY
quiet "$RLFORGE" convert --from "$SCRATCH/init" --to "$SCRATCH/init_native"
quiet "$RLFORGE" convert --from "$SCRATCH/init_native" --to "$SCRATCH/model" --max-shard-bytes 40000
model="$SCRATCH/model"
python3 "$REPO/tests/e2e/check_hf_folder.py" "$model" qwen3 bf16 0 1 > /dev/null || fail "the source folder"

quiet "$RLFORGE" generate --model "$model" --prompt 'What is 2 + 2?' --chat --max-new-tokens 8 --temperature 0.7 \
  --top-p 0.9 --seed 1

# --- SFT on JSONL data, tokenized by the folder's tokenizer --------------------------------------
python3 - "$SCRATCH" <<'PY'
import json, sys
rows = [("Translate to English: Katze", "cat"), ("Translate to English: Hund", "dog"),
        ("Übersetze: cat", "Katze"), ("Übersetze: dog", "Hund"), ("Traduis : chat", "cat"),
        ("Traduis : chien", "dog"), ("翻译：猫", "cat"), ("翻译：狗", "dog"), ("12 + 34 =", "46"),
        ("7 * 6 =", "42"), ("Capital of France?", "Paris"), ("Capital of Japan?", "Tokyo"),
        ("Reverse: abc", "cba"), ("Reverse: xyz", "zyx"), ("Say hi in French", "Salut !"),
        ("Say hi in Japanese", "こんにちは")]
with open(sys.argv[1] + "/train.jsonl", "w") as f:
    for p, r in rows:
        f.write(json.dumps({"prompt": p, "response": r}, ensure_ascii=False) + "\n")
with open(sys.argv[1] + "/val.jsonl", "w") as f:
    for p, r in rows[:4]:
        f.write(json.dumps({"prompt": p, "response": r}, ensure_ascii=False) + "\n")
for column in (0, 1):  # one JSON string per line, for `rlforge tokenize --file`
    with open(sys.argv[1] + ("/prompts.jsonl", "/responses.jsonl")[column], "w") as f:
        for row in rows:
            f.write(json.dumps(row[column], ensure_ascii=False) + "\n")
PY
# verl's one-path form of train_files (issue #20: sft and train read the data keys alike); the example's
# built-in task is switched off, since a task and train_files exclude each other.
sft=(sft --config examples/sft_arith.yaml data.train_files="$SCRATCH/train.jsonl" data.val_files="$SCRATCH/val.jsonl"
     data.task=null data.task_kwargs=null
     data.max_length=32 data.train_batch_size=16 data.micro_batch_size_per_gpu=8 data.val_size=4 optim.lr=1e-2
     optim.lr_warmup_steps=1 trainer.test_freq=0 "trainer.logger=[console,jsonl]" trainer.num_threads=2)
quiet "$RLFORGE" "${sft[@]}" model.path="$model" trainer.total_training_steps=8 trainer.save_freq=8 \
  trainer.default_local_dir="$SCRATCH/run"
cp "$SCRATCH/last.log" "$SCRATCH/sft.log"
grep -q "tokenizer $model: 512 ids; each example is prompt response <|im_end|> (id 511)" "$SCRATCH/sft.log" \
  || fail "SFT did not say it frames examples with the folder's tokenizer: $(grep tokenizer "$SCRATCH/sft.log")"
"$RLFORGE" tokenize --tokenizer "$model" --file "$SCRATCH/prompts.jsonl" > "$SCRATCH/prompt_ids.txt"
"$RLFORGE" tokenize --tokenizer "$model" --file "$SCRATCH/responses.jsonl" > "$SCRATCH/response_ids.txt"
python3 - "$SCRATCH" <<'PY' || fail "SFT's tokens are not the folder's BPE tokens, or the loss did not fall"
import json, sys
d = sys.argv[1]
rows = [json.loads(l) for l in open(d + "/run/metrics.jsonl")]
prompts = [json.loads(l) for l in open(d + "/prompt_ids.txt")]
responses = [json.loads(l) for l in open(d + "/response_ids.txt")]
# A step is the 16 rows once (one epoch): no bos (Qwen has none), the prompt, the response, <|im_end|>.
tokens = sum(len(p) + len(r) + 1 for p, r in zip(prompts, responses))
text_bytes = sum(len(json.loads(l).encode()) + 1 for f in ("/prompts.jsonl", "/responses.jsonl") for l in open(d + f))
assert tokens < 0.8 * text_bytes, ("the merges were not used", tokens, text_bytes)
assert [r["perf/tokens"] for r in rows] == [tokens] * 8, ([r["perf/tokens"] for r in rows], tokens)
loss = [r["train/loss"] for r in rows]
assert loss[-1] < loss[0] - 1.0, loss
print(f"ok sft: {tokens} BPE tokens a step; loss {loss[0]:.3f} -> {loss[-1]:.3f}")
PY

# --- export: everything but the weights as the source had it ------------------------------------
quiet "$RLFORGE" convert --from "$SCRATCH/run" --to "$SCRATCH/exported"
exported="$SCRATCH/exported"
[ "$(ls "$model")" == "$(ls "$exported")" ] || fail "exported files differ: $(ls "$exported") vs $(ls "$model")"
for f in config.json generation_config.json tokenizer.json tokenizer_config.json special_tokens_map.json \
         model.safetensors.index.json; do
  cmp -s "$model/$f" "$exported/$f" || fail "exported $f is not the source's, byte for byte"
done
for f in "$model"/*.safetensors; do
  cmp -s "$f" "$exported/$(basename "$f")" && fail "$(basename "$f") was exported unchanged: the training is lost"
done
python3 "$REPO/tests/e2e/check_hf_folder.py" "$exported" qwen3 bf16 0 1 || fail "format of the exported folder"
python3 -c "
import json, sys
c = json.load(open(sys.argv[1] + '/config.json'))
assert c['layer_types_note'] == {'kept': [1, 'x', None]} and c['use_sliding_window'] is False, c
assert c['max_window_layers'] == 2 and c['transformers_version'] == '4.51.0', c
" "$exported" || fail "config.json's extra fields"
# The checkpoint's own huggingface/ part is that folder too.
for f in config.json tokenizer.json generation_config.json; do
  cmp -s "$model/$f" "$SCRATCH/run/global_step_8/huggingface/$f" || fail "the checkpoint's huggingface/$f"
done

# Reloaded: the exported model scores the training data better than the source did, and generates.
python3 - "$SCRATCH" <<'PY'
import json, sys
d = sys.argv[1]
prompts = [json.loads(l) for l in open(d + "/prompt_ids.txt")]
responses = [json.loads(l) for l in open(d + "/response_ids.txt")]
json.dump({"sequences": [p + r + [511] for p, r in zip(prompts, responses)]}, open(d + "/seqs.json", "w"))
PY
quiet "$RLFORGE" logprobs --model "$model" --input "$SCRATCH/seqs.json" --out "$SCRATCH/before.json"
quiet "$RLFORGE" logprobs --model "$exported" --input "$SCRATCH/seqs.json" --out "$SCRATCH/after.json"
python3 -c "
import json, sys
before, after = json.load(open(sys.argv[1]))['loss'], json.load(open(sys.argv[2]))['loss']
assert after < before - 0.5, (before, after)
print(f'ok reload: loss on the training sequences {before:.3f} (source) -> {after:.3f} (exported)')
" "$SCRATCH/before.json" "$SCRATCH/after.json" || fail "the exported weights are not the trained ones"
quiet "$RLFORGE" generate --model "$exported" --prompt 'Translate to English: Katze' --max-new-tokens 4 --temperature 0

# --- model.tokenizer names a folder for a new model --------------------------------------------
quiet "$RLFORGE" "${sft[@]}" model.tokenizer="$model" trainer.total_training_steps=2 trainer.save_freq=2 \
  trainer.default_local_dir="$SCRATCH/new_run"
part="$SCRATCH/new_run/global_step_2/huggingface"
for f in tokenizer.json tokenizer_config.json special_tokens_map.json; do
  cmp -s "$model/$f" "$part/$f" || fail "a new model's export does not carry model.tokenizer's $f"
done
python3 -c "
import json, sys
c = json.load(open(sys.argv[1] + '/config.json'))
assert c['vocab_size'] == 512 and c['eos_token_id'] == 511 and 'bos_token_id' not in c, c
" "$part" || fail "a new model's config.json from model.tokenizer"

# --- what SFT refuses ---------------------------------------------------------------------------
expect_error "model.tokenizer: builtin:arith is not the tokenizer of model.path $model" \
  "${sft[@]}" model.path="$model" model.tokenizer=builtin:arith trainer.default_local_dir="$SCRATCH/x"
expect_error "model.config.vocab_size: 300 is below what model.tokenizer needs: $model needs 512 embedding rows" \
  "${sft[@]}" model.tokenizer="$model" +model.config.vocab_size=300 trainer.default_local_dir="$SCRATCH/x"
# Weights without a tokenizer: another tokenizer may be named, if it fits the vocabulary and the eos.
cp -r "$model" "$SCRATCH/no_tok"
rm "$SCRATCH/no_tok"/tokenizer*.json "$SCRATCH/no_tok/special_tokens_map.json"
qwen3_tokenizer="$REPO/tests/data/tokenizer_parity/qwen3"
expect_error "model.tokenizer: $qwen3_tokenizer needs 151669 embedding rows (its ids, bos and eos), but model.path \
$SCRATCH/no_tok has vocab_size 512" \
  "${sft[@]}" model.path="$SCRATCH/no_tok" model.tokenizer="$qwen3_tokenizer" trainer.default_local_dir="$SCRATCH/x"
expect_error "model.tokenizer: builtin:arith: no eos to end each response with: the tokenizer's eos_token is id 2, \
and the model's generation stops at ids [511, 509]" \
  "${sft[@]}" model.path="$SCRATCH/no_tok" trainer.default_local_dir="$SCRATCH/x"
[ ! -e "$SCRATCH/x/latest_checkpointed_iteration.txt" ] || fail "a refused run trained"
echo "PASS: SFT on an HF folder with its BPE tokenizer, export keeping everything but the weights, refusals named"

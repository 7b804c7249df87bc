#!/usr/bin/env bash
# Bad input to the model commands (init-model, convert, logprobs, generate): each case exits non-zero
# with a one-line `rlforge:` error naming the file, key or option at fault, and leaves what was there intact.
source "$(dirname "$0")/common.sh"

m="$SCRATCH/model"
"$RLFORGE" init-model --arch qwen2 --out "$m" --seed 1 --vocab 300 --hidden 16 --layers 1 --heads 2 --kv-heads 1 \
  --ffn 24 > /dev/null || fail "init-model"
before=$(cd "$m" && sha256sum * | sort)
echo '{"sequences": [[1, 2, 3]]}' > "$SCRATCH/good.json"

# init-model
expect_error "--arch 'gpt2'" init-model --arch gpt2 --out "$SCRATCH/x" --seed 1
expect_error "the folder is not empty" init-model --arch qwen2 --out "$m" --seed 1
expect_error "--vocab 100: a byte-level tokenizer for qwen2 needs at least 259" init-model --arch qwen2 --out "$SCRATCH/x" --seed 1 --vocab 100
expect_error "--kv-heads (num_key_value_heads): 3 does not divide" init-model --arch llama --out "$SCRATCH/x" --seed 1 --kv-heads 3
expect_error "--hidden (hidden_size)" init-model --arch qwen2 --out "$SCRATCH/x" --seed 1 --hidden 18 --heads 4
expect_error "--tie: expected an integer in [0, 1], got '2'" init-model --arch llama --out "$SCRATCH/x" --seed 1 --tie 2
expect_error "smaller than the" init-model --arch qwen2 --out "$SCRATCH/x" --seed 1 --tokenizer "$m" --vocab 260
expect_error "$SCRATCH/nowhere" init-model --arch qwen2 --out "$SCRATCH/x" --seed 1 --tokenizer "$SCRATCH/nowhere"
[ ! -e "$SCRATCH/x" ] || fail "a failed init-model left $SCRATCH/x behind"

# logprobs
expect_error "$SCRATCH/none/config.json: missing" logprobs --model "$SCRATCH/none" --input "$SCRATCH/good.json" --out "$SCRATCH/o.json"
expect_error "$SCRATCH/absent.json: cannot open" logprobs --model "$m" --input "$SCRATCH/absent.json" --out "$SCRATCH/o.json"
echo '{"sequences": [[1, 2' > "$SCRATCH/bad.json"
expect_error "$SCRATCH/bad.json: not valid JSON" logprobs --model "$m" --input "$SCRATCH/bad.json" --out "$SCRATCH/o.json"
echo '{"tokens": [[1, 2]]}' > "$SCRATCH/bad.json"
expect_error "no \"sequences\" key" logprobs --model "$m" --input "$SCRATCH/bad.json" --out "$SCRATCH/o.json"
echo '{"sequences": []}' > "$SCRATCH/bad.json"
expect_error "sequences: expected a non-empty array" logprobs --model "$m" --input "$SCRATCH/bad.json" --out "$SCRATCH/o.json"
echo '{"sequences": [[1, 2], [5]]}' > "$SCRATCH/bad.json"
expect_error "sequences[1]: 1 token(s); at least 2" logprobs --model "$m" --input "$SCRATCH/bad.json" --out "$SCRATCH/o.json"
max_pos=$(python3 -c "import json; print(json.load(open('$m/config.json'))['max_position_embeddings'])")
python3 -c "import json; print(json.dumps({'sequences': [[1] * ($max_pos + 1)]}))" > "$SCRATCH/bad.json"
expect_error "sequences[0]: $((max_pos + 1)) tokens exceed the model's max_position_embeddings $max_pos" \
  logprobs --model "$m" --input "$SCRATCH/bad.json" --out "$SCRATCH/o.json"
echo '{"sequences": [[1, 2, 300]]}' > "$SCRATCH/bad.json"
expect_error "sequences[0][2]: token id 300 is outside the model's vocabulary [0, 300)" logprobs --model "$m" --input "$SCRATCH/bad.json" --out "$SCRATCH/o.json"
echo '{"sequences": [[1, -4]]}' > "$SCRATCH/bad.json"
expect_error "sequences[0][1]: token id -4" logprobs --model "$m" --input "$SCRATCH/bad.json" --out "$SCRATCH/o.json"
echo '{"sequences": [[1, "a"]]}' > "$SCRATCH/bad.json"
expect_error "sequences[0][1]: \"a\" is not a token id" logprobs --model "$m" --input "$SCRATCH/bad.json" --out "$SCRATCH/o.json"
echo '{"sequences": [[1, 2.5]]}' > "$SCRATCH/bad.json"
expect_error "sequences[0][1]: 2.5 is not a token id" logprobs --model "$m" --input "$SCRATCH/bad.json" --out "$SCRATCH/o.json"
expect_error "--temperature: must be a positive number" logprobs --model "$m" --input "$SCRATCH/good.json" --out "$SCRATCH/o.json" --temperature 0
expect_error "$SCRATCH/no_dir/o.json" logprobs --model "$m" --input "$SCRATCH/good.json" --out "$SCRATCH/no_dir/o.json"

# Broken model folders (copies of the good one).
broken() { rm -rf "$SCRATCH/broken"; cp -r "$m" "$SCRATCH/broken"; }
broken; echo '{"model_type": "qwen2",' > "$SCRATCH/broken/config.json"
expect_error "$SCRATCH/broken/config.json: not valid JSON" logprobs --model "$SCRATCH/broken" --input "$SCRATCH/good.json" --out "$SCRATCH/o.json"
broken; python3 -c "
import json, sys; p = sys.argv[1]; c = json.load(open(p)); c['use_sliding_window'] = True; json.dump(c, open(p, 'w'))" "$SCRATCH/broken/config.json"
expect_error "use_sliding_window: in $SCRATCH/broken/config.json" logprobs --model "$SCRATCH/broken" --input "$SCRATCH/good.json" --out "$SCRATCH/o.json"
broken; python3 -c "
import json, sys; p = sys.argv[1]; c = json.load(open(p)); c['rope_scaling'] = {'rope_type': 'yarn', 'factor': 4.0}; json.dump(c, open(p, 'w'))" "$SCRATCH/broken/config.json"
expect_error "rope_scaling.rope_type: in $SCRATCH/broken/config.json: 'yarn' is not supported" convert --from "$SCRATCH/broken" --to "$SCRATCH/y"
broken; python3 -c "
import json, sys; p = sys.argv[1]; c = json.load(open(p)); c['hidden_size'] = 32; json.dump(c, open(p, 'w'))" "$SCRATCH/broken/config.json"
expect_error "hidden_size: 32 in $SCRATCH/broken/config.json, but $SCRATCH/broken/model.safetensors holds model.embed_tokens.weight of shape" logprobs --model "$SCRATCH/broken" --input "$SCRATCH/good.json" --out "$SCRATCH/o.json"
broken; rm "$SCRATCH/broken/model.safetensors"
expect_error "$SCRATCH/broken" logprobs --model "$SCRATCH/broken" --input "$SCRATCH/good.json" --out "$SCRATCH/o.json"
broken; truncate -s 1000 "$SCRATCH/broken/model.safetensors"
expect_error "$SCRATCH/broken/model.safetensors" logprobs --model "$SCRATCH/broken" --input "$SCRATCH/good.json" --out "$SCRATCH/o.json"
broken; echo '{oops' > "$SCRATCH/broken/generation_config.json"
expect_error "$SCRATCH/broken/generation_config.json: not valid JSON" convert --from "$SCRATCH/broken" --to "$SCRATCH/y"
[ ! -e "$SCRATCH/y/config.json" ] || fail "a failed convert wrote a config.json"

# convert
expect_error "--from: no such folder" convert --from "$SCRATCH/nowhere" --to "$SCRATCH/y"
mkdir -p "$SCRATCH/empty"
expect_error "neither a Hugging Face model folder" convert --from "$SCRATCH/empty" --to "$SCRATCH/y"
expect_error "--to: the folder is not empty" convert --from "$m" --to "$m"
"$RLFORGE" convert --from "$m" --to "$SCRATCH/native" > /dev/null || fail "convert"
printf '\x55' | dd of="$SCRATCH/native/global_step_0/actor/model.safetensors" bs=1 seek=300 conv=notrunc status=none
expect_error "checksum mismatch" convert --from "$SCRATCH/native" --to "$SCRATCH/y"

# generate
expect_error "give the input with --prompt or --prompts" generate --model "$m"
expect_error "temperature: must be >= 0" generate --model "$m" --prompt hi --temperature -1
expect_error "top_p: must be in (0, 1]" generate --model "$m" --prompt hi --top-p 0
expect_error "--max-new-tokens: expected an integer in [1, 2147483647], got '0'" generate --model "$m" --prompt hi --max-new-tokens 0
expect_error "--n: expected an integer in [1, 65536], got '0'" generate --model "$m" --prompt hi --n 0
expect_error "--prompt: 2 tokens + --max-new-tokens 100000 exceed max_position_embeddings 4096" generate --model "$m" --prompt hi --max-new-tokens 100000
expect_error "$SCRATCH/absent.jsonl: cannot open" generate --model "$m" --prompts "$SCRATCH/absent.jsonl"
printf '"ok"\n{"prompt": 5}\n' > "$SCRATCH/p.jsonl"
expect_error "$SCRATCH/p.jsonl: line 2: expected a JSON string" generate --model "$m" --prompts "$SCRATCH/p.jsonl"
printf '"ok"\n{"prompt": [1, 2\n' > "$SCRATCH/p.jsonl"
expect_error "$SCRATCH/p.jsonl: line 2: not valid JSON" generate --model "$m" --prompts "$SCRATCH/p.jsonl"
printf '{"prompt": [{"role": "user"}]}\n' > "$SCRATCH/p.jsonl"
expect_error "line 1: message 0: expected" generate --model "$m" --prompts "$SCRATCH/p.jsonl"
printf '{"prompt": [{"role": "tool", "content": "x"}]}\n' > "$SCRATCH/p.jsonl"
expect_error "$SCRATCH/p.jsonl: line 1: " generate --model "$m" --prompts "$SCRATCH/p.jsonl"
expect_error "role \"tool\" is not supported" generate --model "$m" --prompts "$SCRATCH/p.jsonl"
printf '"\xff\xfe"\n' > "$SCRATCH/p.jsonl"
expect_error "$SCRATCH/p.jsonl: line 1: not valid JSON" generate --model "$m" --prompts "$SCRATCH/p.jsonl"
printf '""\n' > "$SCRATCH/p.jsonl"
expect_error "$SCRATCH/p.jsonl: line 1: no tokens" generate --model "$m" --prompts "$SCRATCH/p.jsonl"
expect_error "--prompt: no tokens" generate --model "$m" --prompt ""
expect_error "--prompt: cannot encode: the text is not valid UTF-8" generate --model "$m" --prompt $'\xffabc'
printf '\n\n' > "$SCRATCH/p.jsonl"
expect_error "no prompts" generate --model "$m" --prompts "$SCRATCH/p.jsonl"
broken; rm "$SCRATCH/broken/tokenizer.json"
expect_error "$SCRATCH/broken/tokenizer.json" generate --model "$SCRATCH/broken" --prompt hi
broken; python3 -c "
import json, sys; p = sys.argv[1]; c = json.load(open(p)); del c['chat_template']; json.dump(c, open(p, 'w'))" "$SCRATCH/broken/tokenizer_config.json"
expect_error "chat_template: missing" generate --model "$SCRATCH/broken" --prompt hi --chat

after=$(cd "$m" && sha256sum * | sort)
[ "$before" == "$after" ] || fail "the model folder changed"
echo "PASS: every bad input to init-model, logprobs, convert and generate was a named one-line error"

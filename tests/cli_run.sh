#!/usr/bin/env bash
# cli_run.sh — `tailor run --device cpu`: flags, errors, logits dump, determinism, and (when the
# transformers fixtures are committed) greedy ids identical to transformers'.
set -u
BIN=${TAILOR_BIN:?TAILOR_BIN not set}
SRC=${TAILOR_SOURCE_DIR:?TAILOR_SOURCE_DIR not set}
command -v python3 >/dev/null || { echo "skipped: python3 is needed to write the tiny model"; exit 77; }
TMP=$(mktemp -d /tmp/tailor_cli_run.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
fail=0
check() { # check DESCRIPTION CONDITION...
    local what=$1; shift
    if "$@"; then echo "ok: $what"; else echo "FAIL: $what"; fail=1; fi
}

# A tiny random Gemma 4 checkpoint (bf16, seeded): 2 layers (sliding, full), PLE, window 3.
python3 - "$TMP/m" <<'EOF'
import json, os, random, struct, sys
d = sys.argv[1]; os.makedirs(d)
random.seed(7)
H, L, V, NQ, NKV, HD, GHD, I, P = 16, 2, 32, 2, 1, 8, 16, 16, 4
types = ["sliding_attention", "full_attention"]
cfg = {"architectures": ["Gemma4ForCausalLM"], "model_type": "gemma4_text", "vocab_size": V,
       "hidden_size": H, "intermediate_size": I, "num_hidden_layers": L,
       "num_attention_heads": NQ, "num_key_value_heads": NKV, "head_dim": HD,
       "global_head_dim": GHD, "layer_types": types, "sliding_window": 3,
       "final_logit_softcapping": 30.0, "hidden_size_per_layer_input": P,
       "vocab_size_per_layer_input": V, "num_kv_shared_layers": 0}
json.dump(cfg, open(os.path.join(d, "config.json"), "w"))
def bf16(x):
    b = struct.pack("<f", x); return b[2:4]
T = {}
def add(name, shape, mean=0.0, sd=0.3):
    n = 1
    for s in shape: n *= s
    T[name] = (shape, b"".join(bf16(random.gauss(mean, sd)) for _ in range(n)))
add("model.embed_tokens.weight", [V, H], sd=0.5); add("model.norm.weight", [H], 1, 0.2)
add("model.embed_tokens_per_layer.weight", [V, L * P]); add("model.per_layer_model_projection.weight", [L * P, H])
add("model.per_layer_projection_norm.weight", [P], 1, 0.2)
for i, t in enumerate(types):
    hd = GHD if t == "full_attention" else HD
    p = f"model.layers.{i}."
    for nm in ["input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
               "post_feedforward_layernorm", "post_per_layer_input_norm"]:
        add(p + nm + ".weight", [H], 1, 0.2)
    add(p + "layer_scalar", [1], 1, 0.2)
    add(p + "self_attn.q_proj.weight", [NQ * hd, H]); add(p + "self_attn.k_proj.weight", [NKV * hd, H])
    add(p + "self_attn.v_proj.weight", [NKV * hd, H]); add(p + "self_attn.o_proj.weight", [H, NQ * hd])
    add(p + "self_attn.q_norm.weight", [hd], 1, 0.2); add(p + "self_attn.k_norm.weight", [hd], 1, 0.2)
    add(p + "mlp.gate_proj.weight", [I, H]); add(p + "mlp.up_proj.weight", [I, H]); add(p + "mlp.down_proj.weight", [H, I])
    add(p + "per_layer_input_gate.weight", [P, H]); add(p + "per_layer_projection.weight", [H, P])
hdr, off, blob = {}, 0, b""
for k, (shape, data) in T.items():
    hdr[k] = {"dtype": "BF16", "shape": shape, "data_offsets": [off, off + len(data)]}
    off += len(data); blob += data
h = json.dumps(hdr).encode(); h += b" " * (-len(h) % 8)
open(os.path.join(d, "model.safetensors"), "wb").write(struct.pack("<Q", len(h)) + h + blob)
EOF
M=$TMP/m

out=$("$BIN" run --device gpu --model "$M" --ids 2,3 2>&1); rc=$?
if "$BIN" devices --json 2>/dev/null | grep -q '"devices":[[:space:]]*\[[[:space:]]*{'; then
  check "--device gpu runs on a GPU machine" test $rc -eq 0
else
  check "--device gpu without a GPU fails" test $rc -eq 1
  check "--device gpu names the missing GPU" grep -q "no usable GPU 0 on this machine" <<<"$out"
fi
# --device CPU: the CPU, whatever the case
ids=$("$BIN" run --device CPU --model "$M" --ids 2,3 --max-tokens 2 --print-ids 2>/dev/null); rc=$?
check "--device CPU runs the CPU reference (rc=$rc, ids '$ids')" test $rc -eq 0 -a -n "$ids"
# a GPU by ordinal: gpu:N or cuda:N; GPU 63 is on no machine here
out=$("$BIN" run --device cuda:63 --model "$M" --ids 2,3 2>&1); rc=$?
check "--device cuda:63 fails (rc=$rc)" test $rc -eq 1
check "--device cuda:63 names it ($out)" grep -q "^tailor: --device cuda:63: no usable GPU 63 on this machine" <<<"$out"
for dev in gpu:x cuda: gpu:-1 tpu ""; do
  "$BIN" run --device "$dev" --model "$M" --ids 2,3 >/dev/null 2>"$TMP/err"; rc=$?
  check "--device $dev is a usage error (rc=$rc)" test $rc -eq 2
  check "--device $dev: the sentence lists the forms" \
    grep -q "is none of cpu, gpu, cuda, gpu:N, cuda:N, N" "$TMP/err"
done

"$BIN" run --ids 2,3 >/dev/null 2>&1; rc=$?
check "missing --model is a usage error (exit 2)" test $rc -eq 2
# a bad flag is named as typed, in one line of text (no control bytes from a long flag's value)
"$BIN" run --model "$M" --top-k 2>"$TMP/err"; rc=$?
check "--top-k without its value is a usage error" test $rc -eq 2
check "--top-k without its value is named ($(cat "$TMP/err"))" grep -q "flag '--top-k' needs a value" "$TMP/err"
check "the bad-flag message is one line of printable text" \
  test "$(wc -l <"$TMP/err")" -eq 1 -a -z "$(tr -d '[:print:]\n' <"$TMP/err")"
"$BIN" run --model "$M" --frobnicate 2>"$TMP/err"; rc=$?
check "an unknown flag is named ($(cat "$TMP/err"))" test $rc -eq 2 -a -n "$(grep "flag '--frobnicate' is unknown" "$TMP/err")"
"$BIN" run --model "$M" --print-ids=1 2>"$TMP/err"; rc=$?
check "a value given to --print-ids is named" test $rc -eq 2 -a -n "$(grep "flag '--print-ids' takes no value" "$TMP/err")"
"$BIN" run --model "$M" --ids 2,3 --prompt hi >/dev/null 2>&1; rc=$?
check "--ids with --prompt is a usage error" test $rc -eq 2
for bad in "2,x" "" "2,,5" "2,-5" "5x" "2,5," " 2" "+2" "99999999999"; do
  "$BIN" run --model "$TMP/no-such-model" --ids "$bad" >/dev/null 2>"$TMP/err"; rc=$?
  check "--ids '$bad' is a usage error, before any file is read ($(cat "$TMP/err"))" \
    test $rc -eq 2 -a -n "$(grep -F -- "--ids '$bad' is not a comma-separated list" "$TMP/err")"
done
for flag in --model --prompt-file --dump-logits; do
  args=(--model "$M" --ids 2)
  [ "$flag" = --prompt-file ] && args=(--model "$M")
  "$BIN" run "${args[@]}" "$flag" "" >/dev/null 2>"$TMP/err"; rc=$?
  check "an empty $flag is a usage error ($(cat "$TMP/err"))" \
    test $rc -eq 2 -a -n "$(grep -F -- "$flag is empty" "$TMP/err")"
done
for bad in "" " 5" "-1" "+1" "1x" "99999999999999999999"; do
  "$BIN" run --model "$M" --ids 2 --seed "$bad" >/dev/null 2>"$TMP/err"; rc=$?
  check "--seed '$bad' is a usage error ($(cat "$TMP/err"))" \
    test $rc -eq 2 -a -n "$(grep -F -- "--seed '$bad' is not an integer" "$TMP/err")"
done
"$BIN" run --device cpu --model "$M" --ids 2 --max-tokens 1 --seed 18446744073709551615 --temperature 1 >/dev/null 2>&1
check "--seed takes the largest 64-bit value" test $? -eq 0
echo keep >"$TMP/kept.bin"
"$BIN" run --device cpu --model "$M" --ids 2,99 --dump-logits "$TMP/kept.bin" >/dev/null 2>"$TMP/err"; rc=$?
check "an id outside the vocabulary fails" test $rc -eq 1
check "the id outside the vocabulary is named ($(cat "$TMP/err"))" \
  grep -q "prompt id 99 (position 1) is outside the vocabulary (0..31)" "$TMP/err"
check "a failed run leaves the --dump-logits file as it was" test "$(cat "$TMP/kept.bin")" = keep
check "a failed run leaves no temporary dump behind" test -z "$(ls "$TMP" | grep 'kept.bin.tmp')"

ids=$("$BIN" run --device cpu --model "$M" --ids 2,5,7,9,11,13 --max-tokens 8 --print-ids \
      --dump-logits "$TMP/l.bin" 2>"$TMP/err"); rc=$?
check "greedy run succeeds" test $rc -eq 0
n=$(tr ',' '\n' <<<"$ids" | grep -c '[0-9]')
check "1..8 ids printed ($ids)" test "$n" -ge 1 -a "$n" -le 8
# the first id comes from the prompt's logits: n ids took n - 1 decode steps, and the rate says so
check "the decode rate is over n - 1 steps ($(cat "$TMP/err"))" \
  grep -q "$n generated in [0-9.]* s ($((n - 1)) decode steps, [0-9.]* tok/s)" "$TMP/err"
check "dump holds 6 rows of 32 float32" test "$(stat -c %s "$TMP/l.bin")" -eq $((6 * 32 * 4))
ids2=$("$BIN" run --model "$M" --ids 2,5,7,9,11,13 --max-tokens 8 --print-ids 2>/dev/null)
check "greedy is deterministic" test "$ids" = "$ids2"
s1=$("$BIN" run --model "$M" --ids 2,5 --max-tokens 8 --print-ids --temperature 1.5 --top-k 10 \
     --top-p 0.9 --seed 42 2>/dev/null)
s2=$("$BIN" run --model "$M" --ids 2,5 --max-tokens 8 --print-ids --temperature 1.5 --top-k 10 \
     --top-p 0.9 --seed 42 2>/dev/null)
check "sampling with a seed is reproducible ($s1)" test -n "$s1" -a "$s1" = "$s2"
# sampling flags left out: the checkpoint's generation_config.json, else transformers' defaults
"$BIN" run --device cpu --model "$M" --ids 2,5 --max-tokens 2 --print-ids --temperature 0.7 \
  --seed 1 >/dev/null 2>"$TMP/err"; rc=$?
check "no generation_config.json: transformers' defaults, said ($(head -1 "$TMP/err"))" \
  grep -q "sampling: temperature 0.7 (--temperature), top-k 50 (transformers' default), top-p 1 (transformers' default)" "$TMP/err"
printf '{"temperature": 1.0, "top_k": 64, "top_p": 0.95}' >"$M/generation_config.json"
"$BIN" run --device cpu --model "$M" --ids 2,5 --max-tokens 2 --print-ids --top-k 5 \
  --seed 1 >/dev/null 2>"$TMP/err"; rc=$?
check "generation_config.json fills what the flags leave out (rc=$rc)" \
  grep -q "sampling: temperature 1 (generation_config.json), top-k 5 (--top-k), top-p 0.95 (generation_config.json)" "$TMP/err"
printf '{"top_p": 2}' >"$M/generation_config.json"
"$BIN" run --device cpu --model "$M" --ids 2,5 --max-tokens 2 --temperature 0.7 >/dev/null 2>"$TMP/err"; rc=$?
check "a bad generation_config.json fails (rc=$rc)" test $rc -eq 1
check "... naming the file and field ($(cat "$TMP/err"))" \
  grep -q "generation_config.json: field top_p must be a number in (0, 1\]" "$TMP/err"
"$BIN" run --device cpu --model "$M" --ids 2,5 --max-tokens 2 >/dev/null 2>&1; rc=$?
check "greedy runs do not read its sampling fields (rc=$rc)" test $rc -eq 0
# stop ids: generation_config.json's eos_token_id replaces Gemma 4's -it stops (1, 106, 50).
# A seeded sampled run (its ids vary; greedy ones here repeat a single id) with an id past the
# vocabulary as the stop gives all 16 ids; with the fourth of them as a stop it ends at that
# id's first occurrence (--print-ids shows it), the draws before it unchanged
S="--device cpu --model $M --ids 2,5 --max-tokens 16 --print-ids --temperature 3 --top-k 32 --top-p 1 --seed 7"
printf '{"eos_token_id": [100000]}' >"$M/generation_config.json"
all=$("$BIN" run $S 2>"$TMP/err")
check "eos_token_id [100000]: no early stop, 16 ids ($all)" test "$(tr ',' '\n' <<<"$all" | wc -l)" -eq 16
check "... and the stops are logged with their source ($(grep stops "$TMP/err"))" \
  grep -q "stops at ids 100000 (generation_config.json's eos_token_id)" "$TMP/err"
fourth=$(cut -d, -f4 <<<"$all")
want=$(tr ',' '\n' <<<"$all" | awk -v s="$fourth" '{print} $1 == s {exit}' | paste -sd,)
printf '{"eos_token_id": [100001, %s]}' "$fourth" >"$M/generation_config.json"
got=$("$BIN" run $S 2>/dev/null)
check "eos_token_id [100001, $fourth] ends at $fourth's first occurrence ($got)" \
  test "$got" = "$want" -a "$want" != "$all"
printf '{"eos_token_id": [1, -2]}' >"$M/generation_config.json"
"$BIN" run --device cpu --model "$M" --ids 2,5 --max-tokens 2 >/dev/null 2>"$TMP/err"; rc=$?
check "a bad eos_token_id fails the run, naming the field ($(cat "$TMP/err"))" \
  test $rc -eq 1 -a -n "$(grep 'generation_config.json: field eos_token_id must be' "$TMP/err")"
rm -f "$M/generation_config.json"
"$BIN" run --model "$M" --ids 2 --greedy --temperature 0.5 >/dev/null 2>&1; rc=$?
check "--greedy with --temperature is a usage error" test $rc -eq 2

# the GPU run's flags are refused on the CPU, each named in one sentence (exit 2)
for flag in "--dtype bf16" "--quantize w4a16" "--quantize-head" "--rehearse t4" "--cache $TMP/c.db"; do
  "$BIN" run --device cpu --model "$M" --ids 2,3 $flag >/dev/null 2>"$TMP/err"; rc=$?
  check "run --device cpu $flag is a usage error ($(cat "$TMP/err"))" \
    test $rc -eq 2 -a -n "$(grep -- "${flag%% *} applies to --device gpu only, and this run is on the CPU" "$TMP/err")"
  check "run --device cpu $flag: one line" test "$(wc -l <"$TMP/err")" -eq 1
done
if ! "$BIN" devices --json 2>/dev/null | grep -q '"devices":[[:space:]]*\[[[:space:]]*{'; then
  "$BIN" run --model "$M" --ids 2,3 --quantize-head >/dev/null 2>"$TMP/err"; rc=$?
  check "without a GPU, --quantize-head is refused saying why ($(cat "$TMP/err"))" \
    test $rc -eq 2 -a -n "$(grep "as no GPU was found" "$TMP/err")"
fi
check "no kernel cache was created for the refused --cache" test ! -e "$TMP/c.db"

# a text prompt from the command line, a file or standard input: the same ids as --ids
mkdir "$TMP/p" && cp "$M/config.json" "$M/model.safetensors" "$TMP/p/"
python3 - "$TMP/p/tokenizer.json" <<'EOF4'
import json, sys
vocab = {"<unk>": 0, "<bos>": 2, "a": 3, "b": 4, "c": 5}
vocab.update({"t%d" % i: i for i in range(6, 32)})
json.dump({"added_tokens": [{"id": 2, "content": "<bos>", "special": True}],
           "model": {"type": "BPE", "unk_token": "<unk>", "vocab": vocab, "merges": []}},
          open(sys.argv[1], "w"))
EOF4
# (the prompt's logits dumped: equal files mean equal prompt ids, position by position)
run_p() { "$BIN" run --device cpu --model "$TMP/p" --max-tokens 1 --print-ids "$@" >/dev/null 2>&1; }
run_p --ids 2,3,4,5 --dump-logits "$TMP/want.f32"
run_p --ids 2,3,4,4 --dump-logits "$TMP/other.f32"
run_p --prompt abc --dump-logits "$TMP/prompt.f32"
printf 'abc' >"$TMP/prompt.txt"
run_p --prompt-file "$TMP/prompt.txt" --dump-logits "$TMP/file.f32"
printf 'abc' | run_p --prompt-file - --dump-logits "$TMP/stdin.f32"
check "the dump tells prompts apart" bash -c "test -s '$TMP/want.f32' && ! cmp -s '$TMP/want.f32' '$TMP/other.f32'"
check "--prompt abc is <bos> a b c (--ids 2,3,4,5)" cmp -s "$TMP/want.f32" "$TMP/prompt.f32"
check "--prompt-file gives the same" cmp -s "$TMP/want.f32" "$TMP/file.f32"
check "--prompt-file - reads standard input" cmp -s "$TMP/want.f32" "$TMP/stdin.f32"
"$BIN" run --device cpu --model "$TMP/p" --prompt-file "$TMP/none.txt" >/dev/null 2>"$TMP/err"; rc=$?
check "a missing --prompt-file fails naming it (rc=$rc: $(cat "$TMP/err"))" \
  test $rc -eq 1 -a -n "$(grep "$TMP/none.txt: cannot open: No such file or directory" "$TMP/err")"
"$BIN" run --device cpu --model "$TMP/p" --prompt abc --prompt-file "$TMP/prompt.txt" >/dev/null 2>"$TMP/err"; rc=$?
check "--prompt with --prompt-file is a usage error (rc=$rc)" \
  test $rc -eq 2 -a -n "$(grep "give exactly one of --ids, --prompt and --prompt-file" "$TMP/err")"
"$BIN" run --device cpu --model "$TMP/p" --ids 2,3 --chat >/dev/null 2>"$TMP/err"; rc=$?
check "--chat with --ids is a usage error (rc=$rc)" test $rc -eq 2
"$BIN" run --device cpu --model "$TMP/p" --ids 2,3 --system hi >/dev/null 2>"$TMP/err"; rc=$?
check "--system with --ids is a usage error naming --system ($(cat "$TMP/err"))" \
  test $rc -eq 2 -a -n "$(grep -- "--system needs --prompt or --prompt-file" "$TMP/err")"

# --chat, --system and --think through a tokenizer with Gemma 4's turn and think tokens: the
# prompt's ids, as the logits of every prompt position tell (equal dumps: equal ids)
mkdir "$TMP/c" && cp "$M/config.json" "$M/model.safetensors" "$TMP/c/"
python3 - "$TMP/c/tokenizer.json" <<'EOF5'
import json, sys
chars = "\nsytemurodlHi"
vocab = {"<unk>": 0, "<eos>": 1, "<bos>": 2}
vocab.update({c: 3 + i for i, c in enumerate(chars)})
vocab.update({"t%d" % i: i for i in range(3 + len(chars), 29)})
vocab.update({"<|think|>": 29, "<|turn>": 30, "<turn|>": 31})
json.dump({"added_tokens": [{"id": i, "content": t, "special": True}
                            for t, i in (("<bos>", 2), ("<|turn>", 30), ("<turn|>", 31),
                                         ("<|think|>", 29))],
           "model": {"type": "BPE", "unk_token": "<unk>", "vocab": vocab, "merges": []}},
          open(sys.argv[1], "w"))
EOF5
run_c() { "$BIN" run --device cpu --model "$TMP/c" --max-tokens 1 --print-ids "$@" >/dev/null 2>"$TMP/err"; }
# <bos><|turn>user\nHi<turn|>\n<|turn>model\n; with a system turn <|turn>system\nHi<turn|>\n first
user_ids=30,9,4,7,10,3,14,15,31,3,30,8,11,12,7,13,3
run_c --ids "2,$user_ids" --dump-logits "$TMP/chat-want.f32"
run_c --ids "2,30,4,5,4,6,7,8,3,14,15,31,3,$user_ids" --dump-logits "$TMP/sys-want.f32"
run_c --chat --prompt " Hi " --dump-logits "$TMP/chat.f32"
check "--chat gives the one-turn prompt ($(cat "$TMP/err"))" cmp -s "$TMP/chat-want.f32" "$TMP/chat.f32"
run_c --system $'\tHi ' --prompt Hi --dump-logits "$TMP/sys.f32"
check "--system puts a system turn first, trimmed, and implies --chat ($(cat "$TMP/err"))" \
  cmp -s "$TMP/sys-want.f32" "$TMP/sys.f32"
check "... which the logits tell from the one-turn prompt" bash -c "! cmp -s '$TMP/chat.f32' '$TMP/sys.f32'"
# thinking on: <bos><|turn>system\n<|think|>\n[Hi]<turn|>\n, then the user turn
run_c --ids "2,30,4,5,4,6,7,8,3,29,3,31,3,$user_ids" --dump-logits "$TMP/think-want.f32"
run_c --think --prompt Hi --dump-logits "$TMP/think.f32"
check "--think opens a system turn with <|think|> and implies --chat ($(cat "$TMP/err"))" \
  cmp -s "$TMP/think-want.f32" "$TMP/think.f32"
run_c --ids "2,30,4,5,4,6,7,8,3,29,3,14,15,31,3,$user_ids" --dump-logits "$TMP/think-sys-want.f32"
run_c --think --system " Hi" --prompt Hi --dump-logits "$TMP/think-sys.f32"
check "--think with --system: <|think|>\\n, then the system text ($(cat "$TMP/err"))" \
  cmp -s "$TMP/think-sys-want.f32" "$TMP/think-sys.f32"
"$BIN" run --device cpu --model "$TMP/p" --ids 2,3 --think >/dev/null 2>"$TMP/err"; rc=$?
check "--think with --ids is a usage error naming --think ($(cat "$TMP/err"))" \
  test $rc -eq 2 -a -n "$(grep -- "--think needs --prompt or --prompt-file" "$TMP/err")"

# text output through a tokenizer.json: the first greedy id of prompt 2,3 made a byte-fallback
# lead byte (<0xC3>), so that generation stops inside a character; the held byte comes out as
# U+FFFD at the end (it used to be dropped). The same id spelled by 300 bytes, more than the
# streaming buffer holds: the run fails naming the token instead of dropping its text.
first=$("$BIN" run --device cpu --model "$M" --ids 2,3 --max-tokens 1 --print-ids 2>/dev/null)
mkdir "$TMP/t" && cp "$M/config.json" "$M/model.safetensors" "$TMP/t/"
write_tokenizer() { # write_tokenizer TOKEN_OF_FIRST
python3 - "$TMP/t/tokenizer.json" "$first" "$1" <<'EOF3'
import json, sys
path, first, spelled = sys.argv[1], int(sys.argv[2]), sys.argv[3]
vocab = {("<unk>" if i == 0 else spelled if i == first else "t%d" % i): i for i in range(32)}
dec = [{"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
       {"type": "ByteFallback"}, {"type": "Fuse"}]
json.dump({"version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
           "normalizer": None, "pre_tokenizer": None, "post_processor": None,
           "decoder": {"type": "Sequence", "decoders": dec},
           "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>",
                     "continuing_subword_prefix": None, "end_of_word_suffix": None,
                     "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                     "vocab": vocab, "merges": []}}, open(path, "w"))
EOF3
}
check "the first greedy id ($first) is an ordinary token" test -n "$first" -a "$first" != 0 -a "$first" != 1
write_tokenizer "<0xC3>"
"$BIN" run --device cpu --model "$TMP/t" --ids 2,3 --max-tokens 1 >"$TMP/out" 2>"$TMP/err"; rc=$?
check "a held byte at max tokens: exit 0 ($(cat "$TMP/err"))" test $rc -eq 0
check "a held byte at max tokens comes out as U+FFFD ($(od -An -tx1 "$TMP/out"))" \
  test "$(od -An -tx1 "$TMP/out" | tr -d ' \n')" = "efbfbd0a"
write_tokenizer "$(printf 'x%.0s' $(seq 600))"
"$BIN" run --device cpu --model "$TMP/t" --ids 2,3 --max-tokens 2 >/dev/null 2>"$TMP/err"; rc=$?
check "a token the decoder cannot stream fails the run (rc $rc)" test $rc -eq 1
check "the failed decode is named ($(cat "$TMP/err"))" \
  grep -q "decoding generated token $first: the output buffer of 512 bytes is too small for token $first (600 bytes)" "$TMP/err"
check "the failed decode is one line" test "$(wc -l <"$TMP/err")" -eq 1
# a tokenizer.json that cannot be read fails a run whose output is text, naming it; with
# --print-ids (no text) it is not needed
printf '{"model": {' >"$TMP/t/tokenizer.json"
"$BIN" run --device cpu --model "$TMP/t" --ids 2,3 --max-tokens 1 >/dev/null 2>"$TMP/err"; rc=$?
check "a malformed tokenizer.json fails a text run ($(cat "$TMP/err"))" \
  test $rc -eq 1 -a -n "$(grep -F "tokenizer.json" "$TMP/err")"
"$BIN" run --device cpu --model "$TMP/t" --ids 2,3 --max-tokens 1 --print-ids >/dev/null 2>&1
check "... and is not needed with --print-ids" test $? -eq 0

# a NaN in the weights (the final norm): the CPU forward reports it, exit 1, and the
# --dump-logits file of an earlier run stays as it was
mkdir "$TMP/nan" && cp "$M/config.json" "$M/model.safetensors" "$TMP/nan/"
python3 - "$TMP/nan/model.safetensors" <<'EOF2'
import json, struct, sys
f = open(sys.argv[1], "r+b"); n = struct.unpack("<Q", f.read(8))[0]
off = json.loads(f.read(n))["model.norm.weight"]["data_offsets"][0]
f.seek(8 + n + off); f.write(struct.pack("<H", 0x7fc0))  # bf16 NaN
EOF2
cp "$TMP/l.bin" "$TMP/l_before.bin"
"$BIN" run --device cpu --model "$TMP/nan" --ids 2,3 --dump-logits "$TMP/l.bin" >/dev/null 2>"$TMP/err"; rc=$?
check "NaN weights fail on the CPU (rc $rc)" test $rc -eq 1
check "NaN weights are reported ($(cat "$TMP/err"))" grep -q "gemma4 cpu: inf or NaN in the activations" "$TMP/err"
check "a run whose forward failed leaves --dump-logits as it was" cmp -s "$TMP/l.bin" "$TMP/l_before.bin"

# a truncated checkpoint: one sentence naming the file, exit 1
mkdir "$TMP/bad" && cp "$M/config.json" "$TMP/bad/"
head -c 5000 "$M/model.safetensors" >"$TMP/bad/model.safetensors"
out=$("$BIN" run --model "$TMP/bad" --ids 2 2>&1); rc=$?
check "truncated checkpoint fails with exit 1" test $rc -eq 1
check "the message names the file ($out)" grep -q "model.safetensors" <<<"$out"

# broken checkpoints through the command: a config whose layer_types is one short, a tensor
# whose shape is transposed (same bytes), a header length larger than the file. Each: exit 1,
# one line naming the file and the field, and the --dump-logits file left as it was.
for b in types shape hlen; do mkdir "$TMP/$b" && cp "$M/config.json" "$M/model.safetensors" "$TMP/$b/"; done
python3 - "$TMP" <<'EOF3'
import json, struct, sys
t = sys.argv[1]
cfg = json.load(open(t + "/types/config.json")); cfg["layer_types"] = cfg["layer_types"][:1]
json.dump(cfg, open(t + "/types/config.json", "w"))
f = open(t + "/shape/model.safetensors", "r+b"); n = struct.unpack("<Q", f.read(8))[0]
h = json.loads(f.read(n)); e = h["model.layers.0.per_layer_input_gate.weight"]
e["shape"] = e["shape"][::-1]
raw = json.dumps(h).encode(); raw += b" " * (n - len(raw))
f.seek(8); f.write(raw); f.close()
f = open(t + "/hlen/model.safetensors", "r+b"); f.write(struct.pack("<Q", 1 << 40)); f.close()
EOF3
for b in "types:config.json:layer_types" "shape:model.safetensors:model.layers.0.per_layer_input_gate.weight" \
         "hlen:model.safetensors:header length"; do
    IFS=: read -r dir file field <<<"$b"
    "$BIN" run --device cpu --model "$TMP/$dir" --ids 2,3 --dump-logits "$TMP/kept.bin" >/dev/null 2>"$TMP/err"; rc=$?
    check "broken checkpoint ($dir) fails with exit 1 (rc $rc)" test $rc -eq 1
    check "it says so in one line naming $file and '$field' ($(cat "$TMP/err"))" \
      test "$(wc -l <"$TMP/err")" -eq 1 -a -n "$(grep -F "$file" "$TMP/err" | grep -F "$field")"
    check "and leaves --dump-logits as it was" test "$(cat "$TMP/kept.bin")" = keep
done

# the committed transformers fixtures: greedy ids identical to generate(do_sample=False)
compared=0
for fx in "$SRC"/tests/fixtures/*/; do
    [ -f "$fx/expected.json" ] || continue
    read -r prompt want <<<"$(python3 -c "import json,sys; e=json.load(open(sys.argv[1])); \
print(','.join(map(str,e['prompt_ids'])), ','.join(map(str,e['greedy_ids'])))" "$fx/expected.json")"
    nt=$(tr ',' '\n' <<<"$want" | grep -c '[0-9]')
    got=$("$BIN" run --model "$fx" --ids "$prompt" --max-tokens "$nt" --print-ids 2>/dev/null)
    check "$(basename "$fx"): expected.json gives a prompt and greedy ids" test -n "$prompt" -a -n "$want"
    check "$(basename "$fx"): greedy ids match transformers ($got vs $want)" test "$got" = "$want"
    compared=$((compared + 1))
done
check "the fixtures were compared ($compared)" test "$compared" -gt 0
exit $fail

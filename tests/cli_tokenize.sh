#!/usr/bin/env bash
# cli_tokenize.sh — `tailor tokenize`: ids out, flags, and one-sentence failures on bad input.
set -u
BIN=${TAILOR_BIN:-tailor}
SRC=${TAILOR_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
SHARED=${TAILOR_SHARED_DIR:-$SRC/../shared}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fails=0 checks=0

check() { # check NAME CONDITION-STATUS
    checks=$((checks + 1))
    if [ "$2" -ne 0 ]; then
        fails=$((fails + 1))
        echo "FAIL: $1" >&2
    fi
}

# expect_fail NAME CODE NEEDLE CMD...: exits CODE, prints one line on stderr containing NEEDLE
expect_fail() {
    local name=$1 code=$2 needle=$3
    shift 3
    "$@" >"$TMP/out" 2>"$TMP/err"
    local rc=$?
    check "$name: exit $rc, want $code" $([ $rc -eq "$code" ]; echo $?)
    check "$name: stderr lacks '$needle': $(cat "$TMP/err")" $(grep -qF -- "$needle" "$TMP/err"; echo $?)
    check "$name: stderr is not one line" $([ "$(wc -l <"$TMP/err")" -eq 1 ]; echo $?)
    check "$name: stdout is not empty" $([ ! -s "$TMP/out" ]; echo $?)
}

# ---- usage errors and bad files (no ../shared needed)
expect_fail "unknown flag" 2 "--frobnicate" "$BIN" tokenize --frobnicate
expect_fail "no tokenizer" 2 "--tokenizer" "$BIN" tokenize --text hi
expect_fail "both sources" 2 "--text" "$BIN" tokenize --tokenizer x.json --text hi --file y
expect_fail "missing value" 2 "flag '--tokenizer' needs a value" "$BIN" tokenize --tokenizer
expect_fail "missing tokenizer" 1 "$TMP/none.json" "$BIN" tokenize --tokenizer "$TMP/none.json" --text hi
mkdir -p "$TMP/model"
expect_fail "model dir without tokenizer.json" 1 "$TMP/model/tokenizer.json" "$BIN" tokenize --model "$TMP/model" --text hi
printf '{"model": {"type": "BPE", "vocab": {"a": 0}, ' >"$TMP/truncated.json"
expect_fail "truncated tokenizer.json" 1 "malformed JSON" "$BIN" tokenize --tokenizer "$TMP/truncated.json" --text hi
printf '{"model": {"type": "BPE", "merges": []}}' >"$TMP/novocab.json"
expect_fail "tokenizer.json without vocab" 1 "model.vocab" "$BIN" tokenize --tokenizer "$TMP/novocab.json" --text hi
printf '{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": [["a", "b"]]}}' >"$TMP/badmerge.json"
expect_fail "merge result not in vocab" 1 "model.merges[0]" "$BIN" tokenize --tokenizer "$TMP/badmerge.json" --text hi

# ---- a tiny valid tokenizer: works without ../shared
printf '{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": [["a", "b"]]}}' >"$TMP/tiny.json"
out=$("$BIN" tokenize --tokenizer "$TMP/tiny.json" --text abba)
check "tiny tokenizer: '$out'" $([ "$out" = "2 1 0" ]; echo $?)
expect_fail "missing text file" 1 "$TMP/none.txt" "$BIN" tokenize --tokenizer "$TMP/tiny.json" --file "$TMP/none.txt"
expect_fail "add-bos without <bos>" 1 "<bos>" "$BIN" tokenize --tokenizer "$TMP/tiny.json" --text ab --add-bos
expect_fail "--chat with --add-bos" 2 "--add-bos and --chat do not go together" \
    "$BIN" tokenize --tokenizer "$TMP/tiny.json" --text ab --chat --add-bos
expect_fail "--chat without turn tokens" 1 "lacks <bos>" "$BIN" tokenize --tokenizer "$TMP/tiny.json" --text ab --chat

TOK=$SHARED/data/gemma3-tokenizer/tokenizer.json
if [ ! -f "$TOK" ]; then
    echo "$checks checks, $fails failed; the real-tokenizer checks were skipped: ../shared is absent"
    [ $fails -eq 0 ] || exit 1
    exit 77
fi

# ---- the real Gemma tokenizer
out=$("$BIN" tokenize --tokenizer "$TOK" --text "Hello world")
check "plain ids: '$out'" $([ "$out" = "9259 1902" ]; echo $?)
out=$("$BIN" tokenize --tokenizer "$TOK" --text "Hello world" --json --add-bos)
check "json + bos: '$out'" $([ "$out" = "[2,9259,1902]" ]; echo $?)
ln -s "$TOK" "$TMP/model/tokenizer.json"
out=$("$BIN" tokenize --model "$TMP/model" --text "<start_of_turn>user")
check "--model DIR: '$out'" $([ "$out" = "105 2364" ]; echo $?)
# the chat prompt tailor run --chat / --system uses: Hugging Face tokenizers 0.23.2 on the
# rendered "<bos><start_of_turn>[system\nBe brief.<end_of_turn>\n<start_of_turn>]user\nHi..."
out=$("$BIN" tokenize --model "$TMP/model" --chat --text " Hi ")
check "--chat: '$out'" $([ "$out" = "2 105 2364 107 10979 106 107 105 4368 107" ]; echo $?)
out=$("$BIN" tokenize --model "$TMP/model" --system "Be brief." --text Hi)
check "--system: '$out'" \
    $([ "$out" = "2 105 9731 107 3912 8652 236761 106 107 105 2364 107 10979 106 107 105 4368 107" ]; echo $?)
expect_fail "--think with a tokenizer without <|think|>" 1 "lacks <|think|>" \
    "$BIN" tokenize --model "$TMP/model" --think --text Hi
# the chat prompt with Gemma 4's control tokens: the Gemma tokenizer with its added tokens 98,
# 100, 101, 105 and 106 named <|think|>, <|channel>, <channel|>, <|turn> and <turn|> as Gemma 4's
# tokenizer names them (GEMMA4.md §4); the ids are Hugging Face tokenizers 0.23.2 (npm) encoding
# the rendered prompt without special tokens added, e.g.
# "<bos><|turn>system\n<|think|>\nBe brief.<turn|>\n<|turn>user\nWhy is the sky blue?<turn|>\n..."
python3 - "$TOK" "$TMP/g4.json" <<'EOF6'
import json, sys
t = json.load(open(sys.argv[1], encoding="utf-8"))
names = {98: "<|think|>", 100: "<|channel>", 101: "<channel|>", 105: "<|turn>", 106: "<turn|>"}
for a in t["added_tokens"]:
    if a["id"] in names:
        del t["model"]["vocab"][a["content"]]
        a["content"], a["special"] = names[a["id"]], True
        t["model"]["vocab"][a["content"]] = a["id"]
json.dump(t, open(sys.argv[2], "w", encoding="utf-8"), ensure_ascii=False)
EOF6
g4() { "$BIN" tokenize --tokenizer "$TMP/g4.json" "$@"; }
out=$(g4 --think --text Hi)
check "--think, no system text: '$out'" \
    $([ "$out" = "2 105 9731 107 98 107 106 107 105 2364 107 10979 106 107 105 4368 107" ]; echo $?)
out=$(g4 --think --system " Be brief." --text "Why is the sky blue? ")
check "--think --system: '$out'" $([ "$out" = "2 105 9731 107 98 107 3912 8652 236761 106 107 105 \
2364 107 11355 563 506 7217 3730 236881 106 107 105 4368 107" ]; echo $?)
out=$(g4 --system "You answer in French." --text $'\n\nHello\tworld  ')
check "--system, text trimmed: '$out'" $([ "$out" = "2 105 9731 107 3048 3890 528 7830 236761 106 107 \
105 2364 107 9259 255968 12392 106 107 105 4368 107" ]; echo $?)
out=$(g4 --think --system $'- one\n- two\n' --text $'\'quoted\'\n\nnext')
check "--think with a list for a system text: '$out'" $([ "$out" = "2 105 9731 107 98 107 236772 886 107 \
236772 1156 106 107 105 2364 107 236789 148758 236789 108 4874 106 107 105 4368 107" ]; echo $?)
out=$(g4 --chat --text "¿Qué tal? 日本語")
check "--chat, two scripts: '$out'" $([ "$out" = "2 105 2364 107 237665 24338 5883 236881 33375 238582 \
106 107 105 4368 107" ]; echo $?)
out=$("$BIN" tokenize --model "$TMP/model" --text ""); rc=$?
check "empty text: exit 0 and no ids (rc $rc, '$out')" $([ $rc -eq 0 ] && [ "$out" = "" ]; echo $?)
if command -v python3 >/dev/null && [ -f "$SRC/tests/tokenizer/expected.json" ]; then
    want=$(python3 -c 'import json,sys; print(" ".join(map(str, json.load(open(sys.argv[1]))["whole"]["ids"])))' \
        "$SRC/tests/tokenizer/expected.json")
    got=$("$BIN" tokenize --tokenizer "$TOK" --file "$SRC/tests/tokenizer/corpus.txt")
    check "--file corpus.txt matches expected.json" $([ "$got" = "$want" ]; echo $?)
    got=$("$BIN" tokenize --tokenizer "$TOK" --file - <"$SRC/tests/tokenizer/corpus.txt")
    check "--file - (stdin) matches expected.json" $([ "$got" = "$want" ]; echo $?)
fi

echo "$checks passed, $fails failed" | sed "s/^$checks passed/$((checks - fails)) passed/"
[ $fails -eq 0 ]

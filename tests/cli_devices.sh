# cli_devices.sh — `tailor devices` and `--json`: the driver line or the live GPUs, every profile,
# a bad flag in one sentence, and no link-time dependency on libcuda.
set -u
: "${TAILOR_BIN:?TAILOR_BIN must name the tailor binary}"

fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

profiles="t4 l4 a10g a100-40gb a100-80gb h100 h200 rtx3090 rtx4090 tpu-v5e tpu-v6e"

# ---- text ------------------------------------------------------------------------------------
"$TAILOR_BIN" devices >"$tmp/out" 2>"$tmp/err"
rc=$?
[ "$rc" -eq 0 ] || fail "tailor devices exited $rc: $(cat "$tmp/err")"
first=$(head -n 1 "$tmp/out")
echo "first line: $first"
case "$first" in
"no CUDA driver: libcuda.so.1 not found ("*")")
    echo "mode: no driver" ;;
"no CUDA driver: "* | "no CUDA device: "* | "the CUDA driver failed to start: "*)
    echo "mode: driver unusable" ;;
"GPU 0: "*)
    echo "mode: live GPU"
    grep -q '^  fingerprint  *[^|]*|sm_[0-9]*|[0-9]*|[0-9]*|[0-9]*|[0-9]*\.[0-9]*$' "$tmp/out" ||
        fail "no well-formed fingerprint line"
    grep -q '^  shared memory / block  49,152 B default, [0-9,]* B opt-in$' "$tmp/out" ||
        fail "no shared-memory line"
    for fact in "compute capability" "SMs" "shared memory / SM" "registers / block" \
        "threads / block" "L2" "memory " "memory clock, bus" "driver" "NVRTC" "UUID"; do
        grep -q "^  $fact" "$tmp/out" || fail "live GPU lacks '$fact'"
    done
    # the cache key: the fingerprint under the default carveout, keyed with any other
    fp=$(sed -n 's/^  fingerprint  *//p' "$tmp/out" | head -n 1)
    key=$(sed -n 's/^  cache key  *//p' "$tmp/out" | head -n 1)
    [ -n "$fp" ] && [ "$key" = "$fp" ] || fail "cache key '$key' is not the fingerprint '$fp'"
    grep -q '^  shared-memory carveout 25 % preferred (default)$' "$tmp/out" ||
        fail "no default carveout line"
    key60=$(TAILOR_CARVEOUT=60 "$TAILOR_BIN" devices | sed -n 's/^  cache key  *//p' | head -n 1)
    [ "$key60" = "$fp|carveout=60" ] || fail "TAILOR_CARVEOUT=60 cache key is '$key60'" ;;
*)
    fail "unexpected first line: $first" ;;
esac
for p in $profiles; do
    grep -q "^$p " "$tmp/out" || fail "profile $p missing from the table"
done
grep -q "^h200 .* 232,448 .* 233,472 " "$tmp/out" || fail "h200 row lacks 232,448 / 233,472"
[ "$(grep -c 'datasheet\|specifications\|hardware reference' "$tmp/out")" -ge 11 ] ||
    fail "profiles lack their sources"

# ---- JSON ------------------------------------------------------------------------------------
"$TAILOR_BIN" devices --json >"$tmp/json" 2>"$tmp/err"
rc=$?
[ "$rc" -eq 0 ] || fail "tailor devices --json exited $rc: $(cat "$tmp/err")"
for key in '"driver"' '"devices"' '"profiles"' '"smem_per_block_optin"' '"source"'; do
    grep -q "$key" "$tmp/json" || fail "JSON lacks $key"
done
for p in $profiles; do
    grep -q "\"short_name\":[[:space:]]*\"$p\"" "$tmp/json" || fail "JSON lacks profile $p"
done
if command -v python3 >/dev/null 2>&1; then
    python3 - "$tmp/json" <<'EOF' || fail "JSON does not parse or lacks its structure"
import json, sys
doc = json.load(open(sys.argv[1]))
assert set(doc) == {"driver", "devices", "profiles"}, doc.keys()
assert len(doc["profiles"]) == 11
h200 = [p for p in doc["profiles"] if p["short_name"] == "h200"][0]
assert h200["smem_per_block_optin"] == 232448 and h200["sm_count"] == 132, h200
if "error" in doc["driver"]:
    assert doc["devices"] == []
else:
    assert len(doc["devices"]) == doc["driver"]["device_count"]
    for d in doc["devices"]:
        assert d["live"] and d["fingerprint"].count("|") == 5, d
        assert d["cache_key"] == d["fingerprint"] and d["carveout_percent"] == 25, d
print("JSON structure ok:", len(doc["devices"]), "live devices")
EOF
fi

# ---- bad input -------------------------------------------------------------------------------
"$TAILOR_BIN" devices --bogus >"$tmp/out" 2>"$tmp/err"
rc=$?
[ "$rc" -ne 0 ] || fail "a bad flag exited 0"
[ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "a bad flag printed $(wc -l <"$tmp/err") lines: $(cat "$tmp/err")"
grep -q -- "--bogus" "$tmp/err" || fail "the bad-flag sentence does not name the flag"
[ ! -s "$tmp/out" ] || fail "a bad flag printed to stdout"
TAILOR_CARVEOUT=half "$TAILOR_BIN" devices >"$tmp/out" 2>"$tmp/err"
rc=$?
[ "$rc" -eq 2 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && [ ! -s "$tmp/out" ] ||
    fail "a malformed TAILOR_CARVEOUT was not refused in one line (rc $rc): $(cat "$tmp/err")"
grep -q "TAILOR_CARVEOUT='half'" "$tmp/err" || fail "the carveout sentence does not name the value"
"$TAILOR_BIN" devices extra >/dev/null 2>"$tmp/err"
[ $? -ne 0 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "a stray argument was not refused in one line"

# ---- the driver is loaded at run time, never linked ------------------------------------------
if command -v readelf >/dev/null 2>&1; then
    if readelf -d "$TAILOR_BIN" | grep NEEDED | grep -q libcuda; then
        fail "tailor links libcuda"
    fi
fi

[ "$fails" -eq 0 ] || exit 1
echo "cli_devices: ok"

# cli_cache.sh — `tailor cache` end to end without a GPU: an empty ls, an export file written by
# hand with coreutils (the documented format), import/export/ls/show/verify/clear through the
# command with --fingerprint, refusals (other device, tampered file), carveout keys, and a bad
# flag.
set -u
BIN=${TAILOR_BIN:-tailor}
TMP=$(mktemp -d /tmp/tailor_cli_cache_XXXXXX)
trap 'rm -rf "$TMP"' EXIT
failures=0
checks=0

check() { # check DESCRIPTION COMMAND...: runs the command, counts a failure when it fails
    local what=$1
    shift
    checks=$((checks + 1))
    if ! "$@"; then
        echo "FAILED: $what" >&2
        failures=$((failures + 1))
    fi
}

not() { ! "$@"; }
# prints_nothing COMMAND...: the command succeeds and prints nothing on stdout (an error that
# prints nothing does not pass)
prints_nothing() { local out; out=$("$@" 2>/dev/null) || return 1; test -z "$out"; }

FP='Test GPU|sm_90|132|232448|13000|13.0'
OTHER='Test GPU|sm_80|108|232448|13000|13.0'
C1=$TMP/one.sqlite

# ---- a --cache that does not exist: the commands that only read fail naming it, creating nothing
for sub in ls show trials "export $TMP/x.tailor" verify; do
    # shellcheck disable=SC2086
    "$BIN" cache $sub --cache "$TMP/typo.db" --fingerprint "$FP" >"$TMP/out" 2>"$TMP/err"; rc=$?
    check "'cache $sub' of a missing --cache exits 1 (got $rc)" test $rc -eq 1
    check "'cache $sub' of a missing --cache names it ($(cat "$TMP/err"))" \
        grep -q "cache file '$TMP/typo.db' does not exist" "$TMP/err"
    check "'cache $sub' of a missing --cache creates nothing" test ! -e "$TMP/typo.db" -a ! -e "$TMP/x.tailor"
done
HOME=$TMP/home XDG_CACHE_HOME= TAILOR_CACHE= "$BIN" cache ls --cache "" >"$TMP/out" 2>"$TMP/err"; rc=$?
check "an empty --cache is a usage error (got $rc: $(cat "$TMP/err"))" \
    test $rc -eq 2 -a -n "$(grep -- "--cache is empty" "$TMP/err")"

# ---- ls on an empty cache: nothing on stdout, exit 0; --json gives [] -----------------------------
check "clear creates a cache" "$BIN" cache clear --all --cache "$C1"
out=$("$BIN" cache ls --cache "$C1" 2>"$TMP/err"); rc=$?
check "ls on an empty cache exits 0 (got $rc)" test $rc -eq 0
check "ls on an empty cache prints nothing on stdout" test -z "$out"
check "ls on an empty cache says so on stderr" grep -q "no cached winners" "$TMP/err"
out=$("$BIN" cache ls --json --cache "$C1"); rc=$?
check "ls --json on an empty cache is [] (got '$out')" test "$rc.$out" = "0.[]"

# ---- an export file written by hand, as docs/cache-format.md describes -----------------------------
entry() { # entry SHAPE KIND BYTES(printf format) MEDIAN
    local b64 sha size
    b64=$(printf "$3" | base64 -w0)
    sha=$(printf "$3" | sha256sum | cut -c1-64)
    size=$(printf "$3" | wc -c)
    printf '{"op":"rmsnorm","shape":"%s","dtype":"bf16","space_hash":"%s",' "$1" "$(printf x | sha256sum | cut -c1-64)"
    printf '"template":"rmsnorm_warp","kernel":"rmsnorm_warp_sm90_B128","params":"{\\"BLOCK\\":128}",'
    printf '"launch":"{\\"grid\\":[1,1,1]}","arch":"sm_90","median_us":%s,"spread_us":0.25,' "$4"
    printf '"tuned_at":1700000000,"n_trials":12,"binary_kind":"%s","binary_size":%d,' "$2" "$size"
    printf '"binary_sha256":"%s","binary":"%s"}' "$sha" "$b64"
}
{
    printf '{\n  "format": "tailor-cache-export",\n  "version": 1,\n'
    printf '  "fingerprint": "%s",\n  "exported_at": 1700000001,\n  "entries": [\n    ' "$FP"
    entry "k=1536,m=1" cubin '\177ELF\000\001\002binary\000\377' 12.5
    printf ',\n    '
    entry "k=2048,m=1" ptx '.version 8.0\n.target sm_90\n' 7.75
    printf '\n  ],\n'
} >"$TMP/body"
sha=$(sha256sum <"$TMP/body" | cut -c1-64)
{ cat "$TMP/body"; printf '  "sha256": "%s"\n}\n' "$sha"; } >"$TMP/hand.tailor"

out=$("$BIN" cache import "$TMP/hand.tailor" --cache "$C1" --fingerprint "$FP" 2>&1); rc=$?
check "import of a hand-written file works (rc $rc: $out)" test $rc -eq 0
check "import reports 2 winners ($out)" grep -q "imported 2 winners" <<<"$out"
"$BIN" cache ls --cache "$C1" >"$TMP/ls1"
check "ls shows one line per winner" test "$(wc -l <"$TMP/ls1")" -eq 2
check "ls shows op, shape, template, params, time" grep -q 'Test GPU *rmsnorm *k=1536,m=1 *bf16 *rmsnorm_warp *{"BLOCK":128} *12.50 us' "$TMP/ls1"
check "ls --op of another op succeeds and lists nothing" prints_nothing "$BIN" cache ls --op nothing --cache "$C1"
check "ls --op rmsnorm lists both" test "$("$BIN" cache ls --op rmsnorm --cache "$C1" | wc -l)" -eq 2
check "TAILOR_CACHE names the cache" cmp -s "$TMP/ls1" <(TAILOR_CACHE=$C1 "$BIN" cache ls)
check "ls --json lists both" test "$("$BIN" cache ls --json --cache "$C1" | grep -c '"template":')" -eq 2

# ---- trials: what every configuration did, fastest first, the winner marked ---------------------
out=$("$BIN" cache trials --cache "$C1" 2>"$TMP/err"); rc=$?
check "trials with none recorded exits 0, nothing on stdout (rc $rc)" test $rc -eq 0 -a -z "$out"
check "trials with none recorded says so" grep -q "no recorded trials" "$TMP/err"
if command -v python3 >/dev/null 2>&1; then
    # trials as the tuner records them (the documented table of docs/cache-format.md), for the
    # winner k=1536,m=1 and for a shape with no winner
    python3 - "$C1" "$FP" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
fp, op, dt = sys.argv[2], "rmsnorm", "bf16"
sh = db.execute("SELECT space_hash FROM winners WHERE shape = 'k=1536,m=1'").fetchone()[0]
rows = [("k=1536,m=1", "rmsnorm_block", '{"BLOCK":64}', "timed", 14.25, ""),
        ("k=1536,m=1", "rmsnorm_warp", '{"BLOCK":128}', "timed", 12.5, ""),
        ("k=1536,m=1", "rmsnorm_warp", '{"BLOCK":2048}', "refused-budget", None,
         "needs 2,048 threads; allows 1,024"),
        ("k=1536,m=1", "rmsnorm_block", '{"BLOCK":32}', "wrong-result", None, "max error 3.1"),
        ("k=4096,m=1", "rmsnorm_warp", '{"BLOCK":256}', "timed", 20.0, "")]
for shape, tpl, params, outcome, us, detail in rows:
    db.execute("INSERT INTO trials VALUES (?,?,?,?,?,?,?,?,?,?,?)",
               (fp, op, shape, dt, sh, tpl, params, outcome, us, detail, 1700000002))
db.commit()
PY
    "$BIN" cache trials --cache "$C1" >"$TMP/tr" 2>"$TMP/err"; rc=$?
    check "trials exits 0 (rc $rc: $(cat "$TMP/err"))" test $rc -eq 0
    check "trials: one header per shape, the winner named" \
        test "$(grep -c '^rmsnorm k=1536,m=1 bf16 on Test GPU (space [0-9a-f]*): winner rmsnorm_warp$' "$TMP/tr")" -eq 1
    check "trials: a shape without a stored winner says so" grep -q "^rmsnorm k=4096,m=1 bf16 .*: no winner stored$" "$TMP/tr"
    check "trials: the fastest first, the winner marked" \
        test "$(grep -A2 '^rmsnorm k=1536' "$TMP/tr" | tail -2 | tr -s ' ' | cut -d' ' -f2- | tr '\n' '|')" \
             = '12.50 us timed rmsnorm_warp {"BLOCK":128} <- winner|14.25 us timed rmsnorm_block {"BLOCK":64}|'
    check "trials: a refusal shows its reason" grep -q 'refused-budget .*{"BLOCK":2048}  needs 2,048 threads; allows 1,024' "$TMP/tr"
    check "trials --shape filters (in any key order)" \
        test "$("$BIN" cache trials --shape m=1,k=4096 --cache "$C1" | grep -c 'us ')" -eq 1
    check "trials --json: five objects, one winner" \
        test "$("$BIN" cache trials --json --cache "$C1" | python3 -c 'import json,sys; t=json.load(sys.stdin); print(len(t), sum(x["winner"] for x in t), t[0]["median_us"])')" = "5 1 12.5"
    check "trials --op of another op succeeds and lists nothing" \
        prints_nothing "$BIN" cache trials --op matmul --cache "$C1"
fi

# ---- export, checksum by coreutils, import into a fresh cache: identical ---------------------------
out=$("$BIN" cache export "$TMP/out.tailor" --cache "$C1" --fingerprint "$FP"); rc=$?
check "export works (rc $rc: $out)" test $rc -eq 0
check "export counts 2 winners" grep -q "exported 2 winners" <<<"$out"
"$BIN" cache export "$TMP/nodir/x.tailor" --cache "$C1" --fingerprint "$FP" >/dev/null 2>"$TMP/err"; rc=$?
check "export into a missing folder fails naming the file, not its temporary ($(cat "$TMP/err"))" \
    test $rc -eq 1 -a -n "$(grep "cannot write export file '$TMP/nodir/x.tailor': No such file" "$TMP/err")"
want=$(sed -n 's/^  "sha256": "\([0-9a-f]*\)"$/\1/p' "$TMP/out.tailor")
got=$(head -n -2 "$TMP/out.tailor" | sha256sum | cut -c1-64)
check "the trailer is the sha256 of all lines but the last two" test -n "$want" -a "$want" = "$got"
C2=$TMP/two.sqlite
check "import of the export works" "$BIN" cache import "$TMP/out.tailor" --cache "$C2" --fingerprint "$FP" >/dev/null
check "ls of the copy equals the original" cmp -s "$TMP/ls1" <("$BIN" cache ls --cache "$C2")
check "show (with binary digests) of the copy equals the original" \
    cmp -s <("$BIN" cache show --cache "$C1") <("$BIN" cache show --cache "$C2")
check "show prints the binary digest" grep -q "sha256 $(printf '.version 8.0\n.target sm_90\n' | sha256sum | cut -c1-64)" <("$BIN" cache show --cache "$C2")
out=$("$BIN" cache verify --cache "$C2"); rc=$?
check "verify passes ($out)" test $rc -eq 0
check "verify counts 2 intact" grep -q "2 winners intact, 0 damaged" <<<"$out"

# ---- refusals: another device, a tampered file -- nothing imported --------------------------------
C3=$TMP/three.sqlite
"$BIN" cache import "$TMP/out.tailor" --cache "$C3" --fingerprint "$OTHER" >"$TMP/out" 2>"$TMP/err"; rc=$?
check "import for another device exits 1 (got $rc)" test $rc -eq 1
check "the refusal is one line" test "$(wc -l <"$TMP/err")" -eq 1
check "the refusal lists the differing fields" grep -q "architecture: sm_90 in the file, sm_80 here; SMs: 132 in the file, 108 here" "$TMP/err"
check "the refused import left no new cache file behind" test ! -e "$C3"
sed 's/rmsnorm_warp_sm90_B128/rmsnorm_warp_sm90_B256/' "$TMP/out.tailor" >"$TMP/tampered.tailor"
check "the tampered file differs" not cmp -s "$TMP/out.tailor" "$TMP/tampered.tailor"
"$BIN" cache import "$TMP/tampered.tailor" --cache "$C3" --fingerprint "$FP" 2>"$TMP/err"; rc=$?
check "a tampered file is refused (rc $rc)" test $rc -eq 1
check "the refusal names the checksum" grep -q "sha256" "$TMP/err"
head -c 300 "$TMP/out.tailor" >"$TMP/short.tailor"
check "a truncated file is refused" not "$BIN" cache import "$TMP/short.tailor" --cache "$C3" --fingerprint "$FP" 2>/dev/null
check "the refused imports left no new cache file behind" test ! -e "$C3"
"$BIN" cache clear --all --cache "$C3" >/dev/null
"$BIN" cache import "$TMP/tampered.tailor" --cache "$C3" --fingerprint "$FP" 2>/dev/null
check "a refused import into an existing cache keeps the file, with nothing added" \
    prints_nothing "$BIN" cache ls --cache "$C3"

# a re-signed file (its checksum made again) with an op tailor does not know, or two entries of one
# key, is refused: nothing imported
resign() { # FILE: the trailer's sha256 made again over the edited body
    head -n -2 "$1" >"$1.body"
    { cat "$1.body"; printf '  "sha256": "%s"\n}\n' "$(sha256sum <"$1.body" | cut -c1-64)"; } >"$1"
    rm -f "$1.body"
}
sed 's/"op":"rmsnorm"/"op":"nope"/' "$TMP/out.tailor" >"$TMP/badop.tailor" && resign "$TMP/badop.tailor"
"$BIN" cache import "$TMP/badop.tailor" --cache "$C3" --fingerprint "$FP" 2>"$TMP/err"; rc=$?
check "an unknown op is refused, naming the field ($(cat "$TMP/err"))" \
    test $rc -eq 1 -a -n "$(grep "entry 1, field 'op' is not an op this tailor knows; nothing was imported" "$TMP/err")"
python3 - "$TMP/out.tailor" "$TMP/dup.tailor" <<'EOF2'
import sys
lines = open(sys.argv[1]).read().split("\n")
first = next(i for i, l in enumerate(lines) if l.startswith('    {"op"'))
entry = lines[first].rstrip(",")
lines.insert(first + 1, entry + ",")
open(sys.argv[2], "w").write("\n".join(lines))
EOF2
resign "$TMP/dup.tailor"
"$BIN" cache import "$TMP/dup.tailor" --cache "$C3" --fingerprint "$FP" 2>"$TMP/err"; rc=$?
check "two entries of one key are refused ($(cat "$TMP/err"))" \
    test $rc -eq 1 -a -n "$(grep "entries 1 and 2 have the same key" "$TMP/err")"
check "... and nothing was imported" prints_nothing "$BIN" cache ls --cache "$C3"

# ---- export refuses what would lose or hide something -----------------------------------------------
cp "$C1" "$TMP/self.sqlite"
"$BIN" cache export "$TMP/self.sqlite" --cache "$TMP/self.sqlite" --fingerprint "$FP" 2>"$TMP/err"; rc=$?
check "export onto the cache file itself is refused ($(cat "$TMP/err"))" \
    test $rc -eq 1 -a -n "$(grep "is the cache itself; nothing was exported" "$TMP/err")"
check "... and the cache is intact" grep -q rmsnorm <("$BIN" cache ls --cache "$TMP/self.sqlite")
printf keep >"$TMP/keep.tailor"
"$BIN" cache export "$TMP/keep.tailor" --cache "$C1" --fingerprint "$OTHER" 2>"$TMP/err"; rc=$?
check "an export with no winners of the device fails ($(cat "$TMP/err"))" \
    test $rc -eq 1 -a -n "$(grep "holds no winners of" "$TMP/err")"
check "... and leaves the file there as it was" test "$(cat "$TMP/keep.tailor")" = keep
python3 -c "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute(\"UPDATE winners SET binary = x'00' WHERE rowid = (SELECT min(rowid) FROM winners)\"); c.commit()" "$TMP/self.sqlite"
"$BIN" cache export "$TMP/damaged.tailor" --cache "$TMP/self.sqlite" --fingerprint "$FP" 2>"$TMP/err"; rc=$?
check "a damaged binary is not exported ($(cat "$TMP/err"))" \
    test $rc -eq 1 -a -n "$(grep "is damaged (its sha256 no longer matches)" "$TMP/err")" -a ! -e "$TMP/damaged.tailor"
check "show marks it damaged" grep -q "DAMAGED   the binary's own sha256 is" <("$BIN" cache show --cache "$TMP/self.sqlite")

# ---- the commands that only read open the file read-only: nothing written, not even WAL mode ------
C4=$TMP/four.sqlite
cp "$C1" "$C4"
if command -v python3 >/dev/null 2>&1; then
    python3 -c "import sqlite3, sys; sqlite3.connect(sys.argv[1]).execute('PRAGMA journal_mode = DELETE')" "$C4"
    before=$(sha256sum <"$C4")
    for sub in ls show trials "export $TMP/four.tailor" verify; do
        # shellcheck disable=SC2086
        "$BIN" cache $sub --cache "$C4" --fingerprint "$FP" >/dev/null 2>"$TMP/err"; rc=$?
        check "'cache $sub' reads a cache without changing it (rc $rc: $(cat "$TMP/err"))" \
            test $rc -eq 0 -a "$(sha256sum <"$C4")" = "$before"
    done
fi
# a write-protected cache in a write-protected folder (WAL, as tailor writes it) can be listed and
# exported; root writes anyway, so that case runs as nobody where setpriv can drop to it
RO=$TMP/ro
mkdir "$RO" && cp "$C1" "$RO/c.sqlite" && chmod 444 "$RO/c.sqlite" && chmod 555 "$RO"
chmod 755 "$TMP" && mkdir "$TMP/w" && chmod 777 "$TMP/w"
as_user() { if [ "$(id -u)" -eq 0 ]; then setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; else "$@"; fi; }
if as_user "$BIN" --version >/dev/null 2>&1 && ! as_user touch "$RO/c.sqlite" 2>/dev/null; then
    for sub in ls show "export $TMP/w/ro.tailor"; do
        # shellcheck disable=SC2086
        as_user "$BIN" cache $sub --cache "$RO/c.sqlite" --fingerprint "$FP" >/dev/null 2>"$TMP/err"; rc=$?
        check "'cache $sub' of a write-protected cache works (rc $rc: $(cat "$TMP/err"))" test $rc -eq 0
    done
    check "the write-protected cache's export holds its winners" grep -q '"op":"rmsnorm"' "$TMP/w/ro.tailor"
else
    echo "note: no unprivileged user to run the write-protected cache case as; not run" >&2
fi
chmod 755 "$RO"

# ---- carveout keys: winners tuned under a TAILOR_CARVEOUT other than the default are keyed
# "<fingerprint>|carveout=V"; --device keys with this process's carveout --------------------------
C5=$TMP/five.sqlite
sed "s/\"fingerprint\": \"$FP\"/\"fingerprint\": \"$FP|carveout=driver\"/" "$TMP/out.tailor" \
    >"$TMP/carve.tailor" && resign "$TMP/carve.tailor"
"$BIN" cache import "$TMP/carve.tailor" --cache "$C5" --fingerprint "$FP" 2>"$TMP/err"; rc=$?
want="shared-memory carveout (TAILOR_CARVEOUT): driver in the file, the default here"
check "a carveout's export is refused under the default ($(cat "$TMP/err"))" \
    test $rc -eq 1 -a -n "$(grep -F "$want" "$TMP/err")"
out=$("$BIN" cache import "$TMP/carve.tailor" --cache "$C5" --fingerprint "$FP|carveout=driver" \
      2>&1)
check "... and imported under its own fingerprint ($out)" grep -q "imported 2 winners" <<<"$out"
check "ls labels the carveout" \
    grep -q '^Test GPU carveout=driver *rmsnorm' <("$BIN" cache ls --cache "$C5")
TAILOR_CARVEOUT=driver "$BIN" cache export "$TMP/none.tailor" --cache "$C5" --device h200 \
    2>"$TMP/err"; rc=$?
check "--device keys with the process's carveout ($(cat "$TMP/err"))" \
    test $rc -eq 1 -a -n "$(grep "holds no winners of 'NVIDIA H200|.*|carveout=driver'" "$TMP/err")"
TAILOR_CARVEOUT=half "$BIN" cache ls --cache "$C5" --device h200 >"$TMP/out" 2>"$TMP/err"; rc=$?
want="TAILOR_CARVEOUT='half' is neither a percentage from 0 to 100 nor 'driver'"
check "a malformed TAILOR_CARVEOUT is refused, naming it ($(cat "$TMP/err"))" \
    test $rc -eq 1 -a -n "$(grep -F "$want" "$TMP/err")"

# ---- clear ------------------------------------------------------------------------------------------
out=$("$BIN" cache clear --cache "$C2" --fingerprint "$OTHER")
check "clear of another device removes nothing ($out)" grep -q "removed 0 winners" <<<"$out"
out=$("$BIN" cache clear --cache "$C2" --fingerprint "$FP")
check "clear of this device removes 2 ($out)" grep -q "removed 2 winners" <<<"$out"
check "after clear, ls is empty" prints_nothing "$BIN" cache ls --cache "$C2"
check "clear --all" "$BIN" cache clear --all --cache "$C1" >/dev/null
check "after clear --all, ls is empty" prints_nothing "$BIN" cache ls --cache "$C1"

# ---- bad usage: exit 2 with one line --------------------------------------------------------------
for args in "ls --nope" "frob" "export" "import a b" "ls --all" "clear --all --fingerprint x" \
            "ls --shape m=1" "trials --shape m=x" "trials extra"; do
    # shellcheck disable=SC2086
    "$BIN" cache $args --cache "$C1" >"$TMP/out" 2>"$TMP/err"; rc=$?
    check "'cache $args' exits 2 (got $rc)" test $rc -eq 2
    check "'cache $args' says so in one line" test "$(wc -l <"$TMP/err")" -eq 1 -a ! -s "$TMP/out"
done
"$BIN" cache ls --json --cache >"$TMP/out" 2>"$TMP/err"; rc=$?
check "'cache ls --cache' without its value exits 2 and names the flag ($(cat "$TMP/err"))" \
    test $rc -eq 2 -a -n "$(grep "flag '--cache' needs a value" "$TMP/err")"
"$BIN" cache ls -q --cache "$C1" >"$TMP/out" 2>"$TMP/err"; rc=$?
check "'cache ls -q' names the short flag ($(cat "$TMP/err"))" \
    test $rc -eq 2 -a -n "$(grep "flag '-q' is unknown" "$TMP/err")"

echo "cli_cache: $checks checks, $failures failed"
test $checks -gt 0 -a $failures -eq 0

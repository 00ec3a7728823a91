#!/usr/bin/env python3
"""fuzz_inputs.py — structure-aware mutation fuzzing of everything tailor reads from a user.

Usage:  python3 scripts/fuzz_inputs.py TARGET [ITERATIONS] [SEED]
        TARGET: checkpoint | index | tokenizer | cache | cachefile | space | flags | all

Each iteration writes one mutated input (a JSON leaf replaced by an odd value or deleted: a
safetensors header, config.json, model.safetensors.index.json, tokenizer.json, a cache export, the
cache's SQLite file, a search space's numbers and names, a command line) and runs the tailor binary on it. The rule it
checks is DESIGN.md's for bad input: the run exits 0 or with a refusal (1, or 2 for a usage
error) whose message is exactly one line; nothing crashes, and with the sanitizers (the default
binary is build-asan/tailor: `make asan` or `cmake --build build-asan`) nothing reads out of
bounds, leaks or hits undefined behaviour. A failed cache import must leave the cache empty.
Inputs that break the rule are kept under $FUZZ_OUT (default /tmp/tailor-fuzz) with the output.

Environment: TAILOR_BIN (the binary), FUZZ_OUT, FUZZ_SHOW=1 (print every verdict).
Needs only the Python standard library; runs without a GPU. Session 29 ran each target 300-600
times here; docs/development.md lists what it found.
"""
import base64
import copy
import hashlib
import json
import os
import random
import re
import shutil
import struct
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("TAILOR_BIN", os.path.join(ROOT, "build-asan", "tailor"))
OUT = os.environ.get("FUZZ_OUT", "/tmp/tailor-fuzz")
FIXTURES = os.path.join(ROOT, "tests", "fixtures")
SHOW = os.environ.get("FUZZ_SHOW") == "1"
ENV = dict(os.environ, ASAN_OPTIONS="detect_leaks=1",
           UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1")

# Values a mutated leaf takes: edges of integers and floats, wrong types, odd strings.
ODD = [None, True, False, 0, -1, 1, 2, 3, 7, 8, 64, 256, 512, 65535, 2**31 - 1, 2**31, -2**31 - 1,
       2**32, 2**53 + 1, 2**63, 1e308, -1e308, 0.5, 1.5, "", "x", "\n", "I\n6", "a" * 3000, [], {},
       [0], [1, 2], [0, 0], [-1, 4], [2**31 - 1, 2**31 - 1], ["a"], {"a": 1}, "BF16", "F16", "F32",
       "I32", "U8", "bf16", "sliding_attention", "full_attention", "gelu_pytorch_tanh",
       "pack-quantized", "..", "/etc/passwd"]


def leaves(o, path=()):
    """Every path into a JSON value, the value itself first."""
    yield path
    if isinstance(o, dict):
        for k, v in o.items():
            yield from leaves(v, path + (k,))
    elif isinstance(o, list):
        for i, v in enumerate(o):
            yield from leaves(v, path + (i,))


def mutate(rnd, doc, values=ODD, times=None):
    """Replaces (or deletes, 15 %) one to three leaves of doc in place."""
    for _ in range(times or rnd.randint(1, 3)):
        paths = [p for p in leaves(doc) if p]
        if not paths:
            return
        path = rnd.choice(paths)
        o = doc
        for q in path[:-1]:
            o = o[q]
        if rnd.random() < 0.15:
            del o[path[-1]]
        else:
            o[path[-1]] = copy.deepcopy(rnd.choice(values))


def run(argv, timeout=120):
    try:
        return subprocess.run([BIN] + argv, capture_output=True, text=True, env=ENV,
                              timeout=timeout, errors="replace", stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return None


class Verdicts:
    def __init__(self, target):
        self.target, self.ok, self.refused, self.bad = target, 0, 0, 0

    def judge(self, it, r, inputs, allowed=(0, 1), extra=None):
        """Counts the run; keeps its inputs and output when it broke the rule."""
        why = None
        if r is None:
            why = "timed out"
        else:
            err = r.stderr
            lines = [l for l in err.splitlines() if l.strip()]
            if "Sanitizer" in err or "runtime error" in err:
                why = "sanitizer"
            elif r.returncode not in allowed:
                why = "exit status %d" % r.returncode
            elif r.returncode != 0 and not lines:
                why = "a refusal without a message"
            elif r.returncode != 0 and any(not l.startswith("tailor") for l in lines) and \
                    not (r.returncode == 2 and "usage" in err.lower()):
                why = "a refusal of more than one line"
            elif extra:
                why = extra()
        if why:
            self.bad += 1
            d = os.path.join(OUT, "%s-%d" % (self.target, it))
            os.makedirs(d, exist_ok=True)
            for name, path in inputs.items():
                if os.path.isfile(path):
                    shutil.copy(path, os.path.join(d, name))
            with open(os.path.join(d, "output.txt"), "w") as f:
                f.write("%s\n%s\n%s" % (why, "" if r is None else r.stdout[-4000:],
                                        "" if r is None else r.stderr[-8000:]))
            print("%s %d: %s (kept in %s)" % (self.target, it, why, d))
        elif r.returncode == 0:
            self.ok += 1
        else:
            self.refused += 1
        if SHOW and r is not None:
            last = [l for l in r.stderr.splitlines() if l.strip()]
            print("  %d %s" % (r.returncode, last[-1][:200] if last else ""))

    def summary(self):
        print("%s: %d ran, %d refused, %d broke the rule" % (self.target, self.ok, self.refused,
                                                              self.bad))
        return self.bad


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (hlen,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8:8 + hlen]), data[8 + hlen:]


def write_safetensors(path, header, body, cut=None):
    text = json.dumps(header).encode()
    blob = struct.pack("<Q", len(text)) + text + body
    with open(path, "wb") as f:
        f.write(blob if cut is None else blob[:cut])


def fuzz_checkpoint(n, rnd, work):
    """A single-file checkpoint: its safetensors header, its config.json, or both; sometimes
    truncated. Runs the CPU reference for three tokens when it loads."""
    v = Verdicts("checkpoint")
    fixtures = ["e2b_w4a16_asym", "e2b_flat", "keqv_flat"]
    loaded = {f: read_safetensors(os.path.join(FIXTURES, f, "model.safetensors")) for f in fixtures}
    configs = {f: json.load(open(os.path.join(FIXTURES, f, "config.json"))) for f in fixtures}
    for it in range(n):
        fx = rnd.choice(fixtures)
        header, body = copy.deepcopy(loaded[fx][0]), loaded[fx][1]
        config = copy.deepcopy(configs[fx])
        what = rnd.randrange(4)
        if what in (0, 2):
            mutate(rnd, header)
        if what in (1, 2):
            mutate(rnd, config)
        cut = None
        if what == 3:
            size = 8 + len(json.dumps(header).encode()) + len(body)
            cut = rnd.randrange(size)
        st, cfg = os.path.join(work, "model.safetensors"), os.path.join(work, "config.json")
        write_safetensors(st, header, body, cut)
        json.dump(config, open(cfg, "w"))
        r = run(["run", "--device", "cpu", "--model", work, "--ids", "2,3,4", "--max-tokens", "3"])
        v.judge(it, r, {"model.safetensors": st, "config.json": cfg})
    return v.summary()


def fuzz_index(n, rnd, work):
    """A sharded checkpoint's model.safetensors.index.json and nested config.json."""
    v = Verdicts("index")
    src = os.path.join(FIXTURES, "e4b_nested")
    for f in os.listdir(src):
        if f.endswith(".safetensors"):
            os.symlink(os.path.join(src, f), os.path.join(work, f))
    index = json.load(open(os.path.join(src, "model.safetensors.index.json")))
    config = json.load(open(os.path.join(src, "config.json")))
    for it in range(n):
        i2, c2 = copy.deepcopy(index), copy.deepcopy(config)
        mutate(rnd, i2 if rnd.random() < 0.5 else c2,
               ODD + ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"])
        ip, cp = os.path.join(work, "model.safetensors.index.json"), os.path.join(work, "config.json")
        json.dump(i2, open(ip, "w"))
        json.dump(c2, open(cp, "w"))
        r = run(["run", "--device", "cpu", "--model", work, "--ids", "2,3,4", "--max-tokens", "3"])
        v.judge(it, r, {"model.safetensors.index.json": ip, "config.json": cp})
    return v.summary()


TOKENIZER = {
    "version": "1.0", "truncation": None, "padding": None,
    "added_tokens": [{"id": i, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
                      "normalized": False, "special": True}
                     for i, c in ((0, "<pad>"), (2, "<bos>"), (14, "<start_of_turn>"))],
    "normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"},
    "pre_tokenizer": {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious",
                      "invert": False},
    "post_processor": None,
    "decoder": {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
        {"type": "ByteFallback"}, {"type": "Fuse"}]},
    "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
              "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True,
              "ignore_merges": False,
              "vocab": {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3, "a": 4, "b": 5, "ab": 6,
                        "\u2581": 7, "\u2581a": 8, "<0x41>": 9, "<0xC3>": 10, "<0xA9>": 11, "c": 12,
                        "abc": 13, "<start_of_turn>": 14},
              "merges": [["a", "b"], ["ab", "c"], ["\u2581", "a"]]}}
TOKENIZER_ODD = ODD + ["BPE", "WordPiece", "Sequence", "Replace", "ByteFallback", "Fuse", "Strip",
                       "Split", "Metaspace", "NFC", "Isolated", "<0x41>", "<0xZZ>", "\u2581",
                       {"String": ""}, {"Regex": "("}, {"Regex": " ?\\p{L}+"}, [["a"]],
                       [["a", "b", "c"]], ["a b"], {"type": "Sequence"}]


def fuzz_tokenizer(n, rnd, work):
    """tokenizer.json: a small BPE with Gemma's normalizer, pre-tokenizer and decoder."""
    v = Verdicts("tokenizer")
    texts = ["ab abc a", "<start_of_turn>ab", "\u00e9 A", "", "   ", "abc" * 300]
    for it in range(n):
        doc = copy.deepcopy(TOKENIZER)
        mutate(rnd, doc, TOKENIZER_ODD)
        path = os.path.join(work, "tokenizer.json")
        json.dump(doc, open(path, "w"))
        r = run(["tokenize", "--tokenizer", path, "--text", rnd.choice(texts)])
        v.judge(it, r, {"tokenizer.json": path})
    return v.summary()


FINGERPRINT = "Test GPU|sm_90|132|232448|13000|13.0"


def export_entry(shape, kind, data, median):
    return {"op": "rmsnorm", "shape": shape, "dtype": "bf16",
            "space_hash": hashlib.sha256(b"x").hexdigest(), "template": "rmsnorm_warp",
            "kernel": "rmsnorm_warp_sm90_B128", "params": "{\"BLOCK\":128}",
            "launch": "{\"grid\":[1,1,1]}", "arch": "sm_90", "median_us": median,
            "spread_us": 0.25, "tuned_at": 1700000000, "n_trials": 12, "binary_kind": kind,
            "binary_size": len(data), "binary_sha256": hashlib.sha256(data).hexdigest(),
            "binary": base64.b64encode(data).decode()}


def fuzz_cache(n, rnd, work):
    """A cache export (docs/cache-format.md), its checksum made right so the fields are read."""
    v = Verdicts("cache")
    odd = ODD + ["sm_75", "sm_90a", "compute_90", "cubin", "ptx", "fatbin", "k=,m=1", "m=1,m=1",
                 "{\"grid\":[0,1,1]}", "{", FINGERPRINT, "w4a16_matmul", "!!!"]
    for it in range(n):
        doc = {"format": "tailor-cache-export", "version": 1, "fingerprint": FINGERPRINT,
               "exported_at": 1700000001,
               "entries": [export_entry("k=1536,m=1", "cubin", b"\177ELF\0\1\2binary\0\377", 12.5),
                           export_entry("k=2048,m=1", "ptx", b".version 8.0\n.target sm_90\n", 7.75)]}
        mutate(rnd, doc, odd)
        if rnd.random() < 0.5 and isinstance(doc.get("entries"), list):  # keep digests consistent
            for e in doc["entries"]:
                try:
                    b = base64.b64decode(e["binary"], validate=True)
                    e["binary_sha256"], e["binary_size"] = hashlib.sha256(b).hexdigest(), len(b)
                except Exception:
                    pass
        body = json.dumps(doc, indent=2)
        body = body[:-1].rstrip() + ",\n"
        path, cache = os.path.join(work, "x.tailor"), os.path.join(work, "c.sqlite")
        with open(path, "w") as f:
            f.write(body + '  "sha256": "%s"\n}\n' % hashlib.sha256(body.encode()).hexdigest())
        if os.path.exists(cache):
            os.remove(cache)
        r = run(["cache", "import", path, "--cache", cache, "--fingerprint", FINGERPRINT])

        def left_nothing():
            if r.returncode != 1 or not os.path.exists(cache):
                return None
            ls = run(["cache", "ls", "--cache", cache])
            return "a failed import left winners behind" if ls and ls.stdout.strip() else None
        v.judge(it, r, {"x.tailor": path}, extra=left_nothing)
    return v.summary()


def fuzz_cachefile(n, rnd, work):
    """The cache's SQLite file itself, bytes overwritten or cut short: ls, verify, show, export
    and trials read it (a damaged file is refused naming it; a damaged binary is named by verify
    and never exported)."""
    v = Verdicts("cachefile")
    doc = {"format": "tailor-cache-export", "version": 1, "fingerprint": FINGERPRINT,
           "exported_at": 1700000001,
           "entries": [export_entry("k=%d,m=1" % (1536 + 8 * i), "cubin", bytes(range(256)) * (i + 1),
                                    12.5) for i in range(20)]}
    body = json.dumps(doc, indent=2)
    body = body[:-1].rstrip() + ",\n"
    export, good = os.path.join(work, "x.tailor"), os.path.join(work, "good.sqlite")
    with open(export, "w") as f:
        f.write(body + '  "sha256": "%s"\n}\n' % hashlib.sha256(body.encode()).hexdigest())
    r = run(["cache", "import", export, "--cache", good, "--fingerprint", FINGERPRINT])
    if r is None or r.returncode != 0:
        print("cachefile: could not make the cache to damage: %s" % (r.stderr if r else "timeout"))
        return 1
    orig = open(good, "rb").read()
    commands = [["cache", "ls"], ["cache", "verify"], ["cache", "trials"],
                ["cache", "show", "--op", "rmsnorm"],
                ["cache", "export", os.path.join(work, "out.tailor"), "--fingerprint", FINGERPRINT]]
    for it in range(n):
        b = bytearray(orig)
        for _ in range(rnd.randint(1, 20)):
            b[rnd.randrange(len(b)) if rnd.random() < 0.7 else rnd.randrange(100)] = rnd.randrange(256)
        if rnd.random() < 0.1:
            b = b[:rnd.randrange(len(b))]
        path = os.path.join(work, "c.sqlite")
        for ext in ("", "-wal", "-shm"):
            if os.path.exists(path + ext):
                os.remove(path + ext)
        open(path, "wb").write(bytes(b))
        r = run(rnd.choice(commands) + ["--cache", path])
        v.judge(it, r, {"c.sqlite": path})
    return v.summary()


SPACES = [("rmsnorm.lua", "rmsnorm", "rows=4,cols=1536,weight=1"),
          ("w4a16_gemv.lua", "w4a16_matmul", "m=1,n=1536,k=6144,group=128"),
          ("attention_decode.lua", "attention_decode",
           "kv_len=4096,head_dim=256,heads=8,kv_heads=1,window=0,batch=1")]
LUA_ODD = ["nil", "-1", "0", "1", "2^31", "2^53", "1e308", "0/0", "math.huge", "-math.huge",
           "\"x\"", "\"\"", "{}", "{0,1,1}", "{1e30,1,1}", "{-1,1,1}", "{1,1,1,1}", "true",
           "function() end", "{ x = 1 }", "0.5", "65536", "2^40", "{ {} }", "error('boom')",
           "string.rep('a', 100000)",
           "setmetatable({}, {__index = function() error('index') end})"]
LUA_SITE = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?|p\.[A-Z_]+|shape\.[a-z_]+|\"[a-z0-9_]+\")(?![\w(])")


def fuzz_space(n, rnd, work):
    """A search space on TAILOR_TEMPLATE_PATH, a number, parameter, shape key or name in it
    replaced by an odd Lua expression; planned on the H100 profile."""
    v = Verdicts("space")
    for it in range(n):
        name, op, shape = rnd.choice(SPACES)
        text = open(os.path.join(ROOT, "templates", name)).read()
        for _ in range(rnd.randint(1, 3)):
            sites = [m.span(1) for m in LUA_SITE.finditer(text)
                     if not text[text.rfind("\n", 0, m.start()) + 1:m.start()].lstrip()
                     .startswith("--")]
            if not sites:
                break
            a, b = rnd.choice(sites)
            text = text[:a] + "(" + rnd.choice(LUA_ODD) + ")" + text[b:]
        shutil.rmtree(work)
        os.makedirs(work)
        path = os.path.join(work, name)
        open(path, "w").write(text)
        ENV["TAILOR_TEMPLATE_PATH"] = work
        r = run(["plan", "--device", "h100", "--op", op, "--shape", shape, "--quiet"])
        del ENV["TAILOR_TEMPLATE_PATH"]
        v.judge(it, r, {name: path})
    return v.summary()


FLAGS = {
    "plan": "--compile --device --dtype --json --list --model --op --preset --quiet --shape",
    "tune": "--budget --cache --device --dtype --force --jobs --list --model --op --preset "
            "--quantize --quantize-head --rehearse --seed --shape --step-tune --strategy --trials "
            "--verify-all --check-only --where",
    "cache": "--all --cache --device --fingerprint --json --op --shape",
    "bench": "--cache --dtype --file --json --model --op --preset --rehearse --shape "
             "--temperature --tokenizer --top-k --top-p --vocab",
    "run": "--cache --chat --device --dtype --dump-logits --greedy --ids --max-tokens --model "
           "--print-ids --prompt --prompt-file --quantize --quantize-head --rehearse --seed "
           "--system --temperature --think --top-k --top-p",
    "tokenize": "--add-bos --chat --file --json --model --system --text --think --tokenizer",
    "devices": "--device --json"}
SUBCOMMANDS = {"cache": ["ls", "show", "trials", "export", "import", "verify", "clear", "bogus"],
               "bench": ["w4a16", "attention", "model", "tokenizer", "sampler", "x"]}


def fuzz_flags(n, rnd, work):
    """Command lines: each command with random flags and values (a usage error is 2, one line)."""
    v = Verdicts("flags")
    values = ["", "0", "-1", "1", "1e9", "nan", "inf", "0.5", "x", "h100", "t4", "cpu", "gpu",
              "gpu:0", "cuda:99", "bf16", "fp16", "fp8", "w4a16", "rmsnorm", "w4a16_matmul",
              "m=1,n=1536,k=6144,group=128", "m=,n=1", "rows=4,cols=1536,weight=1",
              "m=99999999999999999999", "gemma-4-e2b", os.path.join(FIXTURES, "e2b_flat"),
              "/nonexistent", "/tmp", "2,3,4", "2,,3", "99999", "-", "a" * 3000, "--json",
              os.path.join(work, "out.bin"), "template=", "template=w4a16_gemv_t,ASMEM=1",
              "ASMEM=x", "VEC=2,VEC=3", "template=a,template=b", ",,", "=", "K=" + "9" * 30]
    ENV["TAILOR_CACHE"] = os.path.join(work, "c.sqlite")
    for it in range(n):
        cmd = rnd.choice(list(FLAGS))
        argv = [cmd] + ([rnd.choice(SUBCOMMANDS[cmd])] if cmd in SUBCOMMANDS else [])
        for _ in range(rnd.randint(0, 6)):
            argv.append(rnd.choice(FLAGS[cmd].split()))
            if rnd.random() < 0.8:
                argv.append(rnd.choice(values))
        r = run(argv, timeout=60)
        path = os.path.join(work, "argv.txt")
        open(path, "w").write("\n".join(argv))
        v.judge(it, r, {"argv.txt": path}, allowed=(0, 1, 2))
    del ENV["TAILOR_CACHE"]
    return v.summary()


TARGETS = {"checkpoint": fuzz_checkpoint, "index": fuzz_index, "tokenizer": fuzz_tokenizer,
           "cache": fuzz_cache, "cachefile": fuzz_cachefile, "space": fuzz_space,
           "flags": fuzz_flags}


def main():
    if len(sys.argv) < 2 or sys.argv[1] not in list(TARGETS) + ["all"]:
        sys.exit(__doc__)
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    if not os.access(BIN, os.X_OK):
        sys.exit("fuzz_inputs: no tailor binary at %s (make asan, or set TAILOR_BIN)" % BIN)
    bad = 0
    for name in (TARGETS if sys.argv[1] == "all" else [sys.argv[1]]):
        work = os.path.join(OUT, "work-" + name)
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work)
        bad += TARGETS[name](n, random.Random("%s-%d" % (name, seed)), work)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()

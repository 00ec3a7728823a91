#!/usr/bin/env python3
"""trials_near.py — which survivors ever come near a target's best, from `tailor cache trials --json`.

For each op: how many timed configurations each target had and how many came within 10 % and
25 % of its best; then per template, each parameter value's best ratio to the target's best over
all the op's targets (a value whose best is far above 1.0 never wins on this card); and the
configurations that were never within NEAR (default 1.25) of any target's best.

    python3 scripts/probe/trials_near.py TRIALS.json... [--op OP] [--near 1.25] [--where m=512]
                                         [--templates]

Several files (boots of other models or cards, kernel benches) are read as one: a target is
(file, op, shape, dtype). --templates prints instead, per (op, template), how many
configurations were timed, how many never came within 10 % and 25 % of a target's best, and
the closest its best came to the best of the op's other templates over the targets where both
were timed: the data for a rule that leaves a shape to another template
(docs/search-spaces.md).
"""
import argparse
import collections
import json
import sys


def templates_summary(targets):
    best_ratio = {}                            # (op, template, params) -> best ratio
    closest = {}                               # (op, template) -> best / the others' best
    for (op, _, _), rs in targets.items():
        best = min(r["median_us"] for r in rs)
        per_t = collections.defaultdict(lambda: float("inf"))
        for r in rs:
            params = r["params"] if isinstance(r["params"], dict) else {}
            k = (op, r["template"], json.dumps(params, sort_keys=True))
            best_ratio[k] = min(best_ratio.get(k, float("inf")), r["median_us"] / best)
            per_t[r["template"]] = min(per_t[r["template"]], r["median_us"])
        for t, us in per_t.items():
            others = [v for u, v in per_t.items() if u != t]
            if others:
                closest[(op, t)] = min(closest.get((op, t), float("inf")), us / min(others))
    rows = collections.defaultdict(list)
    for (op, t, _), b in best_ratio.items():
        rows[(op, t)].append(b)
    for (op, t), bs in sorted(rows.items()):
        c = closest.get((op, t))
        print(f"{op:18s} {t:28s} {len(bs):4d} configs, {sum(b > 1.10 for b in bs):4d} never within "
              f"10 %, {sum(b > 1.25 for b in bs):4d} never within 25 %; its best / the others' "
              f"best: {'-' if c is None else f'{c:.2f}'}")
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trials", nargs="+")
    ap.add_argument("--templates", action="store_true")
    ap.add_argument("--op")
    ap.add_argument("--near", type=float, default=1.25)
    ap.add_argument("--where", help="only shapes holding this k=v text, e.g. m=512")
    a = ap.parse_args()
    targets = collections.defaultdict(list)
    for path in a.trials:
        for r in json.load(open(path)):
            if r.get("median_us") is None or r["median_us"] <= 0:
                continue
            if a.op and r["op"] != a.op:
                continue
            if a.where and a.where not in r["shape"].split(","):
                continue
            targets[(r["op"], r["shape"] if len(a.trials) == 1 else f"{path}:{r['shape']}",
                     r["dtype"])].append(r)
    if a.templates:
        return templates_summary(targets)
    by_op = collections.defaultdict(list)
    for key, rs in targets.items():
        by_op[key[0]].append((key, rs))
    for op, items in sorted(by_op.items()):
        print(f"== {op}: {len(items)} targets")
        best_ratio = {}          # (template, params text) -> best ratio over targets
        value_best = collections.defaultdict(lambda: float("inf"))  # (template, name, value)
        for (_, shape, dtype), rs in sorted(items):
            best = min(r["median_us"] for r in rs)
            near10 = sum(r["median_us"] <= 1.10 * best for r in rs)
            near25 = sum(r["median_us"] <= 1.25 * best for r in rs)
            win = min(rs, key=lambda r: r["median_us"])
            print(f"  {shape} {dtype}: {len(rs)} timed, {near10} within 10 %, {near25} within 25 %; "
                  f"best {best:.2f} us {win['template']} {json.dumps(win['params'], sort_keys=True)}")
            for r in rs:
                ratio = r["median_us"] / best
                params = r["params"] if isinstance(r["params"], dict) else {}
                cfg = (r["template"], json.dumps(params, sort_keys=True))
                best_ratio[cfg] = min(best_ratio.get(cfg, float("inf")), ratio)
                for k, v in params.items():
                    vb = (r["template"], k, str(v))
                    value_best[vb] = min(value_best[vb], ratio)
        print("  parameter values, best ratio to a target's best:")
        for t in sorted({k[0] for k in value_best}):
            names = sorted({k[1] for k in value_best if k[0] == t})
            for n in names:
                vals = sorted((k[2], value_best[k]) for k in value_best if k[0] == t and k[1] == n)
                print(f"    {t} {n}: " + ", ".join(f"{v}={b:.2f}" for v, b in vals))
        never = sorted(c for c, b in best_ratio.items() if b > a.near)
        print(f"  {len(never)} of {len(best_ratio)} configurations never within {a.near}x of a best")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""timeline.py — summarises the PROBE lines of a kernel built with tailor_probe.cuh.

Each line: PROBE module ticket blocks sm bx by bz t0 t1 t2 t3 t4 t5 exit (ns of %globaltimer; 0 = unset).
Launches are told apart by ticket // blocks (a module loaded again restarts the tickets). Per launch it prints the span from the first
block past its grid wait to the last exit, and each phase's median and maximum over blocks:
  start  t1 - min(t1)   when a block got past its grid wait, from the first one
  wait   t1 - t0        the grid dependency wait (PDL: time spent resident before the start)
  first  t2 - t1        until its first tile landed
  stream t3 - t2        the rest of its tiles
  tail   t4 - t3        sums and the partial's stores
  exit   exit - t4      the merge (long only in the blocks that merge)
Usage: timeline.py LOG [LABEL]
"""
import sys
from collections import defaultdict


def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(q * (len(v) - 1) + 0.5))] if v else 0


def main():
    # one group per loaded module: lines carry the module's ticket address; an address seen
    # again with a ticket it already printed is a module loaded again at the same place
    groups, current = [], {}
    for line in open(sys.argv[1], errors="replace"):
        f = line.split()
        if len(f) != 15 or f[0] != "PROBE":
            continue
        v = [int(x) for x in f[2:]]
        row = [v[0]] + v[2:] + [v[1]]  # ticket, sm, x, y, z, t0..t5, exit, blocks
        g = current.get(f[1])
        if g is None or row[0] in g[1]:
            g = ([], set())
            current[f[1]] = g
            groups.append(g[0])
        g[0].append(row)
        g[1].add(row[0])
    if not groups:
        print("timeline: no PROBE lines in %s" % sys.argv[1])
        return 1
    label = sys.argv[2] if len(sys.argv) > 2 else sys.argv[1]
    for gi, g in enumerate(groups):
        nb = g[0][12]
        launches = defaultdict(list)
        for r in g:
            launches[r[0] // max(nb, 1)].append(r)  # tickets start at 0 in a module
        prev_exit = None
        for li, blocks in sorted(launches.items()):
            t1min = min(b[6] for b in blocks)
            gap = "" if prev_exit is None else ", %.2f us after the launch before ended" % (
                (t1min - prev_exit) / 1e3)
            prev_exit = max(b[11] for b in blocks)
            span = max(b[11] for b in blocks) - t1min
            sms = len(set(b[1] for b in blocks))
            ph = {
                "start": [b[6] - t1min for b in blocks],
                "wait": [b[6] - b[5] for b in blocks],
                "first": [b[7] - b[6] for b in blocks if b[7]],
                "stream": [b[8] - b[7] for b in blocks if b[8] and b[7]],
                "tail": [b[9] - b[8] for b in blocks if b[9] and b[8]],
                "exit": [b[11] - b[9] for b in blocks if b[9]],
                "life": [b[11] - b[6] for b in blocks],
            }
            print("%s module %d launch %d: %d blocks on %d SMs, span %.2f us (first past the wait "
                  "to the last exit%s)" % (label, gi, li, len(blocks), sms, span / 1e3, gap))
            print("   " + "  ".join("%s p50 %.2f max %.2f" % (k, pct(v, .5) / 1e3, pct(v, 1) / 1e3)
                                    for k, v in ph.items() if v))
            lb = max(blocks, key=lambda b: b[11])
            print("   last block (%d,%d,%d) sm %d: start %.2f first %.2f stream %.2f tail %.2f "
                  "exit %.2f us" % (lb[2], lb[3], lb[4], lb[1], (lb[6] - t1min) / 1e3,
                                    (lb[7] - lb[6]) / 1e3 if lb[7] else 0,
                                    (lb[8] - lb[7]) / 1e3 if lb[8] and lb[7] else 0,
                                    (lb[9] - lb[8]) / 1e3 if lb[9] and lb[8] else 0,
                                    (lb[11] - lb[9]) / 1e3 if lb[9] else 0))
    return 0


if __name__ == "__main__":
    sys.exit(main())

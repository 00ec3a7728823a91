#!/usr/bin/env python3
"""gemv_t_variants.py OUTDIR [ROOT] — copies of ROOT/templates/ (default: this checkout's) in which w4a16_gemv_t is pinned to one
configuration (the E2B n=6144 k=1536 winner) and the other int4 spaces refuse everything, each
copy with one piece of the kernel knocked out, to decompose its time on the GPU:
  base     the kernel as it is (pinned)
  nomath   compute_quad only XORs its weights, scales and activations into the sum
  noact    no activation loads (constant activations)
  noscale  no scale loads (scale 1)
  floor    nomath + noact + noscale: the loads of weights, the reduction and the store
  asmem    the kernel as it is with ASMEM=1 (activations staged in shared memory)
  u3       the kernel as it is with UNROLL=3 (all of a warp's quads in one batch at k=1536)
  u3guard  u3 with quads past the warp's end not computed (UNROLL=2 computes a fourth of zeros)
  chains   u3guard, the quad's mmas in four independent chains (sum a and acc, by s) interleaved
  nosum    u3guard, no sum-a mma: the bias subtracted in 16 bits before the mma (exact), two
           chains by s, scale applied per quad in fp32
  actbatch u3guard, the activations of the whole batch loaded with its weights (not one quad ahead)
  best     chains + actbatch
  best2    nosum + actbatch
Made on the development machine (the GPU machine may lack python3) into probe-variants/ (ignored;
name it in the device tool's carry); scripts/probe/variants.sh times them there. Session 9 ran it
on ed440bc's templates (git archive ed440bc templates | tar -x -C /tmp/old; ROOT = /tmp/old):
the nosum and UNROLL=3 variants became the template (docs/perf/w4a16.md, session 9)."""
import os, re, shutil, sys

PIN = {"WR": "1", "WK": "4", "RT": "1", "UNROLL": "2", "SPLITK": "1", "MT": "1", "ASMEM": "0"}
OTHERS = ["w4a16_gemv.lua", "w4a16_gemv_wide.lua", "w4a16_mma.lua"]

NOMATH = """
#if 1 // probe: nomath
    {
        u32 x = 0;
#pragma unroll
        for (int rt = 0; rt < RT; rt++)
#pragma unroll
            for (int h = 0; h < 2; h++)
                x ^= b.w[u][rt][h].x ^ b.w[u][rt][h].y ^ b.w[u][rt][h].z ^ b.w[u][rt][h].w ^
                     (u32)__bfloat16_as_ushort(b.s[u][rt][h]);
#pragma unroll
        for (int j = 0; j < MT; j++)
#pragma unroll
            for (int i = 0; i < 4; i++)
                x ^= av[j][i].x ^ av[j][i].w;
        tot[0][0][0] += __uint_as_float(x & 0x007fffffu);
        return;
    }
#endif
"""

CHAINS = """__device__ __forceinline__ void compute_quad(const Batch &b, int u, const uint4 (&av)[MT][4],
                                             float (&tot)[RT][MT][4])
{
    u32 bf[MT][4][2][2];
#pragma unroll
    for (int j = 0; j < MT; j++)
#pragma unroll
        for (int tp = 0; tp < 4; tp++)
#pragma unroll
            for (int s = 0; s < 2; s++) {
                bf[j][tp][s][0] = word_of(av[j][2 * s], tp);
                bf[j][tp][s][1] = word_of(av[j][2 * s + 1], tp);
            }
    const u32 ones[4] = {ONES, ONES, ONES, ONES};
    float asum[MT][2][4], acc[RT][MT][2][4];
#pragma unroll
    for (int j = 0; j < MT; j++)
#pragma unroll
        for (int s = 0; s < 2; s++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                asum[j][s][e] = 0.f;
#pragma unroll
                for (int rt = 0; rt < RT; rt++)
                    acc[rt][j][s][e] = 0.f;
            }
#pragma unroll
    for (int tp = 0; tp < 4; tp++)
#pragma unroll
        for (int s = 0; s < 2; s++) {
#pragma unroll
            for (int j = 0; j < MT; j++)
                tc_mma_k16(asum[j][s], ones, bf[j][tp][s][0], bf[j][tp][s][1]);
#pragma unroll
            for (int rt = 0; rt < RT; rt++) {
                const u32 w0 = word_of(b.w[u][rt][0], tp), w1 = word_of(b.w[u][rt][1], tp);
                u32 af[4];
                af[0] = w4_raw_pair(w0, 2 * s);
                af[1] = w4_raw_pair(w1, 2 * s);
                af[2] = w4_raw_pair(w0, 2 * s + 1);
                af[3] = w4_raw_pair(w1, 2 * s + 1);
#pragma unroll
                for (int j = 0; j < MT; j++)
                    tc_mma_k16(acc[rt][j][s], af, bf[j][tp][s][0], bf[j][tp][s][1]);
            }
        }
#pragma unroll
    for (int rt = 0; rt < RT; rt++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const float sc = to_f32(b.s[u][rt][h]);
            const float zb = (float)(W4_MAGIC == 0x4300u ? 128 : 1024) + (float)b.z[u][rt][h];
#pragma unroll
            for (int j = 0; j < MT; j++)
#pragma unroll
                for (int e = 2 * h; e < 2 * h + 2; e++)
                    tot[rt][j][e] = fmaf(sc, fmaf(-zb, asum[j][0][e] + asum[j][1][e],
                                                  acc[rt][j][0][e] + acc[rt][j][1][e]),
                                         tot[rt][j][e]);
        }
}
"""

NOSUM = """__device__ __forceinline__ void compute_quad(const Batch &b, int u, const uint4 (&av)[MT][4],
                                             float (&tot)[RT][MT][4])
{
    u32 bf[MT][4][2][2];
#pragma unroll
    for (int j = 0; j < MT; j++)
#pragma unroll
        for (int tp = 0; tp < 4; tp++)
#pragma unroll
            for (int s = 0; s < 2; s++) {
                bf[j][tp][s][0] = word_of(av[j][2 * s], tp);
                bf[j][tp][s][1] = word_of(av[j][2 * s + 1], tp);
            }
    float acc[RT][MT][2][4];
#pragma unroll
    for (int rt = 0; rt < RT; rt++)
#pragma unroll
        for (int j = 0; j < MT; j++)
#pragma unroll
            for (int s = 0; s < 2; s++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    acc[rt][j][s][e] = 0.f;
#pragma unroll
    for (int tp = 0; tp < 4; tp++)
#pragma unroll
        for (int s = 0; s < 2; s++)
#pragma unroll
            for (int rt = 0; rt < RT; rt++) {
                const T2 bias0 = w4_bias(b.z[u][rt][0]), bias1 = w4_bias(b.z[u][rt][1]);
                const u32 w0 = word_of(b.w[u][rt][0], tp), w1 = word_of(b.w[u][rt][1], tp);
                u32 af[4];
                af[0] = w4_as_u32(__hsub2(w4_as_t2(w4_raw_pair(w0, 2 * s)), bias0));
                af[1] = w4_as_u32(__hsub2(w4_as_t2(w4_raw_pair(w1, 2 * s)), bias1));
                af[2] = w4_as_u32(__hsub2(w4_as_t2(w4_raw_pair(w0, 2 * s + 1)), bias0));
                af[3] = w4_as_u32(__hsub2(w4_as_t2(w4_raw_pair(w1, 2 * s + 1)), bias1));
#pragma unroll
                for (int j = 0; j < MT; j++)
                    tc_mma_k16(acc[rt][j][s], af, bf[j][tp][s][0], bf[j][tp][s][1]);
            }
#pragma unroll
    for (int rt = 0; rt < RT; rt++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const float sc = to_f32(b.s[u][rt][h]);
#pragma unroll
            for (int j = 0; j < MT; j++)
#pragma unroll
                for (int e = 2 * h; e < 2 * h + 2; e++)
                    tot[rt][j][e] = fmaf(sc, acc[rt][j][0][e] + acc[rt][j][1][e], tot[rt][j][e]);
        }
}
"""

ACTBATCH = """        uint4 ab[UNROLL][MT][4];
#pragma unroll
        for (int u = 0; u < UNROLL; u++)
            load_a(ab[u], src, q + u, qe, M, C, lane);
        Batch nxt; // past qe: zeros, no load
        load_batch(nxt, qweight, scales, zeros, row0, q + UNROLL, qe, N, C, ld, lane);
#pragma unroll
        for (int u = 0; u < UNROLL; u++)
            if (q + u < qe)
                compute_quad(cur, u, ab[u], tot);
"""

def replace_compute(t, new):
    a = t.index("// tot += this quad (u of the batch) for every row tile; av holds its activations.")
    b = t.index("} // namespace w4t")
    return t[:a] + new + t[b:]

def sub1(text, old, new):
    assert text.count(old) == 1, old
    return text.replace(old, new)

def make(root, out, name):
    pin = dict(PIN, ASMEM="1") if name == "asmem" else PIN if name in ("base", "nomath", "noact", "noscale", "floor") else dict(PIN, UNROLL="3")
    dst = os.path.join(out, name, "templates")
    shutil.rmtree(os.path.join(out, name), ignore_errors=True)
    shutil.copytree(os.path.join(root, "templates"), dst)
    lua = os.path.join(dst, "w4a16_gemv_t.lua")
    t = open(lua).read()
    for k, v in pin.items():
        t, n = re.subn(r"(\n    %s = )(\{[^}]*\}|SPLITS)" % k, r"\g<1>{ %s }" % v, t)
        assert n == 1, k
    open(lua, "w").write(t)
    for f in OTHERS:
        p = os.path.join(dst, f)
        t = open(p).read()
        t, n = re.subn(r"(\n  valid = function\([^)]*\)\n)", r'\1    if true then return false, "pinned (probe)" end\n', t)
        assert n == 1, f
        open(p, "w").write(t)
    cu = os.path.join(dst, "w4a16_gemv_t.cu")
    t = open(cu).read()
    if name in ("nomath", "floor"):
        t = sub1(t, "    // B fragments: step (t', s)", NOMATH + "    // B fragments: step (t', s)")
    if name in ("noact", "floor"):
        t = sub1(t, "                av[j][i] = load_a16(p + i);",
                 "                av[j][i] = make_uint4(0x3f803f80u + i, 0x3f803f80u, 0x3f803f80u, 0x3f803f80u + j + (int)(size_t)p * 0);")
    if name in ("noscale", "floor"):
        t = sub1(t, "                    b.s[u][rt][h] = scales[gi];", "                    b.s[u][rt][h] = from_f32(1.f); (void)gi;")
    if name in ("u3guard", "chains", "nosum", "actbatch", "best", "best2"):
        t = sub1(t, "            compute_quad(cur, u, av, tot);", "            if (q + u < qe)\n                compute_quad(cur, u, av, tot);")
    if name in ("chains", "best"):
        t = replace_compute(t, CHAINS)
    if name in ("nosum", "best2"):
        t = replace_compute(t, NOSUM)
    if name in ("actbatch", "best", "best2"):
        a = t.index("        Batch nxt; // past qe: zeros, no load")
        b = t.index("        cur = nxt;")
        t = t[:a] + ACTBATCH + t[b:]
        t = sub1(t, "    uint4 av[MT][4];\n    load_a(av, src, qb, qe, M, C, lane);\n", "")
    open(cu, "w").write(t)

if __name__ == "__main__":
    root = sys.argv[2] if len(sys.argv) > 2 else \
        os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    for name in ["base", "nomath", "noact", "noscale", "floor", "asmem", "u3", "u3guard", "chains", "nosum", "actbatch", "best", "best2"]:
        make(root, sys.argv[1], name)

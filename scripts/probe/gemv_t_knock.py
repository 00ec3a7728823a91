#!/usr/bin/env python3
"""gemv_t_knock.py OUTDIR — copies of this checkout's templates/ in which w4a16_gemv_t has one piece
of its per-quad work knocked out, to split a launch's time between the loads and the math on the
GPU (scripts/probe/knock.sh times each copy's dumped kernels with cubin_time.cu; the knocked-out
copies compute nothing right, so the tuner cannot time them):
  base    the kernel as it is
  floor   compute_quad only XORs its weights, scales and activations into the sum: the loads, the
          reduction and the store
  nodeq   the mmas take the raw weight words (no shift, LOP3 or subtraction: the dequantization's
          ALU work gone, the tensor-core work kept)
  nomma   the dequantized pairs XORed into the sum instead of the mmas (the ALU work kept, the
          tensor-core work gone)
  noguard load_batch without its per-load checks (every load issued; reads past a warp's quads
          stay inside the buffers cubin_time allocates)
Made on the development machine into probe-variants/ (ignored; name it in the device tool's
carry). Session 49 wrote it for the question of model.md session 48: is the H200's 31B GEMV
bound by issuing instructions or by the bytes it keeps in flight?"""
import os
import shutil
import sys

SRC = "templates/w4a16_gemv_t.cu"

FLOOR = """__device__ __forceinline__ void compute_quad(const Batch &b, int u, const uint4 (&av)[MT][4],
                                             float (&tot)[RT][MT][4])
{
    u32 x = 0;
#pragma unroll
    for (int rt = 0; rt < RT; rt++)
#pragma unroll
        for (int h = 0; h < 2; h++)
            x ^= b.w[u][rt][h].x ^ b.w[u][rt][h].y ^ b.w[u][rt][h].z ^ b.w[u][rt][h].w ^
                 __float_as_uint(to_f32(b.s[u][rt][h]));
#pragma unroll
    for (int j = 0; j < MT; j++)
#pragma unroll
        for (int i = 0; i < 4; i++)
            x ^= av[j][i].x ^ av[j][i].y ^ av[j][i].z ^ av[j][i].w;
    tot[0][0][0] += __uint_as_float(x & 0x007fffffu);
}

"""


def sub1(text, old, new):
    assert text.count(old) == 1, old
    return text.replace(old, new)


def knock(name, t):
    if name == "base":
        return t
    if name == "floor":
        a = t.index("// tot += this quad (u of the batch) for every row tile; av holds its activations.")
        b = t.index("// Quad u of batch b into tot")
        return t[:a] + FLOOR + t[b:]
    if name == "nodeq":
        for p, w in (("2 * s", "w0"), ("2 * s", "w1"), ("2 * s + 1", "w0"), ("2 * s + 1", "w1")):
            bias = "bias[0]" if w == "w0" else "bias[1]"
            t = t.replace("w4_as_u32(w4_pair_unscaled(%s, %s, %s))" % (w, p, bias), w, 1)
        return t
    if name == "nomma":
        return sub1(t, "tc_mma_k16(acc[j], af, bf[j][tp][s][0], bf[j][tp][s][1]);",
                    "acc[j][0] += __uint_as_float((af[0] ^ af[1] ^ af[2] ^ af[3] ^ bf[j][tp][s][0] ^"
                    " bf[j][tp][s][1]) & 0x007fffffu);")
    if name == "noguard":
        return sub1(t, "if (live && q + u < qe && c < C) {", "{ (void)live;")
    raise SystemExit("unknown variant " + name)


def main():
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    out = sys.argv[1]
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    text = open(os.path.join(root, SRC)).read()
    for name in ("base", "floor", "nodeq", "nomma", "noguard"):
        dst = os.path.join(out, name)
        shutil.rmtree(dst, ignore_errors=True)
        shutil.copytree(os.path.join(root, "templates"), os.path.join(dst, "templates"))
        new = knock(name, text)
        assert name == "base" or new != text, name
        open(os.path.join(dst, SRC), "w").write(new)


main()

#!/usr/bin/env python3
"""Reference dequantisation of ggml's weight types, written from the block layouts (numpy).

Usage: quant_reference.py TYPE BLOCKS_FILE OUT_FILE
Reads raw blocks of TYPE, writes the dequantised values as little-endian float32.
Every product and difference is a float32 operation on its own (numpy rounds each one), in the
association ggml's dequantize_row_* writes: e.g. q4_K w = (d*sc)*q - (dmin*m), q6_K
w = (d*sc)*q. Used by tests/quant/dequant_test.cpp, which compares the bit patterns.
The low-bit types (IQ1/IQ2/IQ3) read their lattice grids and sign tables from
src/quant/iq_grids.h (generated from ggml-common.h by scripts/gen-iq-grids.py); the formulas
below are written from the block layouts independently of quant/dequant.cpp.
"""
import os
import re
import sys

import numpy as np

F32 = np.float32
KVALUES_IQ4NL = np.array([-127, -104, -83, -65, -49, -35, -22, -10,
                          1, 13, 25, 38, 53, 69, 89, 113], dtype=np.int32)

# (block size, block bytes)
GEOMETRY = {
    "q4_0": (32, 18), "q4_1": (32, 20), "q5_0": (32, 22), "q5_1": (32, 24), "q8_0": (32, 34),
    "q2_K": (256, 84), "q3_K": (256, 110), "q4_K": (256, 144), "q5_K": (256, 176),
    "q6_K": (256, 210), "iq4_nl": (32, 18), "iq4_xs": (256, 136),
    "iq2_xxs": (256, 66), "iq2_xs": (256, 74), "iq2_s": (256, 82), "iq3_xxs": (256, 98),
    "iq3_s": (256, 110), "iq1_s": (256, 50), "iq1_m": (256, 56), "tq1_0": (256, 54),
    "tq2_0": (256, 66), "mxfp4": (32, 17),
}

GRIDS_H = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src", "quant",
                       "iq_grids.h")


def load_grids():
    """{C++ name: table as bytes [entries, bytes per entry] (uint8)} from iq_grids.h."""
    text = open(GRIDS_H, encoding="utf-8").read()
    out = {}
    for m in re.finditer(r"inline constexpr (\w+) (\w+)\[(\d+)\] = \{(.*?)\};", text, re.S):
        ctype, name, size, body = m.group(1), m.group(2), int(m.group(3)), m.group(4)
        vals = [int(t, 0) for t in re.findall(r"-?(?:0x[0-9a-fA-F]+|\d+)", body)]
        assert len(vals) == size, (name, len(vals), size)
        dt = {"uint8_t": "<u1", "int8_t": "<i1", "uint32_t": "<u4", "uint64_t": "<u8"}[ctype]
        arr = np.array(vals, dtype=np.uint64 if ctype == "uint64_t" else np.int64).astype(dt)
        out[name] = arr
    return out



def half(b, off):
    """Little-endian IEEE binary16 at byte off of each block, widened (exactly) to float32."""
    return b[:, off:off + 2].copy().view("<f2").astype(F32)[:, 0]


def col(v):
    return v.reshape(-1, 1)


def mul(a, b):
    return np.multiply(a, b, dtype=F32)


def sub(a, b):
    return np.subtract(a, b, dtype=F32)


def add(a, b):
    return np.add(a, b, dtype=F32)


def nibbles(qs):
    """Legacy 32-blocks: element j is the low nibble of qs[j], element j + 16 the high one."""
    return np.concatenate([qs & 0xF, qs >> 4], axis=1).astype(np.int32)


def q4_0(b):
    d = half(b, 0)
    return mul((nibbles(b[:, 2:18]) - 8).astype(F32), col(d))


def q4_1(b):
    d, m = half(b, 0), half(b, 2)
    return add(mul(nibbles(b[:, 4:20]).astype(F32), col(d)), col(m))


def fifth_bits(qh_bytes):
    qh = qh_bytes.copy().view("<u4")[:, 0].astype(np.int64)
    bits = (qh[:, None] >> np.arange(32)) & 1
    return (bits << 4).astype(np.int32)


def q5_0(b):
    d = half(b, 0)
    q = nibbles(b[:, 6:22]) | fifth_bits(b[:, 2:6])
    return mul((q - 16).astype(F32), col(d))


def q5_1(b):
    d, m = half(b, 0), half(b, 2)
    q = nibbles(b[:, 8:24]) | fifth_bits(b[:, 4:8])
    return add(mul(q.astype(F32), col(d)), col(m))


def q8_0(b):
    d = half(b, 0)
    q = b[:, 2:34].copy().view(np.int8).astype(F32)
    return mul(q, col(d))


def two_bit_codes(qs):
    """Q2_K/Q3_K: element 128h + 32s + k is bits 2s of qs[32h + k] -> [n, 256]."""
    n = qs.shape[0]
    out = np.zeros((n, 256), dtype=np.int32)
    for h in range(2):
        for s in range(4):
            for k in range(32):
                out[:, 128 * h + 32 * s + k] = (qs[:, 32 * h + k] >> (2 * s)) & 3
    return out


def per_sub(v, size):
    """Repeats per-sub-block values [n, S] to per-element [n, S*size]."""
    return np.repeat(v, size, axis=1)


def q2_K(b):
    scales = b[:, 0:16].astype(np.int32)
    d, dmin = half(b, 80), half(b, 82)
    q = two_bit_codes(b[:, 16:80])
    dl = mul(col(d), (scales & 0xF).astype(F32))
    ml = mul(col(dmin), (scales >> 4).astype(F32))
    return sub(mul(per_sub(dl, 16), q.astype(F32)), per_sub(ml, 16))


def q3_K(b):
    hmask = b[:, 0:32].astype(np.int32)
    q = two_bit_codes(b[:, 32:96])
    p = b[:, 96:108].astype(np.int32)
    d = half(b, 108)
    sc = np.zeros((b.shape[0], 16), dtype=np.int32)
    for i in range(4):
        hi = p[:, 8 + i]
        sc[:, i] = (p[:, i] & 0xF) | ((hi & 3) << 4)
        sc[:, 4 + i] = (p[:, 4 + i] & 0xF) | (((hi >> 2) & 3) << 4)
        sc[:, 8 + i] = (p[:, i] >> 4) | (((hi >> 4) & 3) << 4)
        sc[:, 12 + i] = (p[:, 4 + i] >> 4) | (((hi >> 6) & 3) << 4)
    e = np.arange(256)
    high = (hmask[:, e % 32] >> (e // 32)) & 1
    v = q - np.where(high == 1, 0, 4)
    dl = mul(col(d), (sc - 32).astype(F32))
    return mul(per_sub(dl, 16), v.astype(F32))


def k4_scales(p):
    """Q4_K/Q5_K: 8 scales and 8 mins from the 12 packed bytes."""
    p = p.astype(np.int32)
    sc = np.zeros((p.shape[0], 8), dtype=np.int32)
    m = np.zeros((p.shape[0], 8), dtype=np.int32)
    for j in range(8):
        if j < 4:
            sc[:, j] = p[:, j] & 63
            m[:, j] = p[:, j + 4] & 63
        else:
            sc[:, j] = (p[:, j + 4] & 0xF) | ((p[:, j - 4] >> 6) << 4)
            m[:, j] = (p[:, j + 4] >> 4) | ((p[:, j] >> 6) << 4)
    return sc, m


def k4_codes(qs):
    """Element 64j + 32part + l is nibble `part` of qs[32j + l]."""
    out = np.zeros((qs.shape[0], 256), dtype=np.int32)
    for j in range(4):
        blk = qs[:, 32 * j:32 * j + 32].astype(np.int32)
        out[:, 64 * j:64 * j + 32] = blk & 0xF
        out[:, 64 * j + 32:64 * j + 64] = blk >> 4
    return out


def q45_K(b, qs, qh):
    d, dmin = half(b, 0), half(b, 2)
    sc, m = k4_scales(b[:, 4:16])
    q = k4_codes(qs)
    if qh is not None:
        e = np.arange(256)
        q = q + ((qh.astype(np.int32)[:, e % 32] >> (e // 32)) & 1) * 16
    dl = mul(col(d), sc.astype(F32))
    ml = mul(col(dmin), m.astype(F32))
    return sub(mul(per_sub(dl, 32), q.astype(F32)), per_sub(ml, 32))


def q4_K(b):
    return q45_K(b, b[:, 16:144], None)


def q5_K(b):
    return q45_K(b, b[:, 48:176], b[:, 16:48])


def q6_K(b):
    ql = b[:, 0:128].astype(np.int32)
    qh = b[:, 128:192].astype(np.int32)
    sc = b[:, 192:208].copy().view(np.int8).astype(np.int32)
    d = half(b, 208)
    q = np.zeros((b.shape[0], 256), dtype=np.int32)
    for e in range(256):
        h, g, l = e // 128, (e % 128) // 32, e % 32
        low = (ql[:, 64 * h + 32 * (g & 1) + l] >> (4 * (g // 2))) & 0xF
        high = (qh[:, 32 * h + l] >> (2 * g)) & 3
        q[:, e] = (low | (high << 4)) - 32
    ds = mul(col(d), sc.astype(F32))
    return mul(per_sub(ds, 16), q.astype(F32))


def iq4_nl(b):
    d = half(b, 0)
    v = KVALUES_IQ4NL[nibbles(b[:, 2:18])].astype(F32)
    return mul(col(d), v)


def iq4_xs(b):
    d = half(b, 0)
    sh = b[:, 2:4].copy().view("<u2")[:, 0].astype(np.int32)
    sl = b[:, 4:8].astype(np.int32)
    qs = b[:, 8:136]
    out = []
    for ib in range(8):
        ls = ((sl[:, ib // 2] >> (4 * (ib % 2))) & 0xF) | (((sh >> (2 * ib)) & 3) << 4)
        dl = mul(d, (ls - 32).astype(F32))
        v = KVALUES_IQ4NL[nibbles(qs[:, 16 * ib:16 * ib + 16])].astype(F32)
        out.append(mul(col(dl), v))
    return np.concatenate(out, axis=1)


def u16s(b, off, count):
    return b[:, off:off + 2 * count].copy().view("<u2").astype(np.int64)


def grid_bytes(table, idx):
    """Entries idx [n, g] of a u64 / u32 grid as their bytes [n, g * bytes per entry] (uint8)."""
    e = table[idx]
    return e.view(np.uint8).reshape(idx.shape[0], -1).astype(np.int64)


def sign_bits(signs8):
    """Sign bytes [n, g] to +-1 per element [n, 8g] (bit j of byte l is element 8l + j)."""
    bits = (signs8[:, :, None] >> np.arange(8)) & 1
    return np.where(bits == 1, F32(-1), F32(1)).reshape(signs8.shape[0], -1).astype(F32)


def signed_grid(db, mags, signs):
    """ggml's y = db * grid * sign: the product with the magnitude first, then the sign."""
    return mul(mul(db, mags.astype(F32)), signs)


def iq2_xxs(b):
    g = load_grids()
    d = half(b, 0)
    aux = b[:, 2:66].copy().view("<u4").astype(np.int64)  # [n, 16]: pairs per sub-block
    a0, a1 = aux[:, 0::2], aux[:, 1::2]
    idx = np.stack([(a0 >> (8 * l)) & 0xff for l in range(4)], axis=2).reshape(-1, 32)
    sg = np.stack([g["kIQ2SignsTable"][(a1 >> (7 * l)) & 127] for l in range(4)], axis=2)
    scale = (a1 >> 28).astype(F32)
    db = mul(mul(col(d), add(F32(0.5), scale)), F32(0.25))
    return signed_grid(per_sub(db, 32), grid_bytes(g["kIQ2XXSGrid"], idx),
                       sign_bits(sg.reshape(-1, 32).astype(np.int64)))


def iq2_scales16(b, scales):
    """IQ2_XS / IQ2_S: (d * (0.5 + s)) * 0.25 per 16 weights, s the nibbles of scales[j]."""
    s16 = np.stack([scales & 0xf, scales >> 4], axis=2).reshape(-1, 16).astype(F32)
    return mul(mul(col(half(b, 0)), add(F32(0.5), s16)), F32(0.25))


def iq2_xs(b):
    g = load_grids()
    q = u16s(b, 2, 32)
    scales = b[:, 66:74].astype(np.int64)
    db = iq2_scales16(b, scales)
    mags = grid_bytes(g["kIQ2XSGrid"], q & 511)
    signs = sign_bits(g["kIQ2SignsTable"][q >> 9].astype(np.int64))
    return signed_grid(per_sub(db, 16), mags, signs)


def iq2_s(b):
    g = load_grids()
    qs = b[:, 2:34].astype(np.int64)
    sg = b[:, 34:66].astype(np.int64)
    qh = b[:, 66:74].astype(np.int64)
    scales = b[:, 74:82].astype(np.int64)
    db = iq2_scales16(b, scales)
    idx = np.zeros_like(qs)
    for j in range(8):
        for l in range(4):
            idx[:, 4 * j + l] = qs[:, 4 * j + l] | (((qh[:, j] >> (2 * l)) & 3) << 8)
    return signed_grid(per_sub(db, 16), grid_bytes(g["kIQ2SGrid"], idx), sign_bits(sg))


def iq3_xxs(b):
    g = load_grids()
    d = half(b, 0)
    qs = b[:, 2:66].astype(np.int64)
    aux = b[:, 66:98].copy().view("<u4").astype(np.int64)  # [n, 8]
    sg = np.stack([g["kIQ2SignsTable"][(aux >> (7 * l)) & 127] for l in range(4)], axis=2)
    db = mul(mul(col(d), add(F32(0.5), (aux >> 28).astype(F32))), F32(0.5))
    return signed_grid(per_sub(db, 32), grid_bytes(g["kIQ3XXSGrid"], qs),
                       sign_bits(sg.reshape(-1, 32).astype(np.int64)))


def iq3_s(b):
    g = load_grids()
    d = half(b, 0)
    qs = b[:, 2:66].astype(np.int64)
    qh = b[:, 66:74].astype(np.int64)
    sg = b[:, 74:106].astype(np.int64)
    sc = b[:, 106:110].astype(np.int64)
    s8 = np.stack([sc & 0xf, sc >> 4], axis=2).reshape(-1, 8)
    db = mul(col(d), (1 + 2 * s8).astype(F32))
    idx = qs.copy()
    for j in range(8):
        for i in range(8):
            idx[:, 8 * j + i] |= ((qh[:, j] >> i) & 1) << 8
    return signed_grid(per_sub(db, 32), grid_bytes(g["kIQ3SGrid"], idx), sign_bits(sg))


def iq1_values(dl, idx, delta):
    """y = dl * (grid + delta), per group of 8: dl [n, 32 groups], delta [n, 32 groups]."""
    g = load_grids()
    grid = grid_bytes(g["kIQ1SGrid"], idx).astype(np.uint8).view(np.int8).astype(F32)
    return mul(per_sub(dl, 8), add(grid, per_sub(delta, 8)))


def iq1_s(b):
    d = half(b, 0)
    qs = b[:, 2:34].astype(np.int64)
    qh = u16s(b, 34, 8)
    dl = mul(col(d), (2 * ((qh >> 12) & 7) + 1).astype(F32))
    delta = np.where(qh & 0x8000, F32(-0.125), F32(0.125)).astype(F32)
    idx = np.zeros_like(qs)
    for j in range(8):
        for l in range(4):
            idx[:, 4 * j + l] = qs[:, 4 * j + l] | (((qh[:, j] >> (3 * l)) & 7) << 8)
    return iq1_values(np.repeat(dl, 4, axis=1), idx, np.repeat(delta, 4, axis=1))


def iq1_m(b):
    qs = b[:, 0:32].astype(np.int64)
    qh = b[:, 32:48].astype(np.int64)
    sc = u16s(b, 48, 4)
    dbits = (sc[:, 0] >> 12) | ((sc[:, 1] >> 8) & 0xf0) | ((sc[:, 2] >> 4) & 0xf00) | (sc[:, 3] & 0xf000)
    d = dbits.astype("<u2").view("<f2").astype(F32)
    nib = np.stack([qh & 0xf, qh >> 4], axis=2).reshape(-1, 32)  # group 2j + ... nibbles in order
    idx = qs | ((nib & 7) << 8)
    delta = np.where(nib & 8, F32(-0.125), F32(0.125)).astype(F32)
    s = np.zeros((b.shape[0], 32), dtype=np.int64)
    for j in range(8):
        w = sc[:, j // 2] >> (6 * (j % 2))
        s[:, 4 * j:4 * j + 2] = col(w & 7)
        s[:, 4 * j + 2:4 * j + 4] = col((w >> 3) & 7)
    dl = mul(col(d), (2 * s + 1).astype(F32))
    return iq1_values(dl, idx, delta)


def tq1_0(b):
    d = half(b, 52)
    qs = b[:, 0:48].astype(np.int64)
    qh = b[:, 48:52].astype(np.int64)
    pow3 = [1, 3, 9, 27, 81]

    def trit(x, n):
        return (((x * pow3[n]) & 0xff) * 3) >> 8

    parts = [trit(qs[:, 0:32], n) for n in range(5)]
    parts += [trit(qs[:, 32:48], n) for n in range(5)]
    parts += [trit(qh, n) for n in range(4)]
    t = np.concatenate(parts, axis=1)
    return mul((t - 1).astype(F32), col(d))


def tq2_0(b):
    d = half(b, 64)
    qs = b[:, 0:64].astype(np.int64)
    parts = [(qs[:, 32 * h:32 * h + 32] >> (2 * l)) & 3 for h in range(2) for l in range(4)]
    return mul((np.concatenate(parts, axis=1) - 1).astype(F32), col(d))


def mxfp4(b):
    e = b[:, 0].astype(np.int64)
    bits = np.where(e < 2, 0x00200000 << e, (e - 1) << 23).astype("<u4")
    d = bits.view("<f4").astype(F32)
    v = load_grids()["kMXFP4Values"].astype(np.int64)[nibbles(b[:, 1:17])].astype(F32)
    return mul(v, col(d))


DEQUANT = {
    "q4_0": q4_0, "q4_1": q4_1, "q5_0": q5_0, "q5_1": q5_1, "q8_0": q8_0, "q2_K": q2_K,
    "q3_K": q3_K, "q4_K": q4_K, "q5_K": q5_K, "q6_K": q6_K, "iq4_nl": iq4_nl, "iq4_xs": iq4_xs,
    "iq2_xxs": iq2_xxs, "iq2_xs": iq2_xs, "iq2_s": iq2_s, "iq3_xxs": iq3_xxs, "iq3_s": iq3_s,
    "iq1_s": iq1_s, "iq1_m": iq1_m, "tq1_0": tq1_0, "tq2_0": tq2_0, "mxfp4": mxfp4,
}


def main():
    name, src, dst = sys.argv[1:4]
    size, nbytes = GEOMETRY[name]
    raw = np.fromfile(src, dtype=np.uint8)
    if raw.size % nbytes:
        sys.exit(f"{src}: {raw.size} bytes is not a whole number of {name} blocks")
    with np.errstate(over="ignore", invalid="ignore"):
        y = DEQUANT[name](raw.reshape(-1, nbytes))
    assert y.dtype == F32 and y.shape == (raw.size // nbytes, size), (y.dtype, y.shape)
    y.astype("<f4").tofile(dst)


if __name__ == "__main__":
    main()

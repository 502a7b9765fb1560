"""A small GGUF (v2/v3) reader for the float64 oracle: metadata keys and every tensor
dequantised to float64 by ggml's rules (tests/quant/quant_reference.py, bit-exact in float32,
then widened exactly).

Layout (ggml's gguf.h): magic "GGUF", u32 version, u64 tensor count, u64 key count; keys as
(string, u32 type, value); tensor infos as (string name, u32 n_dims, u64 ne[n_dims], u32 type,
u64 offset); data at the next multiple of general.alignment (default 32) after the infos.
Strings are a u64 length and UTF-8 bytes. Shapes are ggml's `ne` (fastest first); the numpy
array of a tensor has the reverse shape, so W.shape == (out, in) and y = W @ x.
"""
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "quant"))
import quant_reference  # noqa: E402

# ggml type id -> name (ggml.h enum ggml_type), for the types invar reads.
TYPE_NAMES = {
    0: "f32", 1: "f16", 2: "q4_0", 3: "q4_1", 6: "q5_0", 7: "q5_1", 8: "q8_0", 10: "q2_K",
    11: "q3_K", 12: "q4_K", 13: "q5_K", 14: "q6_K", 16: "iq2_xxs", 17: "iq2_xs", 18: "iq3_xxs",
    19: "iq1_s", 20: "iq4_nl", 21: "iq3_s", 22: "iq2_s", 23: "iq4_xs", 29: "iq1_m", 30: "bf16",
    34: "tq1_0", 35: "tq2_0", 39: "mxfp4",
}

# Metadata value types: id -> struct format (8 string and 9 array are handled apart).
SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q",
           11: "<q", 12: "<d"}


class Reader:
    def __init__(self, data):
        self.data = data
        self.pos = 0

    def take(self, fmt):
        v = struct.unpack_from(fmt, self.data, self.pos)[0]
        self.pos += struct.calcsize(fmt)
        return v

    def string(self):
        n = self.take("<Q")
        s = bytes(self.data[self.pos:self.pos + n]).decode("utf-8", errors="replace")
        self.pos += n
        return s

    def value(self, t):
        if t == 8:
            return self.string()
        if t == 9:
            et, n = self.take("<I"), self.take("<Q")
            return [self.value(et) for _ in range(n)]
        return self.take(SCALARS[t])


class Gguf:
    """kv: {key: value}; tensors: {name: (type name, ne, byte offset in the file)}."""

    def __init__(self, path):
        self.data = np.memmap(path, dtype=np.uint8, mode="r")
        r = Reader(self.data)
        if bytes(self.data[:4]) != b"GGUF":
            raise ValueError(f"{path}: not a GGUF file")
        r.pos = 4
        version, n_tensors, n_kv = r.take("<I"), r.take("<Q"), r.take("<Q")
        if version not in (2, 3):
            raise ValueError(f"{path}: GGUF version {version}")
        self.kv = {}
        for _ in range(n_kv):
            key = r.string()
            self.kv[key] = r.value(r.take("<I"))
        infos = []
        for _ in range(n_tensors):
            name = r.string()
            ne = [r.take("<Q") for _ in range(r.take("<I"))]
            infos.append((name, r.take("<I"), ne, r.take("<Q")))
        align = int(self.kv.get("general.alignment", 32))
        base = (r.pos + align - 1) // align * align
        self.tensors = {}
        for name, t, ne, off in infos:
            if t not in TYPE_NAMES:
                raise ValueError(f"{path}: tensor '{name}' has ggml type {t}, not read here")
            self.tensors[name] = (TYPE_NAMES[t], ne, base + off)

    def get(self, name):
        """The tensor as float64, numpy shape = reversed ne; None if absent."""
        if name not in self.tensors:
            return None
        tname, ne, off = self.tensors[name]
        n = int(np.prod(ne))
        if tname == "f32":
            v = self.data[off:off + 4 * n].view("<f4")
        elif tname == "f16":
            v = self.data[off:off + 2 * n].view("<f2")
        elif tname == "bf16":
            u = self.data[off:off + 2 * n].view("<u2").astype(np.uint32) << 16
            v = u.view(np.float32)
        else:
            size, nbytes = quant_reference.GEOMETRY[tname]
            blocks = self.data[off:off + n // size * nbytes].reshape(-1, nbytes)
            with np.errstate(over="ignore", invalid="ignore"):
                v = quant_reference.DEQUANT[tname](np.asarray(blocks))
        return np.asarray(v, dtype=np.float64).reshape(list(reversed(ne)))

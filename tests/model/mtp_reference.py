#!/usr/bin/env python3
"""Float64 reference of the MTP draft head of qwen3next / qwen35 / qwen35moe GGUFs (numpy).

Usage: mtp_reference.py MODEL.gguf ROWS.json OUT.json

ROWS.json holds {"rows": [{"token": t, "pos": p, "hidden": [E floats]}, ...]}, the rows of one
sequence at positions 0, 1, 2, ... in order: row p is (hidden row of position p-1, token at p).
The hidden rows are inputs (invar's trunk computes them), so this needs only the MTP block's math,
written from llama.cpp's graph_mtp (src/models/qwen3next.cpp, qwen35.cpp, qwen35moe.cpp):

  x = eh_proj @ [rmsnorm(embd[tok], enorm) ; rmsnorm(hidden, hnorm)]
  x += attn(rmsnorm(x, attn_norm), pos)      gated full attention over positions 0..p
  x += ffn(rmsnorm(x, post_attention_norm))  dense SwiGLU (qwen35) or MoE + shared expert
  logits = head @ rmsnorm(x, head_norm)

embd / head / head_norm are nextn.embed_tokens / shared_head_head / shared_head_norm when the file
has them, else token_embd / output (token_embd when tied) / output_norm. Writes
{"top": [[[id, logprob], ...20 per row], ...], "hidden_out": [[E floats], ...]} with float64
logprobs ordered by value descending, then id ascending.
"""
import json
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "quant"))
import quant_reference as qr  # noqa: E402  (dequantisation of ggml's block types)

QUANT_NAMES = {2: "q4_0", 3: "q4_1", 6: "q5_0", 7: "q5_1", 8: "q8_0", 10: "q2_K", 11: "q3_K",
               12: "q4_K", 13: "q5_K", 14: "q6_K", 20: "iq4_nl", 23: "iq4_xs"}
SCALAR = {0: ("<u1", 1), 1: ("<i1", 1), 2: ("<u2", 2), 3: ("<i2", 2), 4: ("<u4", 4),
          5: ("<i4", 4), 6: ("<f4", 4), 7: ("<u1", 1), 10: ("<u8", 8), 11: ("<i8", 8),
          12: ("<f8", 8)}


class Gguf:
    """The header, metadata and tensor table of a GGUF file, tensors dequantised on demand."""

    def __init__(self, path):
        self.data = open(path, "rb").read()
        self.off = 0
        magic, _version = struct.unpack_from("<4sI", self.data, 0)
        assert magic == b"GGUF", path
        self.off = 8
        n_tensors, n_kv = self.u64(), self.u64()
        self.kv = {}
        for _ in range(n_kv):
            key = self.string()
            self.kv[key] = self.value(self.u32())
        self.tensors = {}
        for _ in range(n_tensors):
            name = self.string()
            ne = [self.u64() for _ in range(self.u32())]
            ttype, offset = self.u32(), self.u64()
            self.tensors[name] = (ne, ttype, offset)
        align = self.kv.get("general.alignment", 32)
        self.base = (self.off + align - 1) // align * align

    def u32(self):
        self.off += 4
        return struct.unpack_from("<I", self.data, self.off - 4)[0]

    def u64(self):
        self.off += 8
        return struct.unpack_from("<Q", self.data, self.off - 8)[0]

    def string(self):
        n = self.u64()
        self.off += n
        return self.data[self.off - n:self.off].decode("utf-8", "replace")

    def value(self, t):
        if t == 8:
            return self.string()
        if t == 9:
            et, n = self.u32(), self.u64()
            return [self.value(et) for _ in range(n)]
        fmt, size = SCALAR[t]
        self.off += size
        return np.frombuffer(self.data, fmt, 1, self.off - size)[0].item()

    def has(self, name):
        return name in self.tensors

    def get(self, name):
        """The tensor as float64, numpy shape = reversed ggml ne (rows of ne[0])."""
        ne, t, off = self.tensors[name]
        n = int(np.prod(ne))
        start = self.base + off
        if t == 0:
            v = np.frombuffer(self.data, "<f4", n, start).astype(np.float64)
        elif t == 1:
            v = np.frombuffer(self.data, "<f2", n, start).astype(np.float64)
        elif t == 30:
            u = np.frombuffer(self.data, "<u2", n, start).astype(np.uint32) << 16
            v = u.view(np.float32).astype(np.float64)
        else:
            qn = QUANT_NAMES[t]
            size, nbytes = qr.GEOMETRY[qn]
            raw = np.frombuffer(self.data, np.uint8, n // size * nbytes, start)
            with np.errstate(over="ignore", invalid="ignore"):
                v = qr.DEQUANT[qn](raw.reshape(-1, nbytes).copy()).astype(np.float64)
        return v.reshape(list(reversed(ne)))


def rmsnorm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def silu(x):
    return x / (1.0 + np.exp(-x))


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def rope(x, pos, n_rot, base, sections):
    """NEOX pairs (j, j + n_rot/2); with IMROPE sections a pair whose sector falls to the e
    component (position 0 for text) is not rotated."""
    y = x.copy()
    half = n_rot // 2
    for j in range(half):
        p = pos
        if sections is not None:
            s0, s1, s2, s3 = sections
            sector = j % (s0 + s1 + s2 + s3)
            covered = ((sector % 3 == 1 and sector < 3 * s1) or
                       (sector % 3 == 2 and sector < 3 * s2) or
                       (sector % 3 == 0 and sector < 3 * s0))
            p = pos if covered else 0
        theta = p * base ** (-2.0 * j / n_rot)
        c, s = np.cos(theta), np.sin(theta)
        a, b = x[..., j], x[..., j + half]
        y[..., j] = a * c - b * s
        y[..., j + half] = a * s + b * c
    return y


class MtpModel:
    def __init__(self, path):
        g = Gguf(path)
        self.g = g
        a = g.kv["general.architecture"]
        k = lambda name, d=None: g.kv.get(f"{a}.{name}", d)  # noqa: E731
        self.arch = a
        self.E = k("embedding_length")
        self.L = k("block_count") - k("nextn_predict_layers", 0)
        self.H = k("attention.head_count")
        self.Hkv = k("attention.head_count_kv", self.H)
        self.D = k("attention.key_length", self.E // self.H)
        self.R = k("rope.dimension_count", self.D)
        self.base = float(k("rope.freq_base", 10000.0))
        self.eps = float(k("attention.layer_norm_rms_epsilon"))
        secs = k("rope.dimension_sections")
        self.sections = None if a == "qwen3next" else (list(secs) + [0, 0, 0, 0])[:4]
        self.moe = a != "qwen35"
        self.K = k("expert_used_count", 0)
        b = f"blk.{self.L}."
        self.b = b
        opt = lambda name, fallback: g.get(name) if g.has(name) else fallback  # noqa: E731
        self.token_embd = g.get("token_embd.weight")
        self.embd = opt(b + "nextn.embed_tokens.weight", self.token_embd)
        output = opt("output.weight", self.token_embd)
        self.head = opt(b + "nextn.shared_head_head.weight", output)
        self.head_norm = opt(b + "nextn.shared_head_norm.weight", g.get("output_norm.weight"))
        self.eh_proj = g.get(b + "nextn.eh_proj.weight")
        self.enorm = g.get(b + "nextn.enorm.weight")
        self.hnorm = g.get(b + "nextn.hnorm.weight")
        w = lambda name: g.get(b + name)  # noqa: E731
        self.attn_norm, self.post_norm = w("attn_norm.weight"), w("post_attention_norm.weight")
        self.wq, self.wk, self.wv = w("attn_q.weight"), w("attn_k.weight"), w("attn_v.weight")
        self.wo = w("attn_output.weight")
        self.q_norm, self.k_norm = w("attn_q_norm.weight"), w("attn_k_norm.weight")
        if self.moe:
            self.router = w("ffn_gate_inp.weight")
            if g.has(b + "ffn_gate_up_exps.weight"):
                gu = w("ffn_gate_up_exps.weight")  # (NE, 2Fe, E): gate rows, then up rows
                fe = gu.shape[1] // 2
                self.gate_exps, self.up_exps = gu[:, :fe, :], gu[:, fe:, :]
            else:
                self.gate_exps, self.up_exps = w("ffn_gate_exps.weight"), w("ffn_up_exps.weight")
            self.down_exps = w("ffn_down_exps.weight")
            self.shexp_inp = w("ffn_gate_inp_shexp.weight").reshape(-1)
            self.shexp = (w("ffn_gate_shexp.weight"), w("ffn_up_shexp.weight"),
                          w("ffn_down_shexp.weight"))
        else:
            self.ffn = (w("ffn_gate.weight"), w("ffn_up.weight"), w("ffn_down.weight"))
        self.keys, self.values = [], []

    def ffn_out(self, y):
        if not self.moe:
            gate, up, down = self.ffn
            return down @ (silu(gate @ y) * (up @ y))
        z = self.router @ y
        p = np.exp(z - z.max())
        p /= p.sum()
        sel = sorted(range(len(p)), key=lambda e: (-p[e], e))[:self.K]
        wsum = max(sum(p[e] for e in sel), 6.1035e-5)
        out = np.zeros(self.E)
        for e in sel:
            h = silu(self.gate_exps[e] @ y) * (self.up_exps[e] @ y)
            out += p[e] / wsum * (self.down_exps[e] @ h)
        gate, up, down = self.shexp
        sh = down @ (silu(gate @ y) * (up @ y))
        return out + sigmoid(self.shexp_inp @ y) * sh

    def step(self, token, pos, hidden):
        E, H, Hkv, D = self.E, self.H, self.Hkv, self.D
        assert pos == len(self.keys), "rows must be positions 0, 1, 2, ... in order"
        cat = np.concatenate([rmsnorm(self.embd[token], self.enorm, self.eps),
                              rmsnorm(np.asarray(hidden, np.float64), self.hnorm, self.eps)])
        x = self.eh_proj @ cat
        xn = rmsnorm(x, self.attn_norm, self.eps)
        qg = (self.wq @ xn).reshape(H, 2 * D)
        q = rope(rmsnorm(qg[:, :D], self.q_norm, self.eps), pos, self.R, self.base, self.sections)
        gate = qg[:, D:]
        kk = rope(rmsnorm((self.wk @ xn).reshape(Hkv, D), self.k_norm, self.eps), pos, self.R,
                  self.base, self.sections)
        self.keys.append(kk)
        self.values.append((self.wv @ xn).reshape(Hkv, D))
        K, V = np.stack(self.keys), np.stack(self.values)  # [p+1][Hkv][D]
        o = np.zeros((H, D))
        for h in range(H):
            g = h // (H // Hkv)
            s = K[:, g, :] @ q[h] / np.sqrt(D)
            w = np.exp(s - s.max())
            o[h] = (w / w.sum()) @ V[:, g, :]
        x = x + self.wo @ (o * sigmoid(gate)).reshape(-1)
        x = x + self.ffn_out(rmsnorm(x, self.post_norm, self.eps))
        hidden_out = rmsnorm(x, self.head_norm, self.eps)
        logits = self.head @ hidden_out
        m = logits.max()
        logprobs = logits - (m + np.log(np.exp(logits - m).sum()))
        return logprobs, hidden_out


def main():
    model_path, rows_path, out_path = sys.argv[1:4]
    m = MtpModel(model_path)
    rows = json.load(open(rows_path))["rows"]
    top, hidden_out = [], []
    for r in rows:
        lp, ho = m.step(int(r["token"]), int(r["pos"]), r["hidden"])
        order = sorted(range(len(lp)), key=lambda i: (-lp[i], i))[:20]
        top.append([[i, float(lp[i])] for i in order])
        hidden_out.append([float(v) for v in ho])
    json.dump({"top": top, "hidden_out": hidden_out}, open(out_path, "w"))


if __name__ == "__main__":
    main()

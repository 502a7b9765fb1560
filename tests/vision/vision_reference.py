#!/usr/bin/env python3
"""Float64 forward pass of a Qwen3-VL / Qwen3.5 vision tower from an mmproj GGUF in llama.cpp's
layout (projector qwen3vl_merger): the oracle invar's image embeddings are held to. Written from
the architecture (HF Qwen3VLVisionModel; llama.cpp tools/mtmd/models/qwen3vl.cpp), not from
invar's code: weights are the file's, dequantised by ggml's rules (tests/model/gguf_read.py), and
every operation after that is float64.

Usage:
  vision_reference.py JOBS.json
      JOBS.json is a list of {"mmproj": path, "image": path, "width": W, "height": H,
      "out": path}. "image" holds the normalised pixels, [3][H][W] little-endian float32; for
      each job "out" gets the embeddings, [W/2p · H/2p][P · (1 + deepstack layers)] float64.
"""
import json
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "model"))
from float64_oracle import softmax  # noqa: E402
from gguf_read import Gguf  # noqa: E402

ERF = np.vectorize(math.erf)


def layer_norm(x, w, b, eps):
    mean = np.mean(x, axis=-1, keepdims=True)
    var = np.mean((x - mean) ** 2, axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * w + b


def gelu_tanh(x):  # gelu_pytorch_tanh, the ViT MLP's activation
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def gelu_erf(x):  # nn.GELU(), the mergers' activation
    return 0.5 * x * (1.0 + ERF(x / math.sqrt(2.0)))


class Tower:
    def __init__(self, path):
        g = Gguf(path)
        kv = g.kv
        if kv.get("clip.projector_type") != "qwen3vl_merger":
            raise ValueError(f"{path}: not a qwen3vl_merger mmproj")
        self.g = g
        self.C = kv["clip.vision.embedding_length"]
        self.H = kv["clip.vision.attention.head_count"]
        self.D = self.C // self.H
        self.L = kv["clip.vision.block_count"]
        self.p = kv["clip.vision.patch_size"]
        self.m = kv.get("clip.vision.spatial_merge_size", 2)
        self.eps = kv["clip.vision.attention.layer_norm_epsilon"]
        self.base = 10000.0

    def w(self, name):
        t = self.g.get(name)
        if t is None:
            raise KeyError(name)
        return t

    def linear(self, prefix, x):
        return x @ self.w(prefix + ".weight").T + self.w(prefix + ".bias")

    def norm(self, prefix, x):
        return layer_norm(x, self.w(prefix + ".weight"), self.w(prefix + ".bias"), self.eps)

    def merger(self, norm, fc1, fc2, x, postshuffle):
        """HF Qwen3VLVisionPatchMerger over x[T][C], 2 x 2 patches consecutive."""
        C4 = self.C * self.m * self.m
        if postshuffle:
            h = self.norm(norm, x.reshape(-1, C4))
        else:
            h = self.norm(norm, x).reshape(-1, C4)
        return self.linear(fc2, gelu_erf(self.linear(fc1, h)))

    def encode(self, pixels):
        """pixels[3][H][W] normalised -> embeddings [T/4][P * (1 + deepstack)]."""
        _, Hpx, Wpx = pixels.shape
        p, m, C, H, D = self.p, self.m, self.C, self.H, self.D
        gh, gw = Hpx // p, Wpx // p
        # Token order: 2 x 2 merge groups in row-major order, row-major inside a group.
        ys, xs = [], []
        for by in range(0, gh, m):
            for bx in range(0, gw, m):
                for dy in range(m):
                    for dx in range(m):
                        ys.append(by + dy)
                        xs.append(bx + dx)
        ys, xs = np.array(ys), np.array(xs)
        T = len(ys)
        # Conv3D with temporal patch 2 over the frame repeated twice: the sum of both kernels.
        patches = np.stack([pixels[:, y * p:(y + 1) * p, x * p:(x + 1) * p].reshape(-1)
                            for y, x in zip(ys, xs)])
        k0 = self.w("v.patch_embd.weight").reshape(C, -1)
        k1 = self.w("v.patch_embd.weight.1").reshape(C, -1)
        h = patches @ k0.T + patches @ k1.T + self.w("v.patch_embd.bias")
        # Learned positions, bilinear with aligned corners (fast_pos_embed_interpolate).
        table = self.w("v.position_embd.weight")
        G = int(round(math.sqrt(table.shape[0])))
        table = table.reshape(G, G, C)
        hi = np.linspace(0, G - 1, gh)
        wi = np.linspace(0, G - 1, gw)
        for t in range(T):
            sy, sx = hi[ys[t]], wi[xs[t]]
            y0, x0 = int(math.floor(sy)), int(math.floor(sx))
            y1, x1 = min(y0 + 1, G - 1), min(x0 + 1, G - 1)
            fy, fx = sy - y0, sx - x0
            h[t] += ((1 - fy) * (1 - fx) * table[y0, x0] + (1 - fy) * fx * table[y0, x1]
                     + fy * (1 - fx) * table[y1, x0] + fy * fx * table[y1, x1])
        # 2-D RoPE: rotate_half pairs (j, j + D/2); rows for j < D/4, columns for the rest.
        inv = self.base ** (-np.arange(0, D // 2, 2, dtype=np.float64) / (D // 2))
        theta = np.concatenate([np.outer(ys, inv), np.outer(xs, inv)], axis=1)  # [T][D/2]
        cos = np.cos(np.concatenate([theta, theta], axis=1))[:, None, :]
        sin = np.sin(np.concatenate([theta, theta], axis=1))[:, None, :]

        def rope(x):  # x[T][H][D]
            rot = np.concatenate([-x[..., D // 2:], x[..., :D // 2]], axis=-1)
            return x * cos + rot * sin

        deepstack = []
        for l in range(self.L):
            b = f"v.blk.{l}."
            qkv = self.linear(b + "attn_qkv", self.norm(b + "ln1", h)).reshape(T, 3, H, D)
            q, k, v = rope(qkv[:, 0]), rope(qkv[:, 1]), qkv[:, 2]
            att = softmax(np.einsum("thd,shd->hts", q, k) / math.sqrt(D))
            o = np.einsum("hts,shd->thd", att, v).reshape(T, C)
            h = h + self.linear(b + "attn_out", o)
            f = gelu_tanh(self.linear(b + "ffn_up", self.norm(b + "ln2", h)))
            h = h + self.linear(b + "ffn_down", f)
            if f"v.deepstack.{l}.norm.weight" in self.g.tensors:
                d = f"v.deepstack.{l}."
                deepstack.append(self.merger(d + "norm", d + "fc1", d + "fc2", h, True))
        out = self.merger("v.post_ln", "mm.0", "mm.2", h, False)
        return np.concatenate([out] + deepstack, axis=1)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    with open(sys.argv[1]) as f:
        jobs = json.load(f)
    towers = {}
    for job in jobs:
        if job["mmproj"] not in towers:
            towers[job["mmproj"]] = Tower(job["mmproj"])
        W, H = job["width"], job["height"]
        pixels = np.fromfile(job["image"], dtype="<f4").astype(np.float64).reshape(3, H, W)
        towers[job["mmproj"]].encode(pixels).astype("<f8").tofile(job["out"])


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Float64 forward pass of qwen3next, qwen35 and qwen35moe GGUF files: the oracle invar's
logits are held to. Weights are the file's own, dequantised by ggml's rules (gguf_read.py);
every operation after that is float64. The math is docs/qwen3next-math.md §4 and its qwen35
section, written for a whole sequence at once (teacher forcing): the matrix products take every
position together, the conv and the delta rule step through positions in order.

Usage:
  float64_oracle.py check MODEL.gguf REFERENCE.json [TOL]
      Reproduces the stored float64 reference of tests/data/reference (logits at the listed
      positions, top-20 logprobs at the 24 greedy steps); fails when a value is off by more
      than TOL (default 1e-9). This proves the oracle, not invar.
  float64_oracle.py logits JOBS.json
      JOBS.json is a list of {"model": path, "tokens": [ids], "out": path}; for each job writes
      the logits after every position, [len(tokens)][n_vocab] little-endian float64, to "out".
      Optional "images": [{"start": slot, "ny": rows, "nx": columns, "rows": path}], the
      image's input rows [ny·nx][n_embd] little-endian float32, or float64 with
      "dtype": "f64" (as tests/vision/vision_reference.py writes them) (Model.logits).
"""
import json
import math
import sys

import numpy as np

from gguf_read import Gguf


def rmsnorm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def l2norm(x, eps):
    return x / np.maximum(np.sqrt(np.sum(x * x, axis=-1, keepdims=True)), eps)


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def silu(x):
    return x * sigmoid(x)


def softplus(x):
    # ggml's threshold: above 20, log(1 + e^x) is x to float32 precision.
    return np.where(x > 20, x, np.log1p(np.exp(np.minimum(x, 20))))


def softmax(x):
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return e / np.sum(e, axis=-1, keepdims=True)


def rope_scaling(kv, p, R, base, n_ctx):
    """Per-pair inverse frequencies [R/2] and the cos/sin multiplier, as HF's rotary code builds
    them from a config's rope_scaling (_compute_linear_scaling_rope_parameters and
    _compute_yarn_parameters, truncate=True), read back from the keys the converter writes."""
    j = np.arange(R // 2)
    inv_extra = base ** (-2.0 * j / R)
    kind = kv.get(p + "rope.scaling.type", "linear")
    factor = kv.get(p + "rope.scaling.factor", kv.get(p + "rope.scale_linear", 0.0)) or 1.0
    attn = kv.get(p + "rope.scaling.attn_factor", 1.0)
    if kind == "none":
        return inv_extra, 1.0
    if kind == "linear":
        return inv_extra / factor, attn
    assert kind == "yarn", kind
    orig = kv.get(p + "rope.scaling.original_context_length", n_ctx)
    beta_fast = kv.get(p + "rope.scaling.yarn_beta_fast", 32.0)
    beta_slow = kv.get(p + "rope.scaling.yarn_beta_slow", 1.0)
    ext = kv.get(p + "rope.scaling.yarn_ext_factor", 1.0)

    def corr_dim(turns):
        return R * math.log(orig / (turns * 2 * math.pi)) / (2 * math.log(base))

    low = max(math.floor(corr_dim(beta_fast)), 0)
    high = min(math.ceil(corr_dim(beta_slow)), R - 1)
    if low == high:
        high += 0.001
    ramp = np.clip((j - low) / (high - low), 0.0, 1.0)
    extra_weight = (1.0 - ramp) * ext
    inv_freq = (inv_extra / factor) * (1.0 - extra_weight) + inv_extra * extra_weight
    mscale = kv.get(p + "rope.scaling.yarn_attn_factor",
                    0.1 * math.log(factor) + 1.0 if factor > 1.0 else 1.0)
    return inv_freq, (mscale if ext != 0 else 1.0) * attn


class Model:
    def __init__(self, path):
        g = Gguf(path)
        kv = g.kv
        self.g = g
        self.arch = kv["general.architecture"]
        if self.arch not in ("qwen3next", "qwen35", "qwen35moe"):
            raise ValueError(f"{path}: architecture {self.arch} is not modelled here")
        p = self.arch + "."
        self.E = kv[p + "embedding_length"]
        self.L = kv[p + "block_count"] - kv.get(p + "nextn_predict_layers", 0)
        self.H = kv[p + "attention.head_count"]
        self.Hkv = kv.get(p + "attention.head_count_kv", self.H)
        self.D = kv.get(p + "attention.key_length", self.E // self.H)
        self.R = kv.get(p + "rope.dimension_count", self.D)
        self.base = kv.get(p + "rope.freq_base", 10000.0)
        self.eps = kv[p + "attention.layer_norm_rms_epsilon"]
        self.Kc = kv[p + "ssm.conv_kernel"]
        self.Dk = kv[p + "ssm.state_size"]
        self.Hk = kv[p + "ssm.group_count"]
        self.Hv = kv[p + "ssm.time_step_rank"]
        self.Dv = kv[p + "ssm.inner_size"] // self.Hv
        self.K = kv.get(p + "expert_used_count", 0)
        self.inv_freq, self.mscale = rope_scaling(kv, p, self.R, self.base,
                                                  kv[p + "context_length"])
        secs = list(kv.get(p + "rope.dimension_sections", [])) + [0, 0, 0, 0]
        self.sections = secs[:4] if self.arch != "qwen3next" else None
        interval = kv.get(p + "full_attention_interval", 4)
        rec = kv.get(p + "attention.recurrent_layers")
        self.recurrent = [bool(rec[i]) if rec is not None else (i + 1) % interval != 0
                          for i in range(self.L)]
        self.cache = {}
        self.embd = self.w("token_embd.weight")
        self.out = self.w("output.weight")
        if self.out is None:
            self.out = self.embd

    def w(self, name):
        if name not in self.cache:
            self.cache[name] = self.g.get(name)
        return self.cache[name]

    def rope(self, x, pos):
        """x [T, n, D] rotated in NEOX pairs (j, j + R/2), j < R/2. pos [T, 3]: each token's
        (t, h, w). qwen35*'s IMROPE takes pair j's component from section j % Σs: t, h or w by
        sector % 3 within 3·s_c, else e = 0 (not rotated); qwen3next turns every pair by t."""
        half = self.R // 2
        j = np.arange(half)
        inv_freq = self.inv_freq
        scale = np.ones(half)
        axis = np.zeros(half, dtype=np.int64)
        if self.sections is not None:
            s0, s1, s2, _ = self.sections
            sector = j % sum(self.sections)
            h = (sector % 3 == 1) & (sector < 3 * s1)
            w = (sector % 3 == 2) & (sector < 3 * s2)
            t = (sector % 3 == 0) & (sector < 3 * s0)
            scale = np.where(t | h | w, 1.0, 0.0)
            axis = np.where(h, 1, np.where(w, 2, 0))
        theta = pos[:, axis].astype(np.float64) * (scale * inv_freq)[None, :]
        c = (np.cos(theta) * self.mscale)[:, None, :]
        s = (np.sin(theta) * self.mscale)[:, None, :]
        y = x.copy()
        a, b = x[:, :, :half], x[:, :, half:2 * half]
        y[:, :, :half] = a * c - b * s
        y[:, :, half:2 * half] = a * s + b * c
        return y

    def attention(self, i, x, pos):
        b = f"blk.{i}."
        T, H, Hkv, D = x.shape[0], self.H, self.Hkv, self.D
        qg = (x @ self.w(b + "attn_q.weight").T).reshape(T, H, 2 * D)
        q, gate = qg[:, :, :D], qg[:, :, D:]
        k = (x @ self.w(b + "attn_k.weight").T).reshape(T, Hkv, D)
        v = (x @ self.w(b + "attn_v.weight").T).reshape(T, Hkv, D)
        q = self.rope(rmsnorm(q, self.w(b + "attn_q_norm.weight"), self.eps), pos)
        k = self.rope(rmsnorm(k, self.w(b + "attn_k_norm.weight"), self.eps), pos)
        grp = np.arange(H) // (H // Hkv)
        scores = np.einsum("thd,shd->hts", q, k[:, grp, :]) / np.sqrt(D)
        scores = np.where(np.tril(np.ones((T, T), dtype=bool))[None], scores, -np.inf)
        o = np.einsum("hts,shd->thd", softmax(scores), v[:, grp, :])
        o = o.reshape(T, H * D) * sigmoid(gate.reshape(T, H * D))
        return o @ self.w(b + "attn_output.weight").T

    def gated_delta_net(self, i, x):
        b = f"blk.{i}."
        T, Hk, Hv, Dk, Dv = x.shape[0], self.Hk, self.Hv, self.Dk, self.Dv
        KEY, r = Dk * Hk, Hv // Hk
        qkv = x @ self.w(b + "attn_qkv.weight").T
        z = (x @ self.w(b + "attn_gate.weight").T).reshape(T, Hv, Dv)
        if self.arch == "qwen3next":
            # ssm_ba rows per k-head: [b(r), a(r)]; v-head h reads k-head h / r.
            ba = (x @ self.w(b + "ssm_ba.weight").T).reshape(T, Hk, 2 * r)
            beta_in, alpha_in = ba[:, :, :r].reshape(T, Hv), ba[:, :, r:].reshape(T, Hv)
            kmap = np.arange(Hv) // r
        else:
            # Plain v-head order; v-head h reads k-head h % Hk (tiled).
            beta_in = x @ self.w(b + "ssm_beta.weight").T
            alpha_in = x @ self.w(b + "ssm_alpha.weight").T
            kmap = np.arange(Hv) % Hk
        beta = sigmoid(beta_in)
        g = softplus(alpha_in + self.w(b + "ssm_dt.bias")) * self.w(b + "ssm_a")
        conv = self.w(b + "ssm_conv1d.weight")  # [CONV, Kc]
        padded = np.concatenate([np.zeros((self.Kc - 1, qkv.shape[1])), qkv])
        u = sum(padded[j:j + T] * conv[:, j] for j in range(self.Kc))
        u = silu(u)
        q = l2norm(u[:, :KEY].reshape(T, Hk, Dk), self.eps)[:, kmap]
        k = l2norm(u[:, KEY:2 * KEY].reshape(T, Hk, Dk), self.eps)[:, kmap]
        v = u[:, 2 * KEY:].reshape(T, Hv, Dv)
        S = np.zeros((Hv, Dv, Dk))  # per head, row j = value index
        o = np.zeros((T, Hv, Dv))
        decay = np.exp(g)
        for t in range(T):
            S *= decay[t][:, None, None]
            d = beta[t][:, None] * (v[t] - np.einsum("hjk,hk->hj", S, k[t]))
            S += d[:, :, None] * k[t][:, None, :]
            o[t] = np.einsum("hjk,hk->hj", S, q[t]) / np.sqrt(Dk)
        o = rmsnorm(o, self.w(b + "ssm_norm.weight"), self.eps) * silu(z)
        return o.reshape(T, Hv * Dv) @ self.w(b + "ssm_out.weight").T

    def moe(self, i, y):
        b = f"blk.{i}."
        T = y.shape[0]
        p = softmax(y @ self.w(b + "ffn_gate_inp.weight").T)
        NE = p.shape[1]
        up_gate = self.w(b + "ffn_gate_up_exps.weight")
        if up_gate is not None:
            Fe = up_gate.shape[1] // 2
            gate_e, up_e = up_gate[:, :Fe], up_gate[:, Fe:]
        else:
            gate_e, up_e = self.w(b + "ffn_gate_exps.weight"), self.w(b + "ffn_up_exps.weight")
        down_e = self.w(b + "ffn_down_exps.weight")
        out = np.zeros_like(y)
        ids = np.arange(NE)
        for t in range(T):
            sel = np.lexsort((ids, -p[t]))[:self.K]  # value descending, then id ascending
            wsel = p[t, sel] / max(np.sum(p[t, sel]), 6.1035e-5)
            for e, we in zip(sel, wsel):
                out[t] += we * (down_e[e] @ (silu(gate_e[e] @ y[t]) * (up_e[e] @ y[t])))
        sh = (silu(y @ self.w(b + "ffn_gate_shexp.weight").T) *
              (y @ self.w(b + "ffn_up_shexp.weight").T)) @ self.w(b + "ffn_down_shexp.weight").T
        shared_gate = sigmoid(y @ self.w(b + "ffn_gate_inp_shexp.weight").reshape(-1))
        return out + shared_gate[:, None] * sh

    def dense_ffn(self, i, y):
        b = f"blk.{i}."
        a = silu(y @ self.w(b + "ffn_gate.weight").T) * (y @ self.w(b + "ffn_up.weight").T)
        return a @ self.w(b + "ffn_down.weight").T

    def logits(self, tokens, images=()):
        """[T, V] float64 logits after each position of tokens (positions 0..T-1).
        images: (start, ny, nx, rows [ny·nx, E]) in slot order. Their slots take the rows
        instead of token_embd; an image whose first slot is at position p gives slot (y, x) the
        position (p, p + y, p + x), and the text after it continues at p + max(ny, nx)
        (HF Qwen3-VL get_rope_index; llama.cpp mtmd)."""
        tokens = np.asarray(tokens, dtype=np.int64)
        T = len(tokens)
        h = self.embd[tokens].copy()
        pos = np.repeat(np.arange(T)[:, None], 3, axis=1)
        saved = 0
        for start, ny, nx, rows in images:
            n = ny * nx
            h[start:start + n] = rows
            p = start - saved
            k = np.arange(n)
            pos[start:start + n] = np.stack([np.full(n, p), p + k // nx, p + k % nx], axis=1)
            saved += n - max(ny, nx)
            pos[start + n:] = np.arange(start + n, T)[:, None] - saved
        for i in range(self.L):
            b = f"blk.{i}."
            x = rmsnorm(h, self.w(b + "attn_norm.weight"), self.eps)
            h = h + (self.gated_delta_net(i, x) if self.recurrent[i] else self.attention(i, x, pos))
            y = rmsnorm(h, self.w(b + "post_attention_norm.weight"), self.eps)
            h = h + (self.dense_ffn(i, y) if self.arch == "qwen35" else self.moe(i, y))
        return rmsnorm(h, self.w("output_norm.weight"), self.eps) @ self.out.T


def log_softmax(x):
    m = np.max(x, axis=-1, keepdims=True)
    return x - m - np.log(np.sum(np.exp(x - m), axis=-1, keepdims=True))


def check(model_path, ref_path, tol):
    m = Model(model_path)
    ref = json.load(open(ref_path))
    worst = 0.0
    for s in ref["sequences"]:
        toks = list(s["tokens"]) + list(s["greedy"]["tokens"][:-1])
        lg = m.logits(toks)
        n = len(s["tokens"])
        for p, want in zip(s["logits"]["positions"], s["logits"]["values"]):
            worst_l = float(np.max(np.abs(lg[p] - np.asarray(want))))
            worst = max(worst, worst_l)
        lp = log_softmax(lg[n - 1:])
        for step, top in enumerate(s["greedy"]["top"]):
            for tid, want in top:
                worst = max(worst, abs(lp[step, tid] - want))
            if int(np.argmax(lg[n - 1 + step])) != s["greedy"]["tokens"][step]:
                print(f"{s['name']} step {step}: argmax differs from the reference's")
                worst = float("inf")
        print(f"{ref['model']} {s['name']}: max |diff| so far {worst:.3g}")
    print(f"{ref['model']}: max |oracle - reference| = {worst:.3g} (tolerance {tol:g})")
    return 0 if worst <= tol else 1


def run_jobs(jobs_path):
    models = {}
    for job in json.load(open(jobs_path)):
        path = job["model"]
        if path not in models:
            models = {path: Model(path)}  # one file at a time: they can be large
        images = []
        for im in job.get("images", []):
            E = models[path].embd.shape[1]
            dtype = "<f8" if im.get("dtype") == "f64" else "<f4"
            rows = np.fromfile(im["rows"], dtype=dtype).astype(np.float64).reshape(-1, E)
            images.append((im["start"], im["ny"], im["nx"], rows))
        np.asarray(models[path].logits(job["tokens"], images), dtype="<f8").tofile(job["out"])
    return 0


def main():
    if len(sys.argv) >= 4 and sys.argv[1] == "check":
        tol = float(sys.argv[4]) if len(sys.argv) > 4 else 1e-9
        return check(sys.argv[2], sys.argv[3], tol)
    if len(sys.argv) == 3 and sys.argv[1] == "logits":
        return run_jobs(sys.argv[2])
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())

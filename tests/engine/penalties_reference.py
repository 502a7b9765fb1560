#!/usr/bin/env python3
"""vLLM's logit bias and penalties on fixed logits, decoded greedily (numpy, float32).

Usage: penalties_reference.py CASES_JSON
CASES_JSON: {"cases": [{"rows": [[float, ...], ...], "prompt": [id, ...], "steps": N,
             "repetition_penalty": r, "repetition_last_n": n, "frequency_penalty": f,
             "presence_penalty": p, "logit_bias": [[id, bias], ...]}, ...]}
Step k decodes from rows[k % len(rows)]: the bias and penalties below, then the argmax (ties to
the smaller id, as numpy's argmax and invar's greedy pick). Prints {"cases": [{"tokens": [...],
"rows": [[uint32 bit pattern, ...], ...]}]}: the tokens chosen and every penalised row.

Written from the formulas of vLLM's v1 Sampler (logit bias before penalties) and
vllm/model_executor/layers/utils.py apply_penalties, in its tensor form over the whole
vocabulary: repetition over the tokens of prompt + output (a window of the last n with n >= 0,
llama-server's repeat_last_n), then frequency times the output counts, then presence times the
output mask. Every operation is one float32 numpy operation. Used by
tests/engine/penalties_test.cpp.
"""
import json
import sys

import numpy as np

F32 = np.float32


def penalised(row, prompt, output, c):
    v = row.shape[0]
    logits = row.copy()
    for tok, bias in c["logit_bias"]:
        logits[tok] = F32(logits[tok] + F32(bias))
    seq = prompt + output
    n = c["repetition_last_n"]
    window = seq if n < 0 else seq[max(0, len(seq) - n):] if n > 0 else []
    mask = np.zeros(v, dtype=bool)
    mask[np.array(window, dtype=np.int64)] = True
    rep = np.full(v, F32(c["repetition_penalty"]), dtype=F32)
    rep[~mask] = F32(1.0)
    logits = np.where(logits > 0, logits / rep, logits * rep).astype(F32)
    counts = np.bincount(np.array(output, dtype=np.int64), minlength=v)
    logits = (logits - F32(c["frequency_penalty"]) * counts.astype(F32)).astype(F32)
    logits = (logits - F32(c["presence_penalty"]) * (counts > 0).astype(F32)).astype(F32)
    return logits


def run(c):
    rows = [np.array(r, dtype=F32) for r in c["rows"]]
    output, out_rows = [], []
    for k in range(c["steps"]):
        logits = penalised(rows[k % len(rows)], c["prompt"], output, c)
        out_rows.append([int(x) for x in logits.view(np.uint32)])
        output.append(int(np.argmax(logits)))
    return {"tokens": output, "rows": out_rows}


def main():
    with open(sys.argv[1]) as f:
        cases = json.load(f)["cases"]
    json.dump({"cases": [run(c) for c in cases]}, sys.stdout)


if __name__ == "__main__":
    main()

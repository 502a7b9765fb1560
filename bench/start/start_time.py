#!/usr/bin/env python3
"""Start time of `invar serve`: process start to the first /health 200, then the latency of
the first completion request, beside the time `cat FILE > /dev/null` takes (page cache).

  bench/start/start_time.py --invar build/apps/invar/invar [--invar OTHER] --model F [--model G]
                            [--runs 5] [-- more serve arguments]

Each run starts a fresh server (the SHA-256 cache warm after the first start), polls /health
every millisecond, sends one completion (a short prompt, 1 token) and a second one of the same
length (no prefix hit), and stops the server. With
several --invar binaries the runs alternate between them, so that a loaded machine slows each
alike. Prints the median and the spread per model and binary, and the server's own start-up log
lines of its last run.
"""
import argparse
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cat_seconds(path):
    t0 = time.perf_counter()
    subprocess.run(["cat", path], stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t0


def health_ok(port):
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
        c.request("GET", "/health")
        return c.getresponse().status == 200
    except OSError:
        return False


def first_request_seconds(port, prompt):
    body = json.dumps({"prompt": prompt, "max_tokens": 1, "temperature": 0})
    t0 = time.perf_counter()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    c.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
    r = c.getresponse()
    r.read()
    if r.status != 200:
        raise RuntimeError(f"completion answered {r.status}")
    return time.perf_counter() - t0


def one_run(args, invar, model):
    port = free_port()
    cmd = [invar, "serve", "--model", model, "--port", str(port),
           "--threads", str(args.threads), "--log-format", "none"] + args.extra
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    try:
        while not health_ok(port):
            if p.poll() is not None:
                raise RuntimeError("invar serve exited: " + p.stderr.read())
            if time.perf_counter() - t0 > 120:
                raise RuntimeError("no /health 200 within 120 s")
            time.sleep(0.001)
        ready = time.perf_counter() - t0
        first = first_request_seconds(port, args.prompt)
        # The same length again, without a prefix hit: what the first one cost beyond a
        # request on a warm server.
        second = first_request_seconds(port, args.prompt.replace("quick", "quiet"))
    finally:
        p.terminate()
        _, err = p.communicate(timeout=60)
    log = [l for l in err.splitlines() if "model" in l or "cache" in l]
    return ready, first, second, log


def spread(xs):
    return f"median {statistics.median(xs):.3f} s (min {min(xs):.3f}, max {max(xs):.3f})"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--invar", action="append", required=True)
    ap.add_argument("--model", action="append", required=True)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prompt", default="The quick brown fox jumps over the lazy dog. " * 8)
    ap.add_argument("extra", nargs="*", help="more `invar serve` arguments (after --)")
    args = ap.parse_args()
    for model in args.model:
        for invar in args.invar:
            one_run(args, invar, model)  # warms the page cache and the SHA-256 cache
        cats, readies, firsts, seconds, logs = [], {}, {}, {}, {}
        for _ in range(args.runs):
            for invar in args.invar:
                cats.append(cat_seconds(model))
                ready, first, second, logs[invar] = one_run(args, invar, model)
                readies.setdefault(invar, []).append(ready)
                firsts.setdefault(invar, []).append(first)
                seconds.setdefault(invar, []).append(second)
        size = os.path.getsize(model)
        cat = statistics.median(cats)
        print(f"{model} ({size / 1e9:.2f} GB)")
        print(f"  cat FILE > /dev/null:   {spread(cats)}")
        for invar in args.invar:
            print(f"  {invar}")
            print(f"    start to /health 200: {spread(readies[invar])}"
                  f"  = {statistics.median(readies[invar]) / cat:.2f} x cat")
            print(f"    first request:        {spread(firsts[invar])}")
            print(f"    second request:       {spread(seconds[invar])}")
            both = [r + f for r, f in zip(readies[invar], firsts[invar])]
            print(f"    start to first answer: {spread(both)}")
            for line in logs[invar]:
                print("    | " + line)
        sys.stdout.flush()


if __name__ == "__main__":
    main()

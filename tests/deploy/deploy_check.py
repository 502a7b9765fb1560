#!/usr/bin/env python3
"""What deploy/ claims, checked without a cluster or a container engine.

    deploy_check.py SOURCE_DIR INVAR_BINARY WORK_DIR

deploy/k8s: every manifest parses, each object has the fields its kind requires, and the objects
agree with each other (Service → Deployment labels and named ports, Ingress → Service and port,
volumes → claims and Secrets, the Secrets' keys → the paths invar's flags read), with invar
(every flag of the container exists in `invar serve --help`, --port is the containerPort, and
a real `invar serve` started with the manifest's flags answers the probes' paths) and with the
Dockerfile (image, user id). resources-from-inspect, run on a generated model, prints what
`invar inspect` printed and its sum to the byte (two budgets: one byte under a GiB boundary and
on it). deploy/Dockerfile: what it copies exists and is not ignored by its .dockerignore, the
target it builds and the path it installs exist, the runtime packages provide every shared
library the binary needs (`ldd`, `dpkg -S`: the build machine runs the image's Debian), and the
command, port and health check agree with `invar serve`.

Prints one line per failed claim and exits 1 if any failed.
"""
import fnmatch
import os
import re
import shlex
import subprocess
import sys
import time
import urllib.request

import yaml

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
    return ok


def dig(obj, *path):
    for p in path:
        if isinstance(obj, dict):
            obj = obj.get(p)
        elif isinstance(obj, list) and isinstance(p, int) and p < len(obj):
            obj = obj[p]
        else:
            return None
    return obj


# kind → (apiVersion, required paths): what the API server would refuse without.
KINDS = {
    "PersistentVolumeClaim": ("v1", [("spec", "accessModes"),
                                     ("spec", "resources", "requests", "storage")]),
    "Deployment": ("apps/v1", [("spec", "selector", "matchLabels"),
                               ("spec", "template", "metadata", "labels"),
                               ("spec", "template", "spec", "containers")]),
    "Service": ("v1", [("spec", "selector"), ("spec", "ports")]),
    "Ingress": ("networking.k8s.io/v1", [("spec", "rules")]),
}


def load_manifests(k8s):
    objs = []
    for name in sorted(os.listdir(k8s)):
        if not name.endswith(".yaml"):
            continue
        try:
            with open(os.path.join(k8s, name)) as f:
                docs = [d for d in yaml.safe_load_all(f) if d is not None]
        except yaml.YAMLError as e:
            check(False, f"{name}: not YAML: {e}")
            continue
        check(docs, f"{name}: no object")
        for d in docs:
            kind = d.get("kind")
            where = f"{name}: {kind} {dig(d, 'metadata', 'name')}"
            if not check(kind in KINDS, f"{where}: kind not one this check knows"):
                continue
            api, required = KINDS[kind]
            check(d.get("apiVersion") == api, f"{where}: apiVersion {d.get('apiVersion')}, want {api}")
            check(isinstance(dig(d, "metadata", "name"), str), f"{where}: no metadata.name")
            for path in required:
                check(dig(d, *path) not in (None, [], {}), f"{where}: no {'.'.join(path)}")
            objs.append((name, d))
    return objs


def container_ports(container):
    return {p.get("name"): p.get("containerPort") for p in container.get("ports", [])}


def flag_args(args):
    """--name=value and --name value pairs of a container's args, in order."""
    out, i = [], 0
    while i < len(args):
        a = str(args[i])
        if a.startswith("--") and "=" in a:
            out.append(tuple(a.split("=", 1)))
        elif a.startswith("--"):
            nxt = str(args[i + 1]) if i + 1 < len(args) else None
            if nxt is not None and not nxt.startswith("--"):
                out.append((a, nxt))
                i += 1
            else:
                out.append((a, None))
        i += 1
    return out


def serve_flags(invar):
    help_text = subprocess.run([invar, "serve", "--help"], capture_output=True, text=True).stdout
    return set(re.findall(r"(--[a-z0-9][a-z0-9-]*)", help_text))


# Straight to loopback, whatever proxy the environment names.
OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def probe_paths_answer(invar, serve_args, paths, model, work):
    """Starts invar serve with serve_args and GETs each path: the model, address and cache budget
    replaced, and the shared tier left out (it needs a Redis and the Secrets' files)."""
    args = [a for a in serve_args if a[0] not in ("--model", "--host", "--port", "--cache-bytes")
            and not a[0].startswith(("--cache-redis", "--cache-tier-key"))]
    argv = [invar, "serve", "--model", model, "--host", "127.0.0.1", "--port", "0",
            "--cache-bytes", str(64 << 20)]
    for k, v in args:
        argv += [k] if v is None else [k, v]
    log_path = os.path.join(work, "serve.log")
    with open(log_path, "w") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    try:
        port = None
        for _ in range(3000):  # a deadline for a broken build, not a time assertion
            text = open(log_path).read()
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", text)
            if m:
                port = int(m.group(1))
                break
            if proc.poll() is not None:
                break
            time.sleep(0.02)
        if not check(port, f"invar serve with the manifest's flags did not start: {argv}\n{text}"):
            return
        for path in paths:
            status = None
            for _ in range(3000):
                try:
                    status = OPENER.open(f"http://127.0.0.1:{port}{path}", timeout=10).status
                except urllib.error.HTTPError as e:
                    status = e.code
                except OSError:
                    status = None
                if status == 200 or proc.poll() is not None:
                    break
                time.sleep(0.02)
            check(status == 200, f"probe path {path}: invar serve answered {status}, not 200\n"
                  f"{open(log_path).read()}")
    finally:
        proc.kill()
        proc.wait()


def check_k8s(src, invar, work, model, flags, docker):
    objs = load_manifests(os.path.join(src, "deploy", "k8s"))
    by_kind = {}
    for name, d in objs:
        by_kind.setdefault(d["kind"], {})[d["metadata"]["name"]] = (name, d)
    comments = "".join(open(os.path.join(src, "deploy", "k8s", f)).read()
                       for f in os.listdir(os.path.join(src, "deploy", "k8s")) if f.endswith(".yaml"))
    # The Secrets are made by hand (`kubectl create secret generic NAME --from-literal=KEY=...`):
    # their names and keys as the comments give them.
    secrets = {}
    for m in re.finditer(r"kubectl create secret generic (\S+) --from-literal=([A-Za-z0-9_.-]+)=",
                         comments):
        secrets.setdefault(m.group(1), set()).add(m.group(2))
    check(secrets, "no `kubectl create secret` command in deploy/k8s comments")

    services = by_kind.get("Service", {})
    deployments = by_kind.get("Deployment", {})
    for sname, (file, svc) in services.items():
        sel = svc["spec"]["selector"]
        targets = [d for _, d in deployments.values()
                   if all(dig(d, "spec", "template", "metadata", "labels", k) == v
                          for k, v in sel.items())]
        if not check(len(targets) == 1, f"{file}: Service {sname} selects {len(targets)} Deployments"):
            continue
        named = {}
        for c in dig(targets[0], "spec", "template", "spec", "containers"):
            named.update(container_ports(c))
        for p in svc["spec"]["ports"]:
            t = p.get("targetPort", p.get("port"))
            check(t in named or t in named.values(),
                  f"{file}: Service {sname} port {p.get('name')} targets {t}, which no container has")

    for dname, (file, d) in deployments.items():
        spec = d["spec"]
        check(all(dig(spec, "template", "metadata", "labels", k) == v
                  for k, v in spec["selector"]["matchLabels"].items()),
              f"{file}: Deployment {dname}: selector does not match the pod labels")
        pod = spec["template"]["spec"]
        volumes = {v["name"]: v for v in pod.get("volumes", [])}
        for c in pod["containers"]:
            where = f"{file}: container {c.get('name')}"
            ports = container_ports(c)
            for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
                for kind in ("httpGet", "tcpSocket"):
                    port = dig(c, probe, kind, "port")
                    if port is not None:
                        check(port in ports or port in ports.values(),
                              f"{where}: {probe} port {port} is not a container port")
            mounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
            for m in c.get("volumeMounts", []):
                check(m["name"] in volumes, f"{where}: mount {m['name']} has no volume")
            for e in c.get("env", []):
                ref = dig(e, "valueFrom", "secretKeyRef")
                if ref:
                    check(ref.get("key") in secrets.get(ref.get("name"), set()),
                          f"{where}: env {e['name']} reads Secret {ref} that the comments do not make")
            if c.get("image", "").split(":")[0] != "invar":
                continue
            check(c["image"] == docker["image"],
                  f"{where}: image {c['image']}, the Dockerfile's comment builds {docker['image']}")
            run_as = dig(pod, "securityContext", "runAsUser")
            check(run_as == docker["uid"],
                  f"{where}: runAsUser {run_as}, the Dockerfile's user has uid {docker['uid']}")
            args = [str(a) for a in c.get("args", [])]
            check(args[:1] == ["serve"], f"{where}: args do not start with serve")
            fa = flag_args(args[1:])
            for k, _ in fa:
                check(k in flags, f"{where}: {k} is not a flag of `invar serve`")
            values = dict(fa)
            check(values.get("--port") is not None and
                  int(values["--port"]) in ports.values(),
                  f"{where}: --port {values.get('--port')} is not a containerPort {ports}")
            check(values.get("--host") == "0.0.0.0", f"{where}: --host must be 0.0.0.0 in a pod")
            # A file a flag names lives on a mounted volume; a Secret's file is one of its keys.
            for k, v in fa:
                if v is None or not v.startswith("/") or k == "--host":
                    continue
                mount = max((mp for mp in mounts if v.startswith(mp.rstrip("/") + "/")),
                            key=len, default=None)
                if not check(mount, f"{where}: {k}={v} is on no mounted volume"):
                    continue
                vol = volumes.get(mounts[mount], {})
                secret = dig(vol, "secret", "secretName")
                if secret:
                    key = v[len(mount.rstrip("/")) + 1:]
                    check(key in secrets.get(secret, set()),
                          f"{where}: {k}={v}: Secret {secret} has no key {key} "
                          f"(made with {sorted(secrets.get(secret, []))})")
                    mode = dig(vol, "secret", "defaultMode")
                    check(mode is not None and mode & 0o022 == 0,
                          f"{where}: Secret {secret} mounted writable by others (invar refuses it)")
                claim = dig(vol, "persistentVolumeClaim", "claimName")
                if claim:
                    check(claim in by_kind.get("PersistentVolumeClaim", {}),
                          f"{where}: claim {claim} is not in deploy/k8s")
            paths = [dig(c, p, "httpGet", "path") for p in
                     ("readinessProbe", "livenessProbe", "startupProbe")]
            probe_paths_answer(invar, fa, sorted({p for p in paths if p}), model, work)

    for iname, (file, ing) in by_kind.get("Ingress", {}).items():
        for rule in ing["spec"]["rules"]:
            for p in dig(rule, "http", "paths") or []:
                svc = dig(p, "backend", "service", "name")
                port = dig(p, "backend", "service", "port")
                if not check(svc in services, f"{file}: Ingress {iname} → Service {svc}, not in deploy/k8s"):
                    continue
                names = {sp.get("name") for sp in services[svc][1]["spec"]["ports"]}
                numbers = {sp.get("port") for sp in services[svc][1]["spec"]["ports"]}
                check((port or {}).get("name") in names or (port or {}).get("number") in numbers,
                      f"{file}: Ingress {iname} → port {port}, not a port of Service {svc}")
                check(p.get("pathType") in ("Prefix", "Exact", "ImplementationSpecific"),
                      f"{file}: Ingress {iname}: pathType {p.get('pathType')}")


def inspect_bytes(report, label):
    m = re.search(re.escape(label) + r"\s+(\d+) bytes", report)
    return int(m.group(1)) if m else None


def check_resources_from_inspect(src, invar, model):
    report = subprocess.run([invar, "inspect", model], capture_output=True, text=True).stdout
    weights = inspect_bytes(report, "weights (mapped file)")
    state = inspect_bytes(report, "recurrent state per sequence")
    if not check(weights and state, f"invar inspect printed no memory section:\n{report}"):
        return
    script = os.path.join(src, "deploy", "k8s", "resources-from-inspect")
    streams, buffers, gib = 5, 3 << 20, 1 << 30
    fixed = weights + streams * state + buffers + (48 << 20)
    # Requests of 2 GiB - 1 byte and of exactly 2 GiB: a field read one byte short or long moves
    # one of them across the boundary the Gi figure rounds up at.
    for request, want in ((2 * gib - 1, "2Gi"), (2 * gib, "2Gi"), (2 * gib + 1, "3Gi")):
        cache = request - fixed
        out = subprocess.run([script, model, "--invar", invar, "--cache-bytes", str(cache),
                              "--streams", str(streams), "--buffers-bytes", str(buffers)],
                             capture_output=True, text=True)
        if not check(out.returncode == 0, f"resources-from-inspect failed: {out.stderr}"):
            return
        doc = yaml.safe_load(out.stdout)
        got_req = dig(doc, "resources", "requests", "memory")
        got_lim = dig(doc, "resources", "limits", "memory")
        want_lim = f"{-(-(request * 6 // 5) // gib)}Gi"
        check(got_req == want and got_lim == want_lim,
              f"resources-from-inspect for a request of {request} B: {got_req}/{got_lim}, "
              f"want {want}/{want_lim}\n{out.stdout}")
        check(f"file {weights} B" in out.stdout and f"x state {state} B" in out.stdout,
              f"resources-from-inspect read other figures than inspect's {weights}, {state}:\n"
              f"{out.stdout}")
    bad = subprocess.run([script, model, "--invar", invar, "--streams", "many"],
                         capture_output=True, text=True)
    check(bad.returncode == 2 and "whole number" in bad.stderr,
          f"resources-from-inspect --streams many: {bad.returncode} {bad.stderr}")


def dockerignore_match(pattern, path):
    """Docker's .dockerignore rule: the pattern matches the path or one of its parents."""
    parts = path.split("/")
    for i in range(1, len(parts) + 1):
        prefix = "/".join(parts[:i])
        if fnmatch.fnmatchcase(prefix, pattern):
            return True
        if pattern.startswith("**/") and fnmatch.fnmatchcase(parts[i - 1], pattern[3:]):
            return True
    return False


def check_dockerfile(src, invar, flags):
    path = os.path.join(src, "deploy", "Dockerfile")
    text = open(path).read()
    lines = re.sub(r"\\\n", " ", text).splitlines()
    ignore = [p.strip() for p in open(path + ".dockerignore").read().splitlines()
              if p.strip() and not p.startswith("#")]
    tracked = subprocess.run(["git", "-C", src, "ls-files"], capture_output=True,
                             text=True).stdout.split()
    docker = {"image": None, "uid": None}
    m = re.search(r"docker build -f deploy/Dockerfile -t (\S+) \.", text)
    check(m, "Dockerfile: no `docker build -f deploy/Dockerfile -t IMAGE .` comment")
    docker["image"] = m.group(1) if m else None
    m = re.search(r"useradd [^\n]*--uid (\d+)[^\n]* (\S+)\s*$", text, re.M)
    check(m, "Dockerfile: no useradd --uid")
    docker["uid"] = int(m.group(1)) if m else None
    user = m.group(2) if m else None
    runtime_packages, stage = set(), 0
    cmd = entry = None
    for line in lines:
        word, _, rest = line.strip().partition(" ")
        if word == "FROM":
            stage += 1
            check("bookworm" in rest, f"Dockerfile: base {rest} is not Debian 12 (bookworm)")
        elif word == "COPY" and "--from=" not in rest:
            for s in shlex.split(rest)[:-1]:
                s = s.rstrip("/") or "."
                check(os.path.exists(os.path.join(src, s)), f"Dockerfile: COPY {s}: no such path")
                if s != ".":
                    check(not any(dockerignore_match(p, s) for p in ignore),
                          f"Dockerfile: COPY {s} is excluded by its .dockerignore")
        elif word == "RUN" and stage >= 2 and "apt-get install" in rest:
            runtime_packages |= {w for w in rest.split() if re.fullmatch(r"[a-z0-9][a-z0-9.+-]+", w)}
        elif word == "RUN" and "cmake --build" in rest:
            m = re.search(r"cmake --build /build --target (\S+)", rest)
            check(m and m.group(1) == "invar", f"Dockerfile: builds {m and m.group(1)}, not invar")
            m = re.search(r"install -D /build/(\S+) /out(\S+)", rest)
            if check(m, "Dockerfile: no `install -D /build/... /out/...`"):
                built = os.path.realpath(invar)
                check(built.endswith("/" + m.group(1)),
                      f"Dockerfile installs /build/{m.group(1)}, the build tree has {built}")
                docker["installed"] = m.group(2)
        elif word == "ENTRYPOINT":
            entry = yaml.safe_load(rest)
        elif word == "CMD":
            cmd = yaml.safe_load(rest)
        elif word == "USER":
            check(rest.strip() == user, f"Dockerfile: USER {rest} is not the useradd user {user}")
        elif word == "EXPOSE":
            docker["port"] = rest.strip()
        elif word == "HEALTHCHECK":
            docker["health"] = rest
    # The build context after .dockerignore keeps every tracked file the build reads.
    for t in tracked:
        if any(dockerignore_match(p, t) for p in ignore):
            check(False, f"Dockerfile.dockerignore drops the tracked file {t}")
            break
    check(entry == [docker.get("installed")],
          f"Dockerfile: ENTRYPOINT {entry}, the binary is installed at {docker.get('installed')}")
    if check(isinstance(cmd, list) and cmd[:1] == ["serve"], f"Dockerfile: CMD {cmd}"):
        fa = flag_args(cmd[1:])
        for k, _ in fa:
            check(k in flags, f"Dockerfile: CMD flag {k} is not a flag of `invar serve`")
        port = dict(fa).get("--port")
        check(port == docker.get("port"), f"Dockerfile: CMD --port {port}, EXPOSE {docker.get('port')}")
        health = docker.get("health", "")
        check(f"http://127.0.0.1:{port}/health" in health,
              f"Dockerfile: HEALTHCHECK {health} does not ask /health on --port {port}")
        check("curl" not in health or "curl" in runtime_packages,
              "Dockerfile: HEALTHCHECK runs curl, which the runtime stage does not install")
    # Every shared library of the binary comes from the base image or the runtime packages.
    base = {"libc6", "libgcc-s1", "libstdc++6", "zlib1g", "libzstd1", "liblzma5", "libbz2-1.0",
            "libcrypt1", "libselinux1", "libpcre2-8-0"}
    ldd = subprocess.run(["ldd", invar], capture_output=True, text=True).stdout
    libs = [os.path.realpath(lib) for lib in re.findall(r"=> (/\S+)", ldd)]
    # One dpkg call for all (a second each costs seconds on a loaded machine); /lib is /usr/lib.
    owners = {}
    for line in subprocess.run(["dpkg", "-S"] + libs + [l.replace("/usr/lib/", "/lib/", 1) for l in libs],
                               capture_output=True, text=True).stdout.splitlines():
        pkg, _, path = line.partition(": ")
        owners[path.replace("/lib/", "/usr/lib/", 1) if path.startswith("/lib/") else path] = \
            pkg.split(":")[0]
    for lib in libs:
        pkg = owners.get(lib)
        if not check(pkg, f"Dockerfile: no Debian package owns {lib}, which invar links"):
            continue
        check(pkg in base or pkg in runtime_packages,
              f"Dockerfile: invar links {os.path.basename(lib)} (Debian package {pkg}), which the "
              f"runtime stage does not install")
    return docker


def main():
    src, invar, work = sys.argv[1], os.path.abspath(sys.argv[2]), sys.argv[3]
    os.makedirs(work, exist_ok=True)
    model = os.path.join(work, "model.gguf")
    subprocess.run([invar, "make-model", "--embd", "256", "--layers", "2", "--vocab",
                    os.path.join(src, "tests", "data", "models", "qwen3next-tiny.gguf"),
                    "--out", model], check=True, stdout=subprocess.DEVNULL)
    flags = serve_flags(invar)
    check("--cache-tier-key" in flags, f"`invar serve --help` lists no flags: {sorted(flags)[:5]}")
    docker = check_dockerfile(src, invar, flags)
    check_k8s(src, invar, work, model, flags, docker)
    check_resources_from_inspect(src, invar, model)
    for f in failures:
        print("FAIL:", f)
    print(f"deploy_check: {len(failures)} failed claims")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

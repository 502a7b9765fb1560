#!/usr/bin/env python3
"""The reference renderer for invar's chat-template tests: Python's jinja2 set up as Hugging Face
transformers' apply_chat_template sets it up (see tests/data/chat-templates/README.md).

usage: jinja2_reference.py PLAN.json RESULTS.json
PLAN.json: {"cases": [{"template": FILE, "request": FILE, "bos": S, "eos": S, "now": ISO}, ...]}
A case may instead carry the template text and its variables: {"source": S, "context": {...},
"now": ISO}.
RESULTS.json: {"jinja2": VERSION, "results": [{"ok": true, "text": S} | {"ok": false,
"error": S}, ...]} in the order of the cases.
"""
import copy
import datetime
import json
import sys

import jinja2
from jinja2.exceptions import TemplateError
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    # transformers replaces jinja2's tojson: no HTML escaping, json.dumps options passed through
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def raise_exception(message):
    raise TemplateError(message)


def make_env(now):
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: now.strftime(fmt)
    return env


def context(request, bos, eos):
    """The variables invar's chat_template_context() builds (src/chat/chat_request.h)."""
    messages = copy.deepcopy(request["messages"])
    for m in messages:
        if isinstance(m, dict) and isinstance(m.get("tool_calls"), list):
            for call in m["tool_calls"]:
                fn = call.get("function") if isinstance(call, dict) else None
                if isinstance(fn, dict) and isinstance(fn.get("arguments"), str):
                    fn["arguments"] = json.loads(fn["arguments"]) if fn["arguments"] else {}
    ctx = {"messages": messages}
    if request.get("tools"):
        ctx["tools"] = request["tools"]
    ctx["add_generation_prompt"] = request.get("add_generation_prompt", True)
    ctx["bos_token"] = bos
    ctx["eos_token"] = eos
    for k, v in (request.get("chat_template_kwargs") or {}).items():
        if k not in ("messages", "tools"):
            ctx[k] = v
    return ctx


def main():
    plan = json.load(open(sys.argv[1], encoding="utf-8"))
    results = []
    compiled = {}
    for case in plan["cases"]:
        now = datetime.datetime.fromisoformat(case["now"])
        try:
            if "source" in case:
                text = make_env(now).from_string(case["source"]).render(**case["context"])
                results.append({"ok": True, "text": text})
                continue
            key = (case["template"], case["now"])
            if key not in compiled:
                source = open(case["template"], encoding="utf-8", newline="").read()
                compiled[key] = make_env(now).from_string(source)
            request = json.load(open(case["request"], encoding="utf-8"))
            text = compiled[key].render(**context(request, case["bos"], case["eos"]))
            results.append({"ok": True, "text": text})
        except Exception as e:  # any failure counts as an error outcome, as in transformers
            results.append({"ok": False, "error": f"{type(e).__name__}: {e}"})
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        json.dump({"jinja2": jinja2.__version__, "results": results}, f, ensure_ascii=True)


if __name__ == "__main__":
    main()

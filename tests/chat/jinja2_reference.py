#!/usr/bin/env python3
"""The reference renderer for invar's chat-template tests: Python's jinja2 set up as Hugging Face
transformers' apply_chat_template sets it up (see tests/data/chat-templates/README.md).

usage: jinja2_reference.py PLAN.json RESULTS.json
PLAN.json: {"cases": [{"template": FILE, "request": FILE, "bos": S, "eos": S, "now": ISO,
"content_format": "auto" | "string" | "openai"}, ...]}
A case may instead carry the template text and its variables: {"source": S, "context": {...},
"now": ISO}; or ask for a template's content format as vLLM detects it: {"detect": FILE} or
{"detect_source": S} (the text of the result is "string" or "openai").
RESULTS.json: {"jinja2": VERSION, "results": [{"ok": true, "text": S} | {"ok": false,
"error": S}, ...]} in the order of the cases.
"""
import collections
import copy
import datetime
import json
import sys

import jinja2
import jinja2.nodes
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


# vLLM's content-format detection (vllm/renderers/hf.py, _detect_content_format and the walk
# it calls), on jinja2's own syntax tree: the reference invar's src/chat/content_format.cpp is
# compared with.
def _is_var_access(node, varname):
    return isinstance(node, jinja2.nodes.Name) and node.ctx == "load" and node.name == varname


def _is_attr_access(node, varname, key):
    if isinstance(node, jinja2.nodes.Getitem):
        return (_is_var_access(node.node, varname) and isinstance(node.arg, jinja2.nodes.Const)
                and node.arg.value == key)
    if isinstance(node, jinja2.nodes.Getattr):
        return _is_var_access(node.node, varname) and node.attr == key
    return False


def _is_var_or_elems_access(node, varname, key=None):
    if isinstance(node, jinja2.nodes.Filter):
        return node.node is not None and _is_var_or_elems_access(node.node, varname, key)
    if isinstance(node, jinja2.nodes.Test):
        return _is_var_or_elems_access(node.node, varname, key)
    if isinstance(node, jinja2.nodes.Getitem) and isinstance(node.arg, jinja2.nodes.Slice):
        return _is_var_or_elems_access(node.node, varname, key)
    return _is_attr_access(node, varname, key) if key else _is_var_access(node, varname)


def _iter_nodes_assign_var_or_elems(root, varname):
    yield root, varname
    related_varnames = collections.deque([varname])
    queued = {varname}  # vLLM would loop for ever on {% set a = b %}{% set b = a %}
    while related_varnames:
        related_varname = related_varnames.popleft()
        for assign_ast in root.find_all(jinja2.nodes.Assign):
            lhs = assign_ast.target
            rhs = assign_ast.node
            if _is_var_or_elems_access(rhs, related_varname):
                assert isinstance(lhs, jinja2.nodes.Name)
                yield assign_ast, lhs.name
                if lhs.name != related_varname and lhs.name not in queued:
                    queued.add(lhs.name)
                    related_varnames.append(lhs.name)


def _iter_nodes_assign_messages_item(root):
    messages_varnames = [v for _, v in _iter_nodes_assign_var_or_elems(root, "messages")]
    for loop_ast in root.find_all(jinja2.nodes.For):
        for varname in messages_varnames:
            if _is_var_or_elems_access(loop_ast.iter, varname):
                assert isinstance(loop_ast.target, jinja2.nodes.Name)
                yield loop_ast, loop_ast.target.name
                break


def _iter_nodes_assign_content_item(root):
    message_varnames = [v for _, v in _iter_nodes_assign_messages_item(root)]
    for loop_ast in root.find_all(jinja2.nodes.For):
        loop_iter = loop_ast.iter
        loop_target = loop_ast.target
        for varname in message_varnames:
            if _is_var_or_elems_access(loop_iter, varname, "content"):
                assert isinstance(loop_target, jinja2.nodes.Name)
                yield loop_ast, loop_target.name
                break
        if isinstance(loop_iter, jinja2.nodes.Name) and loop_iter.name == "content":
            assert isinstance(loop_target, jinja2.nodes.Name)
            yield loop_ast, loop_target.name


def detect_content_format(source, now):
    try:
        ast = make_env(now).parse(source)
    except Exception:
        return "string"
    try:
        next(_iter_nodes_assign_content_item(ast))
    except StopIteration:
        return "string"
    except Exception:  # vLLM's assertions: its default
        return "string"
    return "openai"


def fit_content(messages, content_format):
    """Message content as vLLM's _parse_chat_message_content hands it to the template, but that
    a string stays a string for "openai" (vLLM wraps it in one text part): null content is ""
    ("string") or [] ("openai"); for "string" the texts of a part array are joined by "\n"."""
    for m in messages:
        if not isinstance(m, dict):
            continue
        c = m.get("content")
        if c is None:
            m["content"] = "" if content_format == "string" else []
        elif content_format == "string" and isinstance(c, list):
            texts = [p if isinstance(p, str) else p["text"] for p in c
                     if isinstance(p, str) or (isinstance(p, dict) and isinstance(p.get("text"), str))]
            m["content"] = "\n".join(texts)


def context(request, bos, eos, content_format):
    """The variables invar's chat_template_context() builds (src/chat/chat_request.h): as
    transformers' apply_chat_template passes them (tools=None, documents=None when there are
    none), the messages fitted to the content format as vLLM fits them."""
    messages = copy.deepcopy(request["messages"])
    for m in messages:
        if isinstance(m, dict) and isinstance(m.get("tool_calls"), list):
            for call in m["tool_calls"]:
                fn = call.get("function") if isinstance(call, dict) else None
                if isinstance(fn, dict) and isinstance(fn.get("arguments"), str):
                    fn["arguments"] = json.loads(fn["arguments"]) if fn["arguments"] else {}
    fit_content(messages, content_format)
    ctx = {"messages": messages, "tools": request.get("tools"), "documents": None}
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
            if "detect" in case or "detect_source" in case:
                source = case.get("detect_source")
                if source is None:
                    source = open(case["detect"], encoding="utf-8", newline="").read()
                results.append({"ok": True, "text": detect_content_format(source, now)})
                continue
            key = (case["template"], case["now"])
            if key not in compiled:
                source = open(case["template"], encoding="utf-8", newline="").read()
                compiled[key] = (make_env(now).from_string(source),
                                 detect_content_format(source, now))
            template, detected = compiled[key]
            content_format = case.get("content_format", "auto")
            if content_format == "auto":
                content_format = detected
            request = json.load(open(case["request"], encoding="utf-8"))
            text = template.render(**context(request, case["bos"], case["eos"], content_format))
            results.append({"ok": True, "text": text})
        except Exception as e:  # any failure counts as an error outcome, as in transformers
            results.append({"ok": False, "error": f"{type(e).__name__}: {e}"})
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        json.dump({"jinja2": jinja2.__version__, "results": results}, f, ensure_ascii=True)


if __name__ == "__main__":
    main()

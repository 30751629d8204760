#!/usr/bin/env python3
# Reference renderer for the chat-template tests: renders with Debian's python3-jinja2
# configured as Hugging Face transformers configures it (sandboxed, trim_blocks and
# lstrip_blocks, loopcontrols, its tojson, raise_exception and strftime_now globals).
# Usage: render_reference.py CASES.json  -> JSON list of {"ok", "output" | "error"}.
import json
import sys
from datetime import datetime

try:
    import jinja2
    import jinja2.ext
    import jinja2.sandbox
except ImportError:
    print("jinja2 is not installed (apt install python3-jinja2)", file=sys.stderr)
    sys.exit(2)


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    # transformers' override: no HTML escaping, json.dumps options exposed.
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(format):
    return datetime.now().strftime(format)


def make_environment():
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def render(env, case):
    with open(case["template"], encoding="utf-8") as f:
        source = f.read()
    with open(case["messages"], encoding="utf-8") as f:
        data = json.load(f)
    # A bare list is the messages; an object holds messages, tools and extra variables,
    # like apply_chat_template(messages, tools=..., **kwargs).
    if isinstance(data, list):
        data = {"messages": data}
    variables = dict(data)
    variables.setdefault("tools", None)
    variables.setdefault("documents", None)
    variables["add_generation_prompt"] = case["add_generation_prompt"]
    variables["bos_token"] = case.get("bos_token", "")
    variables["eos_token"] = case.get("eos_token", "")
    return env.from_string(source).render(**variables)


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        cases = json.load(f)
    env = make_environment()
    results = []
    for case in cases:
        try:
            results.append({"ok": True, "output": render(env, case)})
        except Exception as error:  # any failure: the C++ side must fail too
            results.append({"ok": False, "error": f"{type(error).__name__}: {error}"})
    json.dump(results, sys.stdout, ensure_ascii=False)


if __name__ == "__main__":
    main()

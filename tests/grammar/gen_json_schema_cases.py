#!/usr/bin/env python3
"""Generates json_schema_cases.inc: random schemas of the supported subset, each with
documents and python3-jsonschema's verdict on them (Draft 2020-12, formats unchecked: none are
generated). Valid documents are written the way the grammar narrows JSON (keys in schema
order, at most 3 bytes of whitespace between tokens); invalid ones are mutations of them
(a missing required key, an extra key, a wrong type, too many items, a syntax slip). The test
(json_schema_test.cpp) needs neither python nor jsonschema: rerun this only to change cases.
  python3 tests/grammar/gen_json_schema_cases.py > tests/grammar/json_schema_cases.inc
"""
import json
import random

import jsonschema

rng = random.Random(14)
CHARS = list("abcxyz019 _-.,:{}[]") + ['"', "\\", "\n", "\t", "é", "ß", "€", "😀", "\u0001"]


def rand_schema(depth, defs):
    kinds = ["string", "integer", "number", "boolean", "null", "enum", "const", "nullable"]
    if depth < 3:
        kinds += ["object", "object", "array", "array", "anyOf"]
        if depth > 0 and not defs:
            kinds += ["ref"]
    k = rng.choice(kinds)
    if k == "string":
        s = {"type": "string"}
        if rng.random() < 0.3:
            s["minLength"] = rng.randint(0, 2)
        if rng.random() < 0.3:
            s["maxLength"] = s.get("minLength", 0) + rng.randint(0, 4)
        return s
    if k in ("integer", "number", "boolean", "null"):
        return {"type": k}
    if k == "enum":
        return {"enum": rng.sample(["red", "green", "blue", 1, 2, None, True, "a b"], rng.randint(1, 4))}
    if k == "const":
        return {"const": rng.choice(["fixed", 7, False, None, [1, "x"], {"k": 1}])}
    if k == "nullable":
        return {"type": [rng.choice(["string", "integer", "boolean"]), "null"]}
    if k == "object":
        n = rng.randint(0, 4)
        names = rng.sample(["id", "name", "tags", "value", "nested", "ok", "é", "a b"], n)
        props = {name: rand_schema(depth + 1, defs) for name in names}
        req = [name for name in names if rng.random() < 0.6]
        return {"type": "object", "properties": props, "required": req, "additionalProperties": False}
    if k == "array":
        s = {"type": "array", "items": rand_schema(depth + 1, defs)}
        if rng.random() < 0.4:
            s["minItems"] = rng.randint(0, 2)
        if rng.random() < 0.4:
            s["maxItems"] = s.get("minItems", 0) + rng.randint(0, 3)
        return s
    if k == "anyOf":
        a, b = rng.sample(["string", "integer", "boolean", "null", "array"], 2)
        opts = [{"type": t} if t != "array" else {"type": "array", "items": {"type": "integer"}} for t in (a, b)]
        return {"anyOf": opts}
    if k == "ref":
        defs["item"] = {"type": "object", "properties": {"v": {"type": "integer"},
                        "next": {"anyOf": [{"$ref": "#/$defs/item"}, {"type": "null"}]}},
                        "required": ["v", "next"], "additionalProperties": False}
        return {"$ref": "#/$defs/item"}
    raise AssertionError(k)


def ws():
    # What the grammar allows between tokens: nothing, one space, or one or two newlines and
    # an indentation of spaces and tabs.
    return rng.choice(["", "", "", " ", " ", "\n", "\n  ", "\n\t", "\n\n    "])


def rand_string(s):
    lo = s.get("minLength", 0)
    hi = s.get("maxLength", lo + 6)
    return "".join(rng.choice(CHARS) for _ in range(rng.randint(lo, hi)))


def instance(s, root, depth=0):
    """A random valid instance as (python value, text in the grammar's narrowed form)."""
    if "$ref" in s:
        return instance(root["$defs"]["item"], root, depth + 1)
    if "const" in s:
        v = s["const"]
        return v, json.dumps(v, ensure_ascii=False, separators=(",", ":"))
    if "enum" in s:
        v = rng.choice(s["enum"])
        return v, json.dumps(v, ensure_ascii=False, separators=(",", ":"))
    if "anyOf" in s:
        return instance(rng.choice(s["anyOf"]), root, depth)
    t = s["type"]
    if isinstance(t, list):
        t = rng.choice(t)
    if t == "string":
        v = rand_string(s)
        return v, json.dumps(v, ensure_ascii=False)
    if t == "integer":
        v = rng.choice([0, 1, -1, 42, -7, 123456789])
        return v, str(v)
    if t == "number":
        text = rng.choice(["0", "1.5", "-0.25", "3e2", "1.0E-3", "-12", "6.02e+23"])
        return json.loads(text), text
    if t == "boolean":
        v = rng.choice([True, False])
        return v, json.dumps(v)
    if t == "null":
        return None, "null"
    if t == "array":
        lo = s.get("minItems", 0)
        hi = s.get("maxItems", lo + 3)
        if depth > 4:
            hi = lo
        items = [instance(s["items"], root, depth + 1) for _ in range(rng.randint(lo, hi))]
        inner = ("," + ws()).join(text + ws() for _, text in items)
        return [v for v, _ in items], "[" + ws() + inner + "]"
    if t == "object":
        value, parts = {}, []
        for name, sub in s["properties"].items():
            if name in s.get("required", []) or rng.random() < 0.5:
                v, text = instance(sub, root, depth + 1)
                value[name] = v
                parts.append(json.dumps(name, ensure_ascii=False) + ws() + ":" + ws() + text + ws())
        return value, "{" + ws() + ("," + ws()).join(parts) + "}"
    raise AssertionError(t)


def mutations(text):
    """Texts near `text`: syntax slips and value changes, judged by the validator."""
    out = []
    if text.endswith("}") and len(text) > 2:
        out.append(text[:-1] + ',"extra":1}')
        out.append(text[:-1] + ",}")
    if text.endswith("]") and len(text) > 2:
        out.append(text[:-1] + ",]")
        out.append(text[:-1] + ',"zz"]' if text != "[]" else '["zz"]')
    out.append(text + "x")
    out.append(text[: max(1, len(text) // 2)])
    for a, b in [('"', "'"), ("true", "1"), ("null", '"null"'), ("1", '"1"'), (":", "")]:
        if a in text:
            out.append(text.replace(a, b, 1))
    return out


def verdict(validator, text):
    try:
        value = json.loads(text)
    except ValueError:
        return False
    if isinstance(value, float) and value != value:
        return False
    return validator.is_valid(value)


cases = []
for i in range(80):
    defs = {}
    schema = rand_schema(0, defs)
    if defs:
        schema = dict(schema)
        schema["$defs"] = defs
    validator = jsonschema.Draft202012Validator(schema)
    docs = []
    for _ in range(3):
        _, text = instance(schema, schema)
        assert verdict(validator, text), (schema, text)
        docs.append({"text": text, "valid": True})
        for m in rng.sample(mutations(text), min(3, len(mutations(text)))):
            ok = verdict(validator, m)
            # A mutation the validator accepts is kept only when it is still in the grammar's
            # narrowed form (order and whitespace untouched): removing nothing, renaming nothing.
            if ok and (m.endswith(',"extra":1}') or "'" in m or m.endswith("x")):
                continue
            docs.append({"text": m, "valid": ok})
    cases.append({"schema": schema, "docs": docs})

print("// Generated by gen_json_schema_cases.py (python3-jsonschema verdicts); do not edit.")
print('R"json(' + json.dumps(cases, ensure_ascii=False, indent=0) + ')json"')

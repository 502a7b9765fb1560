#!/usr/bin/env python3
"""Writes schemas.json: the JSON Schema corpus of tests/grammar (issue 26), hand-written
schemas plus systematic variants of each keyword. Rerun after editing; the output is checked in."""
import json

S = []


def add(name, schema):
    S.append({"name": name, "schema": schema})


# --- types ---------------------------------------------------------------------------------
for t in ["null", "boolean", "integer", "number", "string", "array", "object"]:
    add(f"type-{t}", {"type": t})
add("type-array-of-types", {"type": ["string", "integer", "null"]})
add("type-number-and-integer", {"type": ["number", "integer"]})
add("true-schema", True)
add("empty-schema", {})
add("annotations-only", {"title": "x", "description": "d", "examples": [1], "default": 2,
                         "$schema": "https://json-schema.org/draft/2020-12/schema", "$id": "urn:x",
                         "$comment": "c"})

# --- integers and numbers ------------------------------------------------------------------
for lo, hi in [(0, 9), (1, 12), (-5, 5), (10, 99), (100, 1000), (-1000, -10), (0, 65535),
               (7, 7), (-99, 0), (123, 4567)]:
    add(f"int-{lo}-{hi}", {"type": "integer", "minimum": lo, "maximum": hi})
add("int-min-only", {"type": "integer", "minimum": 18})
add("int-max-only", {"type": "integer", "maximum": -3})
add("int-exclusive", {"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 100})
add("int-fractional-bounds", {"type": "integer", "minimum": 1.5, "maximum": 9.5})
add("int-large", {"type": "integer", "minimum": 1000000000000, "maximum": 1000000000099})
add("number-nonneg", {"type": "number", "minimum": 0})
add("number-range", {"type": "number", "minimum": -10, "maximum": 10})
add("number-exclusive", {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1})
add("number-positive", {"type": "number", "exclusiveMinimum": 0})

# --- strings -------------------------------------------------------------------------------
for lo, hi in [(0, 0), (1, 1), (2, 5), (0, 10), (3, None)]:
    s = {"type": "string", "minLength": lo}
    if hi is not None:
        s["maxLength"] = hi
    add(f"string-len-{lo}-{hi}", s)
for fmt in ["date", "time", "date-time", "uuid", "email"]:
    add(f"format-{fmt}", {"type": "string", "format": fmt})
for i, p in enumerate([
    "^[A-Z]{3}-[0-9]{4}$", "^\\d{5}(-\\d{4})?$", "^[a-z]+$", "abc", "^(red|green|blue)$",
    "^\\+?[0-9 ]{7,15}$", "^[^@\\s]+@[^@\\s]+\\.[a-z]{2,}$", "^\\w+$", "x\\d", "^[\\u00e0-\\u00ff]{2,4}$",
    "^\"quoted\"\\\\$", "^[A-Z][a-z]*( [A-Z][a-z]*)*$",
]):
    add(f"pattern-{i}", {"type": "string", "pattern": p})

# --- enum / const --------------------------------------------------------------------------
add("enum-strings", {"enum": ["red", "green", "blue"]})
add("enum-non-ascii", {"enum": ["café", "naïve", "日本語", "Ελληνικά", "emoji 😀", "tab\tand\"quote"]})
add("enum-mixed", {"enum": ["a", 1, 2.5, True, None, [1, 2], {"k": "v"}]})
add("enum-typed", {"type": "string", "enum": ["x", 1, "y"]})
add("const-string", {"const": "fixed"})
add("const-object", {"const": {"a": [1, {"b": None}]}})
add("const-number", {"const": 42})

# --- arrays --------------------------------------------------------------------------------
add("array-of-int", {"type": "array", "items": {"type": "integer"}})
add("array-min-max", {"type": "array", "items": {"type": "string", "maxLength": 3}, "minItems": 2, "maxItems": 4})
add("array-min-only", {"type": "array", "items": {"type": "boolean"}, "minItems": 3})
add("array-max-only", {"type": "array", "items": {"enum": [1, 2, 3]}, "maxItems": 2})
add("array-empty", {"type": "array", "maxItems": 0})
add("tuple", {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": False})
add("tuple-open", {"type": "array", "prefixItems": [{"const": "head"}], "items": {"type": "number"}})
add("tuple-min", {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "integer"}, {"type": "integer"}],
                  "minItems": 2, "items": False})
add("array-any-items", {"type": "array", "minItems": 1})
add("array-nested", {"type": "array", "items": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 9},
                                                  "maxItems": 3}, "maxItems": 3})

# --- objects -------------------------------------------------------------------------------
add("object-required", {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
                        "required": ["a", "b"], "additionalProperties": False})
add("object-optional", {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"},
                                                         "c": {"type": "boolean"}}, "additionalProperties": False})
add("object-mixed", {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"},
                                                      "c": {"type": "boolean"}, "d": {"type": "null"}},
                     "required": ["b", "d"], "additionalProperties": False})
add("object-open", {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]})
add("object-additional-schema", {"type": "object", "properties": {"id": {"type": "integer"}},
                                 "additionalProperties": {"type": "string", "maxLength": 4}})
add("object-map", {"type": "object", "additionalProperties": {"type": "integer"}})
add("object-required-not-listed", {"type": "object", "required": ["x"], "additionalProperties": {"type": "boolean"}})
add("object-forbidden-property", {"type": "object", "properties": {"secret": False, "ok": {"type": "integer"}}})
add("object-empty-closed", {"type": "object", "additionalProperties": False})
add("object-non-ascii-keys", {"type": "object", "properties": {"prénom": {"type": "string"}, "年齢": {"type": "integer"},
                                                               "quo\"te": {"const": 1}}, "required": ["年齢"],
                              "additionalProperties": False})
add("object-inferred", {"properties": {"a": {"type": "integer"}}, "required": ["a"]})

# --- combinators ---------------------------------------------------------------------------
add("anyOf", {"anyOf": [{"type": "string", "maxLength": 5}, {"type": "integer", "minimum": 0}]})
add("anyOf-optional", {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None, "title": "Optional"})
add("oneOf-types", {"oneOf": [{"type": "string"}, {"type": "integer"}, {"type": "array", "items": {"type": "null"}}]})
add("oneOf-discriminated", {"oneOf": [
    {"type": "object", "properties": {"kind": {"const": "circle"}, "r": {"type": "number", "minimum": 0}},
     "required": ["kind", "r"], "additionalProperties": False},
    {"type": "object", "properties": {"kind": {"const": "square"}, "side": {"type": "integer"}},
     "required": ["kind", "side"]}]})
add("allOf-merge", {"allOf": [
    {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
    {"properties": {"b": {"type": "string"}}, "required": ["b"]}]})
add("allOf-single-ref", {"$defs": {"P": {"type": "integer", "minimum": 3, "maximum": 5}},
                         "allOf": [{"$ref": "#/$defs/P"}], "description": "pydantic style"})
add("allOf-with-siblings", {"type": "object", "properties": {"z": {"type": "boolean"}},
                            "allOf": [{"properties": {"y": {"type": "null"}}, "required": ["y"]}]})

# --- $ref and recursion --------------------------------------------------------------------
add("ref-defs", {"$defs": {"name": {"type": "string", "minLength": 1, "maxLength": 8}},
                 "type": "object", "properties": {"first": {"$ref": "#/$defs/name"}, "last": {"$ref": "#/$defs/name"}},
                 "required": ["first", "last"], "additionalProperties": False})
add("ref-definitions", {"definitions": {"n": {"type": "integer", "minimum": 0, "maximum": 3}},
                        "type": "array", "items": {"$ref": "#/definitions/n"}, "maxItems": 5})
add("ref-recursive-tree", {"$defs": {"node": {"type": "object", "properties": {
    "value": {"type": "integer"}, "children": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}},
    "required": ["value"], "additionalProperties": False}}, "$ref": "#/$defs/node"})
add("ref-root-recursive", {"type": "object", "properties": {"next": {"anyOf": [{"$ref": "#"}, {"type": "null"}]},
                                                            "v": {"type": "boolean"}},
                           "required": ["v", "next"], "additionalProperties": False})
add("ref-linked-list", {"$defs": {"list": {"anyOf": [{"type": "null"}, {"type": "object", "properties": {
    "head": {"type": "string", "maxLength": 3}, "tail": {"$ref": "#/$defs/list"}}, "required": ["head", "tail"],
    "additionalProperties": False}]}}, "$ref": "#/$defs/list"})
add("ref-pointer-into-properties", {"type": "object", "properties": {"a": {"type": "string", "format": "uuid"},
                                                                     "b": {"$ref": "#/properties/a"}},
                                    "required": ["a", "b"], "additionalProperties": False})

# --- realistic documents -------------------------------------------------------------------
address = {"type": "object", "properties": {
    "street": {"type": "string", "maxLength": 30}, "city": {"type": "string", "maxLength": 20},
    "postcode": {"type": "string", "pattern": "^[0-9]{5}$"}, "country": {"enum": ["FR", "DE", "JP", "España"]}},
    "required": ["city", "country"], "additionalProperties": False}
line = {"type": "object", "properties": {
    "sku": {"type": "string", "pattern": "^[A-Z]{2}-\\d{3}$"}, "description": {"type": "string", "maxLength": 40},
    "quantity": {"type": "integer", "minimum": 1, "maximum": 1000}, "unit_price": {"type": "number", "minimum": 0},
    "tax_rate": {"enum": [0, 5.5, 10, 20]}}, "required": ["sku", "quantity", "unit_price"], "additionalProperties": False}
add("invoice", {"$defs": {"address": address, "line": line}, "type": "object", "properties": {
    "invoice_number": {"type": "string", "pattern": "^INV-\\d{6}$"}, "issue_date": {"type": "string", "format": "date"},
    "due_date": {"type": "string", "format": "date"}, "currency": {"enum": ["EUR", "USD", "JPY", "£"]},
    "seller": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 30},
                                                "address": {"$ref": "#/$defs/address"},
                                                "vat_id": {"type": ["string", "null"], "maxLength": 14}},
               "required": ["name", "address"], "additionalProperties": False},
    "buyer": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 30},
                                               "email": {"type": "string", "format": "email"},
                                               "address": {"$ref": "#/$defs/address"}},
              "required": ["name"], "additionalProperties": False},
    "lines": {"type": "array", "items": {"$ref": "#/$defs/line"}, "minItems": 1, "maxItems": 4},
    "paid": {"type": "boolean"}, "paid_at": {"anyOf": [{"type": "string", "format": "date-time"}, {"type": "null"}]},
    "notes": {"type": "string", "maxLength": 50}},
    "required": ["invoice_number", "issue_date", "currency", "seller", "lines"], "additionalProperties": False})
add("person-extraction", {"type": "object", "properties": {
    "name": {"type": "string", "minLength": 1, "maxLength": 40}, "age": {"type": "integer", "minimum": 0, "maximum": 150},
    "email": {"type": "string", "format": "email"}, "birthday": {"type": "string", "format": "date"},
    "tags": {"type": "array", "items": {"type": "string", "maxLength": 10}, "maxItems": 3}},
    "required": ["name", "age"], "additionalProperties": False})
add("event", {"type": "object", "properties": {
    "id": {"type": "string", "format": "uuid"}, "starts": {"type": "string", "format": "date-time"},
    "duration_minutes": {"type": "integer", "exclusiveMinimum": 0, "maximum": 1440},
    "location": {"anyOf": [{"type": "string", "maxLength": 20}, {"type": "object", "properties": {
        "lat": {"type": "number", "minimum": -90, "maximum": 90}, "lon": {"type": "number", "minimum": -180, "maximum": 180}},
        "required": ["lat", "lon"], "additionalProperties": False}]},
    "attendees": {"type": "array", "items": {"type": "string", "format": "email"}, "maxItems": 3}},
    "required": ["id", "starts"], "additionalProperties": False})
add("tool-call-args", {"type": "object", "properties": {
    "location": {"type": "string", "description": "City"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
    "required": ["location", "unit"], "additionalProperties": False})
add("classification", {"type": "object", "properties": {
    "label": {"enum": ["positive", "negative", "neutre", "混合"]}, "confidence": {"type": "number", "minimum": 0, "maximum": 1}},
    "required": ["label", "confidence"], "additionalProperties": False})
add("qa-fields", {"type": "object", "properties": {
    "answer": {"type": "string", "maxLength": 60}, "found": {"type": "boolean"},
    "page": {"type": ["integer", "null"], "minimum": 1, "maximum": 999}, "quote": {"type": "string", "maxLength": 30}},
    "required": ["answer", "found"], "additionalProperties": False})
add("openai-strict-style", {"type": "object", "properties": {
    "steps": {"type": "array", "items": {"type": "object", "properties": {
        "explanation": {"type": "string", "maxLength": 20}, "output": {"type": "string", "maxLength": 10}},
        "required": ["explanation", "output"], "additionalProperties": False}, "maxItems": 3},
    "final_answer": {"type": "string", "maxLength": 10}}, "required": ["steps", "final_answer"],
    "additionalProperties": False})
add("config-map", {"type": "object", "properties": {"version": {"const": 2}},
                   "required": ["version"], "additionalProperties": {"type": ["string", "integer", "boolean"]}})
add("matrix", {"type": "array", "items": {"type": "array", "items": {"type": "number", "minimum": -1, "maximum": 1},
                                          "minItems": 2, "maxItems": 2}, "minItems": 2, "maxItems": 2})
add("deep-nesting", {"type": "object", "properties": {"a": {"type": "object", "properties": {"b": {"type": "object",
    "properties": {"c": {"type": "object", "properties": {"d": {"type": "array", "items": {"type": "object",
        "properties": {"e": {"const": "end"}}, "required": ["e"], "additionalProperties": False}, "maxItems": 2}},
        "required": ["d"], "additionalProperties": False}}, "required": ["c"], "additionalProperties": False}},
    "required": ["b"], "additionalProperties": False}}, "required": ["a"], "additionalProperties": False})

# --- systematic combinations: each property kind optional/required, closed/open ----------
kinds = {"s": {"type": "string", "maxLength": 6}, "i": {"type": "integer", "minimum": -20, "maximum": 20},
         "n": {"type": "number", "minimum": 0, "maximum": 100}, "b": {"type": "boolean"},
         "e": {"enum": ["α", "β", "γ"]}, "d": {"type": "string", "format": "date"},
         "a": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 5}, "maxItems": 3}}
names = list(kinds)
for k in range(12):
    props = {f"p{j}_{names[(k + j) % len(names)]}": kinds[names[(k + j) % len(names)]] for j in range(1 + k % 4)}
    keys = list(props)
    required = [x for j, x in enumerate(keys) if (k >> j) & 1]
    schema = {"type": "object", "properties": props, "required": required}
    if k % 3 != 2:
        schema["additionalProperties"] = False
    add(f"combo-{k}", schema)

print(len(S))
with open("schemas.json", "w", encoding="utf-8") as f:
    json.dump(S, f, ensure_ascii=False, indent=1)
    f.write("\n")

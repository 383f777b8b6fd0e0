"""Tests for pyscheduler_sim.schema: CRD schema validation, defaulting and pruning."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from pyscheduler_sim.schema import (
    DUPLICATE,
    FORBIDDEN,
    INVALID,
    NOT_SUPPORTED,
    REQUIRED,
    TOO_LONG,
    TOO_MANY,
    TYPE_INVALID,
    CompiledSchema,
    compile_schema,
    validate_crd_schema,
)


def _wrap(field_schema: dict[str, Any]) -> dict[str, Any]:
    """A root schema with ``spec.<field>`` described by ``field_schema``."""
    return {"type": "object", "properties": {"spec": {"type": "object", "properties": {"f": field_schema}}}}


def _messages(schema: dict[str, Any] | None, obj: dict[str, Any]) -> list[str]:
    return [e.message for e in compile_schema(schema).validate(obj)]


def _field(value: Any) -> dict[str, Any]:
    return {"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "t"}, "spec": {"f": value}}


# ---------------------------------------------------------------- keywords, one field at a time

KEYWORD_CASES = [
    # type
    pytest.param({"type": "integer"}, 3, [], id="integer-ok"),
    pytest.param({"type": "integer"}, "string", [
        'spec.f: Invalid value: "string": spec.f in body must be of type integer: "string"'], id="integer-string"),
    pytest.param({"type": "integer"}, True, [
        'spec.f: Invalid value: true: spec.f in body must be of type integer: "boolean"'], id="bool-is-not-integer"),
    pytest.param({"type": "integer"}, 2.0, [], id="integral-float-is-integer"),
    pytest.param({"type": "integer"}, 2.5, [
        'spec.f: Invalid value: 2.5: spec.f in body must be of type integer: "number"'], id="float-is-not-integer"),
    pytest.param({"type": "number"}, 7, [], id="number-accepts-integer"),
    pytest.param({"type": "number"}, 7.25, [], id="number-ok"),
    pytest.param({"type": "number"}, False, [
        'spec.f: Invalid value: false: spec.f in body must be of type number: "boolean"'], id="bool-is-not-number"),
    pytest.param({"type": "string"}, "x", [], id="string-ok"),
    pytest.param({"type": "string"}, 5, [
        'spec.f: Invalid value: 5: spec.f in body must be of type string: "integer"'], id="string-int"),
    pytest.param({"type": "boolean"}, True, [], id="boolean-ok"),
    pytest.param({"type": "boolean"}, "true", [
        'spec.f: Invalid value: "true": spec.f in body must be of type boolean: "string"'], id="boolean-string"),
    pytest.param({"type": "object"}, {}, [], id="object-ok"),
    pytest.param({"type": "object"}, [1], [
        'spec.f: Invalid value: [1]: spec.f in body must be of type object: "array"'], id="object-array"),
    pytest.param({"type": "array", "items": {"type": "string"}}, [], [], id="array-ok"),
    pytest.param({"type": "array", "items": {"type": "string"}}, {"a": 1}, [
        'spec.f: Invalid value: {"a":1}: spec.f in body must be of type array: "object"'], id="array-object"),
    # nullable
    pytest.param({"type": "string"}, None, [
        'spec.f: Invalid value: "null": spec.f in body must be of type string'], id="null-not-nullable"),
    pytest.param({"type": "string", "nullable": True}, None, [], id="null-nullable"),
    pytest.param({"type": "string", "nullable": True, "pattern": "^a$", "enum": ["a"]}, None, [],
                 id="null-nullable-skips-other-checks"),
    # enum
    pytest.param({"type": "string", "enum": ["replace", "extend"]}, "extend", [], id="enum-ok"),
    pytest.param({"type": "string", "enum": ["replace", "extend"]}, "fast", [
        'spec.f: Unsupported value: "fast": supported values: "replace", "extend"'], id="enum-bad"),
    pytest.param({"type": "integer", "enum": [1, 2]}, 3, [
        'spec.f: Unsupported value: 3: supported values: "1", "2"'], id="enum-integers"),
    pytest.param({"enum": [1], "x-kubernetes-preserve-unknown-fields": True}, True, [
        'spec.f: Unsupported value: true: supported values: "1"'], id="enum-true-is-not-1"),
    pytest.param({"type": "object", "enum": [{"a": 1, "b": [2]}]}, {"b": [2], "a": 1}, [], id="enum-deep-equal"),
    # pattern
    pytest.param({"type": "string", "pattern": "^[a-z]+$"}, "good", [], id="pattern-ok"),
    pytest.param({"type": "string", "pattern": "^[a-z]+$"}, "Bad", [
        "spec.f: Invalid value: \"Bad\": spec.f in body should match '^[a-z]+$'"], id="pattern-bad"),
    pytest.param({"type": "string", "pattern": "[0-9]"}, "abc1def", [], id="pattern-unanchored-search"),
    pytest.param({"type": "integer", "pattern": "^[a-z]+$"}, 5, [], id="pattern-ignores-non-strings"),
    # string lengths
    pytest.param({"type": "string", "maxLength": 10}, "0123456789", [], id="maxLength-ok"),
    pytest.param({"type": "string", "maxLength": 10}, "0123456789a", [
        "spec.f: Too long: may not be more than 10 bytes"], id="maxLength-bad"),
    pytest.param({"type": "string", "maxLength": 2}, "éé", [], id="maxLength-counts-characters"),
    pytest.param({"type": "string", "minLength": 2}, "ab", [], id="minLength-ok"),
    pytest.param({"type": "string", "minLength": 2}, "a", [
        'spec.f: Invalid value: "a": spec.f in body should be at least 2 chars long'], id="minLength-bad"),
    # numbers
    pytest.param({"type": "integer", "minimum": 1}, 1, [], id="minimum-ok"),
    pytest.param({"type": "integer", "minimum": 1}, 0, [
        "spec.f: Invalid value: 0: spec.f in body should be greater than or equal to 1"], id="minimum-bad"),
    pytest.param({"type": "integer", "minimum": 1, "exclusiveMinimum": True}, 1, [
        "spec.f: Invalid value: 1: spec.f in body should be greater than 1"], id="exclusiveMinimum-bad"),
    pytest.param({"type": "integer", "minimum": 1, "exclusiveMinimum": True}, 2, [], id="exclusiveMinimum-ok"),
    pytest.param({"type": "number", "maximum": 1.5}, 1.5, [], id="maximum-ok"),
    pytest.param({"type": "number", "maximum": 1.5}, 2, [
        "spec.f: Invalid value: 2: spec.f in body should be less than or equal to 1.5"], id="maximum-bad"),
    pytest.param({"type": "integer", "maximum": 10, "exclusiveMaximum": True}, 10, [
        "spec.f: Invalid value: 10: spec.f in body should be less than 10"], id="exclusiveMaximum-bad"),
    pytest.param({"type": "integer", "maximum": 1000000}, 1000001, [
        "spec.f: Invalid value: 1000001: spec.f in body should be less than or equal to 1000000"],
        id="maximum-large-printed-plain"),
    pytest.param({"type": "integer", "multipleOf": 5}, 15, [], id="multipleOf-ok"),
    pytest.param({"type": "integer", "multipleOf": 5}, 12, [
        "spec.f: Invalid value: 12: spec.f in body should be a multiple of 5"], id="multipleOf-bad"),
    pytest.param({"type": "number", "multipleOf": 0.1}, 0.3, [], id="multipleOf-decimal-exact"),
    # formats
    pytest.param({"type": "integer", "format": "int32"}, 2**31 - 1, [], id="int32-ok"),
    pytest.param({"type": "integer", "format": "int32"}, 2**31, [
        "spec.f: Invalid value: 2147483648: spec.f in body must be of type int32"], id="int32-overflow"),
    pytest.param({"type": "integer", "format": "int64"}, -(2**63), [], id="int64-ok"),
    pytest.param({"type": "integer", "format": "int64"}, 2**63, [
        "spec.f: Invalid value: 9223372036854775808: spec.f in body must be of type int64"], id="int64-overflow"),
    pytest.param({"type": "string", "format": "date-time"}, "2024-05-01T12:30:00Z", [], id="date-time-ok"),
    pytest.param({"type": "string", "format": "date-time"}, "2024-05-01T12:30:00.123+02:00", [],
                 id="date-time-fraction-offset"),
    pytest.param({"type": "string", "format": "date-time"}, "yesterday", [
        'spec.f: Invalid value: "yesterday": spec.f in body must be of type date-time: "yesterday"'],
        id="date-time-bad"),
    pytest.param({"type": "string", "format": "date-time"}, "2024-02-30T00:00:00Z", [
        'spec.f: Invalid value: "2024-02-30T00:00:00Z": spec.f in body must be of type date-time: '
        '"2024-02-30T00:00:00Z"'], id="date-time-impossible-day"),
    pytest.param({"type": "string", "format": "byte"}, "aGVsbG8=", [], id="byte-ok"),
    pytest.param({"type": "string", "format": "byte"}, "not base64!", [
        'spec.f: Invalid value: "not base64!": spec.f in body must be of type byte: "not base64!"'], id="byte-bad"),
    pytest.param({"type": "string", "format": "date"}, "2024-05-01", [], id="date-ok"),
    pytest.param({"type": "string", "format": "uuid"}, "123e4567-e89b-12d3-a456-426614174000", [], id="uuid-ok"),
    pytest.param({"type": "string", "format": "ipv4"}, "10.0.0.300", [
        'spec.f: Invalid value: "10.0.0.300": spec.f in body must be of type ipv4: "10.0.0.300"'], id="ipv4-bad"),
    pytest.param({"type": "string", "format": "no-such-format"}, "anything", [], id="unknown-format-accepted"),
    # arrays
    pytest.param({"type": "array", "items": {"type": "integer"}, "maxItems": 3}, [1, 2, 3], [], id="maxItems-ok"),
    pytest.param({"type": "array", "items": {"type": "integer"}, "maxItems": 3}, [1, 2, 3, 4, 5], [
        "spec.f: Too many: 5: must have at most 3 items"], id="maxItems-bad"),
    pytest.param({"type": "array", "items": {"type": "integer"}, "minItems": 2}, [1], [
        "spec.f: Invalid value: [1]: spec.f in body should have at least 2 items"], id="minItems-bad"),
    pytest.param({"type": "array", "items": {"type": "integer"}, "minItems": 2}, [1, 2], [], id="minItems-ok"),
    pytest.param({"type": "array", "items": {"type": "integer"}, "uniqueItems": True}, [1, 2], [],
                 id="uniqueItems-ok"),
    pytest.param({"type": "array", "items": {"type": "integer"}, "uniqueItems": True}, [1, 2, 1], [
        "spec.f: Invalid value: [1,2,1]: spec.f in body shouldn't contain duplicates"], id="uniqueItems-bad"),
    pytest.param({"type": "array", "items": {"type": "string"}}, ["a", 1, "b", 2], [
        'spec.f[1]: Invalid value: 1: spec.f[1] in body must be of type string: "integer"',
        'spec.f[3]: Invalid value: 2: spec.f[3] in body must be of type string: "integer"'], id="items-paths"),
    # objects
    pytest.param({"type": "object", "required": ["a", "b"], "properties": {
        "a": {"type": "string"}, "b": {"type": "string"}}}, {"a": "x"}, ["spec.f.b: Required value"],
        id="required-missing"),
    pytest.param({"type": "object", "required": ["a"], "properties": {"a": {"type": "string"}}},
                 {"a": None}, ['spec.f.a: Invalid value: "null": spec.f.a in body must be of type string'],
                 id="required-present-but-null"),
    pytest.param({"type": "object", "maxProperties": 1, "additionalProperties": {"type": "string"}},
                 {"a": "1", "b": "2"}, ["spec.f: Too many: 2: must have at most 1 items"], id="maxProperties-bad"),
    pytest.param({"type": "object", "minProperties": 1, "additionalProperties": {"type": "string"}},
                 {}, ["spec.f: Invalid value: {}: spec.f in body should have at least 1 properties"],
                 id="minProperties-bad"),
    pytest.param({"type": "object", "additionalProperties": {"type": "integer", "minimum": 0}},
                 {"cpu": 1, "mem": -1}, [
                     "spec.f.mem: Invalid value: -1: spec.f.mem in body should be greater than or equal to 0"],
                 id="additionalProperties-schema"),
    pytest.param({"type": "object", "additionalProperties": False, "properties": {"a": {"type": "string"}}},
                 {"a": "x", "b": "y"}, ['spec.f: Invalid value: "b": spec.f.b in body is a forbidden property'],
                 id="additionalProperties-false"),
    pytest.param({"type": "object", "properties": {"a": {"type": "string"}}}, {"zzz": 1}, [],
                 id="unknown-fields-are-not-validation-errors"),
    # int-or-string
    pytest.param({"x-kubernetes-int-or-string": True}, 8080, [], id="int-or-string-int"),
    pytest.param({"x-kubernetes-int-or-string": True}, "http", [], id="int-or-string-string"),
    pytest.param({"x-kubernetes-int-or-string": True}, True, [
        'spec.f: Invalid value: true: spec.f in body must be of type integer,string: "boolean"'],
        id="int-or-string-bool"),
    pytest.param({"x-kubernetes-int-or-string": True}, 1.5, [
        'spec.f: Invalid value: 1.5: spec.f in body must be of type integer,string: "number"'],
        id="int-or-string-float"),
    pytest.param({"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}],
                  "pattern": "^[0-9]+%?$"}, "50%", [], id="int-or-string-with-pattern"),
    # preserve-unknown-fields without type accepts anything
    pytest.param({"x-kubernetes-preserve-unknown-fields": True}, [1, {"a": None}], [], id="preserve-any-value"),
    # value validations
    pytest.param({"type": "integer", "allOf": [{"minimum": 0}, {"maximum": 10}]}, 5, [], id="allOf-ok"),
    pytest.param({"type": "integer", "allOf": [{"minimum": 0}, {"maximum": 10}]}, 11, [
        "spec.f: Invalid value: 11: spec.f in body should be less than or equal to 10",
        "spec.f: Invalid value: 11: spec.f in body must validate all the schemas (allOf)"], id="allOf-bad"),
    pytest.param({"type": "string", "anyOf": [{"pattern": "^a"}, {"pattern": "^b"}]}, "bee", [], id="anyOf-ok"),
    pytest.param({"type": "string", "anyOf": [{"pattern": "^a"}, {"pattern": "^b"}]}, "cat", [
        'spec.f: Invalid value: "cat": spec.f in body must validate at least one schema (anyOf)',
        "spec.f: Invalid value: \"cat\": spec.f in body should match '^a'"], id="anyOf-bad"),
    pytest.param({"type": "integer", "oneOf": [{"minimum": 5}, {"maximum": 0}]}, 7, [], id="oneOf-ok"),
    pytest.param({"type": "integer", "oneOf": [{"minimum": 5}, {"minimum": 6}]}, 7, [
        "spec.f: Invalid value: 7: spec.f in body must validate one and only one schema (oneOf). "
        "Found 2 valid alternatives"], id="oneOf-two"),
    pytest.param({"type": "integer", "oneOf": [{"minimum": 5}, {"maximum": 0}]}, 3, [
        "spec.f: Invalid value: 3: spec.f in body must validate one and only one schema (oneOf). Found none valid",
        "spec.f: Invalid value: 3: spec.f in body should be greater than or equal to 5"], id="oneOf-none"),
    pytest.param({"type": "string", "not": {"enum": ["forbidden"]}}, "ok", [], id="not-ok"),
    pytest.param({"type": "string", "not": {"enum": ["forbidden"]}}, "forbidden", [
        'spec.f: Invalid value: "forbidden": spec.f in body must not validate the schema (not)'], id="not-bad"),
    pytest.param({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
                  "oneOf": [{"required": ["a"]}, {"required": ["b"]}]}, {"a": "x"}, [], id="oneOf-required-ok"),
    pytest.param({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
                  "oneOf": [{"required": ["a"]}, {"required": ["b"]}]}, {"a": "x", "b": "y"}, [
        'spec.f: Invalid value: {"a":"x","b":"y"}: spec.f in body must validate one and only one schema (oneOf). '
        "Found 2 valid alternatives"], id="oneOf-required-both"),
]


@pytest.mark.parametrize(("field_schema", "value", "expected"), KEYWORD_CASES)
def test_keyword(field_schema: dict[str, Any], value: Any, expected: list[str]) -> None:
    assert _messages(_wrap(field_schema), _field(value)) == expected


def test_error_types_and_values() -> None:
    schema = _wrap({"type": "object", "required": ["url"], "properties": {
        "url": {"type": "string"},
        "n": {"type": "integer", "minimum": 1},
        "mode": {"type": "string", "enum": ["a"]},
        "name": {"type": "string", "maxLength": 1},
        "list": {"type": "array", "maxItems": 1, "items": {"type": "integer"}},
        "set": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "integer"}},
        "when": {"type": "string", "format": "date-time"},
    }})
    obj = _field({"n": "x", "mode": "b", "name": "xy", "list": [1, 2], "set": [1, 1], "when": "never"})
    errs = compile_schema(schema).validate(obj)
    got = [(e.type, e.field, e.value) for e in errs]
    assert got == [
        (REQUIRED, "spec.f.url", ""),
        (TYPE_INVALID, "spec.f.n", "x"),
        (NOT_SUPPORTED, "spec.f.mode", "b"),
        (TOO_LONG, "spec.f.name", "xy"),
        (TOO_MANY, "spec.f.list", 2),
        (TYPE_INVALID, "spec.f.when", "never"),
        (DUPLICATE, "spec.f.set[1]", 1),
    ]
    assert errs[1].body == 'Invalid value: "x": spec.f.n in body must be of type integer: "string"'


def test_none_schema_accepts_everything() -> None:
    c = compile_schema(None)
    obj: dict[str, Any] = {"apiVersion": "v1", "kind": "X", "spec": {"anything": [1, None]}}
    before = copy.deepcopy(obj)
    assert c.accepts_everything
    assert c.validate(obj) == []
    assert c.prune(obj) == []
    c.default(obj)
    assert obj == before


def test_compiled_schema_is_reusable() -> None:
    c = compile_schema(_wrap({"type": "integer", "minimum": 0}))
    assert isinstance(c, CompiledSchema)
    assert c.validate(_field(-1)) != []
    assert c.validate(_field(1)) == []
    assert c.validate(_field(-1)) == c.validate(_field(-1))


# ---------------------------------------------------------------- defaulting

_DEFAULTING_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "properties": {
                "mode": {"type": "string", "default": "replace"},
                "nullableWithDefault": {"type": "string", "nullable": True, "default": "d"},
                "limits": {
                    "type": "object",
                    "properties": {
                        "timeoutMillis": {"type": "integer", "default": 50},
                        "memoryPages": {"type": "integer", "default": 256},
                    },
                },
                "withDefaultObject": {
                    "type": "object",
                    "default": {},
                    "properties": {"inner": {"type": "boolean", "default": False}},
                },
                "stages": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "default": {"name": "filter"},
                        "properties": {
                            "name": {"type": "string"},
                            "weight": {"type": "integer", "default": 1},
                        },
                    },
                },
                "byKey": {
                    "type": "object",
                    "additionalProperties": {
                        "type": "object",
                        "properties": {"enabled": {"type": "boolean", "default": True}},
                    },
                },
                "tags": {"type": "array", "default": ["a"], "items": {"type": "string"}},
            },
        },
    },
}

DEFAULTING_CASES = [
    pytest.param({}, {}, id="absent-spec-stays-absent"),
    pytest.param(
        {"spec": {}},
        {"spec": {"mode": "replace", "nullableWithDefault": "d", "withDefaultObject": {"inner": False},
                  "tags": ["a"]}},
        id="top-level-defaults-and-defaults-inside-defaults"),
    pytest.param(
        {"spec": {"mode": "extend", "limits": {}}},
        {"spec": {"mode": "extend", "nullableWithDefault": "d", "limits": {"timeoutMillis": 50, "memoryPages": 256},
                  "withDefaultObject": {"inner": False}, "tags": ["a"]}},
        id="present-values-kept-nested-defaults-applied"),
    pytest.param(
        {"spec": {"limits": {"timeoutMillis": 10}, "tags": []}},
        {"spec": {"mode": "replace", "nullableWithDefault": "d", "limits": {"timeoutMillis": 10, "memoryPages": 256},
                  "withDefaultObject": {"inner": False}, "tags": []}},
        id="partial-object-and-empty-array-kept"),
    pytest.param(
        {"spec": {"mode": None, "nullableWithDefault": None}},
        {"spec": {"mode": "replace", "nullableWithDefault": None, "withDefaultObject": {"inner": False},
                  "tags": ["a"]}},
        id="null-replaced-only-when-not-nullable"),
    pytest.param(
        {"spec": {"stages": [{"name": "score"}, {"weight": 3}, None]}},
        {"spec": {"mode": "replace", "nullableWithDefault": "d", "withDefaultObject": {"inner": False},
                  "tags": ["a"],
                  "stages": [{"name": "score", "weight": 1}, {"weight": 3}, {"name": "filter", "weight": 1}]}},
        id="array-items-and-null-items"),
    pytest.param(
        {"spec": {"byKey": {"x": {}, "y": {"enabled": False}}}},
        {"spec": {"mode": "replace", "nullableWithDefault": "d", "withDefaultObject": {"inner": False},
                  "tags": ["a"], "byKey": {"x": {"enabled": True}, "y": {"enabled": False}}}},
        id="additionalProperties-values"),
]


@pytest.mark.parametrize(("obj", "expected"), DEFAULTING_CASES)
def test_default(obj: dict[str, Any], expected: dict[str, Any]) -> None:
    compile_schema(_DEFAULTING_SCHEMA).default(obj)
    assert obj == expected


def test_default_values_are_copies() -> None:
    c = compile_schema(_DEFAULTING_SCHEMA)
    a: dict[str, Any] = {"spec": {}}
    b: dict[str, Any] = {"spec": {}}
    c.default(a)
    c.default(b)
    a["spec"]["tags"].append("mutated")
    assert b["spec"]["tags"] == ["a"]
    assert _DEFAULTING_SCHEMA["properties"]["spec"]["properties"]["tags"]["default"] == ["a"]


# ---------------------------------------------------------------- pruning

PRUNING_CASES = [
    pytest.param(
        {"type": "object", "properties": {"spec": {"type": "object", "properties": {"a": {"type": "string"}}}}},
        {"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "n", "labels": {"l": "v"}},
         "spec": {"a": "1", "foo": 2}, "extra": True},
        {"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "n", "labels": {"l": "v"}}, "spec": {"a": "1"}},
        ["spec.foo", "extra"],
        id="unknown-fields-root-metadata-kept"),
    pytest.param(
        {"type": "object", "properties": {"metadata": {"type": "object", "properties": {"name": {"type": "string"}}},
                                          "kind": {"type": "string"}}},
        {"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "n", "uid": "u", "annotations": {"a": "b"}}},
        {"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "n", "uid": "u", "annotations": {"a": "b"}}},
        [],
        id="root-metadata-never-pruned-by-its-schema"),
    pytest.param(
        {"type": "object", "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                                                   "properties": {"known": {"type": "object", "properties": {}}}}}},
        {"spec": {"anything": {"deep": [1]}, "known": {"x": 1}}},
        {"spec": {"anything": {"deep": [1]}, "known": {}}},
        ["spec.known.x"],
        id="preserve-keeps-unknown-but-prunes-inside-known"),
    pytest.param(
        {"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "config": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}},
        {"spec": {"config": {"a": {"b": [{"c": 1}]}}}},
        {"spec": {"config": {"a": {"b": [{"c": 1}]}}}},
        [],
        id="preserve-subtree"),
    pytest.param(
        {"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "items": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}}}}}}},
        {"spec": {"items": [{"name": "a"}, {"name": "b", "junk": 1}]}},
        {"spec": {"items": [{"name": "a"}, {"name": "b"}]}},
        ["spec.items[1].junk"],
        id="array-items"),
    pytest.param(
        {"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "m": {"type": "object", "additionalProperties": {"type": "object", "properties": {"v": {"type": "integer"}}}}}}}},
        {"spec": {"m": {"k1": {"v": 1, "w": 2}, "k2": {}}}},
        {"spec": {"m": {"k1": {"v": 1}, "k2": {}}}},
        ["spec.m.k1.w"],
        id="additionalProperties-values"),
    pytest.param(
        {"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "template": {"type": "object", "x-kubernetes-embedded-resource": True,
                         "properties": {"spec": {"type": "object", "properties": {"x": {"type": "string"}}}}}}}}},
        {"spec": {"template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                               "spec": {"x": "1", "y": 2}, "status": {}}}},
        {"spec": {"template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"x": "1"}}}},
        ["spec.template.spec.y", "spec.template.status"],
        id="embedded-resource-keeps-type-and-object-meta"),
    pytest.param(
        {"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "notEmbedded": {"type": "object", "properties": {}}}}}},
        {"spec": {"notEmbedded": {"apiVersion": "v1", "kind": "Pod", "metadata": {}}}},
        {"spec": {"notEmbedded": {}}},
        ["spec.notEmbedded.apiVersion", "spec.notEmbedded.kind", "spec.notEmbedded.metadata"],
        id="resource-fields-pruned-when-not-embedded"),
    pytest.param(
        {"type": "object", "properties": {"spec": {"type": "object"}}},
        {"spec": {"a": 1}},
        {"spec": {}},
        ["spec.a"],
        id="object-without-properties-prunes-everything"),
    pytest.param(
        {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        {"apiVersion": "v1", "spec": {"a": 1}, "status": "x"},
        {"apiVersion": "v1", "spec": {"a": 1}, "status": "x"},
        [],
        id="root-preserve"),
]


@pytest.mark.parametrize(("schema", "obj", "expected", "paths"), PRUNING_CASES)
def test_prune(schema: dict[str, Any], obj: dict[str, Any], expected: dict[str, Any], paths: list[str]) -> None:
    assert compile_schema(schema).prune(obj) == paths
    assert obj == expected


# ---------------------------------------------------------------- list types

_LIST_SCHEMA = _wrap({"type": "object", "properties": {
    "set": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
    "atomic": {"type": "array", "x-kubernetes-list-type": "atomic", "items": {"type": "string"}},
    "map": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
            "items": {"type": "object", "required": ["name"], "properties": {
                "name": {"type": "string"}, "v": {"type": "integer"}}}},
    "map2": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["a", "b"],
             "items": {"type": "object", "properties": {
                 "a": {"type": "string"}, "b": {"type": "integer", "default": 0}}}},
}})

LIST_TYPE_CASES = [
    pytest.param({"set": ["a", "b"]}, [], id="set-ok"),
    pytest.param({"set": ["a", "b", "a", "a"]}, [
        'spec.f.set[2]: Duplicate value: "a"', 'spec.f.set[3]: Duplicate value: "a"'], id="set-duplicates"),
    pytest.param({"atomic": ["a", "a"]}, [], id="atomic-allows-duplicates"),
    pytest.param({"map": [{"name": "x", "v": 1}, {"name": "y", "v": 1}]}, [], id="map-ok"),
    pytest.param({"map": [{"name": "x", "v": 1}, {"name": "x", "v": 2}]}, [
        'spec.f.map[1]: Duplicate value: {"name":"x"}'], id="map-duplicate-key"),
    pytest.param({"map2": [{"a": "x", "b": 1}, {"a": "x", "b": 2}]}, [], id="map-compound-keys-ok"),
    pytest.param({"map2": [{"a": "x"}, {"a": "x", "b": 0}]}, [
        'spec.f.map2[1]: Duplicate value: {"a":"x","b":0}'], id="map-key-default-counts"),
    pytest.param({"set": ["a", 1, "a"]}, [
        'spec.f.set[1]: Invalid value: 1: spec.f.set[1] in body must be of type string: "integer"',
        'spec.f.set[2]: Duplicate value: "a"'], id="list-type-errors-come-last"),
]


@pytest.mark.parametrize(("value", "expected"), LIST_TYPE_CASES)
def test_list_types(value: dict[str, Any], expected: list[str]) -> None:
    assert _messages(_LIST_SCHEMA, _field(value)) == expected


def test_set_of_numbers_and_booleans_are_distinct() -> None:
    schema = _wrap({"type": "array", "x-kubernetes-list-type": "set",
                    "items": {"x-kubernetes-preserve-unknown-fields": True}})
    assert _messages(schema, _field([1, True, 0, False])) == []
    assert _messages(schema, _field([1, 1.0])) == ["spec.f[1]: Duplicate value: 1"]


# ---------------------------------------------------------------- embedded resources

EMBEDDED_SCHEMA = _wrap({"type": "object", "x-kubernetes-embedded-resource": True,
                         "x-kubernetes-preserve-unknown-fields": True})


@pytest.mark.parametrize(("value", "expected"), [
    pytest.param({"apiVersion": "v1", "kind": "Pod"}, [], id="ok"),
    pytest.param({}, [], id="empty-ok"),
    pytest.param({"metadata": {}}, [
        "spec.f.kind: Required value: must not be empty",
        "spec.f.apiVersion: Required value: must not be empty"], id="missing-type-meta"),
])
def test_embedded_resource_validation(value: dict[str, Any], expected: list[str]) -> None:
    assert _messages(EMBEDDED_SCHEMA, _field(value)) == expected


# ---------------------------------------------------------------- a realistic CRD schema

PLUGIN_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "metadata": {"type": "object"},
        "spec": {
            "type": "object",
            "required": ["url"],
            "properties": {
                "url": {"type": "string", "pattern": "^(s3|https?|file)://"},
                "sha256": {"type": "string", "pattern": "^[a-f0-9]{64}$"},
                "stages": {
                    "type": "array",
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["name"],
                    "items": {
                        "type": "object",
                        "required": ["name"],
                        "properties": {
                            "name": {"type": "string", "enum": ["filter", "score"]},
                            "mode": {"type": "string", "enum": ["replace", "extend"], "default": "replace"},
                            "weight": {"type": "integer", "minimum": 0, "default": 1},
                        },
                    },
                },
                "config": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                "limits": {
                    "type": "object",
                    "properties": {
                        "timeoutMillis": {"type": "integer", "default": 50},
                        "memoryPages": {"type": "integer", "default": 256},
                    },
                },
                "failurePolicy": {"type": "string", "enum": ["Fail", "Ignore", "Default"], "default": "Fail"},
                "shadow": {"type": "boolean", "default": False},
            },
        },
        "status": {
            "type": "object",
            "properties": {
                "phase": {"type": "string", "enum": ["Pending", "Loading", "Ready", "Failed"]},
                "conditions": {
                    "type": "array",
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["type"],
                    "items": {
                        "type": "object",
                        "required": ["type", "status"],
                        "properties": {
                            "type": {"type": "string"},
                            "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
                            "reason": {"type": "string"},
                            "message": {"type": "string"},
                            "lastTransitionTime": {"type": "string", "format": "date-time"},
                        },
                    },
                },
            },
        },
    },
}

_SHA = "0123456789abcdef" * 4


def _plugin(spec: dict[str, Any], status: dict[str, Any] | None = None) -> dict[str, Any]:
    obj: dict[str, Any] = {"apiVersion": "scheduling.example.com/v1alpha1", "kind": "SchedulerPlugin",
                           "metadata": {"name": "p", "namespace": "default", "labels": {"a": "b"}}, "spec": spec}
    if status is not None:
        obj["status"] = status
    return obj


def test_plugin_schema_is_structural() -> None:
    assert validate_crd_schema(PLUGIN_SCHEMA) == []


def test_plugin_defaults_prune_validate() -> None:
    c = compile_schema(PLUGIN_SCHEMA)
    obj = _plugin({"url": "https://example.com/p.wasm", "sha256": _SHA, "stages": [{"name": "score"}],
                   "config": {"anything": {"goes": [1, 2]}}, "unknownTop": 1},
                  {"phase": "Ready", "observedBy": "x"})
    assert c.prune(obj) == ["spec.unknownTop", "status.observedBy"]
    c.default(obj)
    assert obj["spec"] == {
        "url": "https://example.com/p.wasm", "sha256": _SHA,
        "stages": [{"name": "score", "mode": "replace", "weight": 1}],
        "config": {"anything": {"goes": [1, 2]}},
        "failurePolicy": "Fail", "shadow": False,
    }
    assert "limits" not in obj["spec"]  # the parent object has no default: it stays absent
    assert obj["spec"]["failurePolicy"] == "Fail"
    assert obj["spec"]["shadow"] is False
    assert obj["status"] == {"phase": "Ready"}
    assert obj["metadata"]["labels"] == {"a": "b"}
    assert c.validate(obj) == []


def test_plugin_limits_defaulted_when_present() -> None:
    c = compile_schema(PLUGIN_SCHEMA)
    obj = _plugin({"url": "file:///p.wasm", "limits": {"timeoutMillis": 5}})
    c.default(obj)
    assert obj["spec"]["limits"] == {"timeoutMillis": 5, "memoryPages": 256}


PLUGIN_INVALID_CASES = [
    pytest.param({}, None, ["spec.url: Required value"], id="url-required"),
    pytest.param({"url": "ftp://x"}, None, [
        "spec.url: Invalid value: \"ftp://x\": spec.url in body should match '^(s3|https?|file)://'"], id="url-scheme"),
    pytest.param({"url": "s3://b/k", "sha256": "ABC"}, None, [
        "spec.sha256: Invalid value: \"ABC\": spec.sha256 in body should match '^[a-f0-9]{64}$'"], id="sha256"),
    pytest.param({"url": "s3://b/k", "stages": [{"name": "bind"}]}, None, [
        'spec.stages[0].name: Unsupported value: "bind": supported values: "filter", "score"'], id="stage-name"),
    pytest.param({"url": "s3://b/k", "stages": [{"mode": "replace"}]}, None, [
        "spec.stages[0].name: Required value"], id="stage-name-required"),
    pytest.param({"url": "s3://b/k", "stages": [{"name": "score", "weight": -1}]}, None, [
        "spec.stages[0].weight: Invalid value: -1: spec.stages[0].weight in body should be greater than or equal to 0"],
        id="stage-weight"),
    pytest.param({"url": "s3://b/k", "stages": [{"name": "filter"}, {"name": "score"}, {"name": "filter"}]}, None, [
        'spec.stages[2]: Duplicate value: {"name":"filter"}'], id="stage-duplicate"),
    pytest.param({"url": "s3://b/k", "stages": [{"name": "filter", "mode": "fast"}]}, None, [
        'spec.stages[0].mode: Unsupported value: "fast": supported values: "replace", "extend"'], id="stage-mode"),
    pytest.param({"url": "s3://b/k", "failurePolicy": "Retry", "shadow": "yes"}, None, [
        'spec.failurePolicy: Unsupported value: "Retry": supported values: "Fail", "Ignore", "Default"',
        'spec.shadow: Invalid value: "yes": spec.shadow in body must be of type boolean: "string"'],
        id="failure-policy-and-shadow"),
    pytest.param({"url": "s3://b/k", "limits": {"timeoutMillis": "50ms"}}, None, [
        'spec.limits.timeoutMillis: Invalid value: "50ms": spec.limits.timeoutMillis in body must be of type '
        'integer: "string"'], id="limits-type"),
    pytest.param({"url": "s3://b/k"}, {"phase": "Done"}, [
        'status.phase: Unsupported value: "Done": supported values: "Pending", "Loading", "Ready", "Failed"'],
        id="status-phase"),
    pytest.param({"url": "s3://b/k"}, {"conditions": [
        {"type": "Ready", "status": "True", "lastTransitionTime": "2024-01-01T00:00:00Z"},
        {"type": "Ready", "status": "Maybe"}]}, [
        'status.conditions[1].status: Unsupported value: "Maybe": supported values: "True", "False", "Unknown"',
        'status.conditions[1]: Duplicate value: {"type":"Ready"}'], id="status-conditions"),
]


@pytest.mark.parametrize(("spec", "status", "expected"), PLUGIN_INVALID_CASES)
def test_plugin_invalid(spec: dict[str, Any], status: dict[str, Any] | None, expected: list[str]) -> None:
    c = compile_schema(PLUGIN_SCHEMA)
    obj = _plugin(spec, status)
    c.default(obj)
    assert [e.message for e in c.validate(obj)] == expected


# ---------------------------------------------------------------- structural schema rules

_P = "spec.versions[0].schema.openAPIV3Schema"

CRD_SCHEMA_CASES = [
    pytest.param({"type": "object"}, [], id="minimal"),
    pytest.param({"type": "object", "x-kubernetes-preserve-unknown-fields": True}, [], id="preserve-root"),
    pytest.param(None, [f"{_P}: Required value: schemas are required"], id="missing"),
    pytest.param({"properties": {}}, [f"{_P}.type: Required value: must not be empty at the root"],
                 id="root-type-missing"),
    pytest.param({"type": "array", "items": {"type": "string"}}, [
        f'{_P}.type: Invalid value: "array": must be object at the root'], id="root-type-not-object"),
    pytest.param({"type": "object", "properties": {"spec": {"properties": {"a": {"type": "string"}}}}}, [
        f"{_P}.properties[spec].type: Required value: must not be empty for specified object fields"],
        id="nested-type-missing"),
    pytest.param({"type": "object", "properties": {"l": {"type": "array", "items": {}}}}, [
        f"{_P}.properties[l].items.type: Required value: must not be empty for specified array items"],
        id="items-type-missing"),
    pytest.param({"type": "object", "properties": {"l": {"type": "array"}}}, [
        f"{_P}.properties[l].items: Required value: must be specified"], id="array-without-items"),
    pytest.param({"type": "object", "properties": {
        "p": {"x-kubernetes-int-or-string": True},
        "q": {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}]},
        "r": {"x-kubernetes-preserve-unknown-fields": True}}}, [], id="typeless-allowed"),
    pytest.param({"type": "object", "properties": {"t": {"type": "map"}}}, [
        f'{_P}.properties[t].type: Unsupported value: "map": supported values: "array", "boolean", "integer", '
        '"number", "object", "string"'], id="unknown-type"),
    pytest.param({"type": "object", "properties": {"m": {
        "type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "string"}}}}, [
        f"{_P}.properties[m].additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive"],
        id="properties-and-additionalProperties"),
    pytest.param({"type": "object", "properties": {"m": {"type": "object", "additionalProperties": False,
                                                         "properties": {"a": {"type": "string"}}}}}, [
        f"{_P}.properties[m].additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive"],
        id="additionalProperties-false-with-properties"),
    pytest.param({"type": "object", "properties": {"m": {"type": "object", "additionalProperties": True,
                                                         "properties": {"a": {"type": "string"}}}}}, [],
                 id="additionalProperties-true-with-properties"),
    pytest.param({"type": "object", "additionalProperties": {"type": "string"}}, [
        f"{_P}.additionalProperties: Forbidden: must not be used at the root"], id="additionalProperties-at-root"),
    pytest.param({"type": "object", "nullable": True}, [
        f"{_P}.nullable: Forbidden: nullable cannot be true at the root"], id="nullable-root"),
    pytest.param({"type": "object", "properties": {"m": {"type": "object",
                                                         "x-kubernetes-preserve-unknown-fields": False}}}, [
        f"{_P}.properties[m].x-kubernetes-preserve-unknown-fields: Invalid value: false: must be true or undefined"],
        id="preserve-false"),
    pytest.param({"type": "object", "properties": {"l": {"type": "array", "uniqueItems": True,
                                                         "items": {"type": "string"}}}}, [
        f"{_P}.properties[l].uniqueItems: Forbidden: uniqueItems cannot be set to true since the runtime "
        "complexity becomes quadratic"], id="uniqueItems"),
    pytest.param({"type": "object", "properties": {"s": {"type": "string", "pattern": "(unclosed"}}}, [
        f'{_P}.properties[s].pattern: Invalid value: "(unclosed": must be a valid regular expression, '
        "but isn't: missing ), unterminated subpattern at position 0"], id="bad-pattern"),
    pytest.param({"type": "object", "properties": {"s": {"type": "string", "anyOf": [
        {"type": "string", "pattern": "^a"}, {"default": "x"}]}}}, [
        f"{_P}.properties[s].anyOf[0].type: Forbidden: must be empty to be structural",
        f"{_P}.properties[s].anyOf[1].default: Forbidden: must be undefined to be structural"],
        id="structural-keywords-in-value-validation"),
    pytest.param({"type": "object", "properties": {"s": {"type": "object", "not": {
        "properties": {"a": {"nullable": True}}}}}}, [
        f"{_P}.properties[s].not.properties[a].nullable: Forbidden: must be false to be structural"],
        id="nullable-inside-not"),
    pytest.param({"type": "object", "properties": {"e": {"type": "string", "x-kubernetes-embedded-resource": True}}}, [
        f'{_P}.properties[e].type: Invalid value: "string": must be object if x-kubernetes-embedded-resource is true',
        f"{_P}.properties[e].properties: Required value: must not be empty if x-kubernetes-embedded-resource is "
        "true without x-kubernetes-preserve-unknown-fields"], id="embedded-not-object"),
    pytest.param({"type": "object", "properties": {"p": {"x-kubernetes-int-or-string": True,
                                                         "x-kubernetes-preserve-unknown-fields": True}}}, [
        f"{_P}.properties[p].x-kubernetes-preserve-unknown-fields: Invalid value: true: must be false if "
        "x-kubernetes-int-or-string is true"], id="int-or-string-and-preserve"),
    pytest.param({"type": "object", "properties": {"p": {"x-kubernetes-int-or-string": True, "allOf": [
        {"anyOf": [{"type": "integer"}, {"type": "string"}]}, {"pattern": "^[0-9]+%?$"}]}}}, [],
        id="int-or-string-allOf-idiom"),
    pytest.param({"type": "object", "properties": {"e": {
        "type": "object", "x-kubernetes-embedded-resource": True, "x-kubernetes-preserve-unknown-fields": True,
        "additionalProperties": {"type": "string"},
        "properties": {"kind": {"type": "integer"}}}}}, [
        f"{_P}.properties[e].additionalProperties: Forbidden: must not be used if x-kubernetes-embedded-resource is set",
        f"{_P}.properties[e].additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive",
        f'{_P}.properties[e].properties[kind].type: Invalid value: "integer": must be string'],
        id="embedded-resource-meta"),
    pytest.param({"type": "object", "properties": {"s": {"type": "object", "anyOf": [
        {"properties": {"metadata": {"required": ["name"]}}}]}}}, [
        f"{_P}.properties[s].anyOf[0].properties[metadata]: Forbidden: must not be specified in a nested context"],
        id="metadata-in-nested-context"),
    pytest.param({"type": "object", "properties": {"metadata": {"type": "object", "properties": {
        "name": {"type": "string", "maxLength": 10}, "labels": {"type": "object"}}}}}, [
        f"{_P}.properties[metadata]: Forbidden: must not specify anything other than name and generateName, "
        "but metadata is implicitly specified"], id="metadata-restricted"),
    # list types
    pytest.param({"type": "object", "properties": {"l": {"type": "array", "x-kubernetes-list-type": "bag",
                                                         "items": {"type": "string"}}}}, [
        f'{_P}.properties[l].x-kubernetes-list-type: Unsupported value: "bag": supported values: "atomic", "set", '
        '"map"'], id="list-type-unknown"),
    pytest.param({"type": "object", "properties": {"l": {"type": "object", "x-kubernetes-list-type": "atomic"}}}, [
        f'{_P}.properties[l].type: Invalid value: "object": must be array if x-kubernetes-list-type is specified'],
        id="list-type-on-object"),
    pytest.param({"type": "object", "properties": {"l": {"type": "array", "x-kubernetes-list-type": "map",
                                                         "items": {"type": "object", "properties": {}}}}}, [
        f"{_P}.properties[l].x-kubernetes-list-map-keys: Required value: must not be empty if "
        "x-kubernetes-list-type is map"], id="list-map-without-keys"),
    pytest.param({"type": "object", "properties": {"l": {
        "type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name", "nope"],
        "items": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}}}}, [
        f'{_P}.properties[l].x-kubernetes-list-map-keys: Invalid value: ["name","nope"]: '
        "entries must all be names of item properties"], id="list-map-key-not-a-property"),
    pytest.param({"type": "object", "properties": {"l": {
        "type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
        "items": {"type": "object", "properties": {"name": {"type": "string"}}}}}}, [
        f"{_P}.properties[l].items.properties[name].default: Required value: this property is in "
        "x-kubernetes-list-map-keys, so it must have a default or be a required property"], id="list-map-key-optional"),
    pytest.param({"type": "object", "properties": {"l": {
        "type": "array", "x-kubernetes-list-type": "set", "x-kubernetes-list-map-keys": ["name"],
        "items": {"type": "string"}}}}, [
        f'{_P}.properties[l].x-kubernetes-list-type: Invalid value: "set": must be map if '
        "x-kubernetes-list-map-keys is non-empty"], id="list-map-keys-on-set"),
    pytest.param({"type": "object", "properties": {"l": {
        "type": "array", "x-kubernetes-list-type": "set",
        "items": {"type": "object", "properties": {"a": {"type": "string"}}}}}}, [
        f'{_P}.properties[l].items.x-kubernetes-map-type: Invalid value: "null": must be atomic as item of a list '
        "with x-kubernetes-list-type=set"], id="set-of-granular-objects"),
    pytest.param({"type": "object", "properties": {"l": {
        "type": "array", "x-kubernetes-list-type": "set", "items": {"type": "object", "x-kubernetes-map-type": "atomic"}}}},
        [], id="set-of-atomic-objects"),
    # defaults
    pytest.param({"type": "object", "properties": {"mode": {"type": "string", "enum": ["a", "b"], "default": "c"}}}, [
        f'{_P}.properties[mode].default: Unsupported value: "c": supported values: "a", "b"'], id="default-enum"),
    pytest.param({"type": "object", "properties": {"n": {"type": "integer", "minimum": 1, "default": 0}}}, [
        f"{_P}.properties[n].default: Invalid value: 0: in body should be greater than or equal to 1"],
        id="default-minimum"),
    pytest.param({"type": "object", "properties": {"o": {"type": "object", "default": {"t": "x"},
                                                         "properties": {"t": {"type": "integer"}}}}}, [
        f'{_P}.properties[o].default.t: Invalid value: "x": t in body must be of type integer: "string"'],
        id="default-nested-type"),
    pytest.param({"type": "object", "properties": {"o": {"type": "object", "default": {"t": 1, "u": 2},
                                                         "properties": {"t": {"type": "integer"}}}}}, [
        f'{_P}.properties[o].default: Invalid value: {{"t":1,"u":2}}: must not have unknown fields: [u]'],
        id="default-unknown-fields"),
    pytest.param({"type": "object", "properties": {"o": {"type": "object", "default": {},
                                                         "required": ["t"],
                                                         "properties": {"t": {"type": "integer", "default": 3}}}}}, [],
                 id="default-validated-after-nested-defaults"),
    pytest.param({"type": "object", "properties": {"s": {"type": "string", "default": None}}}, [
        f'{_P}.properties[s].default: Invalid value: "null": in body must be of type string'],
        id="default-null-not-nullable"),
]


@pytest.mark.parametrize(("schema", "expected"), CRD_SCHEMA_CASES)
def test_validate_crd_schema(schema: dict[str, Any] | None, expected: list[str]) -> None:
    assert [e.message for e in validate_crd_schema(schema)] == expected


def test_validate_crd_schema_types_and_custom_path() -> None:
    errs = validate_crd_schema({"type": "object", "properties": {"m": {"type": "object",
                                                                       "additionalProperties": False,
                                                                       "properties": {"a": {"type": "string"}}}}},
                               path="spec.validation.openAPIV3Schema")
    assert [(e.type, e.field) for e in errs] == [
        (FORBIDDEN, "spec.validation.openAPIV3Schema.properties[m].additionalProperties")]
    errs = validate_crd_schema("not a schema")
    assert [(e.type, e.field) for e in errs] == [(INVALID, _P)]


# ---------------------------------------------------------------- validation rules (CEL)

RULES_SCHEMA = {
    "type": "object",
    "properties": {"spec": {
        "type": "object",
        "x-kubernetes-validations": [
            {"rule": "self.replicas <= self.maxReplicas",
             "message": "replicas must not exceed maxReplicas", "fieldPath": ".replicas"},
            {"rule": "self.maxReplicas >= oldSelf.maxReplicas"},
            {"rule": "!has(self.mode) || self.mode != 'legacy'", "reason": "FieldValueForbidden",
             "message": "legacy mode is gone"}],
        "properties": {
            "replicas": {"type": "integer"},
            "maxReplicas": {"type": "integer"},
            "mode": {"type": "string"},
            "names": {"type": "array", "items": {
                "type": "string",
                "x-kubernetes-validations": [{"rule": "self.startsWith('n-')"}]}}}}}}


def test_validation_rules_are_evaluated_with_kubes_messages() -> None:
    schema = compile_schema(RULES_SCHEMA)
    ok = {"spec": {"replicas": 2, "maxReplicas": 3, "names": ["n-a"]}}
    assert schema.validate(ok) == []
    bad = {"spec": {"replicas": 5, "maxReplicas": 3, "mode": "legacy", "names": ["n-a", "b"]}}
    # As kube-apiserver 1.36 answers (checked against it): a node's rules before its
    # children's; an object's value is not printed, a scalar's is.
    assert [e.message for e in schema.validate(bad)] == [
        "spec.replicas: Invalid value: replicas must not exceed maxReplicas",
        "spec: Forbidden: legacy mode is gone",
        "spec.names[1]: Invalid value: \"b\": failed rule: self.startsWith('n-')"]


def test_transition_rules_run_on_update_only() -> None:
    schema = compile_schema(RULES_SCHEMA)
    shrunk = {"spec": {"replicas": 1, "maxReplicas": 2}}
    assert schema.validate(shrunk) == []  # a create has no old value
    old = {"spec": {"replicas": 1, "maxReplicas": 4}}
    assert [e.message for e in schema.validate(shrunk, old)] == [
        "spec: Invalid value: failed rule: self.maxReplicas >= oldSelf.maxReplicas"]


def test_type_errors_keep_the_rules_from_running() -> None:
    schema = compile_schema(RULES_SCHEMA)
    errs = schema.validate({"spec": {"replicas": "many", "maxReplicas": 3}})
    assert [e.type for e in errs] == [TYPE_INVALID]


def test_a_crd_whose_rule_does_not_compile_is_refused() -> None:
    broken = {"type": "object", "properties": {"spec": {
        "type": "object", "x-kubernetes-validations": [{"rule": "self.a >"}]}}}
    errs = validate_crd_schema(broken)
    assert len(errs) == 1, errs
    assert errs[0].field == ("spec.versions[0].schema.openAPIV3Schema.properties[spec]"
                             ".x-kubernetes-validations[0].rule")
    assert errs[0].message.startswith(
        "spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0]"
        '.rule: Invalid value: "self.a >": compilation failed: '), errs[0].message

"""Tests for pyscheduler_sim.selectors: label and field selectors."""

from __future__ import annotations

from typing import Any

import pytest

from pyscheduler.api.labels import (
    EVERYTHING,
    NOTHING,
    LabelSelector,
    SelectorError,
    label_selector_from_dict,
    label_selector_from_set,
    parse_label_selector,
)
from pyscheduler_sim.selectors import (
    FieldSelector,
    check_field_selector,
    object_fields,
    parse_field_selector,
    supported_fields,
)

NAME_PART_MSG = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
    "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used "
    "for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)

# ---------------------------------------------------------------- label selector parsing


@pytest.mark.parametrize(
    ("text", "requirements", "canonical"),
    [
        pytest.param("", (), "", id="empty"),
        pytest.param("   ", (), "", id="blank"),
        pytest.param("a=b", (("a", "=", ("b",)),), "a=b", id="equals"),
        pytest.param("a==b", (("a", "==", ("b",)),), "a==b", id="double-equals"),
        pytest.param("a!=b", (("a", "!=", ("b",)),), "a!=b", id="not-equals"),
        pytest.param("a", (("a", "exists", ()),), "a", id="exists"),
        pytest.param("!a", (("a", "!", ()),), "!a", id="does-not-exist"),
        pytest.param("a in (y,x)", (("a", "in", ("x", "y")),), "a in (x,y)", id="in-sorted"),
        pytest.param("a notin (x)", (("a", "notin", ("x",)),), "a notin (x)", id="notin"),
        pytest.param("a=", (("a", "=", ("",)),), "a=", id="empty-value"),
        pytest.param("a in ()", (("a", "in", ("",)),), "a in ()", id="empty-set-means-empty-value"),
        pytest.param("x in (foo,,baz)", (("x", "in", ("", "baz", "foo")),), "x in (,baz,foo)", id="empty-member"),
        pytest.param("a in (x,)", (("a", "in", ("", "x")),), "a in (,x)", id="trailing-comma"),
        pytest.param("a in (x,x)", (("a", "in", ("x",)),), "a in (x)", id="deduplicated"),
        pytest.param("  a  =  b ,  c  ", (("a", "=", ("b",)), ("c", "exists", ())), "a=b,c", id="whitespace"),
        pytest.param("z=1,a=2,m", (("a", "=", ("2",)), ("m", "exists", ()), ("z", "=", ("1",))), "a=2,m,z=1",
                     id="sorted-by-key"),
        pytest.param("in in (in,notin)", (("in", "in", ("in", "notin")),), "in in (in,notin)",
                     id="keywords-as-identifiers"),
        pytest.param("example.com/tier=front_end-1.0", (("example.com/tier", "=", ("front_end-1.0",)),),
                     "example.com/tier=front_end-1.0", id="prefixed-key"),
        pytest.param("a>1,b<2", (("a", "gt", ("1",)), ("b", "lt", ("2",))), "a>1,b<2", id="gt-lt"),
        pytest.param("a\tin\n(b)", (("a", "in", ("b",)),), "a in (b)", id="tabs-and-newlines"),
    ],
)
def test_parse_label_selector(text: str, requirements: tuple[Any, ...], canonical: str) -> None:
    sel = parse_label_selector(text)
    assert sel.requirements == requirements
    assert str(sel) == canonical
    assert sel.empty == (not requirements)
    if canonical:
        assert parse_label_selector(canonical) == sel


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        pytest.param("a in", "unable to parse requirement: found '' expected: '('", id="in-without-set"),
        pytest.param("a in (", "unable to parse requirement: found '', expected: ',', ')' or identifier",
                     id="unterminated-set"),
        pytest.param("a in (x", "unable to parse requirement: found '', expected: ',' or ')'", id="missing-paren"),
        pytest.param("a in (x y)", "unable to parse requirement: found 'y', expected: ',' or ')'",
                     id="missing-comma"),
        pytest.param("a in (x,=)", "unable to parse requirement: found '=', expected: ',', or identifier",
                     id="operator-in-set"),
        pytest.param("a in (=)", "unable to parse requirement: found '=', expected: ',', ')' or identifier",
                     id="operator-opens-set"),
        pytest.param("a b", "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt",
                     id="missing-operator"),
        pytest.param("a=(", "unable to parse requirement: found '(', expected: identifier", id="bad-value"),
        pytest.param("=b", "found '=', expected: !, identifier, or 'end of string'", id="missing-key"),
        pytest.param("!", "unable to parse requirement: found '', expected: identifier", id="bare-not"),
        pytest.param(",a", "found ',', expected: !, identifier, or 'end of string'", id="leading-comma"),
        pytest.param("a,", "found '', expected: identifier after ','", id="trailing-comma"),
        pytest.param("a=b c", "found 'c', expected: ',' or 'end of string'", id="two-values"),
        pytest.param("a=b)", "found ')', expected: ',' or 'end of string'", id="stray-paren"),
        pytest.param("!a=b", "found '=', expected: ',' or 'end of string'", id="not-with-value"),
        pytest.param("A_", f'unable to parse requirement: <nil>: Invalid value: "A_": {NAME_PART_MSG}',
                     id="invalid-key"),
        pytest.param("a=b/c", f'unable to parse requirement: values[0][a]: Invalid value: "b/c": {LABEL_VALUE_MSG}',
                     id="invalid-value"),
        pytest.param("a>x", "unable to parse requirement: values[0]: Invalid value: \"x\": for 'Gt', 'Lt' "
                            "operators, the value must be an integer", id="gt-not-integer"),
    ],
)
def test_label_selector_errors(text: str, reason: str) -> None:
    with pytest.raises(SelectorError) as info:
        parse_label_selector(text)
    assert info.value.reason == reason
    assert info.value.selector == text
    assert str(info.value) == f'couldn\'t parse the selector string "{text}": {reason}'
    assert isinstance(info.value, ValueError)


# ---------------------------------------------------------------- label selector matching


@pytest.mark.parametrize(
    ("text", "labels", "expected"),
    [
        pytest.param("", {}, True, id="empty-matches-unlabelled"),
        pytest.param("", None, True, id="empty-matches-none"),
        pytest.param("a=b", {"a": "b"}, True, id="equals"),
        pytest.param("a=b", {"a": "c"}, False, id="equals-other-value"),
        pytest.param("a=b", {}, False, id="equals-missing"),
        pytest.param("a=", {"a": ""}, True, id="empty-value-present"),
        pytest.param("a=", {}, False, id="empty-value-missing"),
        pytest.param("a!=b", {"a": "c"}, True, id="not-equals"),
        pytest.param("a!=b", {"a": "b"}, False, id="not-equals-same"),
        pytest.param("a!=b", {}, True, id="not-equals-matches-missing-key"),
        pytest.param("a!=b", None, True, id="not-equals-matches-no-labels"),
        pytest.param("a in (x,y)", {"a": "y"}, True, id="in"),
        pytest.param("a in (x,y)", {"a": "z"}, False, id="in-other"),
        pytest.param("a in (x,y)", {}, False, id="in-missing"),
        pytest.param("a notin (x,y)", {"a": "z"}, True, id="notin"),
        pytest.param("a notin (x,y)", {"a": "x"}, False, id="notin-member"),
        pytest.param("a notin (x,y)", {}, True, id="notin-matches-missing-key"),
        pytest.param("a", {"a": ""}, True, id="exists"),
        pytest.param("a", {"b": "a"}, False, id="exists-missing"),
        pytest.param("!a", {"b": "1"}, True, id="does-not-exist"),
        pytest.param("!a", {"a": "1"}, False, id="does-not-exist-present"),
        pytest.param("a>5", {"a": "6"}, True, id="gt"),
        pytest.param("a>5", {"a": "5"}, False, id="gt-equal"),
        pytest.param("a>5", {"a": "x"}, False, id="gt-non-integer-label"),
        pytest.param("a>5", {}, False, id="gt-missing"),
        pytest.param("a<5", {"a": "-1"}, True, id="lt"),
        pytest.param("a=b,c!=d,!e,f", {"a": "b", "c": "x", "f": ""}, True, id="conjunction"),
        pytest.param("a=b,c!=d,!e,f", {"a": "b", "c": "x", "f": "", "e": "1"}, False, id="conjunction-fails"),
    ],
)
def test_label_selector_matches(text: str, labels: dict[str, str] | None, expected: bool) -> None:
    assert parse_label_selector(text).matches(labels) is expected


def test_label_selector_requires_exact_match() -> None:
    sel = parse_label_selector("a=b,c in (d),e in (f,g),h!=i")
    assert sel.requires_exact_match("a") == "b"
    assert sel.requires_exact_match("c") == "d"
    assert sel.requires_exact_match("e") is None
    assert sel.requires_exact_match("h") is None
    assert sel.requires_exact_match("zzz") is None


def test_label_selector_is_cached_and_hashable() -> None:
    assert parse_label_selector("a=b,c") is parse_label_selector("a=b,c")
    assert len({parse_label_selector("a=b"), LabelSelector([("a", "=", ("b",))])}) == 1
    assert repr(parse_label_selector("a=b")) == "LabelSelector('a=b')"


# ---------------------------------------------------------------- API object form


@pytest.mark.parametrize(
    ("sel", "labels", "expected"),
    [
        pytest.param(None, {}, False, id="none-matches-nothing"),
        pytest.param(None, {"a": "b"}, False, id="none-matches-nothing-labelled"),
        pytest.param({}, {}, True, id="empty-matches-everything"),
        pytest.param({"matchLabels": {}, "matchExpressions": []}, {"x": "y"}, True, id="empty-parts"),
        pytest.param({"matchLabels": {"app": "web"}}, {"app": "web", "x": "y"}, True, id="match-labels"),
        pytest.param({"matchLabels": {"app": "web"}}, {"app": "db"}, False, id="match-labels-differ"),
        pytest.param({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]},
                     {"tier": "b"}, True, id="in"),
        pytest.param({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["a"]}]},
                     {}, True, id="notin-missing-key"),
        pytest.param({"matchExpressions": [{"key": "tier", "operator": "Exists"}]}, {"tier": ""}, True,
                     id="exists"),
        pytest.param({"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}, {"tier": ""}, False,
                     id="does-not-exist"),
        pytest.param({"matchLabels": {"app": "web"},
                      "matchExpressions": [{"key": "env", "operator": "In", "values": ["prod"]}]},
                     {"app": "web", "env": "dev"}, False, id="combined"),
    ],
)
def test_label_selector_from_dict(sel: dict[str, Any] | None, labels: dict[str, str], expected: bool) -> None:
    assert label_selector_from_dict(sel).matches(labels) is expected


def test_none_and_empty_selector_objects() -> None:
    assert label_selector_from_dict(None) is NOTHING
    assert NOTHING.matches_nothing and not NOTHING.empty
    assert label_selector_from_dict({}) is EVERYTHING
    assert EVERYTHING.empty and not EVERYTHING.matches_nothing
    assert str(label_selector_from_dict({"matchLabels": {"b": "1", "a": "2"}})) == "a=2,b=1"


@pytest.mark.parametrize(
    ("sel", "message"),
    [
        pytest.param({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]},
                     "values: Invalid value: []: for 'in', 'notin' operators, values set can't be empty",
                     id="in-without-values"),
        pytest.param({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]},
                     'values: Invalid value: ["x"]: values set must be empty for exists and does not exist',
                     id="exists-with-values"),
        pytest.param({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]},
                     '"Gt" is not a valid label selector operator', id="unknown-operator"),
        pytest.param({"matchLabels": {"a b": "c"}}, f'key: Invalid value: "a b": {NAME_PART_MSG}', id="bad-key"),
        pytest.param({"matchLabels": {"a b": "c d"}},
                     f'[key: Invalid value: "a b": {NAME_PART_MSG}, '
                     f'values[0][a b]: Invalid value: "c d": {LABEL_VALUE_MSG}]', id="aggregated"),
        pytest.param({"matchLabels": {"a": 1}}, "matchLabels keys and values must be strings", id="non-string"),
        pytest.param(["a"], "label selector must be an object", id="not-an-object"),
    ],
)
def test_label_selector_from_dict_errors(sel: Any, message: str) -> None:
    with pytest.raises(SelectorError) as info:
        label_selector_from_dict(sel)
    assert str(info.value) == message
    assert info.value.reason == message


def test_selector_objects_read_twice_give_the_same_answer() -> None:
    """Selectors of identical content are answered from a cache (one shared object); the
    answer is always what parsing would give: errors again on every call, and content that
    only looks alike (values as a string, not a list) parsed on its own."""
    sel = {"matchLabels": {"app": "web"},
           "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]}
    first = label_selector_from_dict(sel)
    again = label_selector_from_dict({"matchExpressions": [
        {"key": "tier", "operator": "In", "values": ["a", "b"]}], "matchLabels": {"app": "web"}})
    assert again is first and str(first) == "app=web,tier in (a,b)"
    bad = {"matchExpressions": [{"key": "a", "operator": "In", "values": []}]}
    for _ in range(2):
        with pytest.raises(SelectorError, match="values set can't be empty"):
            label_selector_from_dict(bad)
    label_selector_from_dict({"matchExpressions": [
        {"key": "a", "operator": "In", "values": ["x", "y"]}]})
    with pytest.raises(SelectorError, match="must be strings"):
        label_selector_from_dict({"matchExpressions": [
            {"key": "a", "operator": "In", "values": "xy"}]})
    with pytest.raises(SelectorError, match="must be strings"):
        label_selector_from_dict({"matchExpressions": [
            {"key": "a", "operator": "In", "values": [["x"]]}]})


@pytest.mark.parametrize(
    ("labels", "candidate", "expected"),
    [
        pytest.param(None, {"a": "b"}, True, id="none-is-everything"),
        pytest.param({}, {}, True, id="empty-is-everything"),
        pytest.param({"app": "web"}, {"app": "web"}, True, id="match"),
        pytest.param({"app": "web"}, {}, False, id="missing"),
    ],
)
def test_label_selector_from_set(labels: dict[str, str] | None, candidate: dict[str, str], expected: bool) -> None:
    assert label_selector_from_set(labels).matches(candidate) is expected


# ---------------------------------------------------------------- field selectors


@pytest.mark.parametrize(
    ("text", "requirements", "canonical"),
    [
        pytest.param("", (), "", id="empty"),
        pytest.param("spec.nodeName=", (("spec.nodeName", "=", ""),), "spec.nodeName=", id="empty-value"),
        pytest.param("metadata.name==p1", (("metadata.name", "=", "p1"),), "metadata.name=p1", id="double-equals"),
        pytest.param("status.phase!=Failed,spec.nodeName=n1",
                     (("spec.nodeName", "=", "n1"), ("status.phase", "!=", "Failed")),
                     "spec.nodeName=n1,status.phase!=Failed", id="sorted-terms"),
        pytest.param("a=b\\,c", (("a", "=", "b,c"),), "a=b\\,c", id="escaped-comma"),
        pytest.param("a=x\\=y\\\\z", (("a", "=", "x=y\\z"),), "a=x\\=y\\\\z", id="escaped-equals-and-backslash"),
        pytest.param("a=b,,c=d", (("a", "=", "b"), ("c", "=", "d")), "a=b,c=d", id="empty-term-skipped"),
        pytest.param("a!==b", (("a", "!=", "=b"),), None, id="first-operator-wins"),
    ],
)
def test_parse_field_selector(text: str, requirements: tuple[Any, ...], canonical: str | None) -> None:
    if canonical is None:
        with pytest.raises(SelectorError, match="unescaped character in value: 61"):
            parse_field_selector(text)
        return
    sel = parse_field_selector(text)
    assert sel.requirements == requirements
    assert str(sel) == canonical
    assert sel.fields == {f for f, _, _ in requirements}
    assert sel.empty == (not requirements)
    assert parse_field_selector(canonical) == sel


@pytest.mark.parametrize(
    ("text", "reason", "message"),
    [
        pytest.param("a", "invalid selector: 'a'; can't understand 'a'", None, id="no-operator"),
        pytest.param("a=b,c", "invalid selector: 'a=b,c'; can't understand 'c'", None, id="bad-second-term"),
        pytest.param("a=b=c", "invalid field selector: unescaped character in value: 61",
                     'invalid field selector: unescaped character in value: 61 (in field selector "a=b=c")',
                     id="unescaped-equals"),
        pytest.param("a=b\\x", "invalid field selector: invalid escape sequence: \\x",
                     'invalid field selector: invalid escape sequence: \\x (in field selector "a=b\\x")',
                     id="bad-escape"),
        pytest.param("a=b\\", "invalid field selector: invalid escape sequence: \\",
                     'invalid field selector: invalid escape sequence: \\ (in field selector "a=b\\")',
                     id="trailing-backslash"),
    ],
)
def test_field_selector_errors(text: str, reason: str, message: str | None) -> None:
    with pytest.raises(SelectorError) as info:
        parse_field_selector(text)
    assert info.value.reason == reason
    assert str(info.value) == (message or reason)
    assert info.value.selector == text


@pytest.mark.parametrize(
    ("text", "fields", "expected"),
    [
        pytest.param("", {}, True, id="empty"),
        pytest.param("spec.nodeName=", {"spec.nodeName": ""}, True, id="unassigned"),
        pytest.param("spec.nodeName=", {"spec.nodeName": "n1"}, False, id="assigned"),
        pytest.param("spec.nodeName=", {}, True, id="missing-counts-as-empty"),
        pytest.param("spec.nodeName!=", {"spec.nodeName": "n1"}, True, id="not-unassigned"),
        pytest.param("status.phase!=Failed", {"status.phase": "Running"}, True, id="not-equals"),
        pytest.param("status.phase!=Failed", {"status.phase": "Failed"}, False, id="not-equals-same"),
        pytest.param("a=1,b!=2", {"a": "1", "b": "3"}, True, id="conjunction"),
        pytest.param("a=1,b!=2", {"a": "1", "b": "2"}, False, id="conjunction-fails"),
    ],
)
def test_field_selector_matches(text: str, fields: dict[str, str], expected: bool) -> None:
    assert parse_field_selector(text).matches(fields) is expected


def test_field_selector_exact_match_and_caching() -> None:
    sel = parse_field_selector("spec.nodeName=n1,status.phase!=Failed")
    assert sel.requires_exact_match("spec.nodeName") == "n1"
    assert sel.requires_exact_match("status.phase") is None
    assert parse_field_selector("spec.nodeName=n1,status.phase!=Failed") is sel
    assert isinstance(FieldSelector(), FieldSelector) and FieldSelector().empty


# ---------------------------------------------------------------- per-resource fields

POD = {
    "metadata": {"name": "web-1", "namespace": "default"},
    "spec": {"nodeName": "n1", "schedulerName": "pyscheduler", "serviceAccountName": "sa", "hostNetwork": True,
             "restartPolicy": "Always"},
    "status": {"phase": "Running", "podIP": "10.0.0.9", "podIPs": [{"ip": "10.0.0.1"}, {"ip": "fd00::1"}],
               "nominatedNodeName": "n2"},
}


@pytest.mark.parametrize(
    ("plural", "group", "obj", "expected"),
    [
        pytest.param("pods", "", POD, {
            "metadata.name": "web-1", "metadata.namespace": "default", "spec.nodeName": "n1",
            "spec.restartPolicy": "Always", "spec.schedulerName": "pyscheduler", "spec.serviceAccountName": "sa",
            "spec.hostNetwork": "true", "status.phase": "Running", "status.podIP": "10.0.0.1",
            "status.nominatedNodeName": "n2"}, id="pod"),
        pytest.param("pods", "", {"metadata": {"name": "p"}}, {
            "metadata.name": "p", "metadata.namespace": "", "spec.nodeName": "", "spec.restartPolicy": "",
            "spec.schedulerName": "", "spec.serviceAccountName": "", "spec.hostNetwork": "false",
            "status.phase": "", "status.podIP": "", "status.nominatedNodeName": ""}, id="bare-pod"),
        pytest.param("pods", "", {"status": {"podIP": "10.1.1.1"}}, None, id="pod-ip-fallback"),
        pytest.param("nodes", "", {"metadata": {"name": "n1"}, "spec": {"unschedulable": True}},
                     {"metadata.name": "n1", "metadata.namespace": "", "spec.unschedulable": "true"}, id="node"),
        pytest.param("nodes", "", {"metadata": {"name": "n1"}},
                     {"metadata.name": "n1", "metadata.namespace": "", "spec.unschedulable": "false"},
                     id="schedulable-node"),
        pytest.param("events", "", {
            "metadata": {"name": "e", "namespace": "d"},
            "involvedObject": {"kind": "Pod", "namespace": "d", "name": "p", "uid": "u", "apiVersion": "v1",
                               "resourceVersion": "7", "fieldPath": "spec"},
            "reason": "Scheduled", "type": "Normal", "source": {"component": "pyscheduler"},
            "reportingComponent": "pyscheduler-rc"}, {
            "metadata.name": "e", "metadata.namespace": "d", "involvedObject.kind": "Pod",
            "involvedObject.namespace": "d", "involvedObject.name": "p", "involvedObject.uid": "u",
            "involvedObject.apiVersion": "v1", "involvedObject.resourceVersion": "7",
            "involvedObject.fieldPath": "spec", "reason": "Scheduled", "type": "Normal",
            "reportingComponent": "pyscheduler-rc", "source": "pyscheduler"}, id="core-event"),
        pytest.param("events", "events.k8s.io", {
            "metadata": {"name": "e", "namespace": "d"},
            "regarding": {"kind": "Pod", "name": "p", "namespace": "d", "uid": "u"},
            "reason": "Scheduled", "type": "Normal", "reportingController": "pyscheduler"}, {
            "metadata.name": "e", "metadata.namespace": "d", "regarding.kind": "Pod", "regarding.namespace": "d",
            "regarding.name": "p", "regarding.uid": "u", "regarding.apiVersion": "", "regarding.resourceVersion": "",
            "regarding.fieldPath": "", "reason": "Scheduled", "type": "Normal", "reportingController": "pyscheduler",
            "source": "pyscheduler"}, id="events-k8s-io-event"),
        pytest.param("namespaces", "", {"metadata": {"name": "ns"}, "status": {"phase": "Active"}},
                     {"metadata.name": "ns", "metadata.namespace": "", "status.phase": "Active"}, id="namespace"),
        pytest.param("secrets", "", {"metadata": {"name": "s", "namespace": "d"}, "type": "Opaque"},
                     {"metadata.name": "s", "metadata.namespace": "d", "type": "Opaque"}, id="secret"),
        pytest.param("replicasets", "apps", {"metadata": {"name": "r", "namespace": "d"}, "status": {"replicas": 3}},
                     {"metadata.name": "r", "metadata.namespace": "d", "status.replicas": "3"}, id="replicaset"),
        pytest.param("replicasets", "apps", {"metadata": {"name": "r", "namespace": "d"}},
                     {"metadata.name": "r", "metadata.namespace": "d", "status.replicas": "0"},
                     id="replicaset-without-status"),
        pytest.param("configmaps", "", {"metadata": {"name": "c", "namespace": "d"}, "data": {"a": "b"}},
                     {"metadata.name": "c", "metadata.namespace": "d"}, id="generic"),
        pytest.param("widgets", "example.com", {"metadata": "garbage"},
                     {"metadata.name": "", "metadata.namespace": ""}, id="malformed"),
    ],
)
def test_object_fields(plural: str, group: str, obj: dict[str, Any], expected: dict[str, str] | None) -> None:
    fields = object_fields(plural, group, obj)
    if expected is None:
        assert fields["status.podIP"] == "10.1.1.1"
        return
    assert fields == expected
    assert set(fields) <= supported_fields(plural, group) | {"metadata.namespace"}


def test_unassigned_pods_selector_end_to_end() -> None:
    sel = check_field_selector(parse_field_selector("spec.nodeName=,status.phase!=Failed"), "pods", "")
    assert sel.matches(object_fields("pods", "", {"metadata": {"name": "a"}, "status": {"phase": "Pending"}}))
    assert not sel.matches(object_fields("pods", "", POD))


@pytest.mark.parametrize(
    ("plural", "group", "text", "result", "error"),
    [
        pytest.param("pods", "", "spec.nodeName=n1,metadata.namespace=d", "metadata.namespace=d,spec.nodeName=n1",
                     None, id="pod-fields"),
        pytest.param("pods", "", "spec.host=n1", "spec.nodeName=n1", None, id="legacy-spec-host"),
        pytest.param("pods", "", "foo=bar", None, "field label not supported: foo", id="pod-unsupported"),
        pytest.param("nodes", "", "metadata.namespace=x", None, "field label not supported: metadata.namespace",
                     id="node-has-no-namespace"),
        pytest.param("nodes", "", "spec.unschedulable=false", "spec.unschedulable=false", None, id="node-field"),
        pytest.param("events", "events.k8s.io", "regarding.name=p,reportingController=x",
                     "regarding.name=p,reportingController=x", None, id="events-k8s-io"),
        pytest.param("configmaps", "", "data.a=b", None,
                     '"data.a" is not a known field selector: only "metadata.name", "metadata.namespace"',
                     id="builtin-default-message"),
        pytest.param("widgets", "example.com", "spec.size=1", None, "field label not supported: spec.size",
                     id="custom-resource"),
        pytest.param("configmaps", "", "", "", None, id="empty"),
    ],
)
def test_check_field_selector(plural: str, group: str, text: str, result: str | None, error: str | None) -> None:
    sel = parse_field_selector(text)
    if error is not None:
        with pytest.raises(SelectorError) as info:
            check_field_selector(sel, plural, group)
        assert str(info.value) == info.value.reason == error
        return
    assert str(check_field_selector(sel, plural, group)) == result


def test_supported_fields() -> None:
    assert supported_fields("configmaps", "") == {"metadata.name", "metadata.namespace"}
    assert "spec.nodeName" in supported_fields("pods", "")
    assert supported_fields("nodes", "") == {"metadata.name", "spec.unschedulable"}
    assert supported_fields("namespaces", "") == {"metadata.name", "status.phase"}
    assert "involvedObject.name" in supported_fields("events", "")
    assert "regarding.kind" in supported_fields("events", "events.k8s.io")

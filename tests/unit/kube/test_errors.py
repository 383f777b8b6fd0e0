"""Error classification, backoff, token bucket and small helpers of pyscheduler.kube."""

from __future__ import annotations

import datetime as dt
import random
from typing import Any

import pytest

from pyscheduler.kube import errors
from pyscheduler.api.times import micro_time
from pyscheduler.kube.events import object_reference
from pyscheduler.kube.informer import object_key
from pyscheduler.pacing import Backoff, TokenBucket


def status(code: int, reason: str, **details: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                            "code": code, "reason": reason, "message": f"{reason} happened"}
    if details:
        body["details"] = details
    return body


@pytest.mark.parametrize(("code", "reason", "cls", "retryable"), [
    pytest.param(400, "BadRequest", errors.BadRequestError, False, id="400 bad request"),
    pytest.param(401, "Unauthorized", errors.UnauthorizedError, False, id="401"),
    pytest.param(403, "Forbidden", errors.ForbiddenError, False, id="403"),
    pytest.param(404, "NotFound", errors.NotFoundError, False, id="404"),
    pytest.param(409, "Conflict", errors.ConflictError, False, id="409 conflict"),
    pytest.param(409, "AlreadyExists", errors.AlreadyExistsError, False, id="409 exists"),
    pytest.param(410, "Expired", errors.GoneError, False, id="410 expired"),
    pytest.param(410, "Gone", errors.GoneError, False, id="410 gone"),
    pytest.param(422, "Invalid", errors.InvalidError, False, id="422"),
    pytest.param(429, "TooManyRequests", errors.TooManyRequestsError, True, id="429"),
    pytest.param(500, "InternalError", errors.ServerError, True, id="500"),
    pytest.param(501, "NotImplemented", errors.ServerError, False, id="501 is final"),
    pytest.param(504, "Timeout", errors.ServerError, True, id="504"),
    pytest.param(418, "", errors.ApiStatusError, False, id="unknown code"),
])
def test_status_classification(code: int, reason: str, cls: type[errors.ApiStatusError],
                               retryable: bool) -> None:
    exc = errors.api_status_error(code, status(code, reason), method="GET", path="/x")
    assert type(exc) is cls
    assert (exc.code, exc.reason, exc.message) == (code, reason, f"{reason} happened")
    assert errors.is_retryable(exc) is retryable
    assert "GET /x" in str(exc)


def test_retry_after_from_details_or_header() -> None:
    from_details = errors.api_status_error(429, status(429, "TooManyRequests",
                                                      retryAfterSeconds=3))
    assert from_details.retry_after == 3.0
    from_header = errors.api_status_error(429, None, retry_after_header="2",
                                          http_reason="Too Many Requests")
    assert from_header.retry_after == 2.0 and from_header.message == "Too Many Requests"
    assert errors.api_status_error(503, {}, retry_after_header="soon").retry_after is None


def test_invalid_causes_and_non_status_bodies() -> None:
    exc = errors.api_status_error(422, status(422, "Invalid", causes=[
        {"reason": "FieldValueInvalid", "field": "metadata.name"}]))
    assert isinstance(exc, errors.InvalidError)
    assert exc.causes == [{"reason": "FieldValueInvalid", "field": "metadata.name"}]
    odd = errors.api_status_error(502, ["not", "a", "status"], http_reason="Bad Gateway")
    assert isinstance(odd, errors.ServerError) and odd.body == {} and odd.reason == ""


def test_transport_errors_are_retryable_others_not() -> None:
    assert errors.is_retryable(errors.TransportError("GET", "https://x", "reset"))
    assert not errors.is_retryable(errors.DecodeError("GET", "https://x", "bad"))
    assert not errors.is_retryable(ValueError("x"))


def test_backoff_doubles_with_jitter_and_resets() -> None:
    backoff = Backoff(initial=0.2, maximum=30.0, rng=random.Random(1))
    nominal = [0.2 * 2 ** i for i in range(10)]
    for n in nominal:
        delay = backoff.next()
        assert min(n, 30.0) * 0.5 <= delay <= min(n * 1.5, 30.0)
    assert backoff.next() <= 30.0
    backoff.reset()
    assert backoff.next() <= 0.3
    with pytest.raises(ValueError):
        Backoff(initial=0)


def test_token_bucket() -> None:
    now = [0.0]
    bucket = TokenBucket(rate=25, burst=100, clock=lambda: now[0])
    assert sum(bucket.try_take() for _ in range(150)) == 100
    now[0] += 1.0
    assert sum(bucket.try_take() for _ in range(150)) == 25
    now[0] += 100.0
    assert sum(bucket.try_take() for _ in range(150)) == 100  # never more than the burst
    assert bucket.wait_time() == pytest.approx(1 / 25)  # empty: the next token in 40 ms
    now[0] += 0.02
    assert bucket.wait_time() == pytest.approx(0.02) and not bucket.try_take()
    now[0] += 0.0201
    assert bucket.wait_time() == 0 and bucket.try_take()


def test_object_key_and_reference() -> None:
    pod = {"kind": "Pod", "apiVersion": "v1",
           "metadata": {"name": "p", "namespace": "ns", "uid": "u", "resourceVersion": "7"}}
    assert object_key(pod) == "ns/p"
    assert object_key({"metadata": {"name": "node-0"}}) == "node-0"
    with pytest.raises(ValueError):
        object_key({"metadata": {}})
    assert object_reference(pod) == {"apiVersion": "v1", "kind": "Pod", "namespace": "ns",
                                     "name": "p", "uid": "u", "resourceVersion": "7"}
    ref = {"kind": "Node", "name": "n", "uid": "x", "extra": 1}
    assert object_reference(ref) == {"kind": "Node", "name": "n", "uid": "x"}


def test_micro_time() -> None:
    moment = dt.datetime(2026, 1, 2, 3, 4, 5, 6789, tzinfo=dt.timezone.utc)
    assert micro_time(moment) == "2026-01-02T03:04:05.006789Z"
    local = moment.astimezone(dt.timezone(dt.timedelta(hours=2)))
    assert micro_time(local) == "2026-01-02T03:04:05.006789Z"

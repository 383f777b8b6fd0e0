"""Errors raised by :mod:`pyscheduler.kube`, carrying their data as attributes.

Two kinds of failure reach a caller:

* :class:`ApiStatusError` — the API server answered, with a non-2xx code and (normally) a
  ``metav1.Status`` body. The subclass is chosen from the code and ``reason`` the way
  apimachinery's ``errors.IsNotFound``/``IsConflict``/``IsAlreadyExists``/... helpers classify a
  Status, so callers write ``except NotFoundError`` instead of comparing numbers. Note that 409
  means two different things: :class:`AlreadyExistsError` (a create found the name taken) and
  :class:`ConflictError` (a stale ``resourceVersion`` or a failed precondition, e.g. binding a
  pod that is already bound); only the ``reason`` tells them apart.
* :class:`TransportError` — no usable answer: connection refused or reset, TLS failure, timeout,
  a stream cut mid-body. Whether the server acted on the request is unknown.

:class:`DecodeError` covers a 2xx answer (or a watch line) that is not the JSON object promised.

:func:`is_retryable` says whether trying the *same* request again later may succeed: transport
failures, 429 and 5xx (except 501) are; a 409 Conflict is not — the caller must re-read first.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "AlreadyExistsError",
    "ApiStatusError",
    "BadRequestError",
    "ConfigError",
    "ConflictError",
    "DecodeError",
    "ForbiddenError",
    "GoneError",
    "InvalidError",
    "KubeError",
    "NotFoundError",
    "ServerError",
    "TooManyRequestsError",
    "TransportError",
    "UnauthorizedError",
    "api_status_error",
    "is_retryable",
]


class KubeError(Exception):
    """Base class of every error raised by :mod:`pyscheduler.kube`."""


class ConfigError(KubeError):
    """No usable connection configuration (no in-cluster service account, no kubeconfig, or a
    kubeconfig that cannot be loaded); the message says what was tried."""


class TransportError(KubeError):
    """The request got no usable answer (connection failure, TLS failure, timeout, cut stream).

    ``method`` and ``url`` name the request; ``cause`` describes the low-level failure.
    """

    def __init__(self, method: str, url: str, cause: str) -> None:
        super().__init__(f"{method} {url}: {cause}")
        self.method = method
        self.url = url
        self.cause = cause


class DecodeError(KubeError):
    """A successful answer (or one watch line) that is not a JSON object.

    ``data`` holds the start of the offending bytes (at most 512) for the log.
    """

    def __init__(self, method: str, url: str, problem: str, data: bytes = b"") -> None:
        super().__init__(f"{method} {url}: {problem}")
        self.method = method
        self.url = url
        self.problem = problem
        self.data = data[:512]


class ApiStatusError(KubeError):
    """The API server refused the request.

    Attributes mirror ``metav1.Status``: ``code`` (HTTP status), ``reason`` (``NotFound``,
    ``Conflict``, ...; ``""`` when the body was no Status), ``message``, ``details`` (the Status
    ``details`` mapping, possibly empty) and ``body`` (the whole decoded body, ``{}`` if it was not
    JSON). ``retry_after`` is the delay in seconds the server suggested (``Retry-After`` header or
    ``details.retryAfterSeconds``), else ``None``.
    """

    def __init__(self, code: int, reason: str, message: str, body: dict[str, Any] | None = None,
                 *, retry_after: float | None = None, method: str = "", path: str = "") -> None:
        where = f"{method} {path}: " if method or path else ""
        super().__init__(f"{where}{code} {reason or 'Error'}: {message}")
        self.code = code
        self.reason = reason
        self.message = message
        self.body: dict[str, Any] = body or {}
        details = self.body.get("details")
        self.details: dict[str, Any] = details if isinstance(details, dict) else {}
        self.retry_after = retry_after
        self.method = method
        self.path = path


class BadRequestError(ApiStatusError):
    """400: the request itself is wrong (bad selector, bad patch, undecodable body)."""


class UnauthorizedError(ApiStatusError):
    """401: the credentials were missing, wrong or expired."""


class ForbiddenError(ApiStatusError):
    """403: authenticated but not allowed (RBAC, or a namespace being terminated)."""


class NotFoundError(ApiStatusError):
    """404: the object (or the resource type) does not exist."""


class ConflictError(ApiStatusError):
    """409 ``Conflict``: stale ``resourceVersion`` or a failed precondition. Re-read, then retry."""


class AlreadyExistsError(ApiStatusError):
    """409 ``AlreadyExists``: a create found the name taken."""


class GoneError(ApiStatusError):
    """410 ``Gone``/``Expired``: a watch or continue token is older than the server's history.

    The only recovery is a fresh list (an informer relists).
    """


class InvalidError(ApiStatusError):
    """422 ``Invalid``: the object failed validation; ``causes`` lists the field errors."""

    @property
    def causes(self) -> list[dict[str, Any]]:
        causes = self.details.get("causes")
        return [c for c in causes if isinstance(c, dict)] if isinstance(causes, list) else []


class TooManyRequestsError(ApiStatusError):
    """429: throttled (API priority and fairness, or an eviction blocked); see ``retry_after``."""


class ServerError(ApiStatusError):
    """5xx: the server failed (internal error, timeout, unavailable)."""


_BY_CODE: dict[int, type[ApiStatusError]] = {
    400: BadRequestError,
    401: UnauthorizedError,
    403: ForbiddenError,
    404: NotFoundError,
    410: GoneError,
    422: InvalidError,
    429: TooManyRequestsError,
}


def _retry_after(details: Any, header: str | None) -> float | None:
    if isinstance(details, dict):
        seconds = details.get("retryAfterSeconds")
        if isinstance(seconds, (int, float)) and not isinstance(seconds, bool) and seconds > 0:
            return float(seconds)
    if header:
        try:
            seconds = float(header.strip())
        except ValueError:
            return None  # an HTTP date: kube-apiserver never sends one
        if seconds >= 0:
            return seconds
    return None


def api_status_error(code: int, body: Any, *, retry_after_header: str | None = None,
                     http_reason: str = "", method: str = "", path: str = "") -> ApiStatusError:
    """Build the right :class:`ApiStatusError` subclass from an answer's code and body.

    ``body`` is the decoded answer; when it is a ``metav1.Status`` its ``reason``, ``message`` and
    ``details`` are used (and its ``code`` is trusted over the HTTP code only if the HTTP code is
    missing). Otherwise the HTTP reason phrase stands in, as client-go does for non-Status bodies.
    """
    status = body if isinstance(body, dict) else {}
    reason = status.get("reason") if isinstance(status.get("reason"), str) else ""
    message = status.get("message") if isinstance(status.get("message"), str) else ""
    if not message:
        message = http_reason or "the server returned an error without a message"
    retry_after = _retry_after(status.get("details"), retry_after_header)
    cls: type[ApiStatusError]
    if code == 409:
        cls = AlreadyExistsError if reason == "AlreadyExists" else ConflictError
    elif code >= 500:
        cls = ServerError
    else:
        cls = _BY_CODE.get(code, ApiStatusError)
    return cls(code, str(reason or ""), str(message), status, retry_after=retry_after,
               method=method, path=path)


def is_retryable(exc: BaseException) -> bool:
    """Whether repeating the same request later may succeed without reading anything first.

    True for transport failures, 429, 5xx other than 501 Not Implemented, and any refusal that
    carries a ``retry_after`` hint. False for everything else, notably 409 Conflict (re-read the
    object) and 410 Gone (relist).
    """
    if isinstance(exc, TransportError):
        return True
    if isinstance(exc, ApiStatusError):
        if isinstance(exc, (TooManyRequestsError,)):
            return True
        if isinstance(exc, ServerError):
            return exc.code != 501
        return exc.retry_after is not None and not isinstance(exc, (ConflictError, GoneError))
    return False

"""API errors of the embedded API server, rendered as ``metav1.Status`` objects.

Every failure a client can see is an :class:`ApiError` carrying the HTTP code, the ``reason``
and the message kube-apiserver would use for the same situation, so that client libraries
(the official ``kubernetes`` client, ``kubectl``) react to it exactly as they would to a real
cluster: ``reason`` is what ``errors.IsNotFound``/``IsConflict`` and friends look at.

The constructors below mirror apimachinery's ``k8s.io/apimachinery/pkg/api/errors`` helpers
(``NewNotFound``, ``NewAlreadyExists``, ``NewConflict``, ``NewInvalid``, ...), including their
message formats, e.g. ``pods "web-0" not found`` and ``deployments.apps "web" not found``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from pyscheduler.api.validation import FieldError, invalid_message, status_causes

__all__ = [
    "ApiError",
    "already_exists",
    "bad_request",
    "conflict",
    "expired",
    "forbidden",
    "gone",
    "internal_error",
    "invalid",
    "method_not_allowed",
    "not_found",
    "not_found_resource",
    "qualified_resource",
    "request_entity_too_large",
    "status_success",
    "too_many_requests",
    "too_large_resource_version",
    "unauthorized",
    "unsupported_media_type",
]


class ApiError(Exception):
    """A failure reported to the client as a ``metav1.Status`` with ``status: Failure``."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        details: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.headers = headers or {}

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details is not None:
            body["details"] = self.details
        return body


def qualified_resource(group: str, plural: str) -> str:
    """``pods`` for the core group, ``deployments.apps`` otherwise (GroupResource.String())."""
    return f"{plural}.{group}" if group else plural


def _details(group: str, plural: str, name: str) -> dict[str, Any]:
    details: dict[str, Any] = {"name": name, "kind": plural}
    if group:
        details["group"] = group
    return details


def not_found(group: str, plural: str, name: str) -> ApiError:
    return ApiError(
        404,
        "NotFound",
        f'{qualified_resource(group, plural)} "{name}" not found',
        _details(group, plural, name),
    )


def not_found_resource() -> ApiError:
    """The answer for a path that names no resource this server serves."""
    return ApiError(404, "NotFound", "the server could not find the requested resource", {})


def already_exists(group: str, plural: str, name: str) -> ApiError:
    return ApiError(
        409,
        "AlreadyExists",
        f'{qualified_resource(group, plural)} "{name}" already exists',
        _details(group, plural, name),
    )


def conflict(group: str, plural: str, name: str, why: str) -> ApiError:
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {qualified_resource(group, plural)} "{name}": {why}',
        _details(group, plural, name),
    )


STALE_OBJECT = (
    "the object has been modified; please apply your changes to the latest version and try again"
)


def invalid(group: str, kind: str, name: str, errors: Sequence[FieldError]) -> ApiError:
    """422 Invalid, message ``Kind "name" is invalid: [err1, err2]`` as apimachinery renders it."""
    details: dict[str, Any] = {"name": name, "kind": kind, "causes": status_causes(errors)}
    if group:
        details["group"] = group
    return ApiError(422, "Invalid", invalid_message(kind, group, name, errors), details)


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def forbidden(group: str, plural: str, name: str, why: str) -> ApiError:
    return ApiError(
        403,
        "Forbidden",
        f'{qualified_resource(group, plural)} "{name}" is forbidden: {why}',
        _details(group, plural, name),
    )


def method_not_allowed() -> ApiError:
    return ApiError(
        405, "MethodNotAllowed", "the server does not allow this method on the requested resource"
    )


def unsupported_media_type(content_type: str) -> ApiError:
    return ApiError(
        415, "UnsupportedMediaType", f"the body of the request was in an unknown format: {content_type}"
    )


def request_entity_too_large(limit: int) -> ApiError:
    return ApiError(413, "RequestEntityTooLarge", f"Request entity too large: limit is {limit}")


def gone(message: str) -> ApiError:
    return ApiError(410, "Gone", message)


def expired(message: str) -> ApiError:
    return ApiError(410, "Expired", message)


def too_many_requests(message: str, causes: Iterable[dict[str, Any]] = ()) -> ApiError:
    details: dict[str, Any] = {"causes": list(causes)} if causes else {}
    return ApiError(429, "TooManyRequests", message, details or None)


def too_large_resource_version(wanted: int, current: int) -> ApiError:
    return ApiError(
        504,
        "Timeout",
        f"Timeout: Too large resource version: {wanted}, current: {current}",
        {"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
         "retryAfterSeconds": 1},
    )


def unauthorized() -> ApiError:
    return ApiError(401, "Unauthorized", "Unauthorized")


ANONYMOUS = "system:anonymous"


def anonymous_forbidden(method: str, path: str, query: dict[str, str]) -> ApiError:
    """What kube-apiserver answers a request that carries no credentials: anonymous auth lets
    it in as ``system:anonymous`` and RBAC, which grants that user only the health and version
    paths, refuses it (a 403 naming the verb and resource, as kube's request info reads them)."""
    parts = [p for p in path.split("/") if p]
    if parts[:1] == ["api"] and len(parts) >= 3:
        group, rest = "", parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 4:
        group, rest = parts[1], parts[3:]
    else:
        verb = {"GET": "get", "HEAD": "get", "POST": "post", "PUT": "put", "PATCH": "patch",
                "DELETE": "delete"}.get(method, method.lower())
        return ApiError(403, "Forbidden",
                        f'forbidden: User "{ANONYMOUS}" cannot {verb} path "{path}"', {})
    namespace = ""
    if rest[0] == "namespaces" and len(rest) > 1:
        # kube's request info: /namespaces/x is namespace x in namespace x, and so are its
        # status and finalize subresources; anything else after it is a resource in x.
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in ("status", "finalize"):
            rest = rest[2:]
    resource = rest[0] if rest else ""
    name = rest[1] if len(rest) > 1 else ""
    sub = "/".join(rest[2:3])
    if method in ("GET", "HEAD"):
        verb = "get" if name else ("watch" if query.get("watch") in ("1", "true") else "list")
    else:
        verb = {"POST": "create", "PUT": "update", "PATCH": "patch",
                "DELETE": "delete" if name else "deletecollection"}.get(method, method.lower())
    what = f"{resource}/{sub}" if sub else resource
    scope = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
    why = (f'User "{ANONYMOUS}" cannot {verb} resource "{what}" in API group "{group}" '
           f"{scope}")
    subject = f'{qualified_resource(group, resource)} "{name}"' if name else \
        qualified_resource(group, resource)
    return ApiError(403, "Forbidden", f"{subject} is forbidden: {why}",
                    _details(group, resource, name))


def internal_error(message: str) -> ApiError:
    return ApiError(
        500, "InternalError", f"Internal error occurred: {message}",
        {"causes": [{"message": message}]},
    )


def status_success(code: int = 200, details: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "code": code,
    }
    if details is not None:
        body["details"] = details
    return body

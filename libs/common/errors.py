"""One error tree with Kubernetes status codes and reasons.

Every layer raises these; HTTP maps them to `metav1.Status` in one middleware, the NATS
API replies with a `Status` payload and the client re-raises it with `from_status`.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

import msgspec


class StatusCause(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One cause of an error, as in `metav1.StatusCause` (`field` is the field path)."""

    reason: str = ""
    message: str = ""
    field: str = ""


class StatusDetails(msgspec.Struct, kw_only=True, omit_defaults=True):
    name: str = ""
    group: str = ""
    kind: str = ""
    uid: str = ""
    causes: list[StatusCause] = []
    retryAfterSeconds: int = 0  # noqa: N815 - Kubernetes JSON name


class StatusMeta(msgspec.Struct, kw_only=True, omit_defaults=True):
    """A Status' `metav1.ListMeta`: only `continue` is ever set, on a 410 for an expired
    continue token, as the token that lists the rest at the latest resourceVersion."""

    continue_: str = msgspec.field(default="", name="continue")


class Status(msgspec.Struct, kw_only=True, omit_defaults=True):
    """`metav1.Status`, the body of every error answer (HTTP and NATS)."""

    kind: str = "Status"
    apiVersion: str = "v1"  # noqa: N815
    metadata: StatusMeta | None = None
    status: str = "Failure"
    message: str = ""
    reason: str = ""
    details: StatusDetails | None = None
    code: int = 500


class ApiError(Exception):
    """Base of all API errors; `code` and `reason` are Kubernetes' (`metav1.StatusReason`)."""

    code: ClassVar[int] = 500
    reason: ClassVar[str] = "InternalError"

    def __init__(
        self,
        message: str,
        *,
        kind: str = "",
        name: str = "",
        group: str = "",
        causes: list[StatusCause] | None = None,
        retry_after_seconds: int = 0,
        continue_token: str = "",
    ) -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind
        self.name = name
        self.group = group
        self.causes = causes or []
        # `details.retryAfterSeconds` (also the HTTP `Retry-After` header) and
        # `metadata.continue` of the Status.
        self.retry_after_seconds = retry_after_seconds
        self.continue_token = continue_token

    def to_status(self) -> Status:
        details = None
        if self.kind or self.name or self.causes or self.retry_after_seconds:
            details = StatusDetails(
                name=self.name,
                group=self.group,
                kind=self.kind,
                causes=list(self.causes),
                retryAfterSeconds=self.retry_after_seconds,
            )
        metadata = StatusMeta(continue_=self.continue_token) if self.continue_token else None
        return Status(
            metadata=metadata,
            message=self.message,
            reason=self.reason,
            details=details,
            code=self.code,
        )

    @staticmethod
    def from_status(status: Status) -> ApiError:
        """Re-create the error a `Status` describes (the client side of `to_status`)."""
        cls = _BY_REASON.get(status.reason) or _BY_CODE.get(status.code, InternalError)
        d = status.details or StatusDetails()
        err = cls(
            status.message,
            kind=d.kind,
            name=d.name,
            group=d.group,
            causes=d.causes,
            retry_after_seconds=d.retryAfterSeconds,
            continue_token=status.metadata.continue_ if status.metadata else "",
        )
        return err

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r})"


class BadRequest(ApiError):
    code = 400
    reason = "BadRequest"


class Unauthorized(ApiError):
    code = 401
    reason = "Unauthorized"


class Forbidden(ApiError):
    code = 403
    reason = "Forbidden"


class NotFound(ApiError):
    code = 404
    reason = "NotFound"


class MethodNotAllowed(ApiError):
    code = 405
    reason = "MethodNotAllowed"


class AlreadyExists(ApiError):
    code = 409
    reason = "AlreadyExists"


class Conflict(ApiError):
    code = 409
    reason = "Conflict"


class Expired(ApiError):
    """The requested resourceVersion is older than the history kept: relist."""

    code = 410
    reason = "Expired"


class Invalid(ApiError):
    """Validation failed; `causes` carry one entry per field path."""

    code = 422
    reason = "Invalid"


class RequestEntityTooLarge(ApiError):
    code = 413
    reason = "RequestEntityTooLarge"


class TooManyRequests(ApiError):
    code = 429
    reason = "TooManyRequests"


class InternalError(ApiError):
    code = 500
    reason = "InternalError"


class ServiceUnavailable(ApiError):
    code = 503
    reason = "ServiceUnavailable"


class Timeout(ApiError):
    code = 504
    reason = "Timeout"


_ALL: list[type[ApiError]] = [
    BadRequest,
    Unauthorized,
    Forbidden,
    NotFound,
    MethodNotAllowed,
    AlreadyExists,
    Conflict,
    Expired,
    Invalid,
    RequestEntityTooLarge,
    TooManyRequests,
    InternalError,
    ServiceUnavailable,
    Timeout,
]
_BY_REASON: dict[str, type[ApiError]] = {c.reason: c for c in _ALL}
_BY_CODE: dict[int, type[ApiError]] = {}
for _c in reversed(_ALL):
    _BY_CODE[_c.code] = _c


def error_for_code(code: int) -> type[ApiError]:
    """The error class for an HTTP status code (used by fault plans and the HTTP client)."""
    return _BY_CODE.get(code, InternalError)


class FieldError(msgspec.Struct, frozen=True):
    """One validation failure: Kubernetes' `field.Error` (type, path, message)."""

    type: str  # e.g. "FieldValueRequired", "FieldValueInvalid"
    field: str  # field path, e.g. "spec.extendedResourceName"
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


def qualified(resource: str, group: str = "") -> str:
    """`<resource>[.<group>]`, how upstream names a resource in its messages
    (`GroupResource.String()`)."""
    return f"{resource}.{group}" if group else resource


def not_found(resource: str, name: str, *, group: str = "") -> NotFound:
    """Upstream `NewNotFound`: `<resource>[.<group>] "<name>" not found`."""
    return NotFound(
        f'{qualified(resource, group)} "{name}" not found', kind=resource, name=name, group=group
    )


def already_exists(resource: str, name: str, *, group: str = "") -> AlreadyExists:
    """Upstream `NewAlreadyExists`: `<resource>[.<group>] "<name>" already exists`."""
    return AlreadyExists(
        f'{qualified(resource, group)} "{name}" already exists',
        kind=resource,
        name=name,
        group=group,
    )


def conflict(resource: str, name: str, why: str, *, group: str = "") -> Conflict:
    """Upstream `NewConflict`: `Operation cannot be fulfilled on <resource>[.<group>]
    "<name>": <why>`."""
    return Conflict(
        f'Operation cannot be fulfilled on {qualified(resource, group)} "{name}": {why}',
        kind=resource,
        name=name,
        group=group,
    )


def precondition_failed(
    field: str, wanted: str, actual: str, resource: str, name: str, *, group: str = ""
) -> Conflict:
    """The 409 of a write whose precondition (`UID`, `ResourceVersion`) the stored object
    does not meet, worded as upstream's storage words it."""
    return Conflict(
        f"Precondition failed: {field} in precondition: {wanted}, {field} in object meta: {actual}",
        kind=resource,
        name=name,
        group=group,
    )


def invalid(
    kind: str,
    name: str,
    errors: list[FieldError],
    *,
    group: str = "",
    keep_empty_name: bool = False,
) -> Invalid:
    """Build the 422 Kubernetes returns for failed validation, message included, as
    upstream's `NewInvalid` writes it: `<kind> "<name>" is invalid: <errors>`, the kind
    with its group outside the core group (`DeviceClass.resource.k8s.io`). A name not yet
    generated shows as `<generated>`; `keep_empty_name`: the name as it is (an options struct's
    or a review's is "")."""
    joined = ", ".join(str(e) for e in errors)
    what = f"{kind}.{group}" if group else kind
    shown = name if keep_empty_name else name or "<generated>"
    return Invalid(
        f'{what} "{shown}" is invalid: {joined}'
        if len(errors) == 1
        else f'{what} "{shown}" is invalid: [{joined}]',
        kind=kind,
        name=name,
        group=group,
        causes=[StatusCause(reason=e.type, message=e.message, field=e.field) for e in errors],
    )


def forbidden(resource: str, name: str, why: str, *, group: str = "") -> Forbidden:
    """The 403 an admission or a storage rule answers (upstream `NewForbidden`):
    `<resource>[.<group>] "<name>" is forbidden: <why>`, without the name when there is
    none yet."""
    what = f'{qualified(resource, group)} "{name}"' if name else qualified(resource, group)
    return Forbidden(f"{what} is forbidden: {why}", kind=resource, name=name, group=group)


def status_payload(err: ApiError) -> dict[str, Any]:
    return msgspec.to_builtins(err.to_status())


# --- Field error constructors ---------------------------------------------------------------
# Messages follow `field.Error.ErrorBody()` so that `str(FieldError)` reads exactly like
# Kubernetes: `spec.x: Invalid value: "v": detail`.


class GoValue(str):
    """A value shown as Go's `%#v` prints it (a list or a struct), not quoted again."""


def _field_value(value: Any) -> str:
    if isinstance(value, GoValue):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # Go's %q for plain text
    if value is None:
        return "null"
    if isinstance(value, bool | dict | list):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return str(value)


def _with_detail(body: str, detail: str) -> str:
    return f"{body}: {detail}" if detail else body


def field_required(field: str, detail: str = "") -> FieldError:
    return FieldError("FieldValueRequired", field, _with_detail("Required value", detail))


def field_invalid(field: str, value: Any, detail: str) -> FieldError:
    body = f"Invalid value: {_field_value(value)}"
    return FieldError("FieldValueInvalid", field, _with_detail(body, detail))


def field_duplicate(field: str, value: Any) -> FieldError:
    return FieldError("FieldValueDuplicate", field, f"Duplicate value: {_field_value(value)}")


def field_not_supported(field: str, value: Any, supported: list[str]) -> FieldError:
    values = ", ".join(json.dumps(s) for s in supported)
    body = f"Unsupported value: {_field_value(value)}: supported values: {values}"
    return FieldError("FieldValueNotSupported", field, body)


def field_not_found(field: str, value: Any, detail: str = "") -> FieldError:
    body = f"Not found: {_field_value(value)}"
    return FieldError("FieldValueNotFound", field, _with_detail(body, detail))


def field_forbidden(field: str, detail: str) -> FieldError:
    return FieldError("FieldValueForbidden", field, _with_detail("Forbidden", detail))


def field_too_long(field: str, max_length: int) -> FieldError:
    body = f"Too long: may not be more than {max_length} bytes"
    return FieldError("FieldValueTooLong", field, body)


def field_too_many(field: str, actual: int, max_items: int) -> FieldError:
    body = f"Too many: {actual}: must have at most {max_items} items"
    return FieldError("FieldValueTooMany", field, body)

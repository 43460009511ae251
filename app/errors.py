"""Domain errors: what services raise when a request cannot be done, each carrying its HTTP
status. app.main renders every one of them the same way (JSON under /api/, an error page
elsewhere); a view that wants another answer (an htmx fragment) catches them itself.

Services know nothing of HTTP beyond this number; they never raise HTTPException.
"""

from __future__ import annotations


class DomainError(Exception):
    """A request the domain refuses; `status` is the HTTP status it is answered with."""

    status = 400
    headers: dict[str, str] = {}

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class NotFound(DomainError):
    """What was asked for does not exist, or this visitor may not see it."""

    status = 404


class LoginRequired(DomainError):
    """Only a signed-in visitor may see this; a browser is sent to the login page."""

    status = 401


class Forbidden(DomainError):
    """This signed-in visitor may not do this."""

    status = 403


class Conflict(DomainError):
    """The request clashes with what is stored (answered already, a name taken)."""

    status = 409


class TooLarge(DomainError):
    """A submission is over its size cap."""

    status = 413


class InvalidInput(DomainError):
    """The request is well formed but its content cannot be used: code that does not compile,
    a knob value the question does not allow, an answer that is no answer."""

    status = 422

    def __init__(self, message: str, *, loc: tuple[str, ...] | None = None) -> None:
        super().__init__(message)
        # Where in the request body the bad value is, for the API's error (["body", *loc]).
        self.loc = loc


class RateLimited(DomainError):
    """Too many requests of this kind from this learner, account or address."""

    status = 429

    def __init__(self, message: str, retry_after_s: int) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s
        self.headers = {"Retry-After": str(retry_after_s)}


class Busy(DomainError):
    """The server is at capacity for this kind of request; the client may retry."""

    status = 503
    headers = {"Retry-After": "1"}

"""Domain errors that services raise and the app maps to HTTP statuses (app.main).

Services know nothing of HTTP; a view that needs a different answer (an htmx
fragment instead of an error page) catches these itself.
"""

from __future__ import annotations


class NotFound(LookupError):
    """What was asked for does not exist, or this visitor may not see it (404)."""


class RateLimited(Exception):
    """Too many requests of this kind from this learner or address (429)."""

    def __init__(self, message: str, retry_after_s: int) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class Busy(Exception):
    """The server is at capacity for this kind of request; the client may retry (503)."""


class TooLarge(ValueError):
    """A submission is over its size cap (413)."""


class InvalidInput(ValueError):
    """The request is well formed but its content cannot be used, e.g. code that does not
    compile (422)."""

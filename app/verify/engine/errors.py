"""Exceptions of the verify engine. A snippet's own failure is a RunResult, never one of these."""

from __future__ import annotations


class EngineFailure(RuntimeError):
    """The infrastructure failed (forkserver broke, ranks could not start): not the snippet's fault."""


class SnippetSyntaxError(ValueError):
    """The snippet does not compile; `line` is 1-based, or None when unknown."""

    def __init__(self, message: str, line: int | None = None, offset: int | None = None) -> None:
        where = f"line {line}: " if line is not None else ""
        super().__init__(f"{where}{message}")
        self.message = message
        self.line = line
        self.offset = offset


class SandboxUnavailable(EngineFailure):
    """The host does not allow the namespaces the sandbox needs; snippets are not run.

    DDPDRILL_SANDBOX=off runs them without the sandbox instead (docs/sandbox.md).
    """

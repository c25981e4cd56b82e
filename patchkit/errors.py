"""One error root; its exit code is part of the public contract (docs/tasks.md).

0 done, 1 refused (drift, wrong commit, modified after apply, locked), 2 invalid input,
130 interrupted (Ctrl-C), 143 terminated (SIGTERM). patchkit.boundary maps them at the one boundary.
"""

EXIT_OK = 0
EXIT_REFUSED = 1
EXIT_INVALID = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT
EXIT_TERMINATED = 143  # 128 + SIGTERM


class PatchkitError(Exception):
    """An expected failure: printed as one clean message, mapped to an exit code."""

    exit_code = EXIT_REFUSED

    def __init__(self, message: str, exit_code: int | None = None):
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code

    @property
    def message(self) -> str:
        return str(self)


class Refused(PatchkitError):
    """The target is not in a state we may touch (drift, lock, modified after apply)."""

    exit_code = EXIT_REFUSED


class InvalidInput(PatchkitError):
    """The series, pin, patch or target spec is malformed; nothing was written."""

    exit_code = EXIT_INVALID


class TransportError(Refused):
    """The target could not be reached or the remote program died; names the host."""


class Terminated(KeyboardInterrupt):
    """SIGTERM turned into an interrupt (patchkit.profile.site.sigterm_interrupts): the cleanup
    Ctrl-C gets runs for a plain ``kill`` too; the boundary maps it to EXIT_TERMINATED."""

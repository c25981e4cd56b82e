"""Transports: "a command that runs `sh -s` with our stdin" on a target.

Every operation sends one self-contained POSIX sh program on standard input and reads a
machine-readable answer from standard output. A transport knows only how to start that shell
(locally, over SSH, inside a container); it never interprets the program.
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass, field

from patchkit.errors import InvalidInput, TransportError


@dataclass
class RunResult:
    returncode: int
    stdout: bytes
    stderr: bytes
    elapsed: float = 0.0


@dataclass
class Transport:
    """Base: subclasses set `label`, `root` and build `argv()`."""

    label: str
    root: str
    shell: tuple[str, ...] = ("sh", "-s")
    env: dict[str, str] | None = field(default=None, repr=False)

    def argv(self) -> list[str]:
        return list(self.shell)

    def run(self, script: bytes, timeout: float | None = None) -> RunResult:
        argv = self.argv()
        start = time.monotonic()
        try:
            proc = subprocess.run(argv, input=script, capture_output=True, timeout=timeout, env=self.env)
        except FileNotFoundError as e:
            raise TransportError(f"{self.label}: cannot start {argv[0]!r}: {e.strerror}") from e
        except subprocess.TimeoutExpired as e:
            raise TransportError(f"{self.label}: no answer within {timeout:g} s") from e
        return RunResult(proc.returncode, proc.stdout, proc.stderr, time.monotonic() - start)

    def close(self) -> None:
        """Release connections (SSH control masters); local targets hold none."""

    def connection_probe(self) -> object:
        """What connection_notes compares with after an operation (status reports it)."""
        return None

    def connection_notes(self, before: object) -> list[str]:
        """Sentences about the connection this target keeps between commands (none here)."""
        return []


@dataclass
class LocalTransport(Transport):
    """A directory on this machine."""


def _bad_chars(text: str) -> bool:
    return any(ch in text for ch in ("\0", "\n", "\r"))


def parse_target(
    spec: str,
    *,
    cwd: str | None = None,
    container: str | None = None,
    exec_prefix: str | None = None,
    **options,
) -> Transport:
    """Turn a --target string into a Transport.

    Local directories may be relative to `cwd` (where invoke runs). Remote forms
    (`ssh://`, `host:/path`, `docker://`) are handled by the transport modules that know them.
    """
    if not spec or _bad_chars(spec):
        raise InvalidInput(f"bad target spec {spec!r}: empty or contains NUL/newline")
    if spec.startswith("k8s:"):
        return _one_pod(spec, container=container, exec_prefix=exec_prefix, **options)
    remote = _parse_remote(spec, container=container, exec_prefix=exec_prefix, **options)
    if remote is not None:
        return remote
    if container or exec_prefix:
        raise InvalidInput(f"target {spec!r}: --container/--exec need a remote or exec target")
    path = os.path.abspath(os.path.join(cwd or os.getcwd(), os.path.expanduser(spec)))
    return LocalTransport(label=path, root=path)


def _parse_remote(spec: str, **kw) -> Transport | None:
    """Hook for SSH / container transports; returns None for a plain local path."""
    try:
        from patchkit.transport import remote  # (added by the remote-targets work)
    except ImportError:
        if spec.startswith(("ssh://", "docker://")):
            raise InvalidInput(f"target {spec!r}: remote targets are not available in this build") from None
        return None
    return remote.parse_remote_target(spec, **kw)


def _one_pod(spec: str, **kw) -> Transport:
    """A k8s: spec where one target is wanted: it must select exactly one running pod (fleets
    expand it into every pod first: patchkit.transport.k8s.expand_targets)."""
    from patchkit.transport.k8s import expand_targets

    pods = expand_targets([spec], **kw)
    if len(pods) != 1:
        raise InvalidInput(
            f"target {spec!r}: the selector matched {len(pods)} running pods; "
            "here one target is needed (narrow the selector)"
        )
    return pods[0]

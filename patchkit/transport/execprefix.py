"""Exec-prefix targets: a local command that runs `sh -s` somewhere else with our stdin.

`docker exec -i C`, `podman exec -i C`, `kubectl exec -i POD --`, `chroot DIR`, `env VAR=…`:
the transport is the prefix argv followed by the shell argv, executed without a shell, so a
prefix word is always one argument however odd its characters are. (Through SSH the same prefix
is quoted with shlex.join by SshTransport.remote_command.)
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from patchkit.errors import TransportError
from patchkit.transport import RunResult, Transport


@dataclass
class ExecTransport(Transport):
    prefix: tuple[str, ...] = ()
    timeout: float | None = None

    def argv(self) -> list[str]:
        return list(self.prefix) + list(self.shell)

    def run(self, script: bytes, timeout: float | None = None) -> RunResult:
        result = super().run(script, timeout if timeout is not None else self.timeout)
        if result.returncode < 0:
            raise TransportError(
                f"{self.label}: {self.prefix[0]!r} was killed by signal "
                f"{-result.returncode} before the answer was complete"
            )
        if result.returncode in (126, 127) and not result.stdout:
            raise TransportError(
                f"{self.label}: {shlex.join(self.argv())!r} could not start "
                f"the shell (exit {result.returncode}): "
                f"{_last_line(result.stderr) or 'no message'}"
            )
        return result


def _last_line(stderr: bytes) -> str:
    lines = [ln.strip() for ln in stderr.decode("utf-8", "replace").splitlines() if ln.strip()]
    return lines[-1] if lines else ""

"""Exec-prefix targets: a local command that runs `sh -s` somewhere else with our stdin.

`docker exec -i C`, `podman exec -i C`, `kubectl exec -i POD --`, `chroot DIR`, `env VAR=…`:
the transport is the prefix argv followed by the shell argv, executed without a shell, so a
prefix word is always one argument however odd its characters are. (Through SSH the same prefix
is quoted with shlex.join by SshTransport.remote_command.)

The exec target kind (`KIND`): a local path given with --exec PREFIX, or with --container NAME
(`docker exec -i NAME`).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from patchkit.errors import TransportError
from patchkit.transport import RunResult, TargetKind, Transport, register_kind
from patchkit.transport.remote import (
    PREFIX_OPTIONS,
    check_root,
    checked_options,
    container_prefix,
    given_prefix,
    parse_ssh_spec,
    positive_seconds,
    split_exec_prefix,
)


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


def exec_transport(spec: str, root: str, prefix: list[str], opts: dict) -> Transport:
    # SSH-only options (ssh_config, connect_timeout, ...) are ignored here, so that one set of
    # site options (invoke.yaml) can serve a mixed list of targets.
    shell: tuple[str, ...] = ("sh", "-s")
    if "remote_shell" in opts:
        shell = tuple(split_exec_prefix(opts["remote_shell"], spec, "remote_shell"))
    return ExecTransport(
        label=spec,
        root=root,
        prefix=tuple(prefix),
        shell=shell,
        timeout=positive_seconds(opts.get("timeout"), "timeout", spec),
    )


def exec_target(
    spec: str,
    *,
    cwd: str | None = None,
    container: str | None = None,
    exec_prefix: str | None = None,
    **options,
) -> Transport | None:
    """A path inside a container / chroot / pod reached from this machine through a prefix
    (--exec, or --container's); None without one, or for another kind's spec."""
    opts = checked_options(options)
    container, prefix = given_prefix(spec, container, exec_prefix)
    if (container is None and prefix is None) or spec.startswith("docker://") or parse_ssh_spec(spec):
        return None
    root = check_root(spec, spec)
    if container is not None:
        prefix = container_prefix(container, opts)
    assert prefix is not None  # --exec given, or set from --container just above
    return exec_transport(spec, root, prefix, opts)


KIND = register_kind(TargetKind("exec", prefix=None, options=PREFIX_OPTIONS, resolve=exec_target))

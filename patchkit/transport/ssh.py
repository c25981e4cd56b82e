"""SSH targets through the system OpenSSH client (users' ssh_config, ProxyJump, agent, keys).

The ssh target kind (`KIND`, at the end): `ssh://[user@]host[:port]/path` and the scp-like
`[user@]host:/path`, with --container/--exec as a prefix run on the host.

One operation is one `ssh … -- HOST 'sh -s'`: the program goes over stdin, the answer comes back
on stdout; the remote command string is fixed (plus an optional, quoted container/exec prefix),
and the target root travels inside the program, never on the ssh command line.

BatchMode=yes means ssh never prompts: a missing key is an immediate, named failure. With
`reuse` (the default) the first operation leaves a ControlMaster behind (ControlPersist) in a
private 0700 directory; later operations on the same transport ride that connection. Two kinds:
  - per transport (`shared_master=False`, the library default and `--ssh-persist 0`): a fresh
    mkdtemp directory; `close()` stops the master (`ssh -O exit`) and removes the directory, so
    nothing outlives the command;
  - shared (`shared_master=True`, what the tasks use by default): the per-user directory of
    transport/controldir.py; `close()` leaves the master to ControlPersist, so the next command
    to the same host within `control_persist` seconds rides the same connection. A socket whose
    master died is unlinked by ssh itself (ECONNREFUSED) and a new master takes its place.

Exit status 255 is ssh's own "the connection failed"; it becomes a TransportError that names
the host and says why (the target program must therefore never exit 255 itself).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import subprocess
import tempfile
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field

from patchkit.errors import InvalidInput, TransportError
from patchkit.transport import (
    RunResult,
    TargetKind,
    Transport,
    controldir,
    exchange,
    finished,
    interrupts,
    register_kind,
)
from patchkit.transport.remote import (
    PREFIX_OPTIONS,
    check_ssh_options,
    checked_options,
    container_prefix,
    given_prefix,
    parse_ssh_spec,
    positive_seconds,
)

CONNECT_TIMEOUT_S = 10.0  # the TCP connect and SSH banner, when no connect_timeout is given
# Unix socket paths are limited to ~108 bytes; %C expands to 40 hex characters.
_SOCKET_PATH_MAX = 100


@dataclass
class SshTransport(Transport):
    """`sh -s` on HOST via OpenSSH. Option fields are documented in transport/remote.py."""

    host: str = ""
    user: str | None = None
    port: int | None = None
    ssh_config: str | None = None
    ssh_options: tuple[str, ...] = ()
    connect_timeout: float | None = CONNECT_TIMEOUT_S
    timeout: float | None = None
    reuse: bool = True
    control_persist: float = 60.0
    shared_master: bool = False
    remote_shell: str = "sh -s"
    remote_prefix: tuple[str, ...] = ()
    ssh_program: str = "ssh"
    # Called with the ssh client's Popen right after it starts (fault-injection tests kill it).
    on_start: Callable[[subprocess.Popen], None] | None = field(default=None, repr=False)
    # Counters for benchmarks and reports (one "run" is one ssh client invocation).
    runs: int = field(default=0, init=False)
    bytes_sent: int = field(default=0, init=False)
    bytes_received: int = field(default=0, init=False)
    _control_dir: str | None = field(default=None, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _finalizer: weakref.finalize | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.ssh_config is not None and (
            not os.path.exists(self.ssh_config) or os.path.isdir(self.ssh_config)
        ):
            raise InvalidInput(f"{self.label}: ssh_config file {self.ssh_config!r} not found")

    # ---- argv ---------------------------------------------------------------------------------

    @property
    def where(self) -> str:
        """user@host:port as people write it, for messages."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        text = f"{self.user}@{host}" if self.user else host
        return f"{text}:{self.port}" if self.port else text

    @property
    def control_dir(self) -> str | None:
        return self._control_dir

    def remote_command(self) -> str:
        """The one fixed command string the remote login shell runs."""
        if not self.remote_prefix:
            return self.remote_shell
        return f"{shlex.join(self.remote_prefix)} {self.remote_shell}"

    def ssh_args(self) -> list[str]:
        """Everything before `-- HOST`: options only, identical for runs and `-O exit`."""
        args = [self.ssh_program, "-T", "-x", "-a", "-o", "BatchMode=yes", "-o", "ClearAllForwardings=yes"]
        if self.connect_timeout is not None:
            args += ["-o", f"ConnectTimeout={max(1, round(self.connect_timeout))}"]
        args += self._where_args()
        if self.reuse:
            args += [
                "-o",
                "ControlMaster=auto",
                "-o",
                f"ControlPath={self._ensure_control_dir()}/%C",
                "-o",
                f"ControlPersist={max(1, round(self.control_persist))}",
            ]
        if self.reuse and self.shared_master:
            # A kept master may outlive its host (powered off, wedged): probe it while idle, so
            # that a later command fails within ~3 intervals instead of waiting on a dead TCP
            # connection that no ConnectTimeout covers any more.
            interval = max(1, round(self.connect_timeout or CONNECT_TIMEOUT_S))
            args += ["-o", f"ServerAliveInterval={interval}", "-o", "ServerAliveCountMax=3"]
        return args

    def argv(self) -> list[str]:
        return self.ssh_args() + ["--", self.host, self.remote_command()]

    # ---- running ------------------------------------------------------------------------------

    def run(self, script: bytes, timeout: float | None = None) -> RunResult:
        timeout = timeout if timeout is not None else self.timeout
        proc, start = self.start_client(f"{self.where}: cannot start the OpenSSH client {self.ssh_program!r}")
        with proc:
            if self.on_start is not None:
                self.on_start(proc)
            stdout, stderr = self._communicate(proc, script, timeout, start)
        self.runs += 1
        self.bytes_sent += len(script)
        self.bytes_received += len(stdout) + len(stderr)
        code = proc.returncode
        if code == 255:
            if not stderr.strip() and interrupts.deliverable() is not None:
                # interrupted, and the remote program died without its cleanup (SIGKILL)
                finished(RunResult(-9, stdout, stderr, time.monotonic() - start))
            if not stderr.strip():
                # ssh explains its own connection failures on stderr. Silence means the remote
                # shell ended without an exit status (killed by a signal): sshd reports none.
                raise TransportError(
                    f"{self.where}: the remote program ended without an exit "
                    "status (killed by a signal?)" + ("; it had started to answer" if stdout else "")
                )
            raise TransportError(describe_ssh_failure(self.where, stderr, self.connect_timeout))
        if code < 0:
            raise TransportError(
                f"{self.where}: the ssh client was killed by signal {-code} "
                "before the answer was complete; the remote program may "
                "still be running"
            )
        if code in (126, 127) and not stdout:
            raise TransportError(
                f"{self.where}: the remote command {self.remote_command()!r} "
                f"could not be started (exit {code}): "
                f"{_last_line(stderr) or 'no message'}"
            )
        return finished(RunResult(code, stdout, stderr, time.monotonic() - start))

    def _communicate(
        self, proc: subprocess.Popen, script: bytes, timeout: float | None, start: float
    ) -> tuple[bytes, bytes]:
        """Send the program, collect the answer; watch the ssh client, not only the pipes.

        A mux client hands its stdin/stdout/stderr to the control master, so when the client
        dies (killed, or by our overall timeout) the master keeps our pipes open until the
        remote program ends: EOF alone would make us wait for it (patchkit.transport.exchange).
        """

        def client_alive(proc: subprocess.Popen) -> None:
            code = proc.poll()
            if code is not None and code < 0:
                raise TransportError(
                    f"{self.where}: the ssh client was killed by signal "
                    f"{-code} before the answer was complete; the remote "
                    "program may still be running"
                )

        return exchange(
            proc,
            script,
            timeout,
            start,
            timed_out=lambda: TransportError(
                f"{self.where}: no answer within {timeout:g} s (overall timeout); the remote "
                "program may still be running"
            ),
            signal_program=self.signal_program,
            check=client_alive,
        )

    def close(self) -> None:
        """Stop a per-transport master and remove its directory; a shared master stays up."""
        with self._lock:
            control_dir, self._control_dir = self._control_dir, None
            finalizer, self._finalizer = self._finalizer, None
        if finalizer is not None:
            finalizer.detach()
        if control_dir is not None and not self.shared_master:
            _stop_master(self._exit_argv(control_dir), control_dir)

    # ---- the master, for status ---------------------------------------------------------------

    def master_pid(self) -> int | None:
        """pid of the control master this transport would ride now (`ssh -O check`), or None."""
        if not self.reuse:
            return None
        control_dir = self._ensure_control_dir() if self.shared_master else self._control_dir
        if control_dir is None:
            return None
        return controldir.master_pid(self._control_argv(control_dir, "check"))

    def connection_probe(self) -> int | None:
        try:
            return self.master_pid() if self.shared_master else None
        except InvalidInput:
            return None  # an unusable control directory: the run itself reports it

    def connection_notes(self, before: object) -> list[str]:
        if not (self.reuse and self.shared_master):
            return []
        try:
            now = self.master_pid()
        except InvalidInput:
            return []
        if now is None:
            return ["ssh master: none alive now (the next command opens a new connection)"]
        how = "reused by this command" if before == now else "opened by this command"
        return [
            f"ssh master alive (pid {now}, {how}): commands to this host within "
            f"{self.control_persist:g} s of the last one share its connection"
        ]

    # ---- control directory --------------------------------------------------------------------

    def _ensure_control_dir(self) -> str:
        with self._lock:
            if self._control_dir is None and self.shared_master:
                self._control_dir = controldir.user_control_dir()  # no finalizer: ControlPersist ends it
            if self._control_dir is None:
                path = tempfile.mkdtemp(prefix="pk-ssh-")  # mode 0700, owned by us
                if len(path) + 42 > _SOCKET_PATH_MAX:
                    os.rmdir(path)
                    path = tempfile.mkdtemp(prefix="pk-ssh-", dir="/tmp")
                self._control_dir = path
                # Interpreter exit or garbage collection without close(): still clean up.
                self._finalizer = weakref.finalize(self, _stop_master, self._exit_argv(path), path)
            return self._control_dir

    def _exit_argv(self, control_dir: str) -> list[str]:
        return self._control_argv(control_dir, "exit")

    def _control_argv(self, control_dir: str, command: str) -> list[str]:
        args = [self.ssh_program, "-o", "BatchMode=yes", "-o", f"ControlPath={control_dir}/%C"]
        return args + self._where_args() + ["-O", command, "--", self.host]

    def _where_args(self) -> list[str]:
        """Port, user, config file and extra options: the same for a run and for `-O exit`."""
        args = []
        if self.port is not None:
            args += ["-p", str(self.port)]
        if self.user is not None:
            args += ["-l", self.user]
        if self.ssh_config is not None:
            args += ["-F", self.ssh_config]
        for option in self.ssh_options:
            args += ["-o", option]
        return args


def _stop_master(exit_argv: list[str], control_dir: str) -> None:
    try:
        has_socket = bool(os.listdir(control_dir))
    except OSError:
        has_socket = False
    if has_socket:
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            subprocess.run(exit_argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=10)
    shutil.rmtree(control_dir, ignore_errors=True)


# ---- error messages -----------------------------------------------------------------------------


def _last_line(stderr: bytes) -> str:
    lines = [ln.strip() for ln in stderr.decode("utf-8", "replace").splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def describe_ssh_failure(where: str, stderr: bytes, connect_timeout: float | None) -> str:
    """Turn OpenSSH's exit-255 stderr into one sentence that names the host and the cause."""
    text = stderr.decode("utf-8", "replace")
    low = text.lower()
    detail = _last_line(stderr) or "no message from ssh"
    if "permission denied" in low:
        return (
            f"{where}: SSH permission denied ({detail}); BatchMode: no password prompt — "
            "load the key into the agent or set IdentityFile in ssh_config"
        )
    if "host key verification failed" in low or "remote host identification has changed" in low:
        return f"{where}: SSH host key verification failed; check known_hosts for this host ({detail})"
    if "could not resolve hostname" in low:
        return f"{where}: unknown host (not in DNS or ssh_config): {detail}"
    if "timed out" in low:
        limit = f" within the connect timeout of {connect_timeout:g} s" if connect_timeout else ""
        return f"{where}: SSH connection timed out{limit} ({detail})"
    if "connection refused" in low:
        return f"{where}: host unreachable: connection refused (is sshd running?) ({detail})"
    if "no route to host" in low or "network is unreachable" in low:
        return f"{where}: host unreachable ({detail})"
    if "connection closed" in low or "connection reset" in low:
        return f"{where}: the SSH connection was closed by the remote side ({detail})"
    if "bad configuration option" in low or ("config" in low and "line" in low):
        return f"{where}: ssh_config error: {detail}"
    return f"{where}: ssh failed (exit 255, connection problem): {detail}"


# ---- the ssh target kind ---------------------------------------------------------------------


def ssh_target(
    spec: str,
    *,
    cwd: str | None = None,
    container: str | None = None,
    exec_prefix: str | None = None,
    **options,
) -> Transport | None:
    """The SshTransport of an ssh:// or scp-like spec (--container/--exec: a prefix run on the
    host); None for any other."""
    opts = checked_options(options)
    container, prefix = given_prefix(spec, container, exec_prefix)
    parts = None if spec.startswith("docker://") else parse_ssh_spec(spec)
    if parts is None:
        return None
    user, host, port, root = parts
    if container is not None:
        prefix = container_prefix(container, opts)
    return SshTransport(
        label=_ssh_label(user, host, port, root, prefix),
        root=root,
        host=host,
        user=user,
        port=port,
        remote_prefix=tuple(prefix or ()),
        **_ssh_kwargs(opts, spec),
    )


def _ssh_kwargs(opts: dict, spec: str) -> dict:
    kw: dict = {}
    if "ssh_config" in opts:
        kw["ssh_config"] = str(opts["ssh_config"])
    if "ssh_options" in opts:
        kw["ssh_options"] = check_ssh_options(opts["ssh_options"], spec)
    for name in ("connect_timeout", "timeout", "control_persist"):
        if name in opts:
            kw[name] = positive_seconds(opts[name], name, spec)
    for name in ("reuse", "shared_master"):
        if name in opts:
            kw[name] = bool(opts[name])
    if "remote_shell" in opts:
        shell = opts["remote_shell"]
        if not isinstance(shell, str) or not shell.strip() or any(ch in shell for ch in ("\0", "\n", "\r")):
            raise InvalidInput(f"target {spec!r}: bad remote_shell {shell!r}")
        kw["remote_shell"] = shell
    if "ssh_program" in opts:
        kw["ssh_program"] = str(opts["ssh_program"])
    return kw


def _ssh_label(user, host, port, root, prefix) -> str:
    where = f"{user + '@' if user else ''}{'[' + host + ']' if ':' in host else host}"
    if port is not None:
        where += f":{port}"
    label = f"ssh://{where}{root}"
    if prefix:
        label += f" via {shlex.join(prefix)}"
    return label


SSH_OPTIONS = (
    "ssh_config",
    "ssh_options",
    "connect_timeout",
    "reuse",
    "control_persist",
    "shared_master",
    "ssh_program",
    *PREFIX_OPTIONS,
)  # this kind's options; the whitelist is every kind's (patchkit.transport.option_names)
KIND = register_kind(TargetKind("ssh", prefix=None, options=SSH_OPTIONS, resolve=ssh_target))

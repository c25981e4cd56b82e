"""A real OpenSSH server on loopback for tests and benchmarks; never touches ~/.ssh.

Plain functions (usable from bench/ without pytest):
    make_keys(workdir)                      -> SshKeys (host key, authorised user key)
    start_sshd(workdir, keys, alias=...)    -> SshdServer (running `sshd -D` on 127.0.0.1:PORT)
    make_client_config(path, servers, keys) -> path of an ssh_config (-F) with one Host alias
                                               per server and a pre-filled known_hosts
    make_busybox_dir(path)                  -> directory of BusyBox applet symlinks
Pytest fixtures (import them into a test module, or list this module in `pytest_plugins`):
    sshd            session-scoped SshdServer; `.alias`, `.client_config`, `.port`, `.user`
    sshd_factory    function-scoped: sshd_factory(n) -> SshdFleet of n fresh servers sharing
                    one user key and one client config (aliases pk-host-0 .. pk-host-{n-1})
    busybox_bin     session-scoped BusyBox applet directory
    busybox_transport  a local Transport running `busybox sh -s` with PATH=busybox_bin
    ssh_control_dir autouse, per test: PATCHKIT_SSH_CONTROL_DIR points at a fresh short
                    directory, so shared SSH masters (the tasks' default) never cross tests or
                    touch the user's own; afterwards every master in it gets `ssh -O exit`

Counting connections: every TCP connection sshd takes is one "Connection from" line in its
VERBOSE log (`server.connections()`); "Accepted publickey" lines count successful logins.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

SSHD = "/usr/sbin/sshd"  # sshd re-executes itself and insists on an absolute path
USER = "root"
_CONNECTION_LINE = re.compile(r"^Connection from \S+ port (\d+) on ", re.M)
PRIVSEP_DIR = Path("/run/sshd")

BUSYBOX_APPLETS = (
    "sh",
    "sed",
    "wc",
    "sha256sum",
    "mktemp",
    "mv",
    "cp",
    "ln",
    "rm",
    "mkdir",
    "cat",
    "printf",
    "echo",
    "test",
    "[",
    "ls",
    "chmod",
    "head",
    "tail",
    "tr",
    "cut",
    "grep",
    "awk",
    "od",
    "stat",
    "date",
    "sleep",
    "kill",
    "rmdir",
    "touch",
    "readlink",
    "dirname",
    "basename",
    "find",
    "sort",
    "uniq",
    "env",
    "id",
    "hostname",
    "df",
    "sync",
    "true",
    "false",
    "pwd",
    "expr",
    "xargs",
    "cmp",
    "diff",
    "wc",
    "dd",
)


def missing_tools() -> str | None:
    """A reason to skip, or None when sshd, ssh and ssh-keygen are all present."""
    if not os.access(SSHD, os.X_OK):
        return f"OpenSSH server not installed ({SSHD} missing; apt-get install openssh-server)"
    for tool in ("ssh", "ssh-keygen"):
        if shutil.which(tool) is None:
            return f"OpenSSH client tool {tool!r} not on PATH"
    return None


@dataclass
class SshKeys:
    workdir: Path
    host_key: Path
    host_pub: str
    user_key: Path
    authorized_keys: Path


@dataclass
class SshdServer:
    workdir: Path
    port: int
    alias: str
    proc: subprocess.Popen
    log: Path
    config: Path
    keys: SshKeys
    user: str = USER
    host: str = "127.0.0.1"
    client_config: Path | None = None
    probe_ports: set = field(default_factory=set)  # our readiness probes, not clients

    def log_text(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def connections(self) -> int:
        """TCP connections sshd has taken from clients so far (failed logins included)."""
        ports = _CONNECTION_LINE.findall(self.log_text())
        return sum(1 for port in ports if int(port) not in self.probe_ports)

    def accepted(self) -> int:
        """Successful logins so far."""
        return self.log_text().count("Accepted publickey for ")

    def wait_log(self, predicate, timeout: float = 5.0) -> bool:
        """Poll the log until predicate(server) holds (sshd writes asynchronously)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate(self):
                return True
            time.sleep(0.02)
        return predicate(self)

    def url(self, root: str, *, user: bool = True) -> str:
        who = f"{self.user}@" if user else ""
        return f"ssh://{who}{self.host}:{self.port}{root}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@dataclass
class SshdFleet:
    servers: list[SshdServer]
    client_config: Path
    keys: SshKeys
    workdir: Path
    extra: list = field(default_factory=list)

    @property
    def aliases(self) -> list[str]:
        return [s.alias for s in self.servers]

    def targets(self, roots: list[str]) -> list[str]:
        """`alias:/root` specs, one per server."""
        return [f"{s.alias}:{root}" for s, root in zip(self.servers, roots)]

    def stop(self) -> None:
        for server in self.servers:
            server.stop()


# ---- plain functions ----------------------------------------------------------------------------


def silent_port_times_out(make_target) -> None:
    """A port that accepts TCP and never sends an SSH banner: the transport ``make_target(port)``
    returns must fail within a few seconds (its ConnectTimeout covers the banner exchange) with
    an error naming the host and port."""
    from patchkit.errors import TransportError

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    port = listener.getsockname()[1]
    try:
        t = make_target(port)
        start = time.monotonic()
        try:
            t.run(b"true")
        except TransportError as exc:
            error = str(exc)
        else:
            raise AssertionError("a server that never answers did not fail the run")
        assert time.monotonic() - start < 4
    finally:
        listener.close()
    assert "timed out" in error and f"127.0.0.1:{port}" in error, error


def _keygen(path: Path, comment: str) -> None:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
        check=True,
        stdin=subprocess.DEVNULL,
        capture_output=True,
    )


def make_keys(workdir: str | os.PathLike) -> SshKeys:
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    host_key, user_key = workdir / "ssh_host_ed25519_key", workdir / "id_ed25519"
    _keygen(host_key, "patchkit-test-host")
    _keygen(user_key, "patchkit-test-user")
    authorized = workdir / "authorized_keys"
    shutil.copyfile(str(user_key) + ".pub", authorized)
    authorized.chmod(0o600)
    host_pub = Path(str(host_key) + ".pub").read_text().split()
    return SshKeys(workdir, host_key, " ".join(host_pub[:2]), user_key, authorized)


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port(count: int = 1) -> int:
    """A port P such that P .. P+count-1 are free on 127.0.0.1 now.

    P is drawn at random below the kernel's ephemeral range: a port the kernel hands out
    itself (bind to 0, or the local end of any outgoing connection, ssh's included) could be
    taken again by another connection between this call and the server's own bind, and P+1 was
    never reserved at all. That race failed a CI run (EADDRINUSE on a second node's P+1).
    Bounded: 200 draws, then an error (a fall-back to a port the kernel picks would bring the
    race back, and would leave P+1 unchecked).
    """
    low = _ephemeral_low()
    top = max(10000 + count, min(low, 65536) - count)
    draw = random.Random(f"{os.getpid()}-{time.monotonic_ns()}")
    for _ in range(200):
        port = draw.randrange(10000, top)
        if all(_bindable(port + i) for i in range(count)):
            return port
    raise RuntimeError(f"no run of {count} free ports on 127.0.0.1 in 200 draws from 10000-{top}")


def _write_sshd_config(
    path: Path, port: int, keys: SshKeys, workdir: Path, extra: tuple[str, ...], isolated_home: bool
) -> None:
    home = []
    if isolated_home:
        (workdir / "home").mkdir(exist_ok=True)
        home = [f"SetEnv HOME={workdir / 'home'}"]
    lines = [
        f"Port {port}",
        "ListenAddress 127.0.0.1",
        f"HostKey {keys.host_key}",
        f"PidFile {workdir / 'sshd.pid'}",
        f"AuthorizedKeysFile {keys.authorized_keys}",
        "StrictModes no",
        "UsePAM no",
        "PermitRootLogin prohibit-password",
        "PubkeyAuthentication yes",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "LogLevel VERBOSE",
        "MaxStartups 200",
        "MaxSessions 100",
        "UseDNS no",
        "PrintMotd no",
        "AcceptEnv none",
        *home,
        *extra,
    ]
    path.write_text("\n".join(lines) + "\n")


def start_sshd(
    workdir: str | os.PathLike,
    keys: SshKeys,
    *,
    alias: str = "pk-test",
    extra_config: tuple[str, ...] = (),
    isolated_home: bool = True,
    startup_timeout: float = 10.0,
    attempts: int = 5,
) -> SshdServer:
    """Start `sshd -D` on a free loopback port; wait (bounded) until it accepts connections.

    isolated_home: sessions get HOME=<workdir>/home (empty), so the login shell does not source
    this machine's dotfiles (here root's .bashrc runs `pyenv init`, ~100 ms per session) and
    timings measure ssh + patchkit, not the box. extra_config: more sshd_config lines, e.g.
    ("KexAlgorithms curve25519-sha256",) to take the post-quantum kex CPU out of fleet runs.
    """
    reason = missing_tools()
    if reason:
        raise RuntimeError(reason)
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    if not PRIVSEP_DIR.is_dir():
        PRIVSEP_DIR.mkdir(mode=0o755, parents=True, exist_ok=True)
    config, log = workdir / "sshd_config", workdir / "sshd.log"
    errors = []
    for _ in range(attempts):  # the free port can be taken between probe and bind: retry
        port = free_port()
        _write_sshd_config(config, port, keys, workdir, tuple(extra_config), isolated_home)
        check = subprocess.run([SSHD, "-t", "-f", str(config)], capture_output=True, text=True)
        if check.returncode != 0:
            raise RuntimeError(f"sshd rejects its test config {config}: {check.stderr.strip()}")
        log.write_text("")
        proc = subprocess.Popen(
            [SSHD, "-D", "-f", str(config), "-E", str(log)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        probe_ports: set[int] = set()
        if _wait_listening(proc, port, startup_timeout, probe_ports):
            return SshdServer(workdir, port, alias, proc, log, config, keys, probe_ports=probe_ports)
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        errors.append(f"port {port}: {log.read_text(errors='replace').strip()[-300:]}")
    raise RuntimeError("sshd did not start: " + " | ".join(errors))


def _wait_listening(proc: subprocess.Popen, port: int, timeout: float, probe_ports: set[int]) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
                probe_ports.add(sock.getsockname()[1])
                # A banner proves sshd (not a stranger that grabbed the port) is answering.
                sock.settimeout(2)
                if sock.recv(4).startswith(b"SSH-"):
                    return True
        except OSError:
            time.sleep(0.02)
    return False


def make_client_config(
    path: str | os.PathLike,
    servers: list[SshdServer],
    keys: SshKeys,
    *,
    user: str = USER,
    identity: str | os.PathLike | None = None,
) -> Path:
    """An ssh_config for -F: a Host alias per server plus 127.0.0.1 entries; strict host keys."""
    path = Path(path)
    known = path.parent / (path.name + ".known_hosts")
    known.write_text("".join(f"[127.0.0.1]:{s.port} {keys.host_pub}\n" for s in servers))
    identity = Path(identity) if identity else keys.user_key
    blocks = []
    for server in servers:
        blocks.append(f"Host {server.alias}\n  HostName 127.0.0.1\n  Port {server.port}\n")
    blocks.append(
        "Host *\n"
        f"  User {user}\n"
        f"  IdentityFile {identity}\n"
        "  IdentitiesOnly yes\n"
        "  IdentityAgent none\n"
        "  StrictHostKeyChecking yes\n"
        f"  UserKnownHostsFile {known}\n"
        "  GlobalKnownHostsFile /dev/null\n"
        "  CheckHostIP no\n"
        "  LogLevel ERROR\n"
    )
    path.write_text("\n".join(blocks))
    for server in servers:
        server.client_config = path
    return path


def start_fleet(
    workdir: str | os.PathLike,
    count: int,
    *,
    keys: SshKeys | None = None,
    prefix: str = "pk-host-",
    **sshd_options,
) -> SshdFleet:
    """`count` sshd instances on distinct ports sharing one key pair and one client config.

    sshd_options go to start_sshd (extra_config=, isolated_home=)."""
    workdir = Path(workdir)
    keys = keys or make_keys(workdir / "keys")
    servers: list[SshdServer] = []
    try:
        for i in range(count):
            servers.append(start_sshd(workdir / f"sshd{i}", keys, alias=f"{prefix}{i}", **sshd_options))
    except BaseException:
        for server in servers:
            server.stop()
        raise
    config = make_client_config(workdir / "ssh_config", servers, keys)
    return SshdFleet(servers, config, keys, workdir)


def make_busybox_dir(path: str | os.PathLike, busybox: str | None = None) -> Path:
    """A directory of BusyBox applet symlinks, to put first (or alone) on PATH."""
    busybox = busybox or shutil.which("busybox")
    if busybox is None:
        raise RuntimeError("busybox not installed (apt-get install busybox)")
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    for applet in ("busybox",) + BUSYBOX_APPLETS:
        link = path / applet
        if not link.exists():
            link.symlink_to(busybox)
    return path


# ---- pytest fixtures ----------------------------------------------------------------------------

try:
    import pytest
except ImportError:  # bench/ uses the plain functions only
    pytest = None

if pytest is not None:

    @pytest.fixture(scope="session")
    def sshd_keys(tmp_path_factory):
        reason = missing_tools()
        if reason:
            pytest.skip(reason)
        return make_keys(tmp_path_factory.mktemp("sshd-keys"))

    @pytest.fixture(scope="session")
    def sshd(tmp_path_factory, sshd_keys):
        """One loopback sshd for the session; `.alias` works with `-F sshd.client_config`."""
        workdir = tmp_path_factory.mktemp("sshd")
        server = start_sshd(workdir, sshd_keys, alias="pk-test")
        make_client_config(workdir / "ssh_config", [server], sshd_keys)
        yield server
        server.stop()

    @pytest.fixture
    def sshd_factory(tmp_path_factory, sshd_keys):
        """sshd_factory(n) -> SshdFleet; every server started here is stopped afterwards."""
        fleets: list[SshdFleet] = []

        def start(count: int = 1, prefix: str = "pk-host-", **sshd_options) -> SshdFleet:
            fleet = start_fleet(
                tmp_path_factory.mktemp("fleet"), count, keys=sshd_keys, prefix=prefix, **sshd_options
            )
            fleets.append(fleet)
            return fleet

        yield start
        for fleet in fleets:
            fleet.stop()

    @pytest.fixture(autouse=True)
    def ssh_control_dir(monkeypatch):
        from patchkit.transport.controldir import ENV_VAR, stop_masters

        path = tempfile.mkdtemp(prefix="pkc-", dir="/tmp")  # short: unix socket path limit
        monkeypatch.setenv(ENV_VAR, path)
        yield Path(path)
        stop_masters(path)
        shutil.rmtree(path, ignore_errors=True)

    @pytest.fixture(scope="session")
    def busybox_bin(tmp_path_factory):
        if shutil.which("busybox") is None:
            pytest.skip("busybox not installed (apt-get install busybox)")
        return make_busybox_dir(tmp_path_factory.mktemp("busybox") / "bin")

    @pytest.fixture
    def busybox_transport(busybox_bin, tmp_path):
        """A local target under BusyBox sh with only BusyBox applets on PATH (root: tmp_path)."""
        from patchkit.transport import LocalTransport

        return LocalTransport(
            label=f"busybox:{tmp_path}",
            root=str(tmp_path),
            shell=(str(busybox_bin / "busybox"), "sh", "-s"),
            env={"PATH": str(busybox_bin), "LC_ALL": "C"},
        )


def scratch_dir(prefix: str = "pk-sshd-") -> Path:
    """A fresh temp dir for scripts outside pytest (bench)."""
    return Path(tempfile.mkdtemp(prefix=prefix))

"""Fault injection over SSH: kill the ssh client, or the remote shell, during apply and revert.

The multi-file series of tests/faults/test_engine_crash.py (support/crash_tree.py) (two directories, a modified file without a
final newline, a created file in a new directory, a deleted file) runs behind a loopback sshd.
PATH shims, put first on the remote PATH through the remote shell, count the target program's
external commands and can slow each one down (so a timer can kill the ssh client at many points
of a run) or SIGKILL the remote shell at the Nth command.

Killing the ssh client does not stop the remote program: sshd lets it run to its end. So after
a client kill the test waits (bounded) for the remote shell to exit and for the lock to go,
then checks. After every fault: each file is byte-identical to its original or its patched form,
`status` says truthfully which, a dead owner's lock is reported as such, and revert or a fresh
apply converges, taking that lock over by itself.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import threading
import time
from pathlib import Path

import pytest

from patchkit import ops
from patchkit.errors import TransportError
from patchkit.transport import parse_target
from support.crash_tree import AFTER, BEFORE, assert_each_file_whole
from support.engine import git_diff, make_series, read_tree, write_tree
from support.shims import TOOLS
from support.sshd import silent_port_times_out

pytestmark = [pytest.mark.sshd, pytest.mark.slow]

SLOW_S = 0.01  # added to every external command when the client is to be killed
WAIT_S = 20.0  # bound on waiting for an orphaned remote program


@pytest.fixture(scope="module")
def series(tmp_path_factory):
    work = tmp_path_factory.mktemp("ssh-fault-series")
    patch = git_diff(BEFORE, AFTER, work)
    pinned = {k: v for k, v in BEFORE.items() if v is not None}
    return str(make_series(work / "series", pinned, [("0001-multi.patch", patch)]))


def fresh(root: Path) -> None:
    shutil.rmtree(root, ignore_errors=True)
    write_tree(root, {k: v for k, v in BEFORE.items() if v is not None})


class Rig:
    """A target root behind sshd, a faulty transport (shims) and a plain one (checks)."""

    def __init__(self, sshd, work: Path, series: str, slow: float, reuse: bool):
        self.series = series
        self.root = work / "t"
        self.counter, self.at, self.pidfile = work / "count", work / "at", work / "pid"
        bindir = work / "shims"
        bindir.mkdir()
        sleep = shutil.which("sleep")
        q = shlex.quote
        for tool in TOOLS:
            (bindir / tool).write_text(
                "#!/bin/sh\n"
                f"read n < {q(str(self.counter))}; n=$((n+1)); echo $n > {q(str(self.counter))}\n"
                f"read at < {q(str(self.at))}\n"
                f'if [ "$n" -eq "$at" ]; then read p < {q(str(self.pidfile))}; '
                "kill -9 $p $PPID 2>/dev/null; kill -9 $$; fi\n"
                + (f"{q(sleep)} {slow}\n" if slow else "")
                + f'exec {q(shutil.which(tool))} "$@"\n'
            )
            (bindir / tool).chmod(0o755)
        start = f"echo $$ > {q(str(self.pidfile))}; exec sh -s"
        shell = f"PATH={q(str(bindir))}:$PATH sh -c {q(start)}"
        spec = f"{sshd.alias}:{self.root}"
        self.faulty = parse_target(spec, ssh_config=str(sshd.client_config), remote_shell=shell, reuse=reuse)
        self.plain = parse_target(spec, ssh_config=str(sshd.client_config))

    def arm(self, at: int = 0) -> None:
        self.counter.write_text("0\n")
        self.at.write_text(f"{at}\n")
        self.pidfile.unlink(missing_ok=True)

    def commands(self) -> int:
        return int(self.counter.read_text())

    def close(self) -> None:
        self.faulty.close()
        self.plain.close()

    # -- after a fault ---------------------------------------------------------------------------

    def wait_remote_done(self) -> None:
        """The remote shell, if it ever started, has exited; then no live lock remains."""
        grace = time.monotonic() + 0.5  # a session whose client died may still be starting
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            text = self.pidfile.read_text().strip() if self.pidfile.exists() else ""
            if text and not _alive(int(text)):
                break
            if not text and time.monotonic() > grace:
                break
            time.sleep(0.02)
        else:
            pytest.fail("the remote program did not finish")
        while time.monotonic() < deadline:  # poll status until no live lock (bounded)
            host = ops.status(self.series, [self.plain]).hosts[0]
            if not any(m.startswith("locked by") for m in host.messages):
                return
            time.sleep(0.05)
        pytest.fail(f"the target stayed locked: {host.messages}")

    def check_and_converge(self, label, revert: bool) -> tuple[dict, str]:
        states = assert_each_file_whole(self.root)
        host = ops.status(self.series, [self.plain]).hosts[0]
        kinds = set(states.values())
        if kinds == {"original"}:
            assert host.state == "pristine", (label, host)
        elif kinds == {"patched"}:
            assert host.state in ("applied", "partial"), (label, host)
        else:
            assert host.state == "partial", (label, host)
        for f in host.files:  # per file, status agrees with the bytes
            if f.state in ("pristine", "applied") and f.path in states:
                assert {"pristine": "original", "applied": "patched"}[f.state] == states[f.path], (
                    label,
                    f,
                    states,
                )
        left_locked = (self.root / ".patchkit" / "lock").exists()
        if left_locked:
            # the owner is dead
            assert host.lock and host.lock["state"] == "dead", (label, host.messages)
            assert any("takes it over" in m for m in host.messages), (label, host.messages)
        if revert:
            res = ops.revert(self.series, [self.plain])
            assert res.exit_code == 0, (label, res.to_json())
            assert read_tree(self.root, BEFORE.keys()) == BEFORE, label
            assert not (self.root / ".patchkit" / "manifest").exists(), label
        else:
            res = ops.apply(self.series, [self.plain])
            assert res.exit_code == 0, (label, res.to_json())
            assert read_tree(self.root, AFTER.keys()) == AFTER, label
            assert ops.status(self.series, [self.plain]).hosts[0].state == "applied", label
        assert (res.hosts[0].took_over is not None) == left_locked, (label, res.to_json())
        return states, host.state


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


@pytest.fixture
def rig_factory(sshd, series, tmp_path):
    rigs = []

    def make(slow: float = 0.0, reuse: bool = True) -> Rig:
        work = tmp_path / f"rig{len(rigs)}"
        work.mkdir()
        rig = Rig(sshd, work, series, slow, reuse)
        rigs.append(rig)
        return rig

    yield make
    for rig in rigs:
        rig.close()


def kill_client_after(rig: Rig, delay: float) -> list[threading.Timer]:
    timers = []

    def on_start(proc):
        timer = threading.Timer(delay, proc.kill)
        timers.append(timer)
        timer.start()

    rig.faulty.on_start = on_start
    return timers


def client_kill_run(rig: Rig, op: str, delays: list[float], revert_after) -> list[tuple]:
    outcomes = []
    for n, delay in enumerate(delays):
        fresh(rig.root)
        if op == "revert":
            assert ops.apply(rig.series, [rig.plain]).exit_code == 0
        rig.arm()
        timers = kill_client_after(rig, delay)
        res = getattr(ops, op)(rig.series, [rig.faulty])
        for timer in timers:
            timer.cancel()
        rig.faulty.on_start = None
        killed = res.exit_code != 0
        if killed:
            assert res.hosts[0].state == "unreachable", res.to_json()
            assert "killed by signal 9" in " ".join(res.hosts[0].messages), res.to_json()
        rig.wait_remote_done()
        _states, state = rig.check_and_converge((op, delay), revert=revert_after(n))
        outcomes.append((round(delay, 3), killed, state))
    print(op, "client killed after (s, killed, state then):", outcomes)
    return outcomes


# ---- the ssh client dies ------------------------------------------------------------------------


def spread(total: float, count: int) -> list[float]:
    """0 (before the connection) and `count` points across a run of `total` seconds."""
    return [0.0] + [total * (k + 0.5) / count for k in range(count)]


def calibrate(rig: Rig, op: str) -> float:
    fresh(rig.root)
    if op == "revert":
        assert ops.apply(rig.series, [rig.plain]).exit_code == 0
    rig.arm()
    start = time.monotonic()
    res = getattr(ops, op)(rig.series, [rig.faulty])
    elapsed = time.monotonic() - start
    assert res.exit_code == 0, res.to_json()
    assert rig.commands() > 5
    return elapsed


def test_ssh_client_killed_during_apply(rig_factory):
    rig = rig_factory(slow=SLOW_S, reuse=False)  # every run: a fresh connection, then killed
    total = calibrate(rig, "apply")
    outcomes = client_kill_run(rig, "apply", spread(total, 7), revert_after=lambda n: n % 2 == 0)
    killed = [o for o in outcomes if o[1]]
    assert len(killed) >= 6, outcomes  # the delays fell inside the runs
    # The early kill ran nothing; later ones were orphaned but finished unattended.
    assert outcomes[0][2] == "pristine", outcomes
    assert any(o[2] in ("applied", "partial") for o in killed), outcomes


def test_ssh_client_killed_during_revert(rig_factory):
    rig = rig_factory(slow=SLOW_S, reuse=True)  # the killed client is a ControlMaster mux client
    rig.faulty.run(b"true")  # start the master
    total = calibrate(rig, "revert")
    outcomes = client_kill_run(rig, "revert", spread(total, 5), revert_after=lambda n: True)
    assert sum(1 for o in outcomes if o[1]) >= 4, outcomes


# ---- the remote shell dies ----------------------------------------------------------------------


def shell_kill_run(rig: Rig, op: str, points: list[int]) -> list[tuple]:
    outcomes = []
    for n, at in enumerate(points):
        fresh(rig.root)
        if op == "revert":
            assert ops.apply(rig.series, [rig.plain]).exit_code == 0
        rig.arm(at)
        res = getattr(ops, op)(rig.series, [rig.faulty])
        assert res.exit_code == 1, (at, res.to_json())
        assert res.hosts[0].messages[0].startswith(rig.faulty.where), res.hosts[0].messages
        assert rig.commands() == at, (at, rig.commands())
        rig.wait_remote_done()
        states, state = rig.check_and_converge((op, at), revert=(op == "revert" or n % 2 == 1))
        outcomes.append((at, state, tuple(sorted(set(states.values())))))
    print(op, "remote shell killed at command (n, state then, file states):", outcomes)
    return outcomes


def count_commands(rig: Rig, op: str) -> int:
    fresh(rig.root)
    if op == "revert":
        assert ops.apply(rig.series, [rig.plain]).exit_code == 0
    rig.arm(10**6)
    assert getattr(ops, op)(rig.series, [rig.faulty]).exit_code == 0
    return rig.commands()


def test_remote_shell_killed_during_apply(rig_factory):
    rig = rig_factory()
    total = count_commands(rig, "apply")
    assert total > 20
    points = sorted(set(range(1, total + 1, 2)) | {total})
    outcomes = shell_kill_run(rig, "apply", points)
    seen = {o[2] for o in outcomes}
    # Kills before the commit leave originals, after it patched files: both were hit.
    assert ("original",) in seen and ("patched",) in seen, outcomes


def test_remote_shell_killed_during_revert(rig_factory):
    rig = rig_factory()
    total = count_commands(rig, "revert")
    assert total > 5
    outcomes = shell_kill_run(rig, "revert", list(range(1, total + 1)))
    seen = {o[2] for o in outcomes}
    assert ("original",) in seen and ("patched",) in seen, outcomes


# ---- a live lock ---------------------------------------------------------------------------------


def test_second_operation_on_a_locked_target_names_the_holder(rig_factory):
    rig = rig_factory(slow=0.05)
    fresh(rig.root)
    rig.arm()
    first = {}
    worker = threading.Thread(target=lambda: first.update(res=ops.apply(rig.series, [rig.faulty])))
    worker.start()
    try:
        deadline = time.monotonic() + WAIT_S
        while not (rig.root / ".patchkit" / "lock").is_file():  # one line, written whole
            assert time.monotonic() < deadline and worker.is_alive(), "the lock never appeared"
            time.sleep(0.01)
        second = ops.apply(rig.series, [rig.plain])
        status = ops.status(rig.series, [rig.plain]).hosts[0]
    finally:
        worker.join(WAIT_S)
    assert second.exit_code == 1, second.to_json()
    note = " ".join(second.hosts[0].messages)
    assert "locked by pid=" in note and f"host={os.uname().nodename}" in note and "op=apply" in note
    assert "STALE" not in note
    assert any(m.startswith("locked by") for m in status.messages), status.messages
    assert first["res"].exit_code == 0, first["res"].to_json()  # the holder finished its work
    assert read_tree(rig.root, AFTER.keys()) == AFTER


def test_remote_shell_killed_is_not_called_a_connection_problem(rig_factory):
    rig = rig_factory()
    fresh(rig.root)
    rig.arm(5)
    res = ops.apply(rig.series, [rig.faulty])
    note = " ".join(res.hosts[0].messages)
    assert res.exit_code == 1
    assert "connection problem" not in note and ("signal" in note or "killed" in note), note


# ---- faults with a shared ControlMaster (ssh_persist) -------------------------------------------


def _shared(server, root, **options):
    options.setdefault("ssh_config", str(server.client_config))
    return parse_target(f"{server.alias}:{root}", shared_master=True, **options)


def _kill_master(t) -> None:
    """SIGKILL the master: its socket file stays behind with nobody listening (stale)."""
    pid = t.master_pid()
    assert pid is not None
    os.kill(pid, 9)
    deadline = time.monotonic() + 5
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert t.master_pid() is None and os.listdir(t.control_dir), "the socket should be stale"


def _session_processes(server) -> list[int]:
    """sshd's per-connection processes (children and theirs): stopping or killing them with
    the listener makes the host 'down' or 'wedged' for a connection that is already open."""
    parent = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    parent[int(entry)] = int(fh.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    found, frontier = [], [server.proc.pid]
    while frontier:
        kids = [pid for pid, ppid in parent.items() if ppid in frontier]
        found += kids
        frontier = kids
    return found


def test_stale_socket_does_not_break_a_run(sshd_factory, tmp_path):
    server = sshd_factory(1).servers[0]
    t = _shared(server, tmp_path)
    t.run(b"true")
    _kill_master(t)
    before = server.connections()
    assert t.run(b"echo fresh").stdout == b"fresh\n"  # ssh unlinks the stale socket
    server.wait_log(lambda s: s.connections() > before)
    assert server.connections() - before == 1 and t.master_pid() is not None
    t.close()


@pytest.mark.parametrize("stale", [False, True])
def test_host_down_after_a_master_says_refused(sshd_factory, tmp_path, stale):
    server = sshd_factory(1).servers[0]
    t = _shared(server, tmp_path)
    t.run(b"true")
    if stale:
        _kill_master(t)
    sessions = _session_processes(server)
    server.stop()
    for pid in sessions:  # the master's own sshd process goes down with the host
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, 9)
    deadline = time.monotonic() + 5
    while t.master_pid() is not None and time.monotonic() < deadline:
        time.sleep(0.05)  # a live master notices its connection is gone
    with pytest.raises(TransportError) as info:
        t.run(b"true")
    assert str(info.value).startswith(server.alias)
    assert "connection refused" in str(info.value), info.value
    t.close()


def test_auth_failure_with_a_stale_socket_says_permission_denied(sshd, tmp_path):
    from support.sshd import make_client_config, make_keys

    good = _shared(sshd, tmp_path)
    good.run(b"true")
    _kill_master(good)  # same user@host:port -> the same socket name
    stranger = make_keys(tmp_path / "stranger")
    own_config = sshd.client_config
    try:
        config = make_client_config(tmp_path / "cfg", [sshd], sshd.keys, identity=stranger.user_key)
    finally:
        sshd.client_config = own_config
    bad = _shared(sshd, tmp_path, ssh_config=str(config))
    with pytest.raises(TransportError) as info:
        bad.run(b"true")
    assert str(info.value).startswith(sshd.alias)
    assert "permission denied" in str(info.value).lower() and "BatchMode" in str(info.value)


def test_connect_timeout_with_a_stale_socket(sshd, tmp_path, ssh_control_dir):
    import socket
    import subprocess

    def target_with_a_stale_socket(port):
        t = parse_target(
            f"ssh://root@127.0.0.1:{port}/tmp",
            shared_master=True,
            connect_timeout=1,
            ssh_config=str(sshd.client_config),
        )
        # A stale socket exactly where this host's master would live (ssh -G expands %C).
        shown = subprocess.run(
            t.ssh_args() + ["-G", "--", t.host], capture_output=True, text=True, check=True
        ).stdout
        path = next(ln.split(None, 1)[1] for ln in shown.splitlines() if ln.startswith("controlpath "))
        assert path.startswith(str(ssh_control_dir))
        stale = socket.socket(socket.AF_UNIX)
        stale.bind(path)
        stale.close()
        return t

    silent_port_times_out(target_with_a_stale_socket)


def test_overall_timeout_on_a_shared_master_and_recovery(sshd, tmp_path):
    t = _shared(sshd, tmp_path, timeout=1)
    t.run(b"true")
    pid = t.master_pid()
    with pytest.raises(TransportError, match="no answer within 1 s"):
        t.run(b"sleep 4")
    assert t.run(b"echo alive", timeout=10).stdout == b"alive\n"
    assert t.master_pid() == pid  # the master survived its client's timeout


def test_wedged_connection_behind_a_shared_master_is_replaced_not_waited_on(sshd_factory, tmp_path):
    """The connection a kept master holds stops answering (its sshd session SIGSTOPped; TCP
    itself stays up, so no timeout of ssh's own fires). The master's keepalives give up within
    ~3 intervals, the waiting client falls back to a fresh connection (OpenSSH does this when
    the master fails before the session opened, so no byte of the program was consumed), and
    the program runs once. Without keepalives the run would wait for the overall timeout."""
    import signal

    server = sshd_factory(1).servers[0]
    t = _shared(server, tmp_path, connect_timeout=1)
    t.run(b"true")
    old_master = t.master_pid()
    sessions = _session_processes(server)
    assert sessions
    for pid in sessions:
        os.kill(pid, signal.SIGSTOP)
    try:
        before = server.connections()
        start = time.monotonic()
        result = t.run(b"echo once >> " + shlex.quote(str(tmp_path / "ran")).encode(), timeout=15)
        assert time.monotonic() - start < 10, "the run waited on a dead connection"
        assert result.returncode == 0
        assert (tmp_path / "ran").read_text() == "once\n"
        server.wait_log(lambda s: s.connections() > before)
        assert server.connections() - before == 1
        assert t.master_pid() not in (None, old_master)
    finally:
        for pid in sessions:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

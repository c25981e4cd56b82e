"""Recovery by itself and no trace after revert.

* A lock whose owner is provably dead (same host, machine and boot; pid gone, a zombie, or its
  recorded start time no longer matching) is taken over by the next operation, which says so and
  journals it; live owners and owners patchkit cannot judge (another host, pid namespace, an
  unidentifiable boot) are still refused. Judged with real processes, under GNU and BusyBox.
* SIGKILL of the whole `invoke` process group and of the target shell at spread instants of an
  apply (PATH shims count the target program's external commands, as in
  tests/faults/test_engine_crash.py, and kill both at the Nth), locally under GNU and BusyBox
  and over the loopback sshd: a plain `patch.revert` or `patch.apply` then succeeds alone, and
  after revert the tree, `.git` included, is exactly what it was before apply.
* A successful revert removes `.patchkit/`, the exclude line and the directories apply created;
  the journal comes back in the answer (`--keep-journal` keeps it on the target).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from patchkit import ops
from patchkit.transport import LocalTransport
from support.cli import invoke
from support.crash_tree import AFTER, BEFORE, checkout, snapshot
from support.engine import busybox_local, git_diff, make_series, read_tree, write_tree
from support.shims import TOOLS, killer_transport, run_invoke_in_group, spread_instants

pytestmark = [pytest.mark.sshd]

REPO = Path(__file__).resolve().parents[2]
KILL_TOOLS = TOOLS + ["ls", "rmdir"]
WAIT_S = 20.0


@pytest.fixture(scope="module")
def series(tmp_path_factory):
    work = tmp_path_factory.mktemp("recovery-series")
    patch = git_diff(BEFORE, AFTER, work)
    pinned = {k: v for k, v in BEFORE.items() if v is not None}
    return str(make_series(work / "series", pinned, [("0001-multi.patch", patch)]))


# ---- identity facts, as the target program records them ----------------------------------------


def _first_line(path: str) -> str:
    try:
        with open(path) as fh:
            return fh.readline().strip() or "-"
    except OSError:
        return "-"


def proc_start(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().rsplit(")", 1)[1].split()[19]


def proc_state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return "gone"


def lock_line(pid: int, **over) -> str:
    ns = os.readlink("/proc/self/ns/pid").split("[", 1)[1].rstrip("]")
    machine = _first_line("/etc/machine-id")
    if machine == "-":
        machine = _first_line("/var/lib/dbus/machine-id")
    facts = dict(
        pid=str(pid),
        host=os.uname().nodename,
        user="someone",
        op="apply",
        time=str(int(time.time()) - 7),
        start=proc_start(pid) if proc_state(pid) != "gone" else "1",
        boot=_first_line("/proc/sys/kernel/random/boot_id"),
        ns=ns,
        machine=machine,
    )
    facts.update(over)
    return " ".join(f"{k}={v}" for k, v in facts.items()) + "\n"


def gone_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


@pytest.fixture(params=["gnu", "busybox"])
def shell_target(request, tmp_path):
    """make(root) -> a transport for root, under the system sh or under BusyBox alone."""
    if request.param == "gnu":
        return lambda root: LocalTransport(label=str(root), root=str(root))
    bb = request.getfixturevalue("busybox_bin")
    return lambda root: busybox_local(bb, root)


def fresh(root: Path) -> None:
    shutil.rmtree(root, ignore_errors=True)
    write_tree(root, {k: v for k, v in BEFORE.items() if v is not None})


def plant_lock(root: Path, line: str) -> None:
    (root / ".patchkit").mkdir(parents=True, exist_ok=True)
    (root / ".patchkit" / "lock").write_text(line)


# ---- whose lock may be taken over --------------------------------------------------------------


def test_live_owner_is_refused_naming_it(series, tmp_path, shell_target):
    root = tmp_path / "t"
    fresh(root)
    live = subprocess.Popen(["sleep", "60"])
    try:
        plant_lock(root, lock_line(live.pid))
        before = snapshot(root)
        res = ops.apply(series, [shell_target(root)])
        status = ops.status(series, [shell_target(root)]).hosts[0]
    finally:
        live.kill()
        live.wait()
    host = res.hosts[0]
    assert res.exit_code == 1 and host.state == "locked", res.to_json()
    assert host.lock["state"] == "held" and host.took_over is None
    note = " ".join(host.messages)
    assert f"pid={live.pid}" in note and f"host={os.uname().nodename}" in note and "op=apply" in note
    assert 7 <= host.lock["age_s"] < 120 and f"({host.lock['age_s']} s ago" in note, note  # its age
    assert snapshot(root) == before
    assert any(m.startswith("locked by") for m in status.messages), status.messages


@pytest.mark.parametrize("case", ["pid-gone", "zombie", "pid-reused", "rebooted", "legacy-dir"])
def test_dead_owner_is_taken_over_and_journaled(series, tmp_path, shell_target, case):
    root = tmp_path / "t"
    fresh(root)
    keep = None
    if case == "pid-gone":
        line = lock_line(gone_pid())
    elif case == "zombie":
        keep = subprocess.Popen(["true"])  # never reaped until the end: a zombie
        deadline = time.monotonic() + WAIT_S
        while proc_state(keep.pid) != "Z":
            assert time.monotonic() < deadline
            time.sleep(0.01)
        line = lock_line(keep.pid, start=proc_start(keep.pid))
    elif case == "pid-reused":
        keep = subprocess.Popen(["sleep", "60"])  # alive, but not the process that took the lock
        line = lock_line(keep.pid, start=str(int(proc_start(keep.pid)) - 1))
    elif case == "rebooted":
        if _first_line("/etc/machine-id") == "-" and _first_line("/var/lib/dbus/machine-id") == "-":
            pytest.skip("no machine id here: a reboot cannot be told from another machine")
        line = lock_line(1, boot="00000000-0000-0000-0000-000000000000")  # pid 1 lives, but in this boot
    else:  # an older patchkit's lock directory
        line = f"pid={gone_pid()} host={os.uname().nodename} user=x op=apply time=1\n"
    try:
        if case == "legacy-dir":
            (root / ".patchkit" / "lock").mkdir(parents=True)
            (root / ".patchkit" / "lock" / "owner").write_text(line)
        else:
            plant_lock(root, line)
        status = ops.status(series, [shell_target(root)]).hosts[0]
        assert status.lock["state"] == "dead", status
        assert any("the next apply or revert takes it over" in m for m in status.messages)
        res = ops.apply(series, [shell_target(root)])
    finally:
        if keep is not None:
            keep.kill()
            keep.wait()
    host = res.hosts[0]
    assert res.exit_code == 0, res.to_json()
    assert read_tree(root, AFTER.keys()) == AFTER
    assert host.took_over["reason"] == (case if case != "legacy-dir" else "pid-gone")
    assert host.took_over["owner"]["pid"] == line.split()[0][4:]
    assert any(m.startswith("took over the lock of a dead operation") for m in host.messages)
    journal = (root / ".patchkit" / "journal").read_text()
    assert f" apply took-over-lock series reason={host.took_over['reason']} {line.strip()}" in journal
    assert not (root / ".patchkit" / "lock").exists()
    assert sorted(p.name for p in (root / ".patchkit").iterdir()) == ["journal", "manifest", "mkdirs", "orig"]
    res = ops.revert(series, [shell_target(root)])  # the takeover is in the answer's journal
    assert res.exit_code == 0 and not (root / ".patchkit").exists()
    assert [j["event"] for j in res.hosts[0].journal] == [
        "took-over-lock",
        "staged",
        "committing",
        "applied",
        "reverted",
    ]


@pytest.mark.parametrize("case", ["other-pid-namespace", "other-machine", "other-host"])
def test_owner_that_cannot_be_judged_is_refused(series, tmp_path, shell_target, case):
    root = tmp_path / "t"
    fresh(root)
    over = {
        "other-pid-namespace": dict(ns="1"),
        "other-machine": dict(machine="f" * 32),
        "other-host": dict(host="gpu-elsewhere"),
    }[case]
    plant_lock(root, lock_line(gone_pid(), **over))  # its pid is gone *here*: that proves nothing
    before = snapshot(root)
    res = ops.revert(series, [shell_target(root)])
    host = res.hosts[0]
    assert res.exit_code == 1 and host.lock == {**host.lock, "state": "foreign", "reason": case}
    assert "patch.unlock" in " ".join(host.messages)
    assert snapshot(root) == before


def test_a_taker_that_died_in_the_act_is_no_obstacle(series, tmp_path, shell_target):
    root = tmp_path / "t"
    fresh(root)
    plant_lock(root, lock_line(gone_pid()))
    (root / ".patchkit" / "lock.break").write_text(lock_line(gone_pid(), op="revert"))
    (root / ".patchkit" / f"lock.{gone_pid()}").write_text(lock_line(gone_pid()))  # killed while locking
    res = ops.apply(series, [shell_target(root)])
    assert res.exit_code == 0, res.to_json()
    assert sorted(p.name for p in (root / ".patchkit").iterdir()) == ["journal", "manifest", "mkdirs", "orig"]
    # a live taker, though, is respected
    live = subprocess.Popen(["sleep", "60"])
    try:
        plant_lock(root, lock_line(gone_pid()))
        (root / ".patchkit" / "lock.break").write_text(lock_line(live.pid, op="revert"))
        res = ops.revert(series, [shell_target(root)])
    finally:
        live.kill()
        live.wait()
    assert res.exit_code == 1 and "taking over a dead lock" in " ".join(res.hosts[0].messages)


def test_concurrent_takers_one_wins(series, tmp_path):
    """Six operations meet one dead lock at once: one applies, the rest are refused by a live
    lock (or find the series applied); the takeover is journaled once."""
    root = tmp_path / "t"
    for _ in range(3):
        fresh(root)
        plant_lock(root, lock_line(gone_pid()))
        results = [None] * 6

        def run(i, results=results):
            results[i] = ops.apply(series, [str(root)])

        threads = [threading.Thread(target=run, args=(i,)) for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(WAIT_S)
        hosts = [r.hosts[0] for r in results]
        assert sum(1 for h in hosts if h.written) == 1, [h.messages for h in hosts]
        for h in hosts:
            assert h.exit_code == 0 or h.state == "locked", h
        assert read_tree(root, AFTER.keys()) == AFTER
        assert (root / ".patchkit/journal").read_text().count(" took-over-lock ") == 1


# ---- no trace ----------------------------------------------------------------------------------


@pytest.mark.parametrize("exclude", ["template", "no-final-newline", "no-file", "no-info-dir"])
def test_revert_leaves_no_trace_git_included(series, tmp_path, exclude):
    root = checkout(tmp_path / "t", exclude)
    before = snapshot(root)
    proc = invoke("patch.apply", "--series", series, "--target", str(root))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    status = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"],
        cwd=root,
        capture_output=True,
        text=True,
        env=dict(os.environ, GIT_OPTIONAL_LOCKS="0"),
    )
    assert ".patchkit" not in status.stdout, status.stdout  # hidden while applied
    exclude_now = (root / ".git/info/exclude").read_bytes()
    assert exclude_now.split(b"\n")[-2:] == [b"/.patchkit/", b""], exclude_now  # a line of its own
    proc = invoke("patch.revert", "--series", series, "--target", str(root), "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    host = json.loads(proc.stdout)["hosts"][0]
    assert [j["event"] for j in host["journal"]] == ["staged", "committing", "applied", "reverted"]
    assert all(j["series"] == "series" and isinstance(j["time"], int) for j in host["journal"])
    assert snapshot(root) == before


def test_keep_journal_keeps_it_and_a_later_revert_takes_it(series, tmp_path):
    root = checkout(tmp_path / "t")
    before = snapshot(root)
    assert invoke("patch.apply", "--series", series, "--target", str(root)).returncode == 0
    proc = invoke("patch.revert", "--series", series, "--target", str(root), "--keep-journal")
    assert proc.returncode == 0, proc.stdout
    assert "journal:" in proc.stdout and "apply committing series" in proc.stdout
    assert "kept on the target" in proc.stdout
    assert read_tree(root, BEFORE.keys()) == BEFORE
    assert sorted(p.name for p in (root / ".patchkit").iterdir()) == ["exclude", "exclude.orig", "journal"]
    assert (root / ".git/info/exclude").read_bytes().endswith(b"/.patchkit/\n")  # still hidden
    events = [ln.split()[2] for ln in (root / ".patchkit/journal").read_text().splitlines()]
    assert events == ["staged", "committing", "applied", "reverted"]
    proc = invoke("patch.revert", "--series", series, "--target", str(root))  # nothing to revert
    assert proc.returncode == 0 and "nothing to revert" in proc.stdout and "journal:" in proc.stdout
    assert snapshot(root) == before
    # kept, then applied again: the next plain revert answers with both rounds, leaves nothing
    assert invoke("patch.apply", "--series", series, "--target", str(root)).returncode == 0
    assert invoke("patch.revert", "--series", series, "--target", str(root), "--keep-journal").returncode == 0
    assert invoke("patch.apply", "--series", series, "--target", str(root)).returncode == 0
    res = ops.revert(series, [str(root)])
    assert [j["event"] for j in res.hosts[0].journal] == ["staged", "committing", "applied", "reverted"] * 2
    assert snapshot(root) == before


def test_no_trace_under_busybox(series, tmp_path, busybox_bin):
    root = checkout(tmp_path / "t", "no-final-newline")
    before = snapshot(root)
    t = busybox_local(busybox_bin, root)
    assert ops.apply(series, [t]).exit_code == 0
    assert (root / ".git/info/exclude").read_bytes() == b"# mine\n*.log\n/.patchkit/\n"
    res = ops.revert(series, [t])
    assert res.exit_code == 0 and len(res.hosts[0].journal) == 4, res.to_json()
    assert snapshot(root) == before


def test_refused_apply_leaves_no_state_folder(series, tmp_path):
    root = checkout(tmp_path / "t")
    (root / "pkg/b.py").write_bytes(b"drifted\n")
    before = snapshot(root)
    proc = invoke("patch.apply", "--series", series, "--target", str(root))
    assert proc.returncode == 1 and "drifted" in proc.stdout
    assert snapshot(root) == before


@pytest.mark.parametrize("exclude", ["no-final-newline", "no-info-dir"])
def test_killed_at_every_command_then_revert_leaves_no_trace(series, tmp_path, exclude):
    """The target shell SIGKILLed at each external command of an apply on a checkout; a plain
    revert afterwards restores every byte, .git included, and leaves no .patchkit."""
    root = tmp_path / "t"
    checkout(root, exclude)
    t, counter = killer_transport(root, tmp_path, 10**6)
    assert ops.apply(series, [t]).exit_code == 0
    total = int(counter.read_text())
    for at in range(1, total + 1):
        before = snapshot(checkout(root, exclude))
        t, _ = killer_transport(root, tmp_path, at)
        assert ops.apply(series, [t]).exit_code != 0, f"not killed at command {at}"
        res = ops.revert(series, [str(root)])
        assert res.exit_code == 0, (at, res.to_json())
        assert snapshot(root) == before, at


def test_exclude_edited_while_applied_loses_only_our_line(series, tmp_path):
    root = checkout(tmp_path / "t")
    assert ops.apply(series, [str(root)]).exit_code == 0
    with open(root / ".git/info/exclude", "ab") as fh:
        fh.write(b"build/\n")
    original = (root / ".patchkit/exclude.orig").read_bytes()
    res = ops.revert(series, [str(root)])
    assert res.exit_code == 0
    assert (root / ".git/info/exclude").read_bytes() == original + b"build/\n"
    assert any("only the /.patchkit/ line" in m for m in res.hosts[0].messages)
    assert not (root / ".patchkit").exists()


# ---- SIGKILL of the whole invoke process group -------------------------------------------------


class Killer:
    """Shims first on the target's PATH: at the Nth external command, SIGKILL the invoke process
    group (and, with kill_shell, the target shell itself: a remote one is not in that group)."""

    def __init__(self, work: Path, real_dir: Path | None = None):
        self.work = work
        self.bindir = work / "shims"
        self.bindir.mkdir(parents=True)
        self.counter, self.at, self.pgid = work / "count", work / "at", work / "pgid"
        self.shellpid, self.kill_shell = work / "shellpid", work / "kill-shell"
        q = lambda p: shlex.quote(str(p))  # noqa: E731
        for tool in KILL_TOOLS:
            real = (real_dir / tool) if real_dir else shutil.which(tool)
            (self.bindir / tool).write_text(
                "#!/bin/sh\n"
                f"read n < {q(self.counter)}; n=$((n+1)); echo $n > {q(self.counter)}\n"
                f"read at < {q(self.at)}\n"
                f'if [ "$n" -eq "$at" ]; then echo $PPID > {q(self.shellpid)}; read g < {q(self.pgid)}; '
                f"kill -9 -$g 2>/dev/null; [ -f {q(self.kill_shell)} ] && kill -9 $PPID 2>/dev/null; "
                "kill -9 $$; fi\n"
                f'exec {q(real)} "$@"\n'
            )
            (self.bindir / tool).chmod(0o755)

    def run(self, args: list[str], at: int, env=None, kill_shell=False) -> subprocess.Popen:
        self.counter.write_text("0\n")
        self.at.write_text(f"{at}\n")
        self.shellpid.unlink(missing_ok=True)
        if kill_shell:
            self.kill_shell.write_text("")
        else:
            self.kill_shell.unlink(missing_ok=True)
        proc, _, _ = run_invoke_in_group(args, self.pgid, env=env)
        return proc

    def commands(self) -> int:
        return int(self.counter.read_text())

    def wait_shell_gone(self) -> None:
        """The target shell got its SIGKILL (or, when only the client died, ran to its end)."""
        deadline = time.monotonic() + WAIT_S
        while self.shellpid.exists() and proc_state(int(self.shellpid.read_text())) not in ("gone", "Z"):
            assert time.monotonic() < deadline, "the target shell outlived the kill"
            time.sleep(0.02)


def spread(total: int, count: int = 7) -> list[int]:
    return spread_instants(total, count)


def kill_and_recover(
    series,
    root: Path,
    killer: Killer,
    killed_args: list[str],
    plain: list[str],
    env=None,
    kill_shell=lambda n: False,
) -> list[tuple]:
    checkout(root)
    proc = killer.run(["patch.apply", "--series", series, *killed_args], at=10**6, env=env)
    assert proc.returncode == 0, proc.stdout
    total = killer.commands()
    assert total > 20
    outcomes = []
    for n, at in enumerate(spread(total)):
        pristine = snapshot(checkout(root))
        proc = killer.run(
            ["patch.apply", "--series", series, *killed_args], at=at, env=env, kill_shell=kill_shell(n)
        )
        assert proc.returncode == -signal.SIGKILL, (at, proc.returncode)
        killer.wait_shell_gone()
        locked = (root / ".patchkit" / "lock").exists()
        op = "patch.revert" if n % 2 == 0 else "patch.apply"
        done = invoke(op, "--series", series, *plain, "--json")
        assert done.returncode == 0, (at, op, done.stdout, done.stderr)
        host = json.loads(done.stdout)["hosts"][0]
        if locked:
            assert host["took_over"] and host["took_over"]["state"] == "dead", (at, host)
        if op == "patch.apply":
            assert read_tree(root, AFTER.keys()) == AFTER, at
            assert ops.revert(series, [plain[1]], _plain_opts(plain)).exit_code == 0
        assert snapshot(root) == pristine, (at, op)
        outcomes.append((at, op, locked and host["took_over"]["reason"]))
    print("killed at command (n, then, lock taken over):", outcomes)
    assert sum(1 for o in outcomes if o[2]) >= 3, outcomes  # most instants hold the lock
    return outcomes


def _plain_opts(plain: list[str]) -> ops.Options:
    given = dict(zip(plain[::2], plain[1::2]))
    cfg = given.get("--ssh-config")
    return ops.Options(exec_prefix=given.get("--exec"), transport_options={"ssh_config": cfg} if cfg else {})


# A local target shell runs in a session of its own (a terminal's Ctrl-C reaches it only through
# patchkit, which waits for it: tests/faults/test_interrupt.py), so a SIGKILL of invoke's group
# does not reach it: the shims kill it as well, as the ssh test does at its even instants.


def test_sigkill_of_invoke_at_spread_instants_local(series, tmp_path):
    root = tmp_path / "t"
    killer = Killer(tmp_path / "k")
    env = dict(os.environ, PATH=f"{killer.bindir}:{os.environ['PATH']}")
    outcomes = kill_and_recover(
        series,
        root,
        killer,
        ["--target", str(root)],
        ["--target", str(root)],
        env=env,
        kill_shell=lambda n: True,
    )
    assert {o[2] for o in outcomes if o[2]} <= {"zombie", "pid-gone"}


def test_sigkill_of_invoke_at_spread_instants_busybox(series, tmp_path, busybox_bin):
    root = tmp_path / "t"
    killer = Killer(tmp_path / "k", real_dir=busybox_bin)
    shell = f"env PATH={killer.bindir}:{busybox_bin} {busybox_bin / 'busybox'}"
    plain = f"env PATH={busybox_bin} {busybox_bin / 'busybox'}"  # recovery under BusyBox too
    kill_and_recover(
        series,
        root,
        killer,
        ["--target", str(root), "--exec", shell],
        ["--target", str(root), "--exec", plain],
        kill_shell=lambda n: True,
    )


def test_sigkill_over_ssh_at_spread_instants(series, tmp_path, sshd):
    """Over the loopback sshd the target shell is not in invoke's group: it dies with it (the
    host's session ends) at even instants, and at odd ones runs on to its end unattended."""
    root = tmp_path / "t"
    killer = Killer(tmp_path / "k")
    spec = f"{sshd.alias}:{root}"
    prefix = f"env PATH={killer.bindir}:{os.environ['PATH']}"
    cfg = ["--ssh-config", str(sshd.client_config)]
    kill_and_recover(
        series,
        root,
        killer,
        ["--target", spec, "--exec", prefix, *cfg],
        ["--target", spec, *cfg],
        kill_shell=lambda n: n % 2 == 0,
    )

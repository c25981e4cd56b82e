"""Ctrl-C (and SIGTERM) during `patch.apply`, at many instants: no trace, or the whole apply.

PATH shims count the target program's external commands and, at the Nth, signal the `invoke`
process group, as a terminal's Ctrl-C does (the target shell runs in a session of its own:
patchkit passes the signal on to it and waits). Afterwards either the run exited 130 (143),
printed no "wrote:", and the tree -- `.git` included, modes too -- is byte-identical to before,
with no `.patchkit/` and no temporary folder left; or the signal came during the commit, which a
signal never cuts short: exit 0, "wrote: …", every file patched. Locally and over the loopback
sshd. Where the target shell is SIGKILLed as well (it cannot clean up), the message names
exactly what is left, and the next command alone removes it.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support.cli import interrupt, popen_module
from support.crash_tree import AFTER, BEFORE, checkout, snapshot
from support.engine import git_diff, make_series, read_tree
from support.shims import run_invoke_in_group, spread_instants

pytestmark = [pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
TOOLS = ["mv", "cp", "ln", "sed", "rm", "mkdir", "wc", "sha256sum", "mktemp", "date", "uname", "chmod", "ls"]
TOOLS += ["rmdir", "cat", "find", "cut", "head", "tr", "sort"]


@pytest.fixture(scope="module")
def series(tmp_path_factory):
    work = tmp_path_factory.mktemp("interrupt-series")
    patch = git_diff(BEFORE, AFTER, work)
    pinned = {k: v for k, v in BEFORE.items() if v is not None}
    return str(make_series(work / "series", pinned, [("0001-multi.patch", patch)]))


class Interrupter:
    """Shims first on the target's PATH: at the Nth external command, ``kill -s SIG`` to the
    invoke process group (and, with ``kill_shell``, SIGKILL to the target shell), then the
    real command, as after a Ctrl-C that the target's own commands never see."""

    def __init__(self, work: Path, real_dir: Path | None = None):
        self.work = work
        self.bindir = work / "shims"
        self.bindir.mkdir(parents=True)
        self.tmp = work / "tmp"  # the target program's TMPDIR: nothing may stay in it
        self.tmp.mkdir()
        self.counter, self.at, self.pgid = work / "count", work / "at", work / "pgid"
        self.sig, self.kill_shell = work / "sig", work / "kill-shell"
        q = lambda p: shlex.quote(str(p))  # noqa: E731
        for tool in TOOLS:
            real = str(real_dir / tool) if real_dir else shutil.which(tool)
            if real_dir and not (real_dir / tool).exists():
                continue
            assert real, tool
            (self.bindir / tool).write_text(
                "#!/bin/sh\n"
                f"read n < {q(self.counter)}; n=$((n+1)); echo $n > {q(self.counter)}\n"
                f"read at < {q(self.at)}\n"
                f'if [ "$n" -eq "$at" ]; then read g < {q(self.pgid)}; read s < {q(self.sig)}; '
                f'[ -f {q(self.kill_shell)} ] && kill -9 "$PPID"; kill -s "$s" -- "-$g"; fi\n'
                f'exec {q(real)} "$@"\n'
            )
            (self.bindir / tool).chmod(0o755)

    @property
    def path(self) -> str:
        return f"{self.bindir}:{os.environ['PATH']}"

    def run(self, args: list[str], at: int, sig: str = "INT", kill_shell: bool = False, env=None):
        self.counter.write_text("0\n")
        self.at.write_text(f"{at}\n")
        self.sig.write_text(f"{sig}\n")
        if kill_shell:
            self.kill_shell.write_text("")
        else:
            self.kill_shell.unlink(missing_ok=True)
        proc, out, err = run_invoke_in_group(args, self.pgid, env=env, text=True)
        return proc.returncode, out, err

    def commands(self) -> int:
        return int(self.counter.read_text())


instants = spread_instants


def interrupt_everywhere(series, root: Path, rig: Interrupter, args: list[str], env, count: int, sig="INT"):
    apply = ["patch.apply", "--series", series, *args]
    checkout(root)
    code, out, err = rig.run(apply, at=10**6, env=env)
    assert code == 0, (out, err)
    total = rig.commands()
    assert total > 20, total
    outcomes = []
    for at in instants(total, count):
        pristine = snapshot(checkout(root))
        code, out, err = rig.run(apply, at=at, sig=sig, env=env)
        assert not list(rig.tmp.iterdir()), (at, list(rig.tmp.iterdir()))
        if code == 0:  # the signal came during the commit: it ran to its end
            assert read_tree(root, AFTER.keys()) == AFTER, at
            assert "wrote: " in out, (at, out)
            assert "interrupted" in out + err, (at, out, err)
            revert = rig.run(["patch.revert", "--series", series, *args], at=10**6, env=env)
            assert revert[0] == 0, revert
        else:
            assert code == (143 if sig == "TERM" else 130), (at, code, out, err)
            assert "wrote: " not in out, (at, out)
            assert err.startswith(
                "patchkit: " + ("terminated (SIGTERM); " if sig == "TERM" else "interrupted; ")
            )
            assert ".patchkit" not in err or "not started" in err, (at, err)
        assert snapshot(root) == pristine, (at, code, out, err)  # no .patchkit, .git as it was
        outcomes.append((at, code))
    print("interrupted at command (n, exit code):", outcomes)
    assert {c for _, c in outcomes} >= {130 if sig == "INT" else 143}, outcomes
    return outcomes


def test_ctrl_c_at_spread_instants_of_an_apply_leaves_no_trace(series, tmp_path):
    rig = Interrupter(tmp_path / "rig")
    root = tmp_path / "t"
    env = dict(os.environ, PATH=rig.path, TMPDIR=str(rig.tmp))
    outcomes = interrupt_everywhere(series, root, rig, ["--target", str(root)], env, count=14)
    assert outcomes[-1][1] == 0  # the last command is the commit's: it completes


def test_sigterm_at_spread_instants_of_an_apply_leaves_no_trace(series, tmp_path):
    rig = Interrupter(tmp_path / "rig")
    root = tmp_path / "t"
    env = dict(os.environ, PATH=rig.path, TMPDIR=str(rig.tmp))
    interrupt_everywhere(series, root, rig, ["--target", str(root)], env, count=6, sig="TERM")


def test_ctrl_c_under_busybox_at_spread_instants_leaves_no_trace(series, tmp_path, busybox_bin):
    """The traps under BusyBox's sh and applets (through an --exec prefix)."""
    rig = Interrupter(tmp_path / "rig", real_dir=busybox_bin)
    root = tmp_path / "t"
    shell = f"env PATH={rig.bindir}:{busybox_bin} TMPDIR={rig.tmp} {busybox_bin / 'busybox'}"
    interrupt_everywhere(
        series, root, rig, ["--target", str(root), "--exec", shell], dict(os.environ), count=8
    )


def test_ctrl_c_during_a_fleet_apply_leaves_every_host_as_it_was(series, tmp_path):
    """Two hosts, staged then committed: an interrupt in either phase unstages the staged ones
    and reverts the committed ones (all-or-nothing), then exits 130 saying so per host."""
    rig = Interrupter(tmp_path / "rig")
    roots = [tmp_path / "a", tmp_path / "b"]
    env = dict(os.environ, PATH=rig.path, TMPDIR=str(rig.tmp))
    # one host at a time: the shims' count is then the same from run to run
    hosts = ["--target", str(roots[0]), "--target", str(roots[1]), "--jobs", "1"]
    apply = ["patch.apply", "--series", series, *hosts]
    for root in roots:
        checkout(root)
    assert rig.run(apply, at=10**6, env=env)[0] == 0
    total = rig.commands()
    outcomes = []
    for at in instants(total, 10):
        pristine = [snapshot(checkout(root)) for root in roots]
        code, out, err = rig.run(apply, at=at, env=env)
        assert not list(rig.tmp.iterdir()), at
        if code == 0:
            assert all(read_tree(root, AFTER.keys()) == AFTER for root in roots), at
            assert rig.run(["patch.revert", "--series", series, *hosts], at=10**6, env=env)[0] == 0
        else:
            assert code == 130, (at, code, out, err)
            assert "wrote: " not in out, (at, out)
            assert err.startswith("patchkit: interrupted; ") and err.count("\n") == 1, (at, err)
            if "then unstaged" in err or "then reverted" in err:
                assert "the fleet is all-or-nothing: nothing applied" in err, err
        assert [snapshot(root) for root in roots] == pristine, (at, code, out, err)
        outcomes.append((at, code))
    print("fleet interrupted at command (n, exit code):", outcomes)
    assert {c for _, c in outcomes} >= {130}, outcomes


@pytest.mark.sshd
def test_ctrl_c_over_ssh_at_spread_instants_leaves_no_trace(series, tmp_path, sshd):
    """The remote shell is no process of ours: patchkit signals it through a second, short
    program over the same connection, and reads its answer to the end."""
    rig = Interrupter(tmp_path / "rig")
    root = tmp_path / "t"
    prefix = f"env PATH={rig.path} TMPDIR={rig.tmp}"
    args = ["--target", f"{sshd.alias}:{root}", "--exec", prefix, "--ssh-config", str(sshd.client_config)]
    interrupt_everywhere(series, root, rig, args, dict(os.environ), count=8)


def test_a_target_shell_killed_as_well_is_named_with_what_it_left(series, tmp_path):
    """SIGKILL leaves the program no cleanup: the message says what remains, exactly, and that
    the next command removes it; then a plain revert does."""
    rig = Interrupter(tmp_path / "rig")
    root = tmp_path / "t"
    env = dict(os.environ, PATH=rig.path, TMPDIR=str(rig.tmp))
    args = ["--target", str(root)]
    checkout(root)
    rig.run(["patch.apply", "--series", series, *args], at=10**6, env=env)
    total = rig.commands()
    seen = set()
    for at in instants(total, 7)[1:-1]:
        pristine = snapshot(checkout(root))
        code, out, err = rig.run(["patch.apply", "--series", series, *args], at=at, kill_shell=True, env=env)
        assert code == 130, (at, code, out, err)
        left = sorted(p.name for p in (root / ".patchkit").iterdir()) if (root / ".patchkit").exists() else []
        assert "killed by signal 9" in err, err
        named = err.split(".patchkit/ holds ", 1)[1].split(";")[0].split(" (each")[0]
        assert sorted(n.split(" (")[0] for n in named.split(", ")) == left, (at, left, err)
        if "manifest" in left:
            state = (root / ".patchkit" / "manifest").read_text().split("state ", 1)[1].split()[0]
            assert f"manifest ({state})" in named, (at, state, err)
        assert "the next patch.apply or patch.revert" in err, err
        seen.add(tuple(left))
        done = subprocess.run(
            [sys.executable, "-m", "invoke", "patch.revert", "--series", series, *args, "--json"],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, (at, done.stdout, done.stderr)
        assert snapshot(root) == pristine, at
    assert len(seen) >= 2, seen  # instants with different leftovers


def test_ctrl_c_after_spread_delays_as_a_terminal_sends_it(series, tmp_path):
    """The whole group signalled by a clock (a terminal's Ctrl-C), not at a command: the same."""
    root = tmp_path / "t"
    apply = ["patch.apply", "--series", series, "--target", str(root)]
    revert = ["patch.revert", "--series", series, "--target", str(root)]
    checkout(root)

    def timed(*args: str) -> float:
        start = time.monotonic()
        with popen_module("invoke", *args, cwd=REPO) as proc:
            assert proc.wait(timeout=60) == 0
        return time.monotonic() - start

    startup = timed("--list")  # Python and invoke starting, the tasks loaded: before patchkit runs
    timed(*apply)  # the series compiled and cached, as for every run below
    took = min(timed(*revert), timed(*apply))
    checkout(root)
    codes = []
    for k in range(10):
        pristine = snapshot(checkout(root))
        with popen_module("invoke", *apply, cwd=REPO) as proc:
            settle = startup + (took - startup) * k / 9
            out, err = interrupt(proc, signal.SIGINT, settle=settle, group=True, with_stdout=True)
        codes.append(proc.returncode)
        if proc.returncode == 0:
            assert read_tree(root, AFTER.keys()) == AFTER
            with popen_module("invoke", *revert, cwd=REPO) as undo:
                assert undo.wait(timeout=60) == 0
        else:
            # before the task began (invoke loading the tasks) as after: 130, one line
            assert proc.returncode == 130, (k, proc.returncode, out, err)
            assert err.startswith("patchkit: interrupted") and err.count("\n") == 1, (k, err)
            assert "wrote: " not in out, (k, proc.returncode, out, err)
        assert snapshot(root) == pristine, (k, proc.returncode, out, err)
    print("exit codes, interrupted after 0 .. 1 times the apply's duration:", codes)

"""Kill the target-side program at every external command it runs, during apply and revert.

Shims placed first on PATH count the program's external commands (mv, sed, ln, ...) and, at the
chosen one, SIGKILL the target shell and themselves (support.shims.killer_transport). Afterwards:
every file of the tree (support.crash_tree) is byte-identical to its original or its patched form, `status` says so truthfully, and revert (or apply again)
converges by itself (the dead program's lock is taken over), revert leaving no `.patchkit/`.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from patchkit import ops
from support.crash_tree import AFTER, BEFORE, assert_each_file_whole
from support.engine import git_diff, make_series, read_tree, write_tree
from support.shims import killer_transport

pytestmark = [pytest.mark.slow]


@pytest.fixture(scope="module")
def series(tmp_path_factory):
    work = tmp_path_factory.mktemp("crash-series")
    patch = git_diff(BEFORE, AFTER, work)
    pinned = {k: v for k, v in BEFORE.items() if v is not None}
    return make_series(work / "series", pinned, [("0001-multi.patch", patch)])


def fresh(root: Path) -> None:
    shutil.rmtree(root, ignore_errors=True)
    write_tree(root, {k: v for k, v in BEFORE.items() if v is not None})


def assert_status_truthful(series, root: Path, states: dict[str, str]) -> str:
    res = ops.status(str(series), [str(root)])
    host = res.hosts[0]
    if all(s == "original" for s in states.values()):
        assert host.state == "pristine", host
    elif all(s == "patched" for s in states.values()):
        assert host.state in ("applied", "partial"), host  # committed, manifest maybe not final
    else:
        assert host.state == "partial", host
    return host.state


def count_commands(series, root: Path, work: Path, op: str) -> int:
    t, counter = killer_transport(root, work, 10**6)
    res = getattr(ops, op)(str(series), [t])
    assert res.exit_code == 0, res.to_json()
    return int(counter.read_text())


def test_kill_during_apply_at_every_command(series, tmp_path):
    root = tmp_path / "t"
    fresh(root)
    total = count_commands(series, root, tmp_path, "apply")
    assert total > 10
    for at in range(1, total + 1):
        fresh(root)
        t, _ = killer_transport(root, tmp_path, at)
        res = ops.apply(str(series), [t])
        assert res.exit_code != 0, f"not killed at command {at}"
        states = assert_each_file_whole(root)
        assert_status_truthful(series, root, states)
        # no patch.unlock: the dead owner's lock is taken over
        if at % 2:
            res = ops.revert(str(series), [str(root)])
            assert res.exit_code == 0, (at, res.to_json())
            assert read_tree(root, BEFORE.keys()) == BEFORE, at
            assert not (root / ".patchkit").exists(), at
        else:
            res = ops.apply(str(series), [str(root)])
            assert res.exit_code == 0, (at, res.to_json())
            assert read_tree(root, AFTER.keys()) == AFTER, at
            assert ops.status(str(series), [str(root)]).hosts[0].state == "applied"


def test_kill_during_revert_at_every_command(series, tmp_path):
    root = tmp_path / "t"
    fresh(root)
    assert ops.apply(str(series), [str(root)]).exit_code == 0
    total = count_commands(series, root, tmp_path, "revert")
    for at in range(1, total + 1):
        fresh(root)
        assert ops.apply(str(series), [str(root)]).exit_code == 0
        t, _ = killer_transport(root, tmp_path, at)
        res = ops.revert(str(series), [t])
        assert res.exit_code != 0, f"not killed at command {at}"
        states = assert_each_file_whole(root)
        assert_status_truthful(series, root, states)
        res = ops.revert(str(series), [str(root)])
        assert res.exit_code == 0, (at, res.to_json())
        assert read_tree(root, BEFORE.keys()) == BEFORE, at
        assert not (root / ".patchkit").exists(), at


def test_a_killed_operations_temporary_directory_is_removed_by_the_next(series, tmp_path, monkeypatch):
    """SIGKILL skips the EXIT trap that removes the target program's ${TMPDIR:-/tmp}/patchkit.XXXXXX:
    every killed apply left one behind. The next locking operation removes those whose owner is
    provably dead, and only those: a live owner's, another host's and an ownerless one stay."""
    tmp = tmp_path / "tmpdir"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    root = tmp_path / "t"
    fresh(root)
    total = count_commands(series, root, tmp_path, "apply")
    assert ops.revert(str(series), [str(root)]).exit_code == 0
    assert list(tmp.iterdir()) == []
    t, _ = killer_transport(root, tmp_path, total - 2)
    assert ops.apply(str(series), [t]).exit_code != 0
    (left,) = tmp.iterdir()
    owner = (left / "owner").read_text().split()
    assert owner[0].startswith("pid=")
    # a live owner (this test's process, with its start time), another host, no owner at all
    stat = Path(f"/proc/{os.getpid()}/stat").read_text()
    start = stat.rsplit(") ", 1)[1].split()[19]
    live = [
        f"pid={os.getpid()}" if w.startswith("pid=") else f"start={start}" if w.startswith("start=") else w
        for w in owner
    ]
    other = ["host=elsewhere" if w.startswith("host=") else w for w in owner]
    for name, line in (("patchkit.LIVE01", live), ("patchkit.OTHER1", other), ("patchkit.NOOWN1", None)):
        (tmp / name).mkdir()
        if line:
            (tmp / name / "owner").write_text(" ".join(line) + "\n")
    res = ops.revert(str(series), [str(root)])
    assert res.exit_code == 0, res.to_json()
    assert read_tree(root, BEFORE.keys()) == BEFORE
    assert sorted(p.name for p in tmp.iterdir()) == ["patchkit.LIVE01", "patchkit.NOOWN1", "patchkit.OTHER1"]

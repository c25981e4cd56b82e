"""support.cli runs ``python -m invoke`` and ``python -m patchkit.command`` forked from a warm
interpreter (support/zygote.py): the same exit codes, output and files as a fresh interpreter."""

from __future__ import annotations

import re
import subprocess

import pytest

from support import cli
from support.failures import GOOD, small_series, small_target, tree_digest

ELAPSED = re.compile(r'"elapsed": [0-9.e-]+')


def both(monkeypatch, run) -> tuple[subprocess.CompletedProcess, subprocess.CompletedProcess]:
    monkeypatch.setenv("PATCHKIT_TEST_FRESH_CLI", "1")
    fresh = run()
    monkeypatch.delenv("PATCHKIT_TEST_FRESH_CLI")
    return fresh, run()


def same(fresh, warm) -> None:
    """Equal but for the seconds a run took (--json's "elapsed")."""

    def seen(proc):
        return proc.returncode, ELAPSED.sub("", proc.stdout), proc.stderr

    assert seen(warm) == seen(fresh)


def test_exit_codes_and_output_are_a_fresh_interpreters(tmp_path, monkeypatch):
    series = small_series(tmp_path / "s", GOOD)
    runs = {
        "list": lambda: cli.invoke("--list"),
        "bad option": lambda: cli.invoke("patch.apply", "--jobz", "3"),
        "no series": lambda: cli.invoke("patch.verify", "--series", str(tmp_path / "none"), "--target", "x"),
        "json": lambda: cli.invoke(
            "patch.verify", "--series", str(series), "--target", str(tmp_path / "t"), "--json"
        ),
        "installed": lambda: cli.patchkit_command(
            ["patch.status", "--series", "x"], tmp_path, tmp_path / "xdg"
        ),
    }
    small_target(tmp_path / "t")
    codes = {}
    for name, run in runs.items():
        fresh, warm = both(monkeypatch, run)
        same(fresh, warm)
        codes[name] = warm.returncode
    assert codes == {"list": 0, "bad option": 1, "no series": 2, "json": 0, "installed": 2}


def test_an_apply_writes_the_same_tree(tmp_path, monkeypatch):
    series = small_series(tmp_path / "s", GOOD)
    digests = []
    for fresh in ("1", "0"):
        monkeypatch.setenv("PATCHKIT_TEST_FRESH_CLI", fresh)
        target = small_target(tmp_path / f"t{fresh}")
        proc = cli.invoke("patch.apply", "--series", str(series), "--target", str(target))
        assert proc.returncode == 0, proc.stderr
        assert str(target) in proc.stdout
        digests.append(tree_digest(target / "pkg"))
    assert digests[0] == digests[1]


def test_the_environment_and_folder_are_the_callers(tmp_path, monkeypatch):
    """A variable set by the test reaches the command (an INVOKE_* setting), and ``cwd`` is
    where relative paths resolve."""
    monkeypatch.setenv("INVOKE_PATCHKIT_NO_SUCH_KEY", "1")
    fresh, warm = both(monkeypatch, lambda: cli.invoke("-r", str(cli.REPO), "patch.verify", cwd=tmp_path))
    same(fresh, warm)
    assert warm.returncode == 2


def test_a_timeout_kills_the_command(tmp_path):
    with pytest.raises(subprocess.TimeoutExpired):
        cli.invoke("patch.verify", "--series", "x", "--target", "y", timeout=0.001)

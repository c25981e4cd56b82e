"""Every task that takes ``--series`` takes the same forms (patchkit.locations.series_arg): a
shipped series' name, a folder, and ``auto`` where the task has targets to read. A task with
no target refuses ``auto`` with one line saying what to give instead (exit 2, nothing written).

`upstream.fetch --series sglang-v0.5.9` once read ./sglang-v0.5.9/pin.toml ("No such file or
directory", exit 2); patch.edit, new, refresh, gen-runtime and rebase took only a folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.cli import invoke

# the tasks without a target, each with what else it needs; "{tmp}" is the test's own folder
NO_TARGET = {
    "patch.edit": ["--series", "auto", "--dest", "{tmp}/made"],
    "patch.new": ["--name", "0002-x.patch", "--edited", "{tmp}", "--series", "auto", "--pristine", "{tmp}"],
    "patch.refresh": ["--edited", "{tmp}", "--series", "auto", "--pristine", "{tmp}"],
    "patch.gen-runtime": ["--series", "auto", "--check"],
    "patch.export": ["--series", "auto", "--out", "{tmp}/made"],
    "patch.rebase": ["--series", "auto", "--onto", "0.5.10", "--out", "{tmp}/made"],
    "patch.diff": ["--from", "auto", "--to", "sglang-v0.5.9"],
    "upstream.fetch": ["--series", "auto", "--layout", "installed", "--dest", "{tmp}/made"],
    "upstream.pin": ["--series", "auto", "--tree", "{tmp}"],
}


@pytest.mark.parametrize("task", sorted(NO_TARGET))
def test_auto_without_a_target_is_refused_saying_what_to_give(task, tmp_path):
    argv = [a.format(tmp=tmp_path) for a in NO_TARGET[task]]
    proc = invoke(task, *argv, timeout=60)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    option = "--from" if task == "patch.diff" else "--series"
    assert proc.stderr == (
        f"patchkit: {option} auto: {task} has no target to read, and auto picks the shipped series "
        "pinned to a target's files; name a shipped series (patch.series lists them) or a series folder\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # nothing made


def test_the_authoring_tasks_and_diff_take_a_shipped_name():
    proc = invoke("patch.gen-runtime", "--series", "sglang-v0.5.9", "--check", timeout=60)
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    assert "0001-phase-timer-runtime.patch: rendered from patchkit/timing" in proc.stdout
    proc = invoke("patch.diff", "--from", "sglang-v0.5.9", "--to", "sglang-v0.5.10", timeout=60)
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    assert "sglang-v0.5.10" in proc.stdout


def test_a_name_that_is_neither_is_refused_naming_the_option(tmp_path):
    proc = invoke("patch.diff", "--from", "sglang-v0.5.9", "--to", "sglang-v0.5.999", timeout=60)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert proc.stderr.startswith("patchkit: --to sglang-v0.5.999: no such folder in ")
    assert "(close: sglang-v0.5.9" in proc.stderr


@pytest.mark.wheels
def test_upstream_fetch_takes_a_shipped_name(tmp_path):
    """The case as a user typed it: the shipped name, the installed layout, a --dest."""
    dest = tmp_path / "D"
    proc = invoke(
        "upstream.fetch",
        "--series",
        "sglang-v0.5.9",
        "--layout",
        "installed",
        "--dest",
        str(dest),
        timeout=600,
    )
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    assert proc.stdout.startswith(f"tree: {dest}")
    assert (dest / "sglang" / "srt" / "speculative" / "eagle_worker.py").is_file()


@pytest.mark.wheels
def test_patch_edit_takes_a_shipped_name(sglang_059_pristine, tmp_path):
    dest = tmp_path / "edit"
    proc = invoke(
        "patch.edit",
        "--series",
        "sglang-v0.5.9",
        "--pristine",
        str(sglang_059_pristine),
        "--dest",
        str(dest),
        timeout=300,
    )
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    assert proc.stdout == f"editable tree: {dest}\n"
    assert (Path(dest) / "python/sglang/srt/speculative/phase_timer.py").is_file()

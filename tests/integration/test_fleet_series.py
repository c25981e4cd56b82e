"""A fleet mid-upgrade: `--series auto` gives each host its own series, apply stays all-or-nothing.

Host A (over a real loopback sshd) holds sglang 0.5.9, host B (a local folder) sglang 0.5.12,
both built from the real wheels. Each must end up exactly as its own series applied alone would
leave it, the answer (table and --json) names each host's series, and revert restores every
byte. When one host cannot stage (its `mkdir` fails on the stage folder, like a full or
read-only disk), no host is changed.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from patchkit import ops
from patchkit.engine import autoseries
from patchkit.transport import LocalTransport, parse_target
from support.cli import invoke as support_invoke
from support.engine import read_tree
from support.shims import mv_failing_into
from support.upstream import sglang_installed

pytestmark = [pytest.mark.sshd, pytest.mark.wheels]

REPO = Path(__file__).resolve().parents[2]
FILES = (
    "sglang/srt/speculative/eagle_worker.py",
    "sglang/srt/speculative/eagle_worker_v2.py",
    "sglang/srt/speculative/phase_timer.py",
)
SERIES = {"0.5.9": REPO / "patches" / "sglang-v0.5.9", "0.5.12": REPO / "patches" / "sglang-v0.5.12"}


def invoke(*args) -> subprocess.CompletedProcess:
    return support_invoke(*args, timeout=180)


@pytest.fixture(scope="module")
def references(tmp_path_factory):
    """Each release's tree before and after its own series, applied alone."""
    out = {}
    for version, series in SERIES.items():
        root = sglang_installed(version, tmp_path_factory.mktemp(f"ref-{version}") / "site-packages")
        original = read_tree(root, FILES)
        assert ops.apply(str(series), [str(root)]).exit_code == 0
        out[version] = {"original": original, "patched": read_tree(root, FILES)}
    assert out["0.5.9"]["patched"] != out["0.5.12"]["patched"]
    return out


@pytest.fixture
def trees(tmp_path):
    return {
        "0.5.9": sglang_installed("0.5.9", tmp_path / "a" / "site-packages"),
        "0.5.12": sglang_installed("0.5.12", tmp_path / "b" / "site-packages"),
    }


def assert_pristine(root: Path, files: dict) -> None:
    assert read_tree(root, FILES) == files, root
    assert not (root / ".patchkit" / "stage").exists(), root
    assert not (root / ".patchkit" / "manifest").exists(), root


def test_mixed_fleet_apply_status_revert(sshd, trees, references):
    targets = [sshd.url(str(trees["0.5.9"])), str(trees["0.5.12"])]
    args = ["--series", "auto", "--ssh-config", str(sshd.client_config)]
    for t in targets:
        args += ["--target", t]

    proc = invoke("patch.apply", *args, "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    answer = json.loads(proc.stdout)
    assert answer["series"] == ops.PER_HOST and answer["exit_code"] == 0
    assert [(h["series"], h["state"]) for h in answer["hosts"]] == [
        ("sglang-v0.5.9", "applied"),
        ("sglang-v0.5.12", "applied"),
    ]
    assert answer["hosts"][0]["digest"] != answer["hosts"][1]["digest"]
    assert "a series per host" in proc.stderr and "sglang-v0.5.12 (sglang 0.5.12)" in proc.stderr
    for version, root in trees.items():
        assert read_tree(root, FILES) == references[version]["patched"], version

    proc = invoke("patch.status", *args)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("patchkit status: a series per host (sglang-v0.5.12, sglang-v0.5.9)")
    assert lines[1].split()[:3] == ["target", "series", "state"]
    rows = {ln.split()[0]: ln.split() for ln in lines[3:5]}
    label_a = parse_target(targets[0], ssh_config=str(sshd.client_config)).label
    assert rows[label_a][1:4] == ["sglang-v0.5.9", f"({answer['hosts'][0]['digest'][:12]})", "applied"]
    assert rows[targets[1]][1] == "sglang-v0.5.12" and rows[targets[1]][3] == "applied"

    proc = invoke("patch.revert", *args, "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    answer = json.loads(proc.stdout)
    assert [(h["series"], h["state"]) for h in answer["hosts"]] == [
        ("sglang-v0.5.9", "pristine"),
        ("sglang-v0.5.12", "pristine"),
    ]
    for version, root in trees.items():
        assert_pristine(root, references[version]["original"])


def _mkdir_failing_on_stage(shim: Path) -> dict:
    """An environment whose `mkdir` refuses the stage folder (as a full or read-only disk would)."""
    shim.mkdir(parents=True)
    real = shutil.which("mkdir")
    (shim / "mkdir").write_text(
        "#!/bin/sh\n"
        'for a; do case "$a" in */.patchkit/stage*|.patchkit/stage*)\n'
        "  echo \"mkdir: cannot create directory '$a': No space left on device\" >&2; exit 1;;\n"
        "esac; done\n"
        f'exec {shlex.quote(real)} "$@"\n'
    )
    (shim / "mkdir").chmod(0o755)
    return dict(os.environ, PATH=f"{shim}:{os.environ['PATH']}")


def test_mixed_fleet_host_that_cannot_stage_leaves_every_host_untouched(sshd, trees, references, tmp_path):
    host_a = parse_target(sshd.url(str(trees["0.5.9"])), ssh_config=str(sshd.client_config))
    host_b = LocalTransport(
        label="host-b", root=str(trees["0.5.12"]), env=_mkdir_failing_on_stage(tmp_path / "shim")
    )
    try:
        dirs, said = autoseries.resolve_per_host([host_a, host_b])
        assert [Path(d).name for d in dirs] == ["sglang-v0.5.9", "sglang-v0.5.12"], said
        result = ops.apply(ops.PerHostSeries(dirs), [host_a, host_b])
    finally:
        host_a.close()
    assert result.exit_code == 1 and result.per_host
    a, b = result.hosts
    assert (a.series, b.series) == ("sglang-v0.5.9", "sglang-v0.5.12")
    assert b.state == "refused" and "cannot create the stage directories" in " ".join(b.messages)
    assert a.state == "pristine", a
    assert "staged files removed (another host failed)" in a.messages
    assert "not applied: the fleet is all-or-nothing" in a.messages
    for version, root in trees.items():
        assert_pristine(root, references[version]["original"])


def test_mixed_fleet_commit_failure_rolls_every_host_back(sshd, trees, references, tmp_path):
    """Both hosts staged; host A's commit fails (its `mv` into the worker's folder fails, as on
    a read-only directory), so host B, committed with its own series, is reverted."""
    host_a = parse_target(
        sshd.url(str(trees["0.5.9"])),
        ssh_config=str(sshd.client_config),
        remote_shell=mv_failing_into(tmp_path / "shim", "sglang/srt/speculative/"),
    )
    host_b = str(trees["0.5.12"])
    try:
        dirs, _ = autoseries.resolve_per_host([host_a, host_b])
        result = ops.apply(ops.PerHostSeries(dirs), [host_a, host_b])
    finally:
        host_a.close()
    a, b = result.hosts
    assert result.exit_code == 1 and (a.series, b.series) == ("sglang-v0.5.9", "sglang-v0.5.12")
    assert "every file was put back" in " ".join(a.messages), a
    assert b.state == "pristine" and "rolled back (another host failed to commit)" in b.messages
    for version, root in trees.items():
        assert_pristine(root, references[version]["original"])


def test_per_host_series_must_match_the_targets():
    with pytest.raises(ops.PatchkitError) as info:
        ops.apply(ops.PerHostSeries([str(SERIES["0.5.9"])]), ["/a", "/b"])
    assert info.value.exit_code == 2 and "1 series for 2 targets" in info.value.message

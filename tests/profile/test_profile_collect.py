"""profile.collect and profile.report: a report for a server the user started, from a real sshd.

The "server" is two processes (ranks 0 and 1) running the real timing runtime with
PATCHKIT_TIMER_DIR set, as a server started by one's own launcher would; the timing folder is
then fetched over a loopback sshd (through the same agent profile.remote uses) and reported.
The benchmark output is text in sglang.bench_serving's format written by the test: no SGLang
server can run here, and the parser only reads the text.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from patchkit.report.window import read_window, write_window
from patchkit.timing import RUNTIME_PATH
from support.cli import invoke as support_invoke
from support.timing_files import workload

pytestmark = [pytest.mark.sshd]

REPO = Path(__file__).resolve().parents[2]

BENCH_OUTPUT = """\
#Input tokens: 2048
100%|##########| 200/200 [00:31<00:00,  6.32it/s]
============ Serving Benchmark Result ============
Backend:                                 sglang
Successful requests:                     200
Benchmark duration (s):                  31.62
Output token throughput (tok/s):         1,234.56
Accept length:                           3.17
==================================================
"""


def invoke(*args) -> subprocess.CompletedProcess:
    return support_invoke(*args, timeout=180)


@pytest.fixture(scope="module")
def server_root(tmp_path_factory):
    """A 'host' folder whose timing/ a two-rank run wrote, with window.json and a stray file."""
    root = tmp_path_factory.mktemp("host")
    site = root / "site"
    site.mkdir()
    shutil.copyfile(RUNTIME_PATH, site / "phase_timer.py")
    timing = root / "timing"
    start = time.time_ns()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", workload(site, cycles=10, batch_size=2, accepted=(2, 1), rank=rank)],
            env={
                "PATCHKIT_TIMER_DIR": str(timing),
                "PATCHKIT_TIMER_RANK": str(rank),
                "PATCHKIT_TIMER": "host",
                "PATH": "/usr/bin:/bin",
            },
        )
        for rank in (0, 1)
    ]
    assert all(p.wait(timeout=60) == 0 for p in procs)
    write_window(timing, start, time.time_ns(), source="test")
    (timing / "notes.txt").write_text("not a timing file\n")
    assert len(list(timing.glob("*.jsonl"))) == 2
    return root


def ssh_args(sshd) -> list[str]:
    return ["--ssh-config", str(sshd.client_config)]


def test_collect_over_ssh_then_report(sshd, server_root, tmp_path):
    out = tmp_path / "collected"
    before = sshd.connections()
    proc = invoke(
        "profile.collect",
        "--target",
        sshd.url(str(server_root)),
        "--from",
        "timing",
        "--out",
        str(out),
        *ssh_args(sshd),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    source = server_root / "timing"
    names = sorted(p.name for p in source.glob("*.jsonl"))
    assert sorted(p.name for p in out.iterdir()) == sorted(names + ["window.json"])
    for name in names + ["window.json"]:
        assert (out / name).read_bytes() == (source / name).read_bytes(), name
    assert read_window(out) is not None
    assert "collected 2 timing file(s)" in proc.stdout and "(with window.json)" in proc.stdout
    sshd.wait_log(lambda s: s.connections() > before, timeout=3)
    assert sshd.connections() - before == 1  # one stream, one connection

    bench = tmp_path / "bench.txt"
    bench.write_text(BENCH_OUTPUT)
    report = tmp_path / "report"
    proc = invoke("profile.report", "--timing", str(out), "--out", str(report), "--bench", str(bench))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for name in ("table.txt", "trace.json", "phases.png", "summary.json"):
        assert (report / name).stat().st_size > 0, name
    summary = json.loads((report / "summary.json").read_text())
    assert summary["throughput"]["tokens_per_s"] == 1234.56
    assert summary["decode"]["accept_length_reported"] == 3.17
    assert [r["rank"] for r in summary["ranks"]] == [0, 1]  # both ranks collected
    assert summary["cycle"]["count"] == 20  # 10 cycles on each rank
    assert "verify" in proc.stdout and "draft" in proc.stdout
    assert (report / "table.txt").read_text() in proc.stdout


def test_two_nodes_into_one_folder(sshd, server_root, tmp_path):
    """The same folder reached twice (two nodes of one server): both copies kept, renamed."""
    out = tmp_path / "collected"
    proc = invoke(
        "profile.collect",
        "--target",
        sshd.url(str(server_root / "timing")),
        "--target",
        str(server_root / "timing"),
        "--out",
        str(out),
        *ssh_args(sshd),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    jsonl = sorted(p.name for p in out.glob("*.jsonl"))
    assert len(jsonl) == 4 and sum(".node1." in n for n in jsonl) == 2, jsonl


def test_collect_refusals_leave_no_output(sshd, server_root, tmp_path):
    out = tmp_path / "collected"
    proc = invoke(
        "profile.collect",
        "--target",
        sshd.url(str(server_root)),
        "--from",
        "nowhere",
        "--out",
        str(out),
        *ssh_args(sshd),
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "no timing files (*.jsonl)" in proc.stderr and "nowhere" in proc.stderr
    assert not out.exists()

    proc = invoke(
        "profile.collect",
        "--target",
        sshd.url(str(server_root)),
        "--from",
        "timing",
        "--out",
        str(out),
        "--max-mb",
        "0.0001",
        *ssh_args(sshd),
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "more than the limit of 104 bytes" in proc.stderr
    assert not out.exists()

    proc = invoke("profile.collect", "--out", str(out))
    assert proc.returncode == 2 and "needs --target" in proc.stderr


def test_report_of_a_folder_without_timing_is_invalid(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = invoke("profile.report", "--timing", str(empty), "--out", str(tmp_path / "r"))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.startswith("profile: ") and not (tmp_path / "r" / "summary.json").exists()
    proc = invoke("profile.report", "--timing", str(tmp_path / "missing"), "--out", str(tmp_path / "r"))
    assert proc.returncode == 2 and "no such folder" in proc.stderr


def test_collect_twice_into_one_folder_is_refused(server_root, tmp_path):
    out = tmp_path / "collected"
    proc = invoke("profile.collect", "--target", str(server_root / "timing"), "--out", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    proc = invoke("profile.collect", "--target", str(server_root / "timing"), "--out", str(out))
    assert proc.returncode == 2 and "already holds timing files" in proc.stderr
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    proc = invoke(
        "profile.collect",
        "--target",
        str(server_root / "timing"),
        "--out",
        str(tmp_path / "other"),
        "--max-mb",
        "lots",
    )
    assert proc.returncode == 2 and "--max-mb 'lots': a number" in proc.stderr

"""Fleets: several loopback sshd hosts plus a local directory, all-or-nothing apply.

Every host gets its own installed sglang 0.5.9 tree. Apply is two-phase (stage everywhere,
commit only when every host staged); a drifted or unreachable host means nothing is applied
anywhere, and a host whose commit fails (a PATH shim for `mv` on that host only, installed
through its remote shell, fails like a read-only directory) makes the committed hosts roll back.
The summary table has one row per host; the exit code is the worst host's.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from patchkit import ops
from patchkit.transport import parse_target
from support.cli import invoke
from support.crash_tree import AFTER as MULTI_AFTER, BEFORE as MULTI_BEFORE
from support.engine import git_diff, make_series, read_tree, write_tree
from support.shims import mv_failing_into
from support.sshd import free_port, start_fleet
from support.upstream import SERIES_059, sglang_installed

pytestmark = [pytest.mark.sshd, pytest.mark.wheels]

REPO = Path(__file__).resolve().parents[2]
WORKER = "sglang/srt/speculative/eagle_worker.py"
WORKER_V2 = "sglang/srt/speculative/eagle_worker_v2.py"  # 0.5.9's 0008-0013
TIMER = "sglang/srt/speculative/phase_timer.py"
FILES = (WORKER, WORKER_V2, TIMER)
SSH_HOSTS = 3


@pytest.fixture(scope="module")
def fleet(tmp_path_factory, sshd_keys):
    """SSH_HOSTS sshd instances (aliases pk-host-0..), shared by this module's tests."""
    servers = start_fleet(tmp_path_factory.mktemp("fleet"), SSH_HOSTS, keys=sshd_keys)
    yield servers
    servers.stop()


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    root = sglang_installed("0.5.9", tmp_path_factory.mktemp("ref") / "site-packages")
    original = read_tree(root, FILES)
    assert ops.apply(str(SERIES_059), [str(root)]).exit_code == 0
    return {"original": original, "patched": read_tree(root, FILES)}


@pytest.fixture
def roots(tmp_path) -> list[Path]:
    """One installed tree per SSH host, and one more for the local target (last)."""
    return [sglang_installed("0.5.9", tmp_path / f"host{i}" / "site-packages") for i in range(SSH_HOSTS + 1)]


def specs(fleet, roots) -> list[str]:
    return fleet.targets([str(r) for r in roots[:SSH_HOSTS]]) + [str(roots[-1])]


def cli_args(fleet, roots) -> list[str]:
    args = ["--series", str(SERIES_059), "--ssh-config", str(fleet.client_config)]
    for spec in specs(fleet, roots):
        args += ["--target", spec]
    return args


def table(stdout: str) -> dict[str, dict[str, str]]:
    """The summary table: target -> {state, files, wrote, time, result, error}, and each host's notes."""
    lines = stdout.splitlines()
    header = lines.index(next(ln for ln in lines if ln.startswith("target ")))
    columns = lines[header].split()
    rows: dict[str, dict[str, str]] = {}
    i = header + 2
    while i < len(lines) and lines[i] and not lines[i].endswith(":"):
        cells = re.split(r"\s{2,}", lines[i].strip(), maxsplit=len(columns) - 1)
        assert len(cells) in (len(columns), len(columns) - 1), lines[i]  # error may be empty
        rows[cells[0]] = dict(zip(columns[1:], cells[1:]))
        i += 1
    current = None
    for line in lines[i:]:
        if line.endswith(":") and line[:-1] in rows:
            current = line[:-1]
            rows[current]["notes"] = ""
        elif current and line.startswith("  "):
            rows[current]["notes"] += line.strip() + "\n"
    return rows


def connections(fleet) -> list[int]:
    return [s.connections() for s in fleet.servers]


def assert_one_connection_each(fleet, before: list[int]) -> None:
    for server, b in zip(fleet.servers, before):
        server.wait_log(lambda s, b=b: s.connections() > b, timeout=3)
        assert server.connections() - b == 1, server.alias


def assert_untouched(root: Path, files: dict) -> None:
    assert read_tree(root, FILES) == files, root
    assert not (root / ".patchkit" / "stage").exists(), root
    assert not (root / ".patchkit" / "manifest").exists(), root
    assert not (root / ".patchkit" / "orig").exists(), root


# ---- all hosts fine ------------------------------------------------------------------------------


def test_fleet_apply_status_revert(fleet, roots, reference):
    before = connections(fleet)
    proc = invoke("patch.apply", *cli_args(fleet, roots))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # Two programs per SSH host (stage, commit), one connection per host (the control master).
    assert_one_connection_each(fleet, before)
    rows = table(proc.stdout)
    assert list(rows) == [
        parse_target(s, ssh_config=str(fleet.client_config)).label for s in specs(fleet, roots)
    ]
    for row in rows.values():
        assert row["state"] == "applied", row
        assert (row["wrote"], row["result"]) == ("3", "ok"), row
        assert re.fullmatch(r"\d+\.\d\ds", row["time"])
    for root in roots:
        assert read_tree(root, FILES) == reference["patched"], root

    proc = invoke("patch.status", *cli_args(fleet, roots))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = table(proc.stdout)
    assert len(rows) == SSH_HOSTS + 1
    assert {r["state"] for r in rows.values()} == {"applied"}

    res = ops.revert(
        str(SERIES_059),
        specs(fleet, roots),
        ops.Options(transport_options={"ssh_config": str(fleet.client_config)}),
    )
    assert res.exit_code == 0 and {h.state for h in res.hosts} == {"pristine"}, res.to_json()
    for root in roots:
        assert_untouched(root, reference["original"])


def test_fleet_apply_reports_applied(fleet, roots):
    res = ops.apply(
        str(SERIES_059),
        specs(fleet, roots)[-2:],
        ops.Options(transport_options={"ssh_config": str(fleet.client_config)}),
    )
    assert res.exit_code == 0
    assert [h.state for h in res.hosts] == ["applied", "applied"]


# ---- a host fails before commit -----------------------------------------------------------------


def test_drifted_host_means_nothing_applied_anywhere(fleet, roots, reference):
    drifted = roots[1]
    with open(drifted / WORKER, "ab") as fh:
        fh.write(b"# a local edit on host 1\n")
    drifted_files = read_tree(drifted, FILES)
    proc = invoke("patch.apply", *cli_args(fleet, roots))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    rows = table(proc.stdout)
    labels = list(rows)
    assert len(labels) == SSH_HOSTS + 1
    bad = rows[labels[1]]
    assert "pk-host-1" in labels[1]
    assert (bad["state"], bad["result"]) == ("drifted", "REFUSED"), bad
    assert "eagle_worker.py: drifted" in bad["notes"] and "wc -l 1033, pinned 1032" in bad["notes"]
    for label in labels[:1] + labels[2:]:
        row = rows[label]
        assert (row["state"], row["result"]) == ("pristine", "REFUSED"), (label, row)
        assert "staged files removed" in row["notes"] and "all-or-nothing" in row["notes"], row
    for i, root in enumerate(roots):
        assert_untouched(root, drifted_files if i == 1 else reference["original"])


def test_unreachable_host_means_nothing_applied_anywhere(fleet, roots, reference):
    dead = f"ssh://root@127.0.0.1:{free_port()}/srv/nowhere"
    res = ops.apply(
        str(SERIES_059),
        specs(fleet, roots) + [dead],
        ops.Options(transport_options={"ssh_config": str(fleet.client_config)}),
    )
    assert res.exit_code == 1
    *good, last = res.hosts
    assert last.state == "unreachable" and "connection refused" in " ".join(last.messages), last
    assert {h.state for h in good} == {"pristine"}, res.to_json()
    for root in roots:
        assert_untouched(root, reference["original"])


# ---- a host fails during commit -----------------------------------------------------------------


def test_commit_failure_rolls_back_the_committed_hosts(fleet, roots, reference, tmp_path):
    config = str(fleet.client_config)
    failing = 2
    transports = [
        parse_target(
            spec,
            ssh_config=config,
            **(
                {"remote_shell": mv_failing_into(tmp_path / "shim", "sglang/srt/speculative/")}
                if i == failing
                else {}
            ),
        )
        for i, spec in enumerate(specs(fleet, roots))
    ]
    try:
        res = ops.apply(str(SERIES_059), transports)
    finally:
        for t in transports:
            t.close()
    assert res.exit_code == max(h.exit_code for h in res.hosts) == 1, res.to_json()
    for i, host in enumerate(res.hosts):
        if i == failing:
            note = " ".join(host.messages)
            assert f"commit failed in {roots[i]}/sglang/srt/speculative" in note, host
            assert "every file was put back" in note, host
        else:
            assert host.state == "pristine" and host.exit_code == 1, host
            assert "rolled back (another host failed to commit)" in host.messages, host
            assert host.written == []
    for root in roots:  # the failing host put its own files back, the others reverted
        assert_untouched(root, reference["original"])
    # status is truthful everywhere, and a plain apply (no failing mv) converges.
    opts = ops.Options(transport_options={"ssh_config": config})
    status = ops.status(str(SERIES_059), specs(fleet, roots), opts)
    assert {h.state for h in status.hosts} == {"pristine"}, status.to_json()
    res = ops.apply(str(SERIES_059), specs(fleet, roots), opts)
    assert res.exit_code == 0 and {h.state for h in res.hosts} <= {"applied", "ok"}, res.to_json()
    assert ops.status(str(SERIES_059), specs(fleet, roots), opts).exit_code == 0
    for root in roots:
        assert read_tree(root, FILES) == reference["patched"], root
    assert ops.revert(str(SERIES_059), specs(fleet, roots), opts).exit_code == 0
    for root in roots:
        assert_untouched(root, reference["original"])


def test_commit_failure_reports_each_hosts_final_state(fleet, roots, tmp_path):
    config = str(fleet.client_config)
    transports = [
        parse_target(
            spec,
            ssh_config=config,
            **(
                {"remote_shell": mv_failing_into(tmp_path / "shim", "sglang/srt/speculative/")}
                if i == 0
                else {}
            ),
        )
        for i, spec in enumerate(specs(fleet, roots))
    ]
    try:
        res = ops.apply(str(SERIES_059), transports)
    finally:
        for t in transports:
            t.close()
    status = ops.status(
        str(SERIES_059), specs(fleet, roots), ops.Options(transport_options={"ssh_config": config})
    )
    assert [h.state for h in res.hosts] == [h.state for h in status.hosts]


@pytest.fixture(scope="module")
def multi_series(tmp_path_factory):
    work = tmp_path_factory.mktemp("multi-series")
    patch = git_diff(MULTI_BEFORE, MULTI_AFTER, work)
    pinned = {k: v for k, v in MULTI_BEFORE.items() if v is not None}
    return make_series(work / "series", pinned, [("0001-multi.patch", patch)])


def test_commit_failing_half_way_leaves_no_host_patched(fleet, multi_series, tmp_path):
    roots = []
    for i in range(SSH_HOSTS):
        root = tmp_path / f"h{i}"
        write_tree(root, {k: v for k, v in MULTI_BEFORE.items() if v is not None})
        roots.append(root)
    # lib/ is committed before pkg/; the failing host's mv refuses pkg/ only.
    transports = [
        parse_target(
            spec,
            ssh_config=str(fleet.client_config),
            **({"remote_shell": mv_failing_into(tmp_path / "shim", "pkg/")} if i == 1 else {}),
        )
        for i, spec in enumerate(fleet.targets([str(r) for r in roots]))
    ]
    try:
        res = ops.apply(str(multi_series), transports)
    finally:
        for t in transports:
            t.close()
    assert res.exit_code == 1
    assert "every file was put back" in " ".join(res.hosts[1].messages), res.hosts[1]
    for root in roots:
        assert read_tree(root, MULTI_BEFORE.keys()) == MULTI_BEFORE, root
        assert not (root / ".patchkit" / "manifest").exists(), root
        assert not (root / ".patchkit" / "stage").exists(), root

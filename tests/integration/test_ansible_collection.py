"""The Ansible collection patchkit.tools: real ansible-playbook (ansible-core from PyPI) against
loopback sshd hosts, each with its own sglang 0.5.9 tree built from the pinned wheel.

`ANSIBLE_COLLECTIONS_PATH=<checkout>` finds the collection; the action plugin compiles the series
on the controller and runs it through Ansible's own ssh connection. Covered: check + diff mode,
the documented two-task all-or-nothing pattern (staged, applied), a second apply (no change),
revert (byte-identical), and one drifted host (no host's files touched), plus
`ansible-galaxy collection build` and `ansible-doc`. A few playbook runs with several hosts each
(ansible-playbook starts slowly). Results are read through a test-only callback plugin
(tests/ansible_callbacks/record.py).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import pytest

from support.requires import requires
from support.sshd import start_fleet
from support.upstream import SERIES_059, sglang_installed

ANSIBLE = requires("ansible", reason="ansible-core not installed (pip install 'patchkit[ansible]')")
pytestmark = [pytest.mark.sshd, pytest.mark.wheels, ANSIBLE]


REPO = Path(__file__).resolve().parents[2]
COLLECTION = REPO / "ansible_collections" / "patchkit" / "tools"
BIN = Path(sys.executable).parent
HOSTS = 3
WORKER = "sglang/srt/speculative/eagle_worker.py"
FILES = (WORKER, "sglang/srt/speculative/eagle_worker_v2.py", "sglang/srt/speculative/phase_timer.py")

ONE_TASK = """
- hosts: gpu
  gather_facts: false
  tasks:
    - name: series
      patchkit.tools.series:
        series: "{{ series }}"
        root: "{{ root }}"
        state: "{{ state }}"
"""
# the documented all-or-nothing pattern, plus a second apply that must report no change
TWO_TASKS = """
- hosts: gpu
  gather_facts: false
  any_errors_fatal: true
  tasks:
    - name: stage
      patchkit.tools.series: {series: sglang-v0.5.9, root: "{{ root }}", state: staged}
    - name: apply
      patchkit.tools.series: {series: sglang-v0.5.9, root: "{{ root }}", state: applied}
    - name: apply again
      patchkit.tools.series: {series: sglang-v0.5.9, root: "{{ root }}", state: applied}
"""


@pytest.fixture(scope="module")
def fleet(tmp_path_factory, sshd_keys):
    servers = start_fleet(tmp_path_factory.mktemp("ansible-fleet"), HOSTS, keys=sshd_keys)
    yield servers
    servers.stop()


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    return sglang_installed("0.5.9", tmp_path_factory.mktemp("pristine") / "site-packages")


@pytest.fixture
def play(tmp_path, fleet, pristine):
    """Fresh trees, an inventory of the loopback hosts and a runner for ansible-playbook."""
    roots = []
    for i in range(HOSTS):
        root = tmp_path / f"host{i}" / "site-packages"
        shutil.copytree(pristine, root)
        roots.append(root)
    lines = ["[gpu]"]
    for server, root in zip(fleet.servers, roots):
        lines.append(f"{server.alias} ansible_host=127.0.0.1 ansible_port={server.port} root={root}")
    lines += ["[gpu:vars]", "ansible_user=root", f"ansible_ssh_common_args='-F {fleet.client_config}'"]
    (tmp_path / "hosts.ini").write_text("\n".join(lines) + "\n")
    (tmp_path / "one.yml").write_text(ONE_TASK)
    (tmp_path / "two.yml").write_text(TWO_TASKS)
    control = tempfile.mkdtemp(prefix="pka-", dir="/tmp")  # short: unix socket path limit
    env = dict(
        os.environ,
        ANSIBLE_COLLECTIONS_PATH=str(REPO),
        PYTHONPATH=str(REPO),
        PATH=f"{BIN}:{os.environ['PATH']}",
        ANSIBLE_HOME=str(tmp_path / "ansible-home"),
        ANSIBLE_LOCAL_TEMP=str(tmp_path / "ansible-tmp"),
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_SSH_CONTROL_PATH_DIR=control,
        ANSIBLE_RETRY_FILES_ENABLED="0",
        ANSIBLE_CALLBACK_PLUGINS=str(REPO / "tests" / "ansible_callbacks"),
        ANSIBLE_CALLBACKS_ENABLED="record",
        ANSIBLE_FORKS="5",
    )

    def run(playbook: str, *args: str) -> tuple[int, list[dict], str]:
        record = tmp_path / "record.jsonl"
        record.unlink(missing_ok=True)
        proc = subprocess.run(
            [str(BIN / "ansible-playbook"), "-i", "hosts.ini", playbook, *args],
            cwd=tmp_path,
            env=dict(env, PK_ANSIBLE_RECORD=str(record)),
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=240,
        )
        results = [json.loads(ln) for ln in record.read_text().splitlines()] if record.exists() else []
        return proc.returncode, results, proc.stdout + proc.stderr

    yield {"run": run, "roots": roots, "names": fleet.aliases}
    subprocess.run(["ssh", "-F", str(fleet.client_config), "-O", "exit", "x"], capture_output=True)
    shutil.rmtree(control, ignore_errors=True)


def snapshot(root: Path) -> dict[str, bytes]:
    out = {}
    for dirpath, _, files in os.walk(root):
        for f in files:
            p = Path(dirpath) / f
            out[str(p.relative_to(root))] = p.read_bytes()
    return out


def by_task(results: list[dict]) -> dict[str, dict[str, dict]]:
    out: dict[str, dict[str, dict]] = {}
    for r in results:
        out.setdefault(r["task"], {})[r["host"]] = dict(r["result"], _status=r["status"])
    return out


def test_check_apply_again_and_revert(play, pristine):
    before = [snapshot(r) for r in play["roots"]]

    # check mode (+ diff): says every host would change, writes nothing anywhere
    rc, results, out = play["run"]("one.yml", "--check", "--diff", "-e", "state=applied", "-e", "series=auto")
    assert rc == 0, out
    check = by_task(results)["series"]
    assert set(check) == set(play["names"])
    for res in check.values():
        assert res["changed"] is True and res["series"] == "sglang-v0.5.9", res
        assert res["msg"] == "would be applied"
        prepared = res["diff"]["prepared"] if isinstance(res["diff"], dict) else res["diff"][0]["prepared"]
        assert f"+++ b/{WORKER}" in prepared  # installed layout: paths as on the host
        assert "+from sglang.srt.speculative import phase_timer as _pt" in prepared
    assert [snapshot(r) for r in play["roots"]] == before

    # the two-task pattern, then the same apply again: no change
    rc, results, out = play["run"]("two.yml")
    assert rc == 0, out
    tasks = by_task(results)
    for name in play["names"]:
        staged, applied, again = tasks["stage"][name], tasks["apply"][name], tasks["apply again"][name]
        assert staged["changed"] and staged["state"] == "staged" and staged["written"] == []
        assert {f["path"]: f["state"] for f in staged["files"]} == {f: "staged" for f in FILES}
        assert applied["changed"] and applied["state"] == "applied"
        assert {f["path"]: f["state"] for f in applied["files"]} == {f: "applied" for f in FILES}
        assert again["changed"] is False and again["state"] == "applied"
        assert {f["path"]: f["state"] for f in again["files"]} == {f: "applied" for f in FILES}
        assert any("already applied" in m for m in again["messages"])
    reference = pristine.parent / "reference"
    shutil.copytree(pristine, reference / "site-packages")
    from patchkit import ops

    assert ops.apply(str(SERIES_059), [str(reference / "site-packages")]).exit_code == 0
    for root in play["roots"]:
        for f in FILES:
            assert (root / f).read_bytes() == (reference / "site-packages" / f).read_bytes()

    # revert (series as a folder): byte-identical, no patchkit state left
    rc, results, out = play["run"]("one.yml", "--diff", "-e", "state=reverted", "-e", f"series={SERIES_059}")
    assert rc == 0, out
    for res in by_task(results)["series"].values():
        assert res["changed"] is True and res["state"] == "pristine"
        assert f"--- a/{WORKER}" in json.dumps(res["diff"])
    assert [snapshot(r) for r in play["roots"]] == before


def test_one_drifted_host_leaves_every_host_untouched(play):
    drifted = play["roots"][1] / WORKER
    drifted.write_bytes(drifted.read_bytes().replace(b"class EAGLEWorker", b"class EAGLEWorkr", 1))
    before = [snapshot(r) for r in play["roots"]]
    rc, results, out = play["run"]("two.yml")
    assert rc != 0
    tasks = by_task(results)
    bad = play["names"][1]
    assert tasks["stage"][bad]["_status"] == "failed" and tasks["stage"][bad]["state"] == "drifted"
    assert any(f["state"] == "drifted" and f["path"] == WORKER for f in tasks["stage"][bad]["files"])
    assert "apply" not in tasks  # any_errors_fatal: no host reached the commit
    for i, root in enumerate(play["roots"]):
        now = snapshot(root)
        assert {k: v for k, v in now.items() if not k.startswith(".patchkit/")} == before[i]
    # the hosts that staged hold only .patchkit/; `reverted` drops it (the drifted host has none)
    others = [n for n in play["names"] if n != bad]
    rc, results, out = play["run"](
        "one.yml", "-e", "state=reverted", "-e", "series=sglang-v0.5.9", "--limit", ",".join(others)
    )
    assert rc == 0, out
    assert [snapshot(r) for r in play["roots"]] == before


def test_galaxy_build_and_doc(tmp_path):
    env = dict(
        os.environ,
        ANSIBLE_COLLECTIONS_PATH=str(REPO),
        ANSIBLE_HOME=str(tmp_path / "home"),
        PATH=f"{BIN}:{os.environ['PATH']}",
        ANSIBLE_NOCOLOR="1",
    )
    proc = subprocess.run(
        [str(BIN / "ansible-galaxy"), "collection", "build", str(COLLECTION), "--output-path", str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    tarball = tmp_path / "patchkit-tools-0.1.0.tar.gz"
    with tarfile.open(tarball) as tar:
        names = set(tar.getnames())
        manifest = json.load(tar.extractfile("MANIFEST.json"))
    assert {"plugins/action/series.py", "plugins/modules/series.py", "README.md", "meta/runtime.yml"} <= names
    assert not any("__pycache__" in n for n in names)
    assert manifest["collection_info"]["namespace"] == "patchkit"
    assert manifest["collection_info"]["name"] == "tools"
    doc = subprocess.run(
        [str(BIN / "ansible-doc"), "--json", "patchkit.tools.series"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert doc.returncode == 0, doc.stderr
    options = json.loads(doc.stdout)["patchkit.tools.series"]["doc"]["options"]
    assert options["state"]["choices"] == ["verified", "staged", "applied", "reverted"]
    assert set(options) == {"series", "root", "state", "layout", "force"}

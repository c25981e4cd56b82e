"""The Ansible module's result holds plain JSON types only.

`state` (and each file's state) came back as patchkit's HostState enum; a play that registered
the result and read `.state` got `[WARNING]: Type 'HostState' is unsupported in variable
storage, converting to 'str'`. A real ansible-playbook on localhost (connection: local, no sshd,
no wheels: a small tree and series), results read by the test callback
(tests/ansible_callbacks/record.py), which lists every value of another type.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from support.failures import small_series, small_target, tree_digest
from support.requires import requires

pytestmark = requires("ansible", reason="ansible-core not installed (pip install 'patchkit[ansible]')")

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

PLAY = """
- hosts: localhost
  gather_facts: false
  connection: local
  tasks:
    - name: apply
      patchkit.tools.series: {series: "{{ series }}", root: "{{ root }}", state: applied}
      register: applied
    - name: read
      ansible.builtin.set_fact: {got_state: "{{ applied.state }}", got_files: "{{ applied.files }}"}
    - name: show
      ansible.builtin.debug: {var: applied.state}
    - name: status
      patchkit.tools.series: {series: "{{ series }}", root: "{{ root }}", state: verified}
    - name: revert
      patchkit.tools.series: {series: "{{ series }}", root: "{{ root }}", state: reverted}
"""


def test_the_module_result_is_plain_json(tmp_path):
    root, series = small_target(tmp_path / "target"), small_series(tmp_path / "series")
    before = tree_digest(root)
    (tmp_path / "play.yml").write_text(PLAY)
    record = tmp_path / "record.jsonl"
    proc = subprocess.run(
        [str(BIN / "ansible-playbook"), "-i", "localhost,", "play.yml"]
        + ["-e", f"series={series}", "-e", f"root={root}"],
        cwd=tmp_path,
        env=dict(
            os.environ,
            ANSIBLE_COLLECTIONS_PATH=str(REPO),
            PYTHONPATH=str(REPO),
            PATH=f"{BIN}:{os.environ['PATH']}",
            ANSIBLE_HOME=str(tmp_path / "ansible-home"),
            ANSIBLE_LOCAL_TEMP=str(tmp_path / "ansible-tmp"),
            ANSIBLE_NOCOLOR="1",
            ANSIBLE_RETRY_FILES_ENABLED="0",
            ANSIBLE_CALLBACK_PLUGINS=str(REPO / "tests" / "ansible_callbacks"),
            ANSIBLE_CALLBACKS_ENABLED="record",
            PK_ANSIBLE_RECORD=str(record),
        ),
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=240,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output
    assert "unsupported in variable storage" not in output
    assert "[WARNING]" not in output, output
    results = {r["task"]: r for r in map(json.loads, record.read_text().splitlines())}
    for task in ("apply", "status", "revert"):
        assert results[task]["unplain"] == [], (task, results[task]["unplain"])
    applied = results["apply"]["result"]
    assert applied["state"] == "applied" and applied["changed"] is True
    assert {f["state"] for f in applied["files"]} == {"applied"}
    assert results["read"]["result"]["ansible_facts"]["got_state"] == "applied"
    assert tree_digest(root) == before


def test_plain_converts_what_patchkit_returns():
    import importlib.util

    from patchkit.engine.host_result import HostState

    # the action plugin's module, outside Ansible's loader
    path = REPO / "ansible_collections" / "patchkit" / "tools" / "plugins" / "action" / "series.py"
    spec = importlib.util.spec_from_file_location("patchkit_tools_series_action", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    plain = module.plain

    got = plain({"state": HostState.APPLIED, "files": ({"path": Path("a/b"), "n": True},), 1: 2.5})
    assert got == {"state": "applied", "files": [{"path": "a/b", "n": True}], "1": 2.5}
    assert type(got["state"]) is str and type(got["files"]) is list

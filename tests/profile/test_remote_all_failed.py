"""A budgeted sweep whose every point fails: it stops as soon as no point is left, says why
(`stopped: every point failed`, not "max rounds" after 2 of 20 rounds), and ends with one short
line per point and where the servers' logs are, not every log tail joined into one line.

A local-folder target (the sglang 0.5.9 wheel's pinned files) and the tests' stand-in server,
started with a relative path that does not exist in the remote run directory: the mistake the
budgeted-sweep example in docs/profiling.md once made.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from patchkit.errors import PatchkitError
from patchkit.profile.remote import RemoteConfig
from patchkit.profile.remote.sweep import run_remote_sweep
from support.remote_run import PY, SPEC, settings, state_of
from support.upstream import sglang_installed

pytestmark = pytest.mark.wheels


def test_a_sweep_whose_every_point_fails_stops_saying_so(tmp_path):
    tree = sglang_installed("0.5.9", tmp_path / "site-packages")
    cfg = RemoteConfig.from_mapping(
        settings(
            tmp_path,
            [str(tree)],
            tmp_path / "unused",
            ssh_config=None,
            spread_cache="off",
            server_command=f'PYTHONPATH="$PATCHKIT_TARGET_ROOT" exec {PY} tests/support/standin_server.py serve {SPEC}',
            matrix="tok-s=1000,1500,1510",
            budget_minutes=5,
        )
    )
    with pytest.raises(PatchkitError) as err:
        run_remote_sweep(cfg, stream=open(os.devnull, "w"))
    run_dir = next((tmp_path / "out").iterdir())
    doc = json.loads((run_dir / "sweep.json").read_text())
    assert doc["stopped"] == "every point failed"
    assert len(doc["rounds"]) == 2  # a point leaves after failing twice: all three after round 2
    assert "stopped: every point failed" in (run_dir / "sweep.txt").read_text()
    message = err.value.message
    lines = message.splitlines()
    assert lines[0] == "every point of the sweep failed:"
    assert [ln.split(":")[0].strip() for ln in lines[1:4]] == ["tok-s=1000", "tok-s=1500", "tok-s=1510"]
    for line in lines[1:4]:
        # the first line of the error and its last (the server's own), naming the target and the run folder
        assert "can't open file" in line and len(line) < 260 + 3 * len(str(tmp_path)), line
        assert "last lines of the server log" not in line
    assert lines[4] == (
        f"the servers' logs: {run_dir}/points/*/node*/server.log (each repetition's under rep2/, ...); "
        f"the table: {run_dir / 'sweep.md'}"
    )
    assert len(message) < 3 * (260 + 3 * len(str(tmp_path))) + 200 + 2 * len(str(tmp_path))
    assert Path(run_dir / "points" / "01-tok-s1000" / "node0" / "server.log").is_file()
    assert state_of(tree) == "pristine"

"""Summary.json names its units and has machine-friendly meta keys; table.txt says
why the dev columns are empty.

- `phase_shares` (and every share) were percentages with no unit: summary.json's `units` names
  the unit of every number by key name (docs/runtime.md documents them);
- `meta` mixed prose keys ("identical outputs (greedy, with vs without assistant)": "2/2
  prompts") with numbers: its keys are snake_case, its values numbers where they are numbers,
  and the table says them in words;
- table.txt showed dev columns of `-` on the CPU without saying why: a note line says so.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from patchkit.profile.local_run import report_meta
from patchkit.report import build_report, render_table
from patchkit.report.table import meta_lines
from support.timing_files import host_timing_files

RESULT: dict = {
    "model": {"layers": 4, "hidden": 64, "vocab": 128, "draft_layers": 2, "dtype": "float32", "new_tokens": 8}
}
RESULT.update(device="cpu", transformers="5.17.0", torch="2.13.0", warmup=True)
POINT = {
    "params": {"num_assistant_tokens": 4, "assistant_confidence_threshold": 0.0},
    "prompts": 2,
    "identical_outputs": 2,
    "assisted": {"tokens_per_s": 33.5},
    "baseline": {"tokens_per_s": 21.2},
    "accept_length": 3.79,
}


@pytest.fixture(scope="module")
def host_timing(tmp_path_factory) -> Path:
    """Real timing files from the runtime in host mode (what the CPU run writes)."""
    return host_timing_files(tmp_path_factory.mktemp("units"))


@pytest.fixture(scope="module")
def summary(host_timing, tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    return build_report(host_timing, out, meta=report_meta(RESULT, POINT, 36.14), chart=False), out


def test_summary_json_names_the_unit_of_the_shares(summary):
    _, out = summary
    doc = json.loads((out / "summary.json").read_text())
    units = doc["units"]
    assert units["phase_shares"].startswith("% of the cycle's time")
    for key in ("share_of_cycle", "host_share_of_cycle", "top_level_share", "*_ci95", "*_ms"):
        assert key in units, key
    shares = doc["decode_cycle"]["phase_shares"]
    assert set(shares) == {"draft", "verify"} and 90 < sum(shares.values()) <= 100  # percent, not a fraction


def test_meta_keys_are_snake_case_with_plain_values(summary):
    _, out = summary
    meta = json.loads((out / "summary.json").read_text())["meta"]
    assert all(re.fullmatch(r"[a-z][a-z0-9_]*", key) for key in meta), sorted(meta)
    assert meta["identical_outputs"] == 2 and meta["prompts"] == 2
    assert meta["wall_time_s"] == 36.1 and meta["warmup"] is True
    assert (meta["transformers_version"], meta["torch_version"]) == ("5.17.0", "2.13.0")


def test_the_table_says_the_meta_in_words(summary):
    _, out = summary
    table = (out / "table.txt").read_text()
    for line in (
        "identical outputs (greedy, with vs without assistant): 2/2 prompts",
        "upstream: transformers 5.17.0, torch 2.13.0",
        "warm-up: on, before the measured pass (its cycles lie outside the measured window)",
        "profile run wall time: 36.1 s",
    ):
        assert line in table.splitlines(), (line, table)
    assert "identical_outputs" not in table and "wall_time_s" not in table
    remote = {"server_command": "python -m sglang.launch_server", "worker": "spec v2", "sweep_point": "k=2"}
    assert meta_lines(remote) == [
        "server command: python -m sglang.launch_server",
        "speculative worker (server log): spec v2",
        "sweep point: k=2",
    ]
    assert meta_lines({"warmup": False}) == ["warm-up: off (--no-warmup)"]


def test_the_table_says_why_the_dev_columns_are_empty(summary):
    s, _ = summary
    table = render_table(s)
    assert s.mode == "host" and s.cycle["dev_ms"] is None
    note = [ln for ln in table.splitlines() if ln.startswith("dev = device (CUDA) time: none in this run")]
    assert note == [
        "dev = device (CUDA) time: none in this run, so the dev columns show - (mode host: host time "
        "only, as on a machine without a CUDA device or with PATCHKIT_TIMER=host)"
    ]
    # a run with device times says nothing of the kind
    cycle = dict(s.cycle, dev_ms=s.cycle["host_ms"])
    with_device = dataclasses.replace(s, mode="events", cycle=cycle, cycle_kinds={})
    assert "dev = device (CUDA) time" not in render_table(with_device)

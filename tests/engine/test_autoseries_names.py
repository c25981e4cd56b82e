"""``--series auto`` names each series by its own package: a transformers series is
"transformers 5.17.0" in the chosen line, the per-host line and the closest-release refusal,
never "sglang". Synthetic series under a temporary root (autoseries' ``root``), local folders."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchkit.engine import autoseries
from patchkit.errors import Refused
from support.engine import make_series, write_tree

UTILS = "transformers/generation/utils.py"
WORKER = "sglang/srt/speculative/eagle_worker.py"


@pytest.fixture
def shipped(tmp_path) -> Path:
    """Two series, one per package: transformers 5.17.0 and sglang 0.5.9 (installed layout)."""
    root = tmp_path / "patches"
    make_series(
        root / "transformers-v5.17.0",
        {UTILS: b"tf\n"},
        [],
        name="transformers",
        extra_upstream='version = "5.17.0"\n',
    )
    make_series(
        root / "sglang-v0.5.9", {WORKER: b"sg\n"}, [], name="sglang", extra_upstream='version = "0.5.9"\n'
    )
    return root


def test_the_chosen_line_names_transformers_for_a_transformers_tree(shipped, tmp_path):
    site = tmp_path / "site"
    write_tree(site, {UTILS: b"tf\n"})
    chosen, said = autoseries.resolve([str(site)], root=shipped)
    assert Path(chosen).name == "transformers-v5.17.0"
    assert "chose transformers-v5.17.0 (transformers 5.17.0): utils.py matches its pin exactly" in said
    assert "sglang" not in said


def test_a_fleet_line_names_each_host_s_own_package(shipped, tmp_path):
    tf, sg = tmp_path / "tf", tmp_path / "sg"
    write_tree(tf, {UTILS: b"tf\n"})
    write_tree(sg, {WORKER: b"sg\n"})
    _, said = autoseries.resolve_per_host([str(tf), str(sg)], root=shipped)
    assert f"{tf}: transformers-v5.17.0 (transformers 5.17.0)" in said
    assert f"{sg}: sglang-v0.5.9 (sglang 0.5.9)" in said


def test_the_closest_release_of_a_refusal_is_named_by_its_package(shipped, tmp_path):
    site = tmp_path / "site"
    write_tree(site, {UTILS: b"tf, edited\n"})
    with pytest.raises(Refused) as info:
        autoseries.resolve([str(site)], root=shipped)
    assert "closest: transformers-v5.17.0 (transformers 5.17.0): utils.py has sha256" in str(info.value)

"""`patch.series` lists every shipped series with its upstream, releases and proof (table and
--json, the same for the installed command); and a target holding none of the given series'
pinned files (the default sglang series on a transformers tree) is told about --series auto,
naming the shipped series pinned to exactly its files when there is one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from patchkit.engine.series import read_series
from patchkit.locations import series_root, shipped_names
from patchkit.pin import read_pin
from patchkit.proofs import proof_of
from support.cli import invoke, patchkit_command
from support.engine import write_tree
from support.failures import tree_digest


def test_the_json_list_has_every_shipped_series_with_its_upstream_releases_and_proof():
    proc = invoke("patch.series", "--json", timeout=60)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["schema"] == "patchkit.series/1"
    rows = {row["name"]: row for row in doc["series"]}
    assert sorted(rows) == shipped_names() and len(rows) == len(doc["series"])
    for name, row in rows.items():
        pin = read_pin(series_root() / name / "pin.toml")
        digest = read_series(str(series_root() / name)).digest
        assert (row["upstream"], row["releases"], row["digest"]) == (pin.name, list(pin.versions), digest)
        assert row["proven"] == proof_of(name, digest).to_json()
        assert row["proven_text"] == proof_of(name, digest).describe()
    assert rows["transformers-v5.17.0"]["upstream"] == "transformers"
    names = [row["name"] for row in doc["series"]]  # release order: 0.5.9 before 0.5.10
    assert names.index("sglang-v0.5.9") < names.index("sglang-v0.5.10") < names.index("sglang-v0.5.23")


def test_the_table_has_a_row_per_series_and_says_how_to_use_one(tmp_path):
    proc = invoke("patch.series", timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split() == ["series", "upstream", "releases", "proven"]
    rows = {ln.split()[0]: ln for ln in lines[2:] if ln and not ln.startswith(str(len(shipped_names())))}
    assert sorted(rows) == shipped_names()
    assert rows["transformers-v5.17.0"].split()[1:3] == ["transformers", "5.17.0"]
    assert rows["sglang-v0.5.12"].endswith(
        "ran on a GPU: 0.5.12 (NVIDIA H200, 2026-12-01..2026-12-05); static proof"
    )
    assert rows["sglang-v0.5.9"].endswith("static proof only")
    assert lines[-1].startswith(
        f"{len(shipped_names())} series in {series_root()}; use one with --series NAME"
    )
    # the installed command's Program lists the same
    installed = patchkit_command(["patch.series"], tmp_path, config_home=tmp_path / "xdg")
    assert (installed.returncode, installed.stdout) == (0, proc.stdout), installed.stderr


def test_no_pinned_file_there_suggests_series_auto(tmp_path):
    tree = tmp_path / "t"
    write_tree(tree, {"pkg/other.py": b"x = 1\n"})
    before = tree_digest(str(tree))
    proc = invoke("patch.apply", "--target", str(tree), timeout=120)  # invoke.yaml's default series
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    message = next(
        ln.strip() for ln in proc.stdout.splitlines() if "none of the pinned files" in ln and "…" not in ln
    )
    assert message.endswith(
        "; --series auto picks the shipped series pinned to a target's files (patch.series lists them)"
    )
    assert tree_digest(str(tree)) == before


@pytest.mark.wheels
def test_the_default_series_on_a_transformers_tree_names_the_shipped_one(tmp_path):
    """The pinned transformers files (fetched by the product's own upstream.fetch), the default
    series from invoke.yaml (sglang-v0.5.9): refused, naming transformers-v5.17.0 and auto."""
    tree = tmp_path / "site"
    fetched = invoke(
        "upstream.fetch",
        "--series",
        "transformers-v5.17.0",
        "--layout",
        "installed",
        "--dest",
        str(tree),
        timeout=600,
    )
    assert fetched.returncode == 0, fetched.stderr
    before = tree_digest(str(tree))
    proc = invoke("patch.apply", "--target", str(tree), "--json", timeout=120)
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    doc = json.loads(proc.stdout)
    assert doc["series"] == "sglang-v0.5.9"
    (message,) = doc["hosts"][0]["messages"]
    assert message.startswith(f"none of the pinned files exists under {tree} ")
    assert message.endswith(
        "; the shipped transformers-v5.17.0 is pinned to exactly these files: pass --series auto "
        "(or --series transformers-v5.17.0)"
    )
    assert doc["error"] == f"{tree}: {message}"
    assert tree_digest(str(tree)) == before
    auto = invoke("patch.verify", "--series", "auto", "--target", str(Path(tree)), timeout=120)
    assert auto.returncode == 0 and "chose transformers-v5.17.0 (transformers 5.17.0)" in auto.stderr, (
        auto.stderr
    )

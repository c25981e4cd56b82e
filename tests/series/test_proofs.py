"""patches/proofs.toml, the record of how each shipped series is proven, against the series it
names, their pins, the static proof's version and the results it cites; and what patch.verify
prints from it (a "proven:" line, the --json key). No wheel: the proof itself runs in
tests/series/test_static_proof.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from patchkit import proofs
from patchkit.author import phaseproof
from patchkit.engine.series import read_series
from patchkit.errors import InvalidInput
from patchkit.ops import OpResult
from patchkit.output import render_json, render_text
from patchkit.upstream import read_pin

REPO = Path(__file__).resolve().parents[2]
PATCHES = REPO / "patches"
TABLE = PATCHES / proofs.PROOFS_FILE


def test_every_sglang_series_has_the_static_proof_of_the_current_checker():
    table = proofs.read_proofs(TABLE)
    assert {n for n, p in table.items() if p.static is not None} == set(phaseproof.proved_series())
    assert {p.static for p in table.values() if p.static is not None} == {phaseproof.CHECKER_VERSION}
    assert set(table) <= {p.parent.name for p in PATCHES.glob("*/pin.toml")}


def test_every_gpu_row_names_a_release_of_its_series_and_results_that_exist():
    runs = [run for p in proofs.read_proofs(TABLE).values() for run in p.gpu]
    assert runs, "sglang-v0.5.12 was run on the H200"
    for run in runs:
        assert run.release in read_pin(PATCHES / run.series / "pin.toml").versions, run
        assert re.fullmatch(r"\d{4}-\d\d-\d\d(\.\.\d{4}-\d\d-\d\d)?", run.dates), run
        for path in run.results:
            assert path.startswith("bench/results/") and (REPO / path).is_file(), run


def test_a_gpu_proof_is_one_line_added_to_the_table(tmp_path):
    """What the engineer running a release on a GPU adds: one inline table in the gpu list."""
    line = (
        '  { series = "sglang-v0.5.16", release = "0.5.16", card = "NVIDIA H100 80GB HBM3", '
        'dates = "2026-12-06", checks = ["records", "acceptance"], results = ["bench/results/sglang_gpu.md"] },\n'
    )
    text = TABLE.read_text()
    assert "\ngpu = [\n" in text
    edited = tmp_path / "proofs.toml"
    edited.write_text(text.replace("\ngpu = [\n", "\ngpu = [\n" + line, 1))
    proof = proofs.read_proofs(edited)["sglang-v0.5.16"]
    assert proof.how == "gpu" and proof.static == phaseproof.CHECKER_VERSION
    assert proof.describe().startswith("ran on a GPU (NVIDIA H100 80GB HBM3): sglang 0.5.16, 2026-12-06 (")
    assert proofs.read_proofs(TABLE)["sglang-v0.5.16"].how == "static"


@pytest.mark.parametrize(
    ("row", "said"),
    [
        (
            '{ series = "s", release = "1", card = "c", dates = "d", checks = ["fast"], results = ["r"] }',
            "unknown check(s) fast",
        ),
        (
            '{ series = "s", release = "1", card = "c", dates = "d", checks = ["records"] }',
            "needs exactly series, release",
        ),
        (
            '{ series = "s", release = "1", card = "", dates = "d", checks = ["records"], results = ["r"] }',
            "non-empty strings",
        ),
    ],
)
def test_a_malformed_gpu_row_is_refused_naming_the_file_and_row(row, said, tmp_path):
    bad = tmp_path / "proofs.toml"
    bad.write_text(f"gpu = [\n  {row},\n]\n")
    with pytest.raises(InvalidInput) as info:
        proofs.read_proofs(bad)
    assert f"{bad}: gpu row 1: " in str(info.value) and said in str(info.value)


def verify_result(series: str, digest: str) -> OpResult:
    return OpResult("verify", series, digest, [])


def test_patch_verify_says_in_plain_words_what_was_proven_where():
    static = read_series(str(PATCHES / "sglang-v0.5.16")).digest
    lines = render_text(verify_result("sglang-v0.5.16", static)).splitlines()
    assert lines[1] == (
        "proven: static proof only (no GPU run recorded): the release's patched source was checked "
        "(every timed phase that begins also ends), not run"
    )
    gpu = read_series(str(PATCHES / "sglang-v0.5.12")).digest
    line = render_text(verify_result("sglang-v0.5.12", gpu)).splitlines()[1]
    assert line.startswith(
        "proven: ran on a GPU (NVIDIA H200): sglang 0.5.12, 2026-12-01..2026-12-05 (checked there: records, "
    )
    assert line.endswith(
        "; figures in bench/results/sglang_gpu.md, bench/results/sglang_gpu_timer_cost.md); and the static proof"
    )
    assert "phaseproof" not in line and "nothing recorded" not in line
    doc = json.loads(render_json(verify_result("sglang-v0.5.12", gpu)))
    assert doc["proven"]["sglang-v0.5.12"]["text"] == line.removeprefix("proven: ")
    assert doc["proven"]["sglang-v0.5.12"]["how"] == "gpu"
    assert doc["proven"]["sglang-v0.5.12"]["gpu"][0]["card"] == "NVIDIA H200"
    assert doc["proven"]["sglang-v0.5.12"]["static"] == {
        "checker": "patchkit.author.phaseproof",
        "version": phaseproof.CHECKER_VERSION,
    }


def test_a_series_named_like_a_shipped_one_with_other_bytes_carries_no_proof():
    line = render_text(verify_result("sglang-v0.5.12", "0" * 64)).splitlines()[1]
    said = (
        "nothing (not the shipped sglang-v0.5.12: its content differs, so that series' proofs do not apply)"
    )
    assert line == f"proven: {said}"
    doc = json.loads(render_json(verify_result("sglang-v0.5.12", "0" * 64)))
    assert doc["proven"] == {"sglang-v0.5.12": {"how": "none", "gpu": [], "static": None, "text": said}}
    transformers = read_series(str(PATCHES / "transformers-v5.17.0")).digest
    assert render_text(verify_result("transformers-v5.17.0", transformers)).splitlines()[1] == (
        "proven: nothing (no GPU run and no static proof recorded for this series)"
    )


def test_docs_series_table_is_written_from_the_record():
    assert proofs.main(["--docs", "--check"]) == 0, "run `python -m patchkit.proofs --docs`"
    docs = (REPO / "docs" / "series.md").read_text()
    assert "| `sglang-v0.5.12` | 0.5.12, 0.5.12.post1 | GPU and static (phaseproof " in docs
    assert (
        f"| `sglang-v0.5.23` | 0.5.23 | static (phaseproof {phaseproof.CHECKER_VERSION}) only | — |" in docs
    )
    stale = docs.replace("| GPU and static (phaseproof", "| static (phaseproof", 1)
    assert proofs.docs_text(stale) == docs


def test_the_table_header_says_each_check_as_the_reader_knows_it():
    """proofs.toml's comment lists the words a gpu row may use, with the meaning CHECKS gives."""
    header = [ln.lstrip("# ").strip() for ln in TABLE.read_text().splitlines() if ln.startswith("#")]
    listed = {
        ln.split()[0]: ln.split(None, 1)[1]
        for ln in header
        if ln.split()[:1] and ln.split()[0] in proofs.CHECKS
    }
    assert listed == proofs.CHECKS


def test_a_mixed_fleet_gets_a_proven_line_per_series():
    from patchkit.engine.host_result import HostResult
    from patchkit.ops import PER_HOST

    digests = {n: read_series(str(PATCHES / n)).digest for n in ("sglang-v0.5.12", "sglang-v0.5.16")}
    hosts = [
        HostResult(f"gpu{k}:/site", "verify", "pristine", 0, series=n, digest=d)
        for k, (n, d) in enumerate(digests.items())
    ]
    result = OpResult("verify", PER_HOST, "", hosts)
    lines = [ln for ln in render_text(result).splitlines() if ln.startswith("proven: ")]
    assert [ln.split(": ", 2)[1] for ln in lines] == ["sglang-v0.5.12", "sglang-v0.5.16"]
    assert lines[0].startswith("proven: sglang-v0.5.12: ran on a GPU (NVIDIA H200): sglang 0.5.12, ")
    assert lines[1].startswith("proven: sglang-v0.5.16: static proof only (no GPU run recorded)")
    doc = json.loads(render_json(result))
    assert {n: p["how"] for n, p in doc["proven"].items()} == {
        "sglang-v0.5.12": "gpu",
        "sglang-v0.5.16": "static",
    }

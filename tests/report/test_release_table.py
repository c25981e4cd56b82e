"""bench/gpu/release_table.py: the GPU harness's release runs as rows of sglang_gpu.{json,md}.

A release run on a later day is added to the rows already there: the Markdown section, written
whole, keeps the earlier releases, each with its own card and date."""

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _release_table():
    spec = importlib.util.spec_from_file_location(
        "release_table", ROOT / "bench" / "gpu" / "release_table.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _work(tmp_path: Path, release: str) -> Path:
    """What run_h200.sh's relpack returns: RELEASE_acc/<stamp>/summary.json and its check."""
    work = tmp_path / f"work-{release}"
    run = work / f"{release}_acc" / "20261208-010000"
    run.mkdir(parents=True)
    (run / "summary.json").write_text(json.dumps({"throughput": {"tokens_per_s": 9000.0}}))
    (run / "remote.json").write_text(json.dumps({"server_command": "serve --speculative-num-steps 3"}))
    (work / "checks").mkdir()
    check = {
        "checks": {"records": True},
        "decode_cycles": 370,
        "timed_decode_cycles": 370,
        "sglang_decode_lines": 370,
    }
    (work / "checks" / f"{release}_acc.json").write_text(json.dumps(check))
    return work


def test_a_later_release_keeps_the_earlier_rows_in_the_markdown(tmp_path, capsys):
    rt = _release_table()
    doc, md = tmp_path / "gpu.json", tmp_path / "gpu.md"
    md.write_text("# GPU runs\n\nearlier text\n")
    rt.main(
        [
            str(_work(tmp_path, "0.5.13")),
            "--json",
            str(doc),
            "--md",
            str(md),
            "--card",
            "H100",
            "--date",
            "2026-12-06",
        ]
    )
    rt.main(
        [
            str(_work(tmp_path, "0.5.14")),
            "--json",
            str(doc),
            "--md",
            str(md),
            "--card",
            "H200",
            "--date",
            "2026-12-08",
        ]
    )
    capsys.readouterr()
    text = md.read_text()
    assert text.startswith("# GPU runs\n\nearlier text\n\n" + rt.SECTION)
    assert [ln.split(" | ")[0] for ln in text.splitlines() if ln.startswith("| 0.5.")] == [
        "| 0.5.13",
        "| 0.5.14",
    ]
    assert "0.5.13 on H100, 2026-12-06; 0.5.14 on H200, 2026-12-08." in text
    rows = json.loads(doc.read_text())["releases"]
    assert [(r["release"], r["card"], r["date"]) for r in rows] == [
        ("0.5.13", "H100", "2026-12-06"),
        ("0.5.14", "H200", "2026-12-08"),
    ]

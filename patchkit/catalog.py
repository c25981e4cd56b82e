"""The shipped series as ``patch.series`` lists them: each one's upstream, releases and proof.

One row per folder of patches/ (``patchkit/_series/`` in the wheel), in release order: the pin's
upstream name and versions (pin.toml), the series' content digest, and how it is proven
(patches/proofs.toml, through patchkit.proofs: the words patch.verify's ``proven:`` line uses).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from patchkit.engine.series import read_series
from patchkit.locations import series_root, shipped_names
from patchkit.pin import read_pin
from patchkit.proofs import SeriesProof, proof_of
from patchkit.upstream import version_key

SCHEMA = "patchkit.series/1"


@dataclass(frozen=True)
class Shipped:
    name: str
    upstream: str  # the pin's package name: sglang, transformers
    releases: tuple[str, ...]  # the pinned version first, then the releases sharing its files
    files: tuple[str, ...]
    digest: str
    proof: SeriesProof

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "upstream": self.upstream,
            "releases": list(self.releases),
            "files": list(self.files),
            "digest": self.digest,
            "proven": self.proof.to_json(),
            "proven_text": self.proof.describe(),
        }


def _order(name: str) -> tuple:
    """sglang-v0.5.9 before sglang-v0.5.10: by upstream, then by version."""
    upstream, _, version = name.partition("-v")
    try:
        return upstream, version_key(version)
    except ValueError:
        return upstream, (), version


def shipped_series() -> list[Shipped]:
    """Every shipped series, in release order."""
    rows = []
    for name in sorted(shipped_names(), key=_order):
        folder = series_root() / name
        pin = read_pin(folder / "pin.toml")
        digest = read_series(str(folder)).digest
        rows.append(Shipped(name, pin.name, pin.versions, tuple(pin.files), digest, proof_of(name, digest)))
    return rows


def proven_cell(proof: SeriesProof) -> str:
    """The table's short word for a proof (the whole record: ``--json``'s ``proven_text``, and
    patch.verify's ``proven:`` line): the GPU runs' releases, cards and dates, else the static
    proof, else that none is recorded."""
    static = "static proof" if proof.static is not None else ""
    if proof.gpu:
        runs = "; ".join(f"{run.release} ({run.card}, {run.dates})" for run in proof.gpu)
        return f"ran on a GPU: {runs}" + (f"; {static}" if static else "")
    return f"{static} only" if static else "no proof recorded (no GPU run, no static proof)"


def render_text(rows: list[Shipped]) -> str:
    """The table: series, upstream, releases, proven (one line a series), then how to use one."""
    table = [("series", "upstream", "releases", "proven")]
    table += [(r.name, r.upstream, ", ".join(r.releases), proven_cell(r.proof)) for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(3)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row[:3], widths)) + "  " + row[3] for row in table]
    lines.insert(1, "  ".join("-" * w for w in widths) + "  " + "-" * len("proven"))
    lines.append("")
    lines.append(
        f"{len(rows)} series in {series_root()}; use one with --series NAME, or --series auto to pick "
        "the one pinned to a target's files"
    )
    return "\n".join(lines) + "\n"


def render_json(rows: list[Shipped]) -> str:
    doc = {"schema": SCHEMA, "root": str(series_root()), "series": [r.to_json() for r in rows]}
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"

"""How each shipped series is proven: patches/proofs.toml (``gpu`` rows, ``static`` versions).

The one record of it: patch.verify's "proven:" line and its ``--json`` key ``proven`` read it
here, docs/series.md's table names it, tests/series/test_proofs.py holds it to the series. A
series is matched by name and by digest: a folder named like a shipped series but holding
other bytes carries none of the shipped one's proofs.
"""

from __future__ import annotations

import argparse
import sys
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from patchkit.boundary import main_boundary
from patchkit.errors import InvalidInput
from patchkit.locations import checkout, series_root, shipped_names
from patchkit.pin import read_pin
from patchkit.upstream import version_key

PROOFS_FILE = "proofs.toml"
STATIC_CHECKER = "patchkit.author.phaseproof"
# patch.verify's words where no GPU run is recorded (docs/series.md#proven says what the static proof checks)
STATIC_ONLY = (
    "static proof only (no GPU run recorded): the release's patched source was checked "
    "(every timed phase that begins also ends), not run"
)
NOTHING = "nothing (no GPU run and no static proof recorded for this series)"

# What a GPU row may say it checked (proofs.toml's header says the same, line by line).
CHECKS = {
    "records": "every decode forward SGLang logged has its cycle record, none lost",
    "phases": "every phase of the worker recorded in the timed decode cycles",
    "acceptance": "the acceptance records equal SGLang's spec_correct_drafts_histogram",
    "trace": "the phases appear in the profiler's trace (/start_profile)",
    "overhead": "the timer's overhead paired inside the server",
    "predict": "profile.predict end to end",
    "sweep": "a profile.remote --matrix sweep end to end",
    "revert": "applied and reverted byte-exactly on the GPU host",
}
GPU_KEYS = ("series", "release", "card", "dates", "checks", "results")


@dataclass(frozen=True)
class GpuRun:
    series: str
    release: str
    card: str
    dates: str
    checks: tuple[str, ...]
    results: tuple[str, ...]

    def describe(self) -> str:
        """docs/series.md's "on a GPU" cell."""
        return (
            f"sglang {self.release} on {self.card}, {self.dates} ({', '.join(self.checks)}; "
            f"{', '.join(self.results)})"
        )

    def said(self) -> str:
        """patch.verify's words for it: the card, the release, the days, then what was checked."""
        return (
            f"ran on a GPU ({self.card}): sglang {self.release}, {self.dates} (checked there: "
            f"{', '.join(self.checks)}; figures in {', '.join(self.results)})"
        )

    def to_json(self) -> dict:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in vars(self).items()}


@dataclass(frozen=True)
class SeriesProof:
    series: str
    static: int | None  # the static proof's version it passes
    gpu: tuple[GpuRun, ...]

    @property
    def how(self) -> str:
        """``gpu`` (run on a GPU; the static proof may hold too), ``static`` or ``none``."""
        return "gpu" if self.gpu else "static" if self.static is not None else "none"

    def describe(self) -> str:
        """In plain words, what was proven where (patch.verify's "proven:" line)."""
        if self.gpu:
            runs = "; ".join(run.said() for run in self.gpu)
            return runs + ("; and the static proof" if self.static is not None else "")
        if self.static is not None:
            return STATIC_ONLY
        return NOTHING

    def to_json(self) -> dict:
        return {
            "how": self.how,
            "gpu": [run.to_json() for run in self.gpu],
            "static": None if self.static is None else {"checker": STATIC_CHECKER, "version": self.static},
        }


def proofs_path() -> Path:
    return series_root() / PROOFS_FILE


@cache
def read_proofs(path: Path | None = None) -> dict[str, SeriesProof]:
    """Series name -> its proofs, for every series proofs.toml names; checked as read."""
    path = Path(path or proofs_path())
    if not path.is_file():
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise InvalidInput(f"{path}: {e}") from e
    unknown = set(data) - {"gpu", "static"}
    if unknown:
        raise InvalidInput(f"{path}: unknown key(s) {', '.join(sorted(unknown))} (known: gpu, static)")
    static = data.get("static", {})
    for name, version in static.items():
        if not isinstance(version, int) or isinstance(version, bool):
            raise InvalidInput(f"{path}: static.{name} = {version!r}: the checker's version, a whole number")
    runs: dict[str, list[GpuRun]] = {}
    for n, row in enumerate(data.get("gpu", []), 1):
        where = f"{path}: gpu row {n}"
        if not isinstance(row, dict) or set(row) != set(GPU_KEYS):
            got = ", ".join(sorted(row)) if isinstance(row, dict) else repr(row)
            raise InvalidInput(f"{where}: needs exactly {', '.join(GPU_KEYS)} (has {got})")
        if not all(isinstance(row[k], str) and row[k] for k in GPU_KEYS[:4]):
            raise InvalidInput(f"{where}: {', '.join(GPU_KEYS[:4])} are non-empty strings")
        for key in ("checks", "results"):
            if (
                not isinstance(row[key], list)
                or not row[key]
                or not all(isinstance(v, str) for v in row[key])
            ):
                raise InvalidInput(f"{where}: {key} is a non-empty list of strings")
        bad = [c for c in row["checks"] if c not in CHECKS]
        if bad:
            raise InvalidInput(f"{where}: unknown check(s) {', '.join(bad)} (known: {', '.join(CHECKS)})")
        run = GpuRun(
            row["series"],
            row["release"],
            row["card"],
            row["dates"],
            tuple(row["checks"]),
            tuple(row["results"]),
        )
        runs.setdefault(run.series, []).append(run)
    return {
        name: SeriesProof(name, static.get(name), tuple(runs.get(name, ())))
        for name in sorted(set(static) | set(runs))
    }


def proof_of(name: str, digest: str) -> SeriesProof:
    """The proofs of the series named ``name`` whose content digest is ``digest``: the shipped
    series' record when the digest is the shipped folder's, else nothing."""
    from patchkit.engine.series import read_series

    folder = series_root() / name
    recorded = read_proofs().get(name)
    if recorded is None or not (folder / "pin.toml").is_file() or read_series(str(folder)).digest != digest:
        return SeriesProof(name, None, ())
    return recorded


def describe(name: str, digest: str) -> str:
    """How the series ``name`` (with content ``digest``) is proven, in words."""
    proof = proof_of(name, digest)
    if proof.how == "none" and name in read_proofs():
        return f"nothing (not the shipped {name}: its content differs, so that series' proofs do not apply)"
    return proof.describe()


# ----------------------------------------------------------------------------- docs/series.md's table

DOCS_BEGIN = (
    "<!-- the table below is written by `python -m patchkit.proofs --docs` from patches/proofs.toml -->"
)
DOCS_END = "<!-- end of the table from patches/proofs.toml -->"


def markdown_table() -> str:
    """docs/series.md's table: every shipped series, its releases and how it is proven."""

    def order(name: str) -> tuple:
        tool, _, version = name.partition("-v")
        return tool, version_key(version)

    table = read_proofs()
    rows = ["| series | releases | proven | on a GPU |", "|---|---|---|---|"]
    for name in sorted(shipped_names(), key=order):
        proof = table.get(name, SeriesProof(name, None, ()))
        releases = ", ".join(read_pin(series_root() / name / "pin.toml").versions)
        static = f"static (phaseproof {proof.static})"
        how = {
            "gpu": "GPU" + (f" and {static}" if proof.static is not None else ""),
            "static": f"{static} only",
            "none": "no proof recorded",
        }[proof.how]
        runs = "; ".join(run.describe() for run in proof.gpu) or "—"
        rows.append(f"| `{name}` | {releases} | {how} | {runs} |")
    return "\n".join(rows)


def docs_text(text: str) -> str:
    """``text`` (docs/series.md) with the block between the markers written anew."""
    if text.count(DOCS_BEGIN) != 1 or text.count(DOCS_END) != 1:
        raise InvalidInput(f"docs/series.md: needs the markers {DOCS_BEGIN!r} and {DOCS_END!r} once each")
    head, rest = text.split(DOCS_BEGIN)
    _, tail = rest.split(DOCS_END)
    return f"{head}{DOCS_BEGIN}\n{markdown_table()}\n{DOCS_END}{tail}"


@main_boundary("python -m patchkit.proofs")
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m patchkit.proofs", description=__doc__.splitlines()[0])
    ap.add_argument(
        "--docs", action="store_true", help="rewrite docs/series.md's table from patches/proofs.toml"
    )
    ap.add_argument(
        "--check", action="store_true", help="with --docs: exit 1 if the table differs, write nothing"
    )
    args = ap.parse_args(argv)
    if not args.docs:
        print(markdown_table())
        return 0
    root = checkout()
    if root is None:
        raise InvalidInput("--docs writes the checkout's docs/series.md: run it in the checkout")
    docs = root / "docs" / "series.md"
    old = docs.read_text(encoding="utf-8")
    new = docs_text(old)
    if args.check:
        if new != old:
            print(
                f"{docs}: its table differs from patches/proofs.toml; run `python -m patchkit.proofs --docs`"
            )
            return 1
        return 0
    if new != old:
        docs.write_text(new, encoding="utf-8")
        print(f"wrote {docs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

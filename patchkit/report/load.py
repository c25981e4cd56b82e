"""Read a directory of phase-timer JSON-lines files (one per process/rank)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from patchkit.errors import InvalidInput

SCHEMA = "patchkit.timing/1"
FILE_GLOB = "phase-timing.rank*.pid*.jsonl"


@dataclass
class ProcessTiming:
    """Everything one process wrote: its header, phases, cycles, notes and exit stats."""

    path: Path
    header: dict
    phases: list[dict] = field(default_factory=list)
    cycles: list[dict] = field(default_factory=list)
    notes: list[dict] = field(default_factory=list)
    stats: dict | None = None
    truncated_lines: int = 0

    @property
    def rank(self) -> int:
        return int(self.header.get("rank") or 0)

    @property
    def mode(self) -> str:
        return self.header.get("mode", "host")

    def wall_ns(self, t: int) -> int:
        """Map this process's perf_counter_ns to wall-clock ns (aligns ranks)."""
        clock = self.header["clock"]
        return clock["wall_t0_ns"] + (t - clock["host_t0_ns"])


def _parse_line(path: Path, lineno: int, line: str, is_last: bool):
    try:
        rec = json.loads(line)
    except json.JSONDecodeError as exc:
        if is_last:  # a process killed mid-write leaves half a line: skip it, count it
            return None
        raise InvalidInput(f"{path}:{lineno}: not a JSON record ({exc.msg})") from exc
    if not isinstance(rec, dict) or "kind" not in rec:
        raise InvalidInput(f"{path}:{lineno}: record has no 'kind'")
    return rec


def load_file(path: Path) -> ProcessTiming:
    lines = path.read_text(encoding="utf-8").splitlines()
    if not lines:
        raise InvalidInput(f"{path}: empty timing file")
    header = _parse_line(path, 1, lines[0], is_last=False)
    if header.get("kind") != "header":
        raise InvalidInput(f"{path}:1: first record must be the header, found {header.get('kind')!r}")
    if header.get("schema") != SCHEMA:
        raise InvalidInput(f"{path}:1: schema {header.get('schema')!r}, expected {SCHEMA!r}")
    proc = ProcessTiming(path=path, header=header)
    for lineno, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        rec = _parse_line(path, lineno, line, is_last=lineno == len(lines))
        if rec is None:
            proc.truncated_lines += 1
            continue
        kind = rec["kind"]
        if kind == "phase":
            proc.phases.append(rec)
        elif kind == "cycle":
            proc.cycles.append(rec)
        elif kind == "note":
            proc.notes.append(rec)
        elif kind == "stats":
            proc.stats = rec
        elif kind == "header":
            raise InvalidInput(f"{path}:{lineno}: a second header (two processes wrote one file?)")
    return proc


def load_timing_dir(timing_dir) -> list[ProcessTiming]:
    """All processes' timing in `timing_dir`, ordered by rank then pid."""
    root = Path(timing_dir)
    if not root.is_dir():
        raise InvalidInput(f"{root}: timing directory does not exist")
    files = sorted(root.glob(FILE_GLOB))
    if not files:
        raise InvalidInput(f"{root}: no timing files ({FILE_GLOB})")
    procs = [load_file(p) for p in files]
    procs.sort(key=lambda p: (p.rank, int(p.header.get("pid") or 0)))
    return procs

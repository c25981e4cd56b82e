"""The measured window: when the measured benchmark pass started and ended.

`profile.remote`, `profile.run` and `profile.sweep` run a warm-up pass before the measured one
and write ``window.json`` into the timing folder (beside the ``phase-timing.*.jsonl`` files);
`profile.report` reads it from any folder, so a user's own run can carry one too.  Times are
wall-clock nanoseconds (``time.time_ns()``) on the host that ran the benchmark, which is the
host whose timing headers pair ``wall_t0_ns`` with ``host_t0_ns``: the report maps each
cycle's ``t0`` to wall clock through that pair (``ProcessTiming.wall_ns``) and keeps the cycles
that start inside ``[start, end]``.  The rest are counted as ``warmup_cycles`` (before) and
``after_window_cycles`` (after) and never enter the shares.

    {"schema": "patchkit.window/1",
     "measured": {"start_unix_ns": 1764600000000000000, "end_unix_ns": 1764600060000000000},
     "warmup": {"start_unix_ns": ..., "end_unix_ns": ...} | null,
     "source": "profile.remote"}
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from patchkit.errors import InvalidInput

WINDOW_FILE = "window.json"
WINDOW_SCHEMA = "patchkit.window/1"


@dataclass(frozen=True)
class Window:
    start_unix_ns: int
    end_unix_ns: int
    warmup: tuple[int, int] | None = None
    source: str = ""

    def contains(self, wall_ns: int) -> bool:
        return self.start_unix_ns <= wall_ns <= self.end_unix_ns

    def to_dict(self) -> dict:
        return {
            "schema": WINDOW_SCHEMA,
            "measured": {"start_unix_ns": self.start_unix_ns, "end_unix_ns": self.end_unix_ns},
            "warmup": None
            if self.warmup is None
            else {"start_unix_ns": self.warmup[0], "end_unix_ns": self.warmup[1]},
            "source": self.source,
        }


def write_window(
    timing_dir, start_unix_ns: int, end_unix_ns: int, warmup: tuple[int, int] | None = None, source: str = ""
) -> Path:
    """Write ``window.json`` into `timing_dir` (created if missing); returns its path."""
    if end_unix_ns < start_unix_ns:
        raise InvalidInput(f"measured window ends before it starts ({start_unix_ns} > {end_unix_ns})")
    path = Path(timing_dir) / WINDOW_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    win = Window(
        int(start_unix_ns),
        int(end_unix_ns),
        None if warmup is None else (int(warmup[0]), int(warmup[1])),
        source,
    )
    path.write_text(json.dumps(win.to_dict(), indent=2) + "\n", encoding="utf-8")
    return path


def read_window(timing_dir) -> Window | None:
    """The window recorded in `timing_dir`, or None when the folder has no ``window.json``."""
    path = Path(timing_dir) / WINDOW_FILE
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("schema") != WINDOW_SCHEMA:
            raise InvalidInput(f"{path}: schema {data.get('schema')!r}, expected {WINDOW_SCHEMA!r}")
        m = data["measured"]
        w = data.get("warmup")
        return Window(
            int(m["start_unix_ns"]),
            int(m["end_unix_ns"]),
            None if not w else (int(w["start_unix_ns"]), int(w["end_unix_ns"])),
            str(data.get("source") or ""),
        )
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise InvalidInput(f"{path}: not a measured window ({exc})") from None

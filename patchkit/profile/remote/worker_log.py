"""Which speculative worker an SGLang server ran, read from its log; and what to say when a
profile run's server ran but recorded no cycle.

SGLang's server_args logs the choice once at start-up (a warning on every rank):

  0.5.9, 0.5.10  "Spec v2 is enabled for eagle/eagle3 speculative decoding and overlap schedule
                  is turned on."  /  "Overlap scheduler is disabled when spec v2 is off or using
                  unsupported speculative algorithm."  (-> v1)
  0.5.12         "Spec v2 is enabled by default for eagle/eagle3/standalone speculative
                  decoding."  /  "Spec v1 is used for eagle/eagle3/standalone speculative
                  decoding because <reason>."
  multi-layer    "Spec v2 is enabled for multi-layer EAGLE speculative decoding."
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

V1_FILE, V2_FILE = "eagle_worker.py", "eagle_worker_v2.py"

# (pattern, worker, file the worker lives in); the last matching line of a log wins
_LINES = (
    (re.compile(r"Spec v2 is enabled for multi-layer EAGLE[^\n]*"), "multi-layer v2", None),
    (re.compile(r"Spec v2 is enabled(?! for multi-layer)[^\n]*"), "v2", V2_FILE),
    (re.compile(r"Spec v1 is used for [^\n]*"), "v1", V1_FILE),
    (re.compile(r"Overlap scheduler is disabled when spec v2 is off[^\n]*"), "v1", V1_FILE),
)
# substrings of every line above: what the remote agent greps a server log of any size for
NEEDLES = ("Spec v1", "Spec v2", "spec v2 is off")
CLASSES = {"v1": "EAGLEWorker", "v2": "EAGLEWorkerV2", "multi-layer v2": "MultiLayerEagleWorkerV2"}


@dataclass(frozen=True)
class WorkerGuess:
    worker: str | None  # "v1", "v2", "multi-layer v2", or None: the log does not say
    line: str | None  # the log line that says so
    file: str | None  # the worker's file under sglang/srt/speculative/

    @property
    def known(self) -> bool:
        return self.worker is not None

    def describe(self) -> str:
        if self.worker is None:
            return "unknown"
        return f"spec {self.worker} ({CLASSES[self.worker]}{', ' + self.file if self.file else ''})"


def which_worker(log_text: str) -> WorkerGuess:
    """The worker named by the last "Spec v1/v2" line of ``log_text`` (unknown if none)."""
    best: tuple[int, WorkerGuess | None] = (-1, None)
    for pattern, worker, file in _LINES:
        for match in pattern.finditer(log_text or ""):
            if match.start() > best[0]:
                best = (match.start(), WorkerGuess(worker, match.group(0).strip(), file))
    return best[1] or WorkerGuess(None, None, None)


def worker_of(log_text: str, files: list[str]) -> WorkerGuess:
    """which_worker, else what the series says: a release whose series patches
    eagle_worker_v2.py and not eagle_worker.py (0.5.13 on, where the v1 worker is gone) runs
    EAGLEWorkerV2 whatever its log says (0.5.17 logs no "Spec v2" line)."""
    guess = which_worker(log_text)
    if guess.known or V2_FILE not in files or V1_FILE in files:
        return guess
    return WorkerGuess("v2", f"the series patches {V2_FILE} only: the release has no v1 worker", V2_FILE)


def timed_files(series_dir) -> list[str]:
    """Base names of the files the series' pin lists (what it patches)."""
    from patchkit.upstream import read_pin

    try:
        return [Path(p).name for p in read_pin(Path(series_dir) / "pin.toml").files]
    except Exception:  # a broken pin was refused long before; say nothing about it here
        return []


def no_cycles_message(found: str, logs: list[tuple[str, str]], series_dir, server_command: str) -> str:
    """The error when the server ran but the timing has no cycle: which worker ran (from the
    server logs, ``[(where, text)]``), whether the series times it, what to do."""
    series = Path(series_dir).name
    files = timed_files(series_dir)
    guesses = [(where, worker_of(text, files)) for where, text in logs]
    known = [(where, g) for where, g in guesses if g.known]
    head = f"the server ran, but {found}. "
    if "--speculative-algorithm" not in server_command and not known:
        return head + (
            "Which worker ran: none that is speculative (the server command has no "
            "--speculative-algorithm), so nothing calls the timed code."
        )
    if not known:
        return head + (
            "Which worker ran: unknown (no 'Spec v1'/'Spec v2' line in "
            + (", ".join(where for where, _ in logs) or "the server log")
            + "). "
            f"Series {series} patches {', '.join(files) or 'nothing'}; check that the server "
            "imports the patched package from the target root (PYTHONPATH, which python) and "
            "that its speculative worker is one the series times."
        )
    where, guess = known[0]
    said = f'Which worker ran: {guess.describe()}, as {where} says: "{guess.line}". '
    if guess.file is None:
        return head + said + f"No series times that worker (series {series} patches {', '.join(files)})."
    if guess.file not in files:
        other = (
            "v1 (SGLANG_ENABLE_SPEC_V2=0 or --disable-overlap-schedule)"
            if guess.worker == "v2"
            else "v2 (overlap scheduling on, --speculative-eagle-topk 1)"
        )
        return (
            head
            + said
            + (
                f"Series {series} does not time it: it patches {', '.join(files) or 'nothing'}. "
                f"Use a series that patches {guess.file} (e.g. patches/sglang-v0.5.12 times both "
                f"workers), or make SGLang run {other}."
            )
        )
    return (
        head
        + said
        + (
            f"Series {series} times it ({guess.file}), so the server most likely imported another "
            "copy of sglang than the patched target root (PYTHONPATH, which python, an editable "
            "install elsewhere)."
        )
    )

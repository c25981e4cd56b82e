"""``profile.run`` on the embedded default: install → verify → apply → run → revert → report.

    from patchkit.profile import run_default
    outcome = run_default("profile-out", size="ci")
    outcome.run_dir, outcome.summary.phase("verify")["share_of_cycle"], outcome.workload

The tree is reverted and checked pristine (patch.status) before the report is written, on
success, on failure and on Ctrl-C (KeyboardInterrupt goes on after the revert). Outputs in
``<out_root>/<timestamp>/``: table.txt, trace.json, phases.png, summary.json (the report),
timing/ (the runtime's JSON-lines), workload.json / workload.log / workload-spec.json.
"""

from __future__ import annotations

import functools
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from patchkit.errors import InvalidInput
from patchkit.profile.progress import ProgressLine
from patchkit.profile.session import run_workload
from patchkit.profile.site import DEFAULT_SERIES, DEFAULT_SITE, ensure_site, imported, patched
from patchkit.settings import PROFILE_DEFAULTS, checked


@dataclass
class ProfileOutcome:
    run_dir: Path
    summary: object  # patchkit.report.Summary (of the first point for a sweep)
    table: str
    workload: dict
    elapsed_s: float
    files: dict = field(default_factory=dict)


def new_run_dir(out_root) -> Path:
    """``<out_root>/<YYYYmmdd-HHMMSS>`` (a suffix when two runs start in the same second)."""
    root = Path(out_root).absolute()  # the workload runs with the run dir as its cwd
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    for n in range(100):
        candidate = root / (stamp if n == 0 else f"{stamp}-{n}")
        if candidate.with_name(candidate.name + PARTIAL_SUFFIX).exists():
            continue  # an interrupted run of that second
        try:
            candidate.mkdir(parents=True)
            _MADE.append(candidate)
            return candidate
        except FileExistsError:
            continue
    raise InvalidInput(f"{root}: could not make a fresh run directory for {stamp}")


# An interrupted profile.run / profile.sweep leaves what it wrote so far (timing files, logs) in
# <out>/<timestamp>.partial, so it is never taken for a complete run beside the others.
PARTIAL_SUFFIX = ".partial"
_MADE: list[Path] = []  # the run directories new_run_dir made, in order (marks_partial reads them)


def marks_partial(fn):
    """Decorator: when ``fn`` is interrupted (Ctrl-C, SIGTERM), the run directories it made are
    renamed ``<timestamp>.partial`` and the interrupt's message says where they are."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        first = len(_MADE)
        try:
            return fn(*args, **kwargs)
        except KeyboardInterrupt as exc:
            made = [d for d in _MADE[first:] if d.is_dir()]
            if not made:
                raise
            moved = []
            for run_dir in made:
                partial = run_dir.with_name(run_dir.name + PARTIAL_SUFFIX)
                try:
                    run_dir.rename(partial)
                except OSError:  # kept under its own name, marked inside
                    (run_dir / "INCOMPLETE").write_text("interrupted: this run did not finish\n")
                    partial = run_dir
                moved.append(str(partial))
            said = str(exc.args[0]) if exc.args and exc.args[0] else "the tree was reverted"
            raise type(exc)(f"{said}; the incomplete run's files are in {', '.join(moved)}") from None
        finally:
            del _MADE[first:]

    return wrapper


DEVICES = ("auto", "cpu", "cuda")


def check_args(size: str, timer_mode: str | None, num_assistant_tokens=None, device: str = "auto") -> None:
    """The options of run_default / run_sweep through their rows' checks (patchkit.settings),
    for callers that are not a task (``python -m patchkit.profile``, tests)."""
    for name, value in (
        ("device", device),
        ("size", size),
        ("timer", timer_mode),
        ("num_assistant_tokens", num_assistant_tokens),
    ):
        checked("profile.run", name, value)


def describe_workload(result: dict, point: dict) -> str:
    m = result["model"]
    params = point["params"]
    return (
        f"random Llama {m['layers']}x{m['hidden']} (vocab {m['vocab']}) target, "
        f"{m['draft_layers']}-layer shared draft, {m['dtype']} on {result['device']}; "
        f"{point['prompts']} prompts x {m['new_tokens']} new tokens, greedy; "
        f"num_assistant_tokens {params.get('num_assistant_tokens')}, "
        f"confidence threshold {params.get('assistant_confidence_threshold')}"
    )


def report_meta(result: dict, point: dict, elapsed_s: float | None = None) -> dict:
    """The report's meta: throughput with/without speculation, accepted length, context.
    snake_case keys and plain values (numbers where they are numbers); the table says them in
    words (patchkit.report.table.meta_lines)."""
    meta = {
        "tokens_per_s": point["assisted"]["tokens_per_s"],
        "baseline_tokens_per_s": point["baseline"]["tokens_per_s"],
        "accept_length": point["accept_length"],
        "workload": describe_workload(result, point),
        # prompts whose greedy output was the same with and without the assistant, of prompts
        "identical_outputs": point["identical_outputs"],
        "prompts": point["prompts"],
        "transformers_version": result["transformers"],
        "torch_version": result["torch"],
    }
    if "warmup" in result:  # the first prompt, plain and assisted, before the measured pass
        meta["warmup"] = bool(result["warmup"])
    if elapsed_s is not None:
        meta["wall_time_s"] = round(elapsed_s, 1)
    return meta


def write_pass_window(measured: dict, source: str, timing_dir=None):
    """window.json in the pass's timing folder, from the wall-clock times the workload took
    around its measured pass (and warm-up); nothing when the workload reported none."""
    from patchkit.report.window import write_window

    span = measured.get("window_ns")
    if not span:
        return None
    return write_window(
        timing_dir or measured["timing_dir"],
        span[0],
        span[1],
        warmup=measured.get("warmup_ns"),
        source=source,
    )


def progress_log(stream):
    """Where progress lines go: stderr when the table goes to stdout, else the given stream."""
    out = stream or sys.stdout

    def log(msg: str) -> None:
        print(msg, file=sys.stderr if out is sys.stdout else out, flush=True)

    return out, log


@marks_partial
def run_default(
    out_root=PROFILE_DEFAULTS["out"],
    size: str = PROFILE_DEFAULTS["size"],
    *,
    series_dir=DEFAULT_SERIES,
    site=DEFAULT_SITE,
    num_assistant_tokens: int = PROFILE_DEFAULTS["num_assistant_tokens"],
    assistant_confidence_threshold: float = PROFILE_DEFAULTS["confidence"],
    seed: int = PROFILE_DEFAULTS["seed"],
    timer_mode: str | None = None,
    device: str = PROFILE_DEFAULTS["device"],
    wheelhouse=None,
    timeout: float | None = None,
    chart: bool = True,
    stream=None,
    workload=None,
    timer_sample: int | None = None,
    warmup: bool = PROFILE_DEFAULTS["warmup"],
    mode: str = PROFILE_DEFAULTS["mode"],
) -> ProfileOutcome:
    """The default profile run. ``timer_mode`` None: events on CUDA, host time otherwise.
    ``timer_sample`` N times about one cycle in N (PATCHKIT_TIMER_SAMPLE; None: the
    environment's, else every cycle).
    ``warmup``: the first prompt once (plain and assisted) before the measured pass; its
    cycles are recorded but lie outside the measured window (window.json in timing/).

    ``workload`` replaces patchkit.profile.session.run_workload (same signature); the
    bracket around it -- apply before, revert and the pristine check after -- stays.
    ``mode`` import: nothing is written in the site; the workload gets the hook folder
    (``<run>/import-hook``, patchkit.engine.importmode) first on its PYTHONPATH, and the
    bracket is that folder's writing (``hook=`` is passed to the workload).
    """
    check_args(size, timer_mode, num_assistant_tokens, device)
    if workload is None:  # the real workload imports torch & co. in this interpreter
        from patchkit.extras import require

        require("profile", "profile.run")
    timer_sample = checked("profile.run", "sample", timer_sample)
    mode = checked("profile.run", "mode", mode)
    out, log = progress_log(stream)
    start = time.monotonic()
    series_dir, site = Path(series_dir), Path(site)
    ensure_site(series_dir, site, wheelhouse=wheelhouse, log=log)  # a bad series: no run dir made
    run_dir = new_run_dir(out_root)
    point = {
        "label": f"k={num_assistant_tokens}",
        "num_assistant_tokens": int(num_assistant_tokens),
        "assistant_confidence_threshold": float(assistant_confidence_threshold),
        "schedule": "constant",
        "timing_dir": str((run_dir / "timing").resolve()),
    }
    spec = {"size": size, "seed": seed, "device": device, "points": [point], "warmup": bool(warmup)}
    if timer_sample is not None:
        spec["timer_sample"] = timer_sample
    bracket = (
        imported(series_dir, site, run_dir, log=log)
        if mode == "import"
        else patched(series_dir, site, log=log)
    )
    with bracket as done:
        hook = {"hook": done} if mode == "import" else {}
        result = (workload or run_workload)(
            site, spec, run_dir, timer_mode=timer_mode, timeout=timeout, progress=ProgressLine(), **hook
        )
    from patchkit.report import build_report, render_table  # after the revert: tree is pristine

    measured = result["points"][0]
    write_pass_window(measured, "profile.run")
    summary = build_report(
        measured["timing_dir"],
        run_dir,
        meta=report_meta(result, measured, time.monotonic() - start),
        chart=chart,
    )
    table = render_table(summary)
    print(table, file=out)
    print(f"report: {run_dir}/ ({', '.join(sorted(summary.files.values()))})", file=out)
    return ProfileOutcome(run_dir, summary, table, result, time.monotonic() - start, dict(summary.files))

"""Reports for runs you launched yourself: ``profile.collect`` and ``profile.report``.

The common flow is: ``patch.apply``, start SGLang with your own launcher and
``PATCHKIT_TIMER_DIR=DIR``, run a benchmark, then

    patchkit profile.collect --target ssh://gpu1/opt/venv/lib/python3.11/site-packages \\
        --from /tmp/pk-timing --out timing/
    patchkit profile.report --timing timing/ --out report/ --bench bench.txt

``collect`` fetches every rank's timing files (``*.jsonl``) and ``window.json`` from each target
as profile.remote does: one tar stream per target written by its job-control agent
(patchkit/profile/remote/agent.py, run by ``python3`` on the target through the target's
transport), refused when the folder holds more than ``max_mb``. Several targets (the nodes of
one multi-node server) land in one folder; a file name two nodes share gets ``.nodeN``.
``report`` writes the table, trace, chart and summary of any timing folder
(patchkit.report.build_report), with tokens/s and accept length from a benchmark's text output
(patchkit.profile.bench_output) when given one.
"""

from __future__ import annotations

import posixpath
import shlex
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from patchkit.errors import InvalidInput
from patchkit.profile.remote.host import RemoteHost
from patchkit.profile.site import ProfileError
from patchkit.report.load import timing_folder
from patchkit.settings import REMOTE_DEFAULTS, positive_number

WINDOW_FILE = "window.json"


@dataclass
class FetchSettings:
    """What RemoteHost needs to run its agent (a subset of RemoteConfig)."""

    python: str = REMOTE_DEFAULTS["python"]
    max_fetch_mb: float = REMOTE_DEFAULTS["max_fetch_mb"]
    step_timeout_s: float = REMOTE_DEFAULTS["step_timeout_s"]

    @property
    def python_argv(self) -> list[str]:
        return shlex.split(self.python)


@dataclass
class Collected:
    out: Path
    files: list[Path] = field(default_factory=list)  # the timing files written into out
    window: Path | None = None
    per_target: list[tuple[str, str, int]] = field(default_factory=list)  # (label, folder, files)

    @property
    def bytes(self) -> int:
        return sum(p.stat().st_size for p in self.files)


def source_folder(transport, folder: str | None) -> str:
    """The timing folder on the target: ``folder`` (relative: under the target's root), else
    the target's root itself."""
    if not folder:
        return transport.root
    if folder.startswith("/"):
        return posixpath.normpath(folder)
    return posixpath.normpath(posixpath.join(transport.root, folder))


def collect(
    transports: list, out, folder: str | None = None, settings: FetchSettings | None = None
) -> Collected:
    """Fetch the timing files of every target into ``out`` (created; must hold no timing yet)."""
    settings = settings or FetchSettings()
    if positive_number(settings.max_fetch_mb) is None:
        raise InvalidInput(f"--max-mb must be positive, not {settings.max_fetch_mb:g}")
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.glob("*.jsonl"))):
        raise InvalidInput(f"{out} already holds timing files (or is not a folder): give a new --out folder")
    result = Collected(out)
    staging = Path(tempfile.mkdtemp(prefix="patchkit-collect-"))
    try:
        fetched = []
        for index, transport in enumerate(transports):
            host = RemoteHost(index, transport, settings)
            where = source_folder(transport, folder)
            files = host.fetch_timing(staging / f"node{index}", source=where)
            timing = [p for p in files if p.suffix == ".jsonl"]
            result.per_target.append((transport.label, where, len(timing)))
            fetched.append((index, files, timing))
        if not any(timing for _, _, timing in fetched):
            places = ", ".join(f"{label}:{where}" for label, where, _ in result.per_target)
            raise ProfileError(
                f"no timing files (*.jsonl) in {places}; was the server started "
                "with PATCHKIT_TIMER_DIR set to that folder, and the series applied?"
            )
        out.mkdir(parents=True, exist_ok=True)
        for index, files, timing in fetched:
            for path in timing:
                dest = out / path.name
                if dest.exists():  # the same rank and pid on two nodes: keep both
                    dest = out / f"{path.stem}.node{index}.jsonl"
                shutil.copyfile(path, dest)
                result.files.append(dest)
            window = next((p for p in files if p.name == WINDOW_FILE), None)
            if window is not None and result.window is None:  # the head node's (first target)
                result.window = out / WINDOW_FILE
                shutil.copyfile(window, result.window)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return result


def report(timing_dir, out, bench_file=None, chart: bool = True, say=None):
    """build_report over ``timing_dir`` (a run folder: its timing/, timing_folder); tokens/s and
    accept length from ``bench_file``."""
    from patchkit.extras import PAGE_NEEDS
    from patchkit.profile.bench_output import parse_bench_output
    from patchkit.report import build_report

    if not Path(timing_dir).is_dir():
        raise InvalidInput(f"--timing {timing_dir}: no such folder")
    meta: dict = {}
    if bench_file:  # checked before the timing folder's content, as every option is
        try:
            text = Path(bench_file).read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            raise InvalidInput(f"--bench {bench_file}: {exc.strerror}") from exc
        meta.update(parse_bench_output(text).report_meta(bench_file))
    timing_dir = timing_folder(timing_dir, say)
    if chart:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            chart = False
            meta["chart"] = "not drawn: matplotlib is not installed (pip install 'patchkit[report]')"
            if say:
                say(f"report.html and phases.png: not written ({PAGE_NEEDS})")
    return build_report(timing_dir, out, meta=meta, chart=chart)

"""Running the workload subprocess: spec in, progress streamed, result out, child never left behind.

The child is ``python -m patchkit.profile.workload`` with the patched tree first on PYTHONPATH.
Its stdout carries ``@@progress`` lines (read by a thread, shown on the live line), its stderr
goes to ``workload.log`` in the run directory. On Ctrl-C, a timeout or any error here, the child
is terminated (SIGTERM, then SIGKILL) before the exception goes on, so that the caller's
revert never races a process still importing from the tree.
"""

from __future__ import annotations

import contextlib
import json
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

from patchkit.profile.progress import ProgressLine, describe
from patchkit.profile.site import ProfileError, workload_env
from patchkit.profile.workload import PROGRESS_PREFIX

WORKLOAD_MODULE = "patchkit.profile.workload"


def _reader(stream, events: queue.Queue) -> None:
    for line in stream:
        if line.startswith(PROGRESS_PREFIX):
            with contextlib.suppress(json.JSONDecodeError):
                events.put(json.loads(line[len(PROGRESS_PREFIX) :]))
    events.put(None)


def _stop(proc: subprocess.Popen, grace: float = 5.0) -> None:
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _log_tail(path: Path, lines: int = 12) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    except OSError:
        return ""
    return "\n".join(text[-lines:])


def _env(site: Path, timer_mode: str | None, hook) -> dict:
    env = workload_env(site, timer_mode)
    if hook is None:
        return env
    from patchkit.engine.importmode import import_env

    return import_env(hook, env)


def run_workload(
    site: Path,
    spec: dict,
    run_dir: Path,
    *,
    timer_mode: str | None = None,
    timeout: float | None = None,
    progress: ProgressLine | None = None,
    python: str | None = None,
    hook=None,
) -> dict:
    """Run the workload once for ``spec`` (see workload.py); returns its result document.
    ``hook``: import mode's hook folder (patchkit.engine.importmode.HookFolder), first on the
    workload's PYTHONPATH."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    spec_path, result_path = run_dir / "workload-spec.json", run_dir / "workload.json"
    log_path = run_dir / "workload.log"
    spec_path.write_text(json.dumps(spec, indent=2) + "\n", encoding="utf-8")
    argv = [
        python or sys.executable,
        "-m",
        WORKLOAD_MODULE,
        "--spec",
        str(spec_path),
        "--result",
        str(result_path),
    ]
    progress = progress or ProgressLine()
    events: queue.Queue = queue.Queue()
    deadline = time.monotonic() + timeout if timeout else None
    with open(log_path, "w", encoding="utf-8") as log:
        proc = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            env=_env(site, timer_mode, hook),
            cwd=str(run_dir),
        )
        thread = threading.Thread(target=_reader, args=(proc.stdout, events), daemon=True)
        thread.start()
        try:
            finished = False
            while not finished:
                try:
                    event = events.get(timeout=progress.interval)
                except queue.Empty:
                    event = False
                if event is None:
                    finished = True
                elif event:
                    progress.update(describe(event))
                else:
                    progress.update()
                if deadline and time.monotonic() > deadline:
                    raise ProfileError(
                        f"the workload ran past its {timeout:.0f} s limit; stopped it (log: {log_path})"
                    )
            proc.wait()
        finally:
            _stop(proc)
            thread.join(1.0)
            progress.close()
    if proc.returncode != 0:
        raise ProfileError(
            f"the workload failed (exit {proc.returncode}); last lines of {log_path}:\n{_log_tail(log_path)}"
        )
    try:
        result = json.loads(result_path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ProfileError(f"the workload wrote no readable result ({result_path}: {exc})") from exc
    where = Path(result.get("transformers_file", "")).resolve()
    if Path(site).resolve() not in where.parents:
        raise ProfileError(
            f"the workload imported transformers from {where}, not from the "
            f"patched tree {site}; is something else first on sys.path?"
        )
    return result

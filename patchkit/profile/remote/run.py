"""``profile.remote``: profile SGLang servers on SSH targets -- apply, serve, benchmark, revert.

    from patchkit.profile.remote import RemoteConfig, run_remote
    cfg = RemoteConfig.from_mapping({
        "targets": ["ssh://gpu1/opt/venv/lib/python3.11/site-packages"],
        "server_command": "python -m sglang.launch_server --model-path M "
                          "--speculative-algorithm EAGLE3 ...",
        "env": {"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring"},
        "bench_command": "python -m sglang.bench_serving --backend sglang --port 30000 ..."})
    outcome = run_remote(cfg)      # outcome.run_dir, .summary, .bench.tokens_per_s

The flow, one live progress line throughout:
  1. patch.verify on every target (each must be pristine: a state found applied is not ours to
     revert), then patch.apply (a fleet applies all or nothing);
  2. a fresh run directory on every target (mktemp under ``remote_dir``), named in remote.json at
     once (and again when each server has started): a sweep resumed after its process died
     stops what a run it cut left there (patchkit.profile.remote.resume);
  3. the server command started detached on every target (agent.py: its own session and
     process group, pgid recorded on the target), with the timing runtime's environment;
  4. ``/health`` polled through the SSH connection until it answers 200, bounded by
     ``health_timeout_s``; a server that exits first fails the run at once, with its log's tail;
  5. with ``warmup`` (the default; ``--no-warmup`` turns it off) a warm-up pass first: the
     benchmark command (or ``warmup_command``, e.g. the same benchmark with fewer prompts) run
     once on the first target, its output kept in warmup.log and not used; then the measured
     benchmark, started detached on the first target and polled until it exits (bounded by
     ``bench_timeout_s``; the servers are watched meanwhile); its output saved and parsed. The
     agent records each job's wall-clock start and end on that target and writes
     ``timing/window.json`` there (patchkit.report.window's format: the measured window and the
     warm-up's), so the report keeps only the cycles of the measured pass;
  6. the servers stopped: ``stop_signals`` to each process group, ``stop_grace_s`` each, KILL;
  7. every target's timing files fetched (one tar stream per target, ``max_fetch_mb`` at most);
  finally -- on success, failure and Ctrl-C alike -- every job still running on a target is
  stopped, the server logs are saved, the remote run directories removed (unless
  ``keep_remote_dir``), the series reverted on every target it was applied to and patch.status
  checked pristine;
  8. the report (patchkit.report) in ``<out>/<timestamp>/``, with the benchmark's output token
     throughput and accept length; benchmark.log, remote.json and node<i>/server.log beside it.

A server that ran but recorded no cycle (no timing files, or files without a cycle) fails the
run with a message that names the speculative worker SGLang chose, read from the server log's
"Spec v1/v2" line (patchkit.profile.remote.worker_log), and whether the series times it.

``baseline`` (``--baseline``): after the revert, the same steps 2-6 once more with the server
command stripped of every ``--speculative-*`` option (patchkit.profile.remote.server_args), no series
applied, the same benchmark; its logs in ``<run>/baseline/``; summary.json's ``baseline`` is
{tokens_per_s, spec_tokens_per_s, ratio = spec / baseline, accept_length, server_command,
dropped, report, error} and table.txt says "tokens/s with speculation: X, without: Y, speedup
Zx". ``matrix`` (``--matrix``) runs patchkit.profile.remote.sweep instead. SIGTERM is handled
like Ctrl-C (servers stopped, series reverted; exit 143 instead of 130).

Environment of the server (after ``env``): PATCHKIT_TIMER_DIR=<run dir>/timing,
PATCHKIT_TIMER_FLUSH_S, PATCHKIT_TIMER (when ``timer`` is set), PATCHKIT_TIMER_SAMPLE and
PATCHKIT_TIMER_SEED (``timer_sample``/``timer_seed`` unless ``env`` names them), PATCHKIT_TARGET_ROOT,
PATCHKIT_RUN_DIR, PATCHKIT_NODE_RANK (target index), PATCHKIT_NNODES, PATCHKIT_SERVER_PORT.
The benchmark gets ``bench_env`` and the same PATCHKIT_TARGET_ROOT/RUN_DIR/SERVER_PORT.
Commands run under ``sh -c`` in the run directory, so they may use those variables.
"""

from __future__ import annotations

import functools
import json
import shutil
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from patchkit.engine.host_result import HostState
from patchkit.errors import PatchkitError
from patchkit.profile.bench_output import BenchOutput, parse_bench_output
from patchkit.profile.local_run import new_run_dir
from patchkit.profile.progress import ProgressLine
from patchkit.profile.remote.config import RemoteConfig
from patchkit.profile.remote.host import RemoteHost, last_lines
from patchkit.profile.remote.server_args import drop_speculative
from patchkit.profile.remote.worker_log import (
    NEEDLES as WORKER_NEEDLES,
    no_cycles_message,
    timed_files,
    worker_of,
)
from patchkit.profile.site import ProfileError, _sigint_deferred, sigterm_interrupts
from patchkit.report.window import WINDOW_FILE

__all__ = ["RemoteConfig", "RemoteOutcome", "parse_bench_output", "run_remote"]

BENCH_LOG_MAX = 16 * 1024 * 1024
SERVER_LOG_MAX = 1024 * 1024
_OK_FILE_STATES = ("ok", "pristine", "applied", "original")


@dataclass
class RemoteOutcome:
    run_dir: Path
    summary: object  # patchkit.report.Summary
    table: str
    bench: BenchOutput
    hosts: list
    elapsed_s: float
    files: dict = field(default_factory=dict)


def describe_failures(result) -> str:
    """Per host: state, exit code, messages and the files that are not as expected."""
    parts = []
    for host in result.hosts:
        if host.exit_code == 0 and host.state == HostState.PRISTINE:
            continue
        detail = list(host.messages) + [
            f"{f.path}: {f.state}{' - ' + f.detail if f.detail else ''}"
            for f in host.files
            if f.state not in _OK_FILE_STATES
        ]
        parts.append(
            f"{host.target}: {host.state} (exit {host.exit_code})"
            + (": " + "; ".join(detail) if detail else "")
        )
    return "; ".join(parts)


class RemoteRun:
    """One profile run over ``hosts``; ``execute()`` is the whole flow."""

    def __init__(
        self,
        cfg: RemoteConfig,
        run_dir: Path,
        progress: ProgressLine,
        transports,
        *,
        server_command: str | None = None,
        env: dict | None = None,
        apply: bool = True,
        timed: bool = True,
    ):
        """``server_command``/``env`` override the settings' (a sweep point, the baseline);
        ``apply=False``: the series is not verified, applied or reverted by this run (a sweep
        brackets its points itself, the baseline runs unpatched); ``timed=False``: no timing
        files are expected."""
        self.cfg = cfg
        self.run_dir = run_dir
        self.progress = progress
        self.hosts = [RemoteHost(i, t, cfg) for i, t in enumerate(transports)]
        self.server_command = server_command or cfg.server_command
        self.env = dict(cfg.env if env is None else env)
        self.apply_series, self.timed = apply, timed
        self.applied = False
        self.bench_text = ""
        self.notes: list[str] = []
        self.worker_lines: dict[int, str] = {}  # host index -> its log's "Spec v1/v2" lines
        self.partial_timing: Path | None = None  # interrupted: the timing fetched by cleanup
        self.bench: BenchOutput | None = None  # the benchmark's output, once it finished
        self.window: dict | None = None  # what window.json holds (head target)
        # set by a sweep that runs several of these at once (--gpus): an Event whose setting
        # stops this run at its next poll, as Ctrl-C would (the signal reaches the main thread only)
        self.cancel: threading.Event | None = None

    # ---- helpers --------------------------------------------------------------------------------

    def log(self, message: str) -> None:
        self.progress.close(final=message)

    def check_cancel(self) -> None:
        if self.cancel is not None and self.cancel.is_set():
            raise KeyboardInterrupt("the sweep was interrupted")

    def ops(self, name: str):
        from patchkit import ops

        opts = ops.Options(layout=self.cfg.layout, jobs=self.cfg.jobs, timeout=self.cfg.step_timeout_s)
        return getattr(ops, name)(self.cfg.series, [h.transport for h in self.hosts], opts)

    def server_env(self, host: RemoteHost) -> dict:
        env = dict(self.env)
        env.update(
            PATCHKIT_TIMER_DIR=host.path("timing"),
            PATCHKIT_TIMER_FLUSH_S=f"{self.cfg.timer_flush_s:g}",
            PATCHKIT_TARGET_ROOT=host.root,
            PATCHKIT_RUN_DIR=host.run_dir,
            PATCHKIT_NODE_RANK=str(host.index),
            PATCHKIT_NNODES=str(len(self.hosts)),
            PATCHKIT_SERVER_PORT=str(self.cfg.port),
        )
        if self.cfg.timer:
            env["PATCHKIT_TIMER"] = self.cfg.timer
        if self.cfg.cpus:  # a block's own list is in env already (blocks.Block.env)
            env.setdefault("PATCHKIT_CPUS", self.cfg.cpus[0])
        # sampled timing; an env setting (--env, a matrix's env:PATCHKIT_TIMER_SAMPLE) wins;
        # none: the runtime's budget sets the rate (PATCHKIT_TIMER_BUDGET)
        if self.cfg.timer_sample is not None:
            env.setdefault("PATCHKIT_TIMER_SAMPLE", str(self.cfg.timer_sample))
        env.setdefault("PATCHKIT_TIMER_SEED", str(self.cfg.timer_seed))
        return env

    def bench_env(self, host: RemoteHost) -> dict:
        env = dict(self.cfg.bench_env)
        env.update(
            PATCHKIT_TARGET_ROOT=host.root,
            PATCHKIT_RUN_DIR=host.run_dir,
            PATCHKIT_SERVER_PORT=str(self.cfg.port),
        )
        return env

    def log_name(self, host: RemoteHost) -> str:
        """Where the server log can be read after the run (saved locally by the cleanup)."""
        return f"the server log ({self.run_dir / f'node{host.index}' / 'server.log'})"

    def server_log_tail(self, host: RemoteHost, lines: int = 15) -> str:
        try:
            text = host.tail("server.log", 16384).decode("utf-8", "replace")
        except PatchkitError as exc:
            return f"(could not read it: {exc.message})"
        return last_lines(text, lines) or "(empty)"

    # ---- steps ----------------------------------------------------------------------------------

    def verify_and_apply(self) -> None:
        self.progress.update("verifying the series on every target")
        verified = self.ops("verify")
        if verified.exit_code != 0 or any(h.state != HostState.PRISTINE for h in verified.hosts):
            raise ProfileError(
                "patch.verify: every target must be pristine before a profile run (a state "
                "found applied may be someone else's, and is not reverted here): "
                + describe_failures(verified),
                verified.exit_code or 1,
            )
        self.progress.update("applying the series on every target")
        self.applied = True  # from here on, revert in the cleanup (apply may be half done)
        applied = self.ops("apply")
        if applied.exit_code != 0:
            raise ProfileError("patch.apply: " + describe_failures(applied), applied.exit_code)
        written = sum(len(h.written) for h in applied.hosts)
        self.log(
            f"applied {Path(self.cfg.series).name} to {len(self.hosts)} target(s) ({written} files written)"
        )

    def start_servers(self) -> None:
        for host in self.hosts:
            self.progress.update(f"starting the server on {host.where}")
            host.make_run_dir()
            self.record()  # where this run's jobs are, for a sweep resumed after its process died
            job = host.start("server", self.server_command, self.server_env(host))
            self.record()
            self.log(
                f"server started on {host.where} (process group {job['pgid']}, run directory {host.run_dir})"
            )

    def check_servers(self, during: str) -> None:
        for host in self.hosts:
            state = host.poll("server")
            if state["exit"] is not None or not state["alive"]:
                raise ProfileError(
                    f"{host.label}: the server exited (exit {state['exit']}) {during}; last "
                    f"lines of {self.log_name(host)}:\n{last_lines(state['tail'])}"
                )

    def wait_healthy(self) -> None:
        url = self.cfg.url
        watched = self.hosts if self.cfg.health_on == "all" else self.hosts[:1]
        pending = list(watched)
        start = time.monotonic()
        last: dict[int, str] = {}
        while True:
            self.check_cancel()
            for host in self.hosts:
                state = host.poll("server", url if host in pending else "")
                if state["exit"] is not None or not state["alive"]:
                    raise ProfileError(
                        f"{host.label}: the server exited (exit {state['exit']}) before "
                        f"{url} answered; last lines of {self.log_name(host)}:\n"
                        f"{last_lines(state['tail'])}"
                    )
                if host in pending:
                    last[host.index] = state.get("health") or "?"
                    if state.get("health") == "ok":
                        pending.remove(host)
            if not pending:
                self.log(f"{url} answered 200 after {time.monotonic() - start:.1f} s")
                return
            if time.monotonic() - start > self.cfg.health_timeout_s:
                host = pending[0]
                raise ProfileError(
                    f"{host.label}: the server did not answer {url} with 200 within "
                    f"{self.cfg.health_timeout_s:g} s (last probe: {last[host.index]}); "
                    f"last lines of {self.log_name(host)}:\n{self.server_log_tail(host)}"
                )
            self.progress.update(f"waiting for {url} on {pending[0].where}")
            time.sleep(self.cfg.poll_s)

    def _run_job(self, name: str, command: str, what: str) -> tuple[dict, str]:
        """Run ``command`` as job ``name`` on the head target until it exits (servers watched,
        bench_timeout_s); returns its last state and its log's text."""
        head = self.hosts[0]
        head.start(name, command, self.bench_env(head))
        start = time.monotonic()
        while True:
            self.check_cancel()
            state = head.poll(name, tail=512)
            if state["exit"] is not None:
                break
            self.check_servers(f"during the {what}")
            if time.monotonic() - start > self.cfg.bench_timeout_s:
                raise ProfileError(
                    f"{head.label}: the {what} ran past bench_timeout_s "
                    f"({self.cfg.bench_timeout_s:g} s); stopped it"
                )
            text = f"{what} running on {head.where}"
            line = last_lines(state["tail"], 1)
            if self.progress.live and line:
                text += ": " + line[-60:]
            self.progress.update(text)
            time.sleep(self.cfg.poll_s)
        state["elapsed_s"] = time.monotonic() - start
        return state, head.tail(f"{name}.log", BENCH_LOG_MAX).decode("utf-8", "replace")

    def run_warmup(self) -> None:
        """The warm-up pass: the benchmark (or ``warmup_command``) once, its result unused,
        so that the measured pass meets warm caches and compiled kernels."""
        command = self.cfg.warmup_command or self.cfg.bench_command
        state, text = self._run_job("warmup", command, "warm-up benchmark")
        (self.run_dir / "warmup.log").write_text(text, encoding="utf-8")
        if state["exit"] != 0:
            raise ProfileError(
                f"{self.hosts[0].label}: the warm-up benchmark failed (exit "
                f"{state['exit']}); last lines of {self.run_dir / 'warmup.log'}:"
                f"\n{last_lines(text)}"
            )
        self.log(f"warm-up benchmark done in {state['elapsed_s']:.1f} s")

    def run_bench(self) -> BenchOutput:
        head = self.hosts[0]
        state, self.bench_text = self._run_job("bench", self.cfg.bench_command, "benchmark")
        (self.run_dir / "benchmark.log").write_text(self.bench_text, encoding="utf-8")
        if state["exit"] != 0:
            raise ProfileError(
                f"{head.label}: the benchmark failed (exit {state['exit']}); "
                f"last lines of {self.run_dir / 'benchmark.log'}:\n"
                f"{last_lines(self.bench_text)}"
            )
        parsed = parse_bench_output(self.bench_text)
        self.log(
            f"benchmark done in {state['elapsed_s']:.1f} s: output throughput "
            f"{parsed.tokens_per_s} tok/s, accept length {parsed.accept_length}"
        )
        return parsed

    def write_window(self) -> dict:
        """window.json in the head target's timing folder: the measured benchmark's wall-clock
        start and end (and the warm-up's), taken by the agent on that host; fetched with the
        timing files."""
        self.window = self.hosts[0].agent(
            "window", self.hosts[0].run_dir, "bench", "warmup" if self.cfg.warmup else "", "profile.remote"
        )
        return self.window

    def stop_servers(self) -> None:
        for host in self.hosts:
            self.progress.update(f"stopping the server on {host.where}")
            for job in host.stop("server"):
                if job["left"]:
                    raise ProfileError(
                        f"{host.label}: server process group {job['pgid']} "
                        f"still has processes {job['left']} after KILL"
                    )
                how = ", ".join(job["sent"]) or "it had already exited"
                self.log(f"server on {host.where} stopped ({how}; exit {job['exit']})")

    def fetch_timing(self) -> Path:
        timing = self.run_dir / "timing"
        timing.mkdir(exist_ok=True)
        for old in timing.glob("*.jsonl"):  # an earlier fetch of this run (cut by an interrupt)
            old.unlink()
        count = 0
        for host in self.hosts:
            self.progress.update(f"fetching timing files from {host.where}")
            node = self.run_dir / f"node{host.index}" / "timing"
            files = host.fetch_timing(node)
            for path in files:
                if path.name == WINDOW_FILE and host.index == 0 and path.parent == node:
                    shutil.copyfile(path, timing / WINDOW_FILE)  # the head's clock: the bench's
                    continue
                if not path.name.endswith(".jsonl"):
                    continue
                dest = timing / path.name
                if dest.exists():  # the same rank and pid on two nodes: keep both
                    dest = timing / f"{path.stem}.node{host.index}.jsonl"
                shutil.copyfile(path, dest)
                count += 1
            self.log(f"fetched {len(files)} timing file(s) from {host.where}")
        if not count:
            raise ProfileError(
                self.no_cycles(
                    "no timing files were written on any target ("
                    + ", ".join(f"{h.where}:{h.path('timing')}" for h in self.hosts)
                    + ")"
                )
            )
        cycles = count_cycles(timing)
        if not cycles:
            raise ProfileError(self.no_cycles(f"its {count} timing file(s) hold no cycle ({timing})"))
        return timing

    def read_worker_lines(self, host: RemoteHost) -> str:
        """The server log's "Spec v1/v2" lines (logged at start-up; grepped on the target, so
        a log longer than what is fetched back still tells)."""
        if host.index not in self.worker_lines and host.run_dir is not None:
            try:
                self.worker_lines[host.index] = host.grep("server.log", WORKER_NEEDLES)
            except PatchkitError:
                return ""
        return self.worker_lines.get(host.index, "")

    @property
    def worker(self) -> str:
        """The worker the head node's server log names, e.g. "spec v2 (EAGLEWorkerV2, ...)"."""
        return self.worker_on(0)

    def worker_on(self, index: int) -> str:
        """The worker host ``index``'s server log names, else the one its series implies."""
        return worker_of(self.worker_lines.get(index, ""), self.series_files).describe()

    @functools.cached_property
    def series_files(self) -> list[str]:
        """The files the series patches (its pin.toml), read once."""
        return timed_files(self.cfg.series)

    def no_cycles(self, found: str) -> str:
        """Which worker ran (the servers' logs say, on the targets still), and what to do."""
        logs = [(self.log_name(h), self.read_worker_lines(h)) for h in self.hosts]
        return no_cycles_message(found, logs, self.cfg.series, self.server_command)

    # ---- cleanup ------------------------------------------------------------------------------

    def cleanup(self, interrupted: bool = False) -> list[str]:
        """Stop what runs, keep the logs, remove remote dirs, revert; returns the problems.
        ``interrupted``: fetch the timing written so far first (``partial_timing``)."""
        problems = []
        for host in self.hosts:
            if host.run_dir is None:
                continue
            try:
                for job in host.stop():
                    if job["left"]:
                        problems.append(
                            f"{host.label}: job {job['name']} (process group "
                            f"{job['pgid']}) still has processes {job['left']}"
                        )
            except PatchkitError as exc:
                problems.append(f"stopping the jobs: {exc.message}")
            try:
                node = self.run_dir / f"node{host.index}"
                node.mkdir(exist_ok=True)
                (node / "server.log").write_bytes(host.tail("server.log", SERVER_LOG_MAX))
            except (PatchkitError, OSError):
                pass
            self.read_worker_lines(host)
        if interrupted and self.timed and any(h.run_dir for h in self.hosts):
            try:  # what the servers wrote until the interrupt: a partial report
                self.partial_timing = self.fetch_timing()
            except (PatchkitError, OSError) as exc:
                self.notes.append(f"no partial report: {getattr(exc, 'message', exc)}")
        for host in self.hosts:
            if host.run_dir is None:
                continue
            if not self.cfg.keep_remote_dir:
                try:
                    host.cleanup()
                except PatchkitError as exc:
                    self.notes.append(f"left {host.run_dir} on {host.where}: {exc.message}")
        problems += self.revert_series()
        for host in self.hosts:
            host.close()
        return problems

    def revert_series(self) -> list[str]:
        """Revert where this run applied, check patch.status pristine; returns the problems."""
        if not self.applied:
            return []
        problems = []
        self.progress.update("reverting the series on every target")
        try:
            reverted = self.ops("revert")
            status = self.ops("status")
        except PatchkitError as exc:
            problems.append(f"revert: {exc.message}")
        else:
            if reverted.exit_code != 0 or any(h.state != HostState.PRISTINE for h in status.hosts):
                problems.append(
                    "revert after the profile run failed: "
                    + describe_failures(reverted)
                    + "; patch.status: "
                    + describe_failures(status)
                )
            else:
                self.applied = False
                self.log(f"reverted {len(self.hosts)} target(s); patch.status: pristine")
        return problems

    def record(self) -> dict:
        doc = {
            "config": self.cfg.to_dict(),
            "notes": self.notes,
            "hosts": [
                {
                    "index": h.index,
                    "target": h.label,
                    "root": h.root,
                    "remote_run_dir": h.run_dir,
                    "kept": self.cfg.keep_remote_dir,
                    "jobs": h.jobs,
                    "server_command": self.server_command,
                    "worker": self.worker_on(h.index),
                }
                for h in self.hosts
            ],
        }
        (self.run_dir / "remote.json").write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
        return doc

    # ---- the flow ----------------------------------------------------------------------------

    def execute(self) -> tuple[BenchOutput, Path | None]:
        failure = None
        try:
            if self.apply_series:
                self.verify_and_apply()
            self.start_servers()
            self.wait_healthy()
            if self.cfg.warmup:
                self.run_warmup()
            bench = self.bench = self.run_bench()
            self.write_window()
            self.stop_servers()
            timing = self.fetch_timing() if self.timed else None
            return bench, timing
        except BaseException as exc:
            failure = exc
            raise
        finally:
            with _sigint_deferred():
                problems = self.cleanup(interrupted=isinstance(failure, KeyboardInterrupt))
                self.record()
                self.progress.close()
            if problems and isinstance(failure, KeyboardInterrupt):
                # still an interrupt (exit 130), but the boundary says what was not cleaned up
                raise type(failure)("cleanup incomplete: " + "; ".join(problems)) from None
            if problems:
                error = ProfileError("; ".join(problems) + (f" (after: {failure})" if failure else ""))
                raise error from failure


def count_cycles(timing_dir: Path) -> int:
    """Cycle records in the fetched JSON-lines files (0 when none can be read)."""
    from patchkit.errors import InvalidInput
    from patchkit.report import load_timing_dir

    try:
        return sum(len(p.cycles) for p in load_timing_dir(timing_dir))
    except InvalidInput:
        return 0


def report_meta(
    cfg: RemoteConfig,
    bench: BenchOutput,
    hosts,
    elapsed_s: float,
    *,
    server_command: str | None = None,
    env: dict | None = None,
) -> dict:
    meta = bench.report_meta("its output (see benchmark.log)")
    meta["benchmark_command"] = cfg.bench_command
    # the benchmark (or warmup_command) once before the measured pass, same server (window.json)
    meta["warmup"] = bool(cfg.warmup)
    if cfg.warmup:
        meta["warmup_command"] = cfg.warmup_command or "the benchmark once, same server"
    meta["server_command"] = server_command or cfg.server_command
    env = cfg.env if env is None else env
    if env:
        meta["server_environment"] = " ".join(f"{k}={v}" for k, v in env.items())
    meta["targets"] = ", ".join(h.label for h in hosts)
    meta["series"] = Path(cfg.series).name
    meta["wall_time_s"] = round(elapsed_s, 1)
    return meta


def run_baseline(
    cfg: RemoteConfig,
    run_dir: Path,
    progress: ProgressLine,
    transports,
    spec_tokens_per_s,
    *,
    sub: str = "baseline",
) -> dict:
    """The same server without its --speculative-* options, unpatched, with the same benchmark;
    ``baseline/`` (``sub``) in the run directory holds its logs. Returns summary.json's
    "baseline"."""
    command, removed = drop_speculative(cfg.server_command)
    doc = {
        "tokens_per_s": None,
        "spec_tokens_per_s": spec_tokens_per_s,
        "ratio": None,
        "accept_length": None,
        "server_command": command,
        "dropped": removed,
        "report": sub,
        "error": None,
    }
    base_dir = run_dir / sub
    base_dir.mkdir(parents=True, exist_ok=True)
    run = RemoteRun(cfg, base_dir, progress, transports, server_command=command, apply=False, timed=False)
    run.log(f"baseline: the server without {len(removed)} --speculative-* option(s), series not applied")
    try:
        bench, _ = run.execute()
    except ProfileError as exc:
        doc["error"] = exc.message
        run.log(f"baseline failed: {exc.message}")
        return doc
    bench.write(base_dir)
    doc["tokens_per_s"], doc["accept_length"] = bench.tokens_per_s, bench.accept_length
    if bench.tokens_per_s and spec_tokens_per_s:
        doc["ratio"] = spec_tokens_per_s / bench.tokens_per_s
    if bench.tokens_per_s is None:
        doc["error"] = f"no output token throughput in {base_dir / 'benchmark.log'}"
    return doc


def baseline_meta(baseline: dict | None) -> dict:
    if not baseline:
        return {}
    meta = {"baseline_server_command": baseline["server_command"]}
    if baseline.get("tokens_per_s") is not None:
        meta["baseline_tokens_per_s"] = baseline["tokens_per_s"]
    return meta


def run_remote(
    cfg: RemoteConfig, *, stream=None, progress: ProgressLine | None = None, transports=None
) -> RemoteOutcome:
    """The remote profile run (module docstring); raises ProfileError/InvalidInput.
    With ``cfg.baseline`` the unpatched, non-speculative server is measured after it."""
    out = stream or sys.stdout
    start = time.monotonic()
    if cfg.chart:  # phases.png: said before a target is touched, not after the run
        from patchkit.extras import require

        require("report", "profile.remote", instead="or give --no-chart")
    # bad specs: refused before anything; a k8s: selector is every pod it matches
    transports = transports or cfg.open_targets()  # patchkit.transport.resolve_targets
    run_dir = new_run_dir(cfg.out)
    progress = progress or ProgressLine(prefix="profile")
    with sigterm_interrupts():
        run = RemoteRun(cfg, run_dir, progress, transports)
        try:
            bench, timing = run.execute()
        except KeyboardInterrupt:
            if run.partial_timing is not None:
                with _sigint_deferred():
                    partial_report(cfg, run, out, time.monotonic() - start)
            raise
        baseline = None
        if cfg.baseline:  # after the revert: the tree is pristine again
            baseline = run_baseline(cfg, run_dir, progress, transports, bench.tokens_per_s)
    bench.write(run_dir)
    from patchkit.report import build_report, render_table  # after the revert

    meta = report_meta(cfg, bench, run.hosts, time.monotonic() - start)
    meta["worker"] = run.worker  # the speculative worker, from the server log
    meta.update(baseline_meta(baseline))
    summary = build_report(timing, run_dir, chart=cfg.chart, meta=meta, baseline=baseline)
    table = render_table(summary)
    print(table, file=out)
    print(f"report: {run_dir}/ ({', '.join(sorted(summary.files.values()))})", file=out)
    hosts = json.loads((run_dir / "remote.json").read_text(encoding="utf-8"))["hosts"]
    if baseline and baseline["error"]:
        raise ProfileError(
            f"the baseline run failed: {baseline['error']} (the speculative run's report is in {run_dir}/)"
        )
    return RemoteOutcome(run_dir, summary, table, bench, hosts, time.monotonic() - start, dict(summary.files))


def partial_report(cfg: RemoteConfig, run: RemoteRun, out, elapsed_s: float) -> None:
    """The report of an interrupted run, from the timing fetched before the revert; its
    summary says ``partial``: the benchmark did not finish (no throughput figures), or it did
    and the interrupt came after it (its figures kept: the report is whole)."""
    from patchkit.report import build_report, render_table

    meta = report_meta(cfg, run.bench or BenchOutput(), run.hosts, elapsed_s)
    if run.bench is not None:
        meta["partial"] = (
            "interrupted after the benchmark finished (while the timing was fetched or the targets "
            "cleaned up): the benchmark's figures and the timing of its cycles are complete"
        )
        run.bench.write(run.run_dir)
    else:
        meta["partial"] = (
            "interrupted before the benchmark finished: only the cycles timed until then; no benchmark figures"
        )
    meta["worker"] = run.worker
    try:
        summary = build_report(run.partial_timing, run.run_dir, chart=cfg.chart, meta=meta)
    except PatchkitError as exc:
        print(f"no partial report: {exc.message}", file=out)
        return
    print(render_table(summary), file=out)
    print(f"partial report: {run.run_dir}/ ({', '.join(sorted(summary.files.values()))})", file=out)

"""One target of the remote profile run: the agent's commands sent through its transport.

Every step is one POSIX sh program given to ``Transport.run`` (``sh -s`` over SSH, or local):

    exec 'python3' -c '<agent.py source>' 'poll' '/tmp/patchkit-profile/…' …

Every word is shlex-quoted; the server and benchmark commands travel as single arguments and
only the target's ``sh -c`` interprets them. The agent answers one JSON line (or raw bytes for
``fetch``/``tail``); a non-zero exit becomes a ProfileError that names the host and the step.
"""

from __future__ import annotations

import io
import json
import shlex
import tarfile
from functools import lru_cache
from pathlib import Path

from patchkit.errors import PatchkitError
from patchkit.profile.site import ProfileError

AGENT_FILE = Path(__file__).with_name("agent.py")
LOG_TAIL_BYTES = 4096


@lru_cache(maxsize=1)
def agent_source() -> str:
    return AGENT_FILE.read_text(encoding="utf-8")


def agent_program(python_argv: list[str], args) -> bytes:
    """The sh program that runs the agent with ``args`` (all quoted)."""
    words = [*python_argv, "-c", agent_source(), *[str(a) for a in args]]
    return ("exec " + " ".join(shlex.quote(w) for w in words) + "\n").encode("utf-8")


def last_lines(text: str, count: int = 15) -> str:
    lines = [ln for ln in text.replace("\r", "\n").splitlines() if ln.strip()]
    return "\n".join(lines[-count:])


class RemoteHost:
    """A target, its remote run directory and the jobs started there."""

    def __init__(self, index: int, transport, cfg):
        self.index = index
        self.transport = transport
        self.cfg = cfg
        self.run_dir: str | None = None
        self.jobs: dict[str, dict] = {}  # name -> last known state (pgid, exit, ...)

    @property
    def label(self) -> str:
        return self.transport.label

    @property
    def where(self) -> str:
        return getattr(self.transport, "where", None) or self.transport.label

    @property
    def root(self) -> str:
        return self.transport.root

    def path(self, name: str) -> str:
        return f"{self.run_dir}/{name}"

    # ---- the agent ----------------------------------------------------------------------------

    def agent(self, *args, timeout: float | None = None, raw: bool = False):
        program = agent_program(self.cfg.python_argv, args)
        step = args[0]
        try:
            result = self.transport.run(program, timeout=timeout or self.cfg.step_timeout_s)
        except PatchkitError as exc:
            raise ProfileError(f"{self.label}: {step}: {exc.message}") from exc
        if result.returncode != 0:
            detail = last_lines(result.stderr.decode("utf-8", "replace"), 5) or "no message"
            raise ProfileError(
                f"{self.label}: {step} failed on the target (exit {result.returncode}): {detail}"
            )
        if raw:
            return result.stdout
        lines = [ln for ln in result.stdout.decode("utf-8", "replace").splitlines() if ln.strip()]
        try:
            return json.loads(lines[-1])
        except (IndexError, json.JSONDecodeError) as exc:
            raise ProfileError(
                f"{self.label}: {step}: unreadable answer from the agent: {result.stdout[-200:]!r}"
            ) from exc

    def make_run_dir(self) -> str:
        self.run_dir = self.agent("mkrun", self.cfg.remote_dir)["dir"]
        return self.run_dir

    def start(self, name: str, command: str, env: dict) -> dict:
        self.jobs[name] = {"name": name, "pgid": None, "command": command}
        answer = self.agent(
            "start", self.run_dir, name, self.run_dir, json.dumps(env, sort_keys=True), command
        )
        self.jobs[name].update(pgid=answer["pgid"], monitor=answer["monitor"])
        return self.jobs[name]

    def poll(self, name: str, url: str = "", tail: int = LOG_TAIL_BYTES) -> dict:
        probe_timeout = min(5.0, max(1.0, self.cfg.poll_s * 2))
        state = self.agent("poll", self.run_dir, name, url, probe_timeout, tail)
        self.jobs.setdefault(name, {"name": name}).update(
            {k: v for k, v in state.items() if k in ("pgid", "exit", "done")}
        )
        return state

    def stop(self, *names: str) -> list[dict]:
        """INT/TERM/... then KILL to each job's process group (all jobs when no names)."""
        grace = self.cfg.stop_grace_s
        per_job = grace * len(self.cfg.stop_signals) + 10  # the agent's KILL wait and reaping
        answer = self.agent(
            "stop",
            self.run_dir,
            grace,
            ",".join(self.cfg.stop_signals),
            *names,
            timeout=per_job * (len(names) or 2) + self.cfg.step_timeout_s,
        )
        for job in answer["jobs"]:
            known = self.jobs.setdefault(job["name"], {"name": job["name"]})
            known.update(
                pgid=job["pgid"],
                exit=job["exit"],
                done=job["done"],
                left=job["left"],
                sent=known.get("sent", []) + job["sent"],
            )  # every stop, in order
        return answer["jobs"]

    def tail(self, name: str, limit: int) -> bytes:
        return self.agent("tail", self.path(name), limit, raw=True)

    def grep(self, name: str, needles, max_lines: int = 20) -> str:
        """The first lines of the run directory's file ``name`` holding any of ``needles``."""
        return self.agent("grep", self.path(name), max_lines, *needles, raw=True).decode("utf-8", "replace")

    def fetch_timing(self, dest: Path, source: str | None = None) -> list[Path]:
        """The run directory's timing/ (or the folder ``source``) as a tar stream, unpacked
        into ``dest``."""
        limit = int(self.cfg.max_fetch_mb * 1024 * 1024)
        data = self.agent(
            "fetch",
            source or self.path("timing"),
            limit,
            raw=True,
            timeout=self.cfg.step_timeout_s + limit / 1e6,
        )
        dest.mkdir(parents=True, exist_ok=True)
        try:
            with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
                members = [m for m in tar.getmembers() if m.isfile()]
                tar.extractall(dest, members=members, filter="data")
        except (tarfile.TarError, OSError) as exc:
            raise ProfileError(
                f"{self.label}: the timing files could not be unpacked into {dest}: {exc}"
            ) from exc
        return sorted(p for p in dest.rglob("*") if p.is_file())

    def cleanup(self) -> None:
        self.agent("cleanup", self.run_dir)

    def close(self) -> None:
        self.transport.close()

"""Fault tests that stop a run at its Nth external command: shims on the target's PATH count
the commands, and the run is started in a process group of its own whose id a shim can read;
killer_transport, a local target whose shell is SIGKILLed at its Nth command; mv_failing_into,
a remote shell whose `mv` fails into one folder like a read-only directory."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from patchkit.transport import LocalTransport

REPO = Path(__file__).resolve().parents[2]

# the target program's external commands that the killer shims count
TOOLS = ["mv", "cp", "ln", "sed", "rm", "mkdir", "wc", "sha256sum", "mktemp", "date", "uname", "chmod"]


def make_shims(bindir: Path, counter: Path, at: int, pidfile: Path) -> None:
    """A shim per TOOLS in ``bindir``: each adds one to ``counter`` and, at the ``at``-th
    command, SIGKILLs the shell whose pid is in ``pidfile``, its own parent and itself."""
    bindir.mkdir(parents=True, exist_ok=True)
    for tool in TOOLS:
        real = shutil.which(tool)
        script = (
            f"#!/bin/sh\nread n < '{counter}'; n=$((n+1)); echo $n > '{counter}'\n"
            f"if [ \"$n\" -eq {at} ]; then read p < '{pidfile}'; kill -9 $p $PPID 2>/dev/null; "
            f"kill -9 $$; fi\nexec '{real}' \"$@\"\n"
        )
        (bindir / tool).write_text(script)
        (bindir / tool).chmod(0o755)


def killer_transport(root: Path, work: Path, at: int) -> tuple[LocalTransport, Path]:
    """A local transport on ``root`` whose target shell is killed at its ``at``-th external
    command (shims and counter under ``work``), and the counter file."""
    counter, pidfile, bindir = work / "count", work / "pid", work / f"shims{at}"
    counter.write_text("0\n")
    make_shims(bindir, counter, at, pidfile)
    env = dict(os.environ, PATH=f"{bindir}:{os.environ['PATH']}")
    shell = ("sh", "-c", f"echo $$ > '{pidfile}'; exec sh -s")
    return LocalTransport(label=str(root), root=str(root), shell=shell, env=env), counter


def mv_failing_into(shim_dir: Path, dest: str) -> str:
    """A remote shell whose `mv` fails, like a read-only directory, when moving into `dest`."""
    shim_dir.mkdir(parents=True, exist_ok=True)
    real = "/usr/bin/mv" if Path("/usr/bin/mv").exists() else "/bin/mv"
    (shim_dir / "mv").write_text(
        "#!/bin/sh\n"
        "for last; do :; done\n"
        f'if [ "$last" = {shlex.quote(dest)} ]; then\n'
        "  echo \"mv: cannot move into '$last': Read-only file system\" >&2; exit 1\n"
        "fi\n"
        f'exec {real} "$@"\n'
    )
    (shim_dir / "mv").chmod(0o755)
    return f"PATH={shlex.quote(str(shim_dir))}:$PATH sh -s"


def run_invoke_in_group(args: list[str], pgid_file: Path, env=None, text: bool = False):
    """``python -m invoke ARGS`` in a new session, its process-group id written to ``pgid_file``
    first (a shim signals the whole group with it); waits at most 120 s. (proc, out, err)."""
    line = (
        f"echo $$ > {shlex.quote(str(pgid_file))}; exec {shlex.quote(sys.executable)} -m invoke "
        + shlex.join(args)
    )
    proc = subprocess.Popen(
        ["sh", "-c", line],
        cwd=REPO,
        env=env,
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=text,
    )
    out, err = proc.communicate(timeout=120)
    return proc, out, err


def spread_instants(total: int, count: int) -> list[int]:
    """``count`` instants across a run of ``total`` commands, the first and the last included."""
    return sorted({1, total} | {1 + (total - 1) * k // (count - 1) for k in range(1, count - 1)})

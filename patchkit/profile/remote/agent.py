"""The target side of the remote profile run: job control for a server and a benchmark.

This file is not imported on the target: patchkit.profile.remote reads its text and sends it as
``PYTHON -c SOURCE COMMAND ARGS...`` inside a POSIX sh program (every word shlex-quoted), through
the target's transport. It uses the standard library only (Python 3.8+), writes one JSON object
on stdout (``fetch`` and ``tail`` write raw bytes) and exits 0, or 3 with a message on stderr.

A job (the server, the benchmark) is started detached so that it outlives the SSH session:

    launcher (the ssh session's python) -- fork --> monitor: setsid(), child subreaper,
        ignores INT/TERM/HUP, stdio on /dev/null -- fork --> job: own process group,
        signals at their defaults, stdin /dev/null, stdout+stderr to NAME.log,
        exec sh -c COMMAND

The job's process group id is written to NAME.pgid before the launcher answers. The monitor
reaps the job and every orphan of it (a subreaper, so nothing is left as a zombie even where
PID 1 does not reap), writes the job's exit status to NAME.exit, and NAME.done when no child is
left. It also writes the job's wall-clock start and end (``time.time_ns()`` on this host, just
before the fork and just after the job is reaped) to NAME.start_ns and NAME.end_ns: the
measured window of a benchmark (``window``), on the clock the timing headers pair with theirs.
On Linux it writes the machine's boot id to NAME.boot: a job of an earlier boot (the machine
rebooted since; a resumed sweep stopping what a cut run left) is not signalled, its process
group id possibly another process's now. ``stop`` and ``cleanup`` of a folder already removed
do nothing.
Signals go to the job's process group, never to the monitor, so a stop sequence
(INT, then TERM, then KILL) reaches every process the job started. Python programs handle INT
as KeyboardInterrupt and run their atexit hooks (the timing runtime writes its last records
there); a job started from a non-interactive sh with ``&`` would have INT ignored, hence the
reset here.

Commands:
    mkrun BASE                          fresh run directory under BASE (marker file inside)
    start DIR NAME CWD ENV_JSON CMD     start a job; {"pgid", "monitor"}
    window DIR MEASURED WARMUP SOURCE   write DIR/timing/window.json from the jobs' wall times
    poll DIR NAME URL TIMEOUT TAIL      {"exit", "done", "alive", "health", "tail"}; URL may be ""
    stop DIR GRACE SIGNALS [NAME...]    stop jobs (all with a .pgid file when no NAME)
    fetch DIR MAX_BYTES                 a tar stream of the regular files under DIR
    tail PATH MAX_BYTES                 the last bytes of a file
    grep PATH MAX_LINES NEEDLE...       the first lines of a file that contain a NEEDLE
    cleanup DIR                         remove a run directory made by mkrun
"""

import json
import os
import signal
import sys
import tarfile
import tempfile
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the agent runs on Python 3.8+: annotations stay strings
    from collections.abc import Callable

MARKER = ".patchkit-profile-run"
ALLOWED_SIGNALS = ("INT", "TERM", "HUP", "QUIT", "USR1", "USR2", "KILL")
_PR_SET_CHILD_SUBREAPER = 36


def fail(message):
    sys.stderr.write("patchkit remote agent: %s\n" % message)
    sys.stderr.flush()
    sys.exit(3)


def answer(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def job_path(directory, name, what):
    return os.path.join(directory, "%s.%s" % (name, what))


def read_text(path):
    try:
        with open(path) as fh:
            return fh.read().strip()
    except OSError:
        return None


def tail_bytes(path, limit):
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - limit))
            return fh.read()
    except OSError:
        return b""


# ---- process groups ------------------------------------------------------------------------------


def group_members(pgid):
    """Pids of live (not zombie) processes in process group `pgid`."""
    if not os.path.isdir("/proc/self"):
        try:
            os.killpg(pgid, 0)
            return [pgid]
        except OSError:
            return []
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[-1].split()
        if len(fields) >= 3 and fields[0] not in ("Z", "X") and int(fields[2]) == pgid:
            members.append(int(entry))
    return members


def exit_status(status):
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


# ---- start ------------------------------------------------------------------------------------


def _become_subreaper():
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except Exception:
        pass


def _null_stdio(log_fd=None):
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(log_fd if log_fd is not None else null, 1)
    os.dup2(log_fd if log_fd is not None else null, 2)
    os.closerange(3, 256)  # the ssh session's pipes must not stay open in a detached job


def cpu_set(text):
    """A CPU list as taskset -c and /proc's Cpus_allowed_list write it ("0-3,8,10-11") -> a set."""
    cpus: set[int] = set()
    for part in text.split(","):
        low, _, high = part.strip().partition("-")
        cpus.update(range(int(low), int(high or low) + 1))
    return cpus


def _read_all(fd):
    """Everything a pipe carries until its writers close it; the descriptor is closed."""
    data = b""
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        data += chunk
    os.close(fd)
    return data


def _exec_job(command, cwd, env, log_path, report_fd):
    try:
        os.setpgid(0, 0)
        for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGPIPE", "SIGXFSZ"):
            if hasattr(signal, name):
                signal.signal(getattr(signal, name), signal.SIG_DFL)
        os.chdir(cwd)
        os.closerange(3, report_fd)  # nothing of the ssh session may stay open in the job
        os.closerange(report_fd + 1, 256)
        log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        cpus = env.get("PATCHKIT_CPUS")
        if cpus:  # profile.remote --cpus: the server and everything it starts on these CPUs
            os.sched_setaffinity(0, cpu_set(cpus))
        os.execvpe("sh", ["sh", "-c", command], env)
    except BaseException as exc:  # exec failed: tell the monitor, never return into its code
        try:
            os.write(report_fd, ("%s: %s" % (type(exc).__name__, exc)).encode())
        finally:
            os._exit(127)


def _monitor(directory, name, command, cwd, env, to_launcher):
    os.setsid()
    _become_subreaper()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    read_fd, write_fd = os.pipe()  # close-on-exec: EOF once the job has exec'd
    with open(job_path(directory, name, "start_ns"), "w") as fh:
        fh.write("%d\n" % time.time_ns())
    booted = boot_id()
    if booted:
        with open(job_path(directory, name, "boot"), "w") as fh:
            fh.write(booted + "\n")
    job = os.fork()
    if job == 0:
        os.close(read_fd)
        _exec_job(command, cwd, env, job_path(directory, name, "log"), write_fd)
    os.close(write_fd)
    with open(job_path(directory, name, "pgid"), "w") as fh:
        fh.write("%d\n" % job)
    problem = _read_all(read_fd)
    if problem:
        os.write(to_launcher, json.dumps({"error": problem.decode("utf-8", "replace")}).encode())
    else:
        os.write(to_launcher, json.dumps({"pgid": job, "monitor": os.getpid()}).encode())
    os.close(to_launcher)
    _null_stdio()
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            break
        except InterruptedError:
            continue
        if pid == job:
            with open(job_path(directory, name, "end_ns"), "w") as fh:
                fh.write("%d\n" % time.time_ns())
            with open(job_path(directory, name, "exit"), "w") as fh:
                fh.write("%d\n" % exit_status(status))
    with open(job_path(directory, name, "done"), "w") as fh:
        fh.write("done\n")
    os._exit(0)


def cmd_start(directory, name, cwd, env_json, command):
    env = dict(os.environ)
    env.update(json.loads(env_json))
    if os.path.exists(job_path(directory, name, "pgid")):
        fail("%s: a job named %s was already started there" % (directory, name))
    read_fd, write_fd = os.pipe()
    monitor = os.fork()
    if monitor == 0:
        os.close(read_fd)
        try:
            _monitor(directory, name, command, cwd, env, write_fd)
        except BaseException as exc:
            try:
                os.write(write_fd, json.dumps({"error": "monitor: %s" % exc}).encode())
            finally:
                os._exit(1)
    os.close(write_fd)
    data = _read_all(read_fd)
    result = json.loads(data.decode() or '{"error": "the monitor died before answering"}')
    if "error" in result:
        fail("could not start %s (%s): %s" % (name, command, result["error"]))
    answer(result)


# ---- poll / stop --------------------------------------------------------------------------------


def probe(url, timeout):
    import urllib.request

    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never via a proxy
    try:
        with opener.open(url, timeout=timeout) as resp:
            return "ok" if resp.status == 200 else "HTTP %d" % resp.status
    except Exception as exc:  # refused, timeout, HTTP error: all mean "not healthy yet"
        code = getattr(exc, "code", None)
        if code is not None:
            return "HTTP %s %s" % (code, getattr(exc, "reason", ""))
        reason = getattr(exc, "reason", None) or exc
        return "%s: %s" % (type(exc).__name__, reason)


def boot_id():
    """This boot of the machine (Linux), else None: a job recorded in an earlier boot is gone, and
    its process group id may belong to another process now."""
    return read_text("/proc/sys/kernel/random/boot_id")


def job_state(directory, name):
    pgid_text = read_text(job_path(directory, name, "pgid"))
    pgid = int(pgid_text) if pgid_text and pgid_text.isdigit() else None
    booted = read_text(job_path(directory, name, "boot"))
    if pgid is not None and booted and booted != boot_id():
        pgid = None  # started before the machine rebooted: nothing of it runs, nothing to signal
    code = read_text(job_path(directory, name, "exit"))
    return {
        "name": name,
        "pgid": pgid,
        "exit": int(code) if code not in (None, "") else None,
        "done": os.path.exists(job_path(directory, name, "done")),
        "alive": group_members(pgid) if pgid else [],
    }


def cmd_poll(directory, name, url, timeout, tail):
    state = job_state(directory, name)
    if url and state["exit"] is None:
        state["health"] = probe(url, float(timeout))
    state["tail"] = tail_bytes(job_path(directory, name, "log"), int(tail)).decode("utf-8", "replace")
    answer(state)


def stop_job(directory, name, grace, signals):
    state = job_state(directory, name)
    pgid = state["pgid"]
    sent: list[str] = []
    if pgid is None:
        state.update(sent=sent, left=[])
        return state
    for sig in list(signals) + ["KILL"]:
        if not group_members(pgid):
            break
        try:
            os.killpg(pgid, getattr(signal, "SIG" + sig))
        except ProcessLookupError:
            break
        sent.append(sig)
        deadline = time.monotonic() + (grace if sig != "KILL" else 5.0)
        while group_members(pgid) and time.monotonic() < deadline:
            time.sleep(0.05)
    deadline = time.monotonic() + 2.0  # let the monitor reap and write .exit/.done
    while not os.path.exists(job_path(directory, name, "done")) and time.monotonic() < deadline:
        time.sleep(0.02)
    state = job_state(directory, name)
    state.update(sent=sent, left=state.pop("alive"))
    return state


def cmd_stop(directory, grace, signals, *names):
    signals = [s for s in signals.split(",") if s]
    for sig in signals:
        if sig not in ALLOWED_SIGNALS:
            fail("unknown stop signal %r" % sig)
    if not os.path.isdir(directory):  # removed already (a resumed sweep's cut run, cleaned up)
        answer({"jobs": [], "missing": True})
        return
    if not names:
        names = tuple(sorted(f[: -len(".pgid")] for f in os.listdir(directory) if f.endswith(".pgid")))
    answer({"jobs": [stop_job(directory, n, float(grace), signals) for n in names]})


# ---- files ------------------------------------------------------------------------------------


def cmd_mkrun(base):
    os.makedirs(base, exist_ok=True)
    path = tempfile.mkdtemp(prefix=time.strftime("%Y%m%d-%H%M%S-"), dir=base)
    os.chmod(path, 0o755)
    with open(os.path.join(path, MARKER), "w") as fh:
        fh.write("made by patchkit profile.remote\n")
    os.mkdir(os.path.join(path, "timing"))
    answer({"dir": path})


def cmd_fetch(directory, max_bytes):
    files, total = [], 0
    for top, dirs, names in os.walk(directory):
        dirs.sort()
        for fname in sorted(names):
            path = os.path.join(top, fname)
            if os.path.isfile(path) and not os.path.islink(path):
                files.append(path)
                total += os.path.getsize(path)
    if total > int(max_bytes):
        fail("%s holds %d bytes of files, more than the limit of %s bytes" % (directory, total, max_bytes))
    out = sys.stdout.buffer
    with tarfile.open(fileobj=out, mode="w|") as tar:
        for path in files:
            tar.add(path, arcname=os.path.relpath(path, directory), recursive=False)
    out.flush()


WINDOW_SCHEMA = "patchkit.window/1"  # patchkit.report.window's format, written here by hand


def _wall(directory, name):
    start = read_text(job_path(directory, name, "start_ns"))
    end = read_text(job_path(directory, name, "end_ns"))
    if not start or not end:
        return None
    return {"start_unix_ns": int(start), "end_unix_ns": int(end)}


def cmd_window(directory, measured, warmup, source):
    """timing/window.json: the measured job's wall-clock span (and the warm-up job's, when
    WARMUP is not ""), as patchkit.report.window.write_window writes it."""
    span = _wall(directory, measured)
    if span is None:
        fail("%s: job %s has no recorded start and end" % (directory, measured))
    if span["end_unix_ns"] < span["start_unix_ns"]:
        fail("%s: job %s ends before it starts (clock stepped back?)" % (directory, measured))
    doc = {
        "schema": WINDOW_SCHEMA,
        "measured": span,
        "warmup": _wall(directory, warmup) if warmup else None,
        "source": source,
    }
    path = os.path.join(directory, "timing", "window.json")
    if not os.path.isdir(os.path.dirname(path)):
        os.makedirs(os.path.dirname(path))
    with open(path + ".tmp", "w") as fh:
        fh.write(json.dumps(doc, indent=2) + "\n")
    os.rename(path + ".tmp", path)
    answer(doc)


def cmd_tail(path, max_bytes):
    sys.stdout.buffer.write(tail_bytes(path, int(max_bytes)))
    sys.stdout.buffer.flush()


def cmd_grep(path, max_lines, *needles):
    """Lines holding a needle (fixed bytes), wherever they are in a log of any size."""
    wanted = [n.encode("utf-8") for n in needles]
    left = int(max_lines)
    out = sys.stdout.buffer
    try:
        with open(path, "rb") as fh:
            for line in fh:
                if left <= 0:
                    break
                if any(n in line for n in wanted):
                    out.write(line[:4096].rstrip(b"\r\n") + b"\n")
                    left -= 1
    except OSError:
        pass
    out.flush()


def cmd_cleanup(directory):
    if not os.path.exists(directory):
        answer({"removed": None})
        return
    if not os.path.exists(os.path.join(directory, MARKER)):
        fail("%s has no %s marker; not removing it" % (directory, MARKER))
    import shutil

    shutil.rmtree(directory)
    answer({"removed": directory})


COMMANDS: "dict[str, Callable[..., None]]" = {
    "mkrun": cmd_mkrun,
    "start": cmd_start,
    "poll": cmd_poll,
    "stop": cmd_stop,
    "fetch": cmd_fetch,
    "window": cmd_window,
    "tail": cmd_tail,
    "grep": cmd_grep,
    "cleanup": cmd_cleanup,
}


def main(argv):
    if not argv or argv[0] not in COMMANDS:
        fail("usage: agent {%s} ARGS..." % "|".join(sorted(COMMANDS)))
    try:
        COMMANDS[argv[0]](*argv[1:])
    except TypeError as exc:
        fail("%s: %s" % (argv[0], exc))
    except OSError as exc:
        fail("%s: %s" % (argv[0], exc))


if __name__ == "__main__":
    main(sys.argv[1:])

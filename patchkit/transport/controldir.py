"""The per-user directory that holds SSH control sockets shared between patchkit commands.

With `ssh_persist` > 0 the first command to a host leaves an OpenSSH ControlMaster behind
(ControlPersist); the next command within that time rides it instead of a new key exchange.
Whoever can write to the directory can plant a socket and see every later program, so it must be
ours and mode 0700: created so, repaired when only its mode is wrong (entries not owned by us are
removed, since they may have been planted while it was open), refused when it belongs to somebody
else or is not a plain directory.

Where: $PATCHKIT_SSH_CONTROL_DIR if set, else $XDG_RUNTIME_DIR/patchkit-ssh when that runtime
directory is ours, else /tmp/patchkit-ssh-<uid>. Sockets are named by ssh's %C (a 40-hex hash of
local host, remote host, port and user), which keeps every path short: unix socket paths are
limited to about 104 bytes.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess

from patchkit.errors import InvalidInput

ENV_VAR = "PATCHKIT_SSH_CONTROL_DIR"
# sun_path is 104 bytes on BSD/macOS and 108 on Linux; keep below the smaller, with %C's 40 hex
# characters, the slash and ssh's own temporary suffix while it binds (".XXXXXXXXXXXXXXXX").
SOCKET_PATH_MAX = 104
_TEMP_SUFFIX = 17
_MASTER_RUNNING = re.compile(rb"Master running \(pid=(\d+)\)")


def user_control_dir() -> str:
    """The shared directory, created or repaired as described above; raises InvalidInput."""
    path = os.environ.get(ENV_VAR) or _default_dir()
    path = os.path.abspath(os.path.expanduser(path))
    if len(path) + 1 + 40 + _TEMP_SUFFIX > SOCKET_PATH_MAX:
        raise InvalidInput(
            f"SSH control directory {path!r} is too long for unix socket paths "
            f"(at most {SOCKET_PATH_MAX - 41 - _TEMP_SUFFIX} characters); set "
            f"{ENV_VAR} to a shorter directory or use --ssh-persist 0"
        )
    ensure_private_dir(path)
    return path


def _default_dir() -> str:
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime:
        try:
            st = os.stat(runtime)
        except OSError:
            st = None
        if (
            st is not None
            and stat.S_ISDIR(st.st_mode)
            and st.st_uid == os.getuid()
            and not st.st_mode & 0o077
        ):
            return os.path.join(runtime, "patchkit-ssh")
    return f"/tmp/patchkit-ssh-{os.getuid()}"


def ensure_private_dir(path: str) -> None:
    """Make `path` a directory owned by us with mode 0700, or refuse (InvalidInput)."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as e:
        raise InvalidInput(
            f"cannot create the SSH control directory {path!r}: {e.strerror}; "
            f"set {ENV_VAR} elsewhere or use --ssh-persist 0"
        ) from e
    # Open without following a symlink and check what was opened: no window between the check
    # and the repair in which the name could be swapped.
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as e:
        raise InvalidInput(
            f"SSH control directory {path!r} is not a plain directory "
            f"({e.strerror}); remove it, set {ENV_VAR} or use --ssh-persist 0"
        ) from e
    try:
        st = os.fstat(fd)
        if st.st_uid != os.getuid():
            raise InvalidInput(
                f"SSH control directory {path!r} belongs to uid {st.st_uid}, not "
                f"to you (uid {os.getuid()}): refusing to use its sockets; remove "
                f"it, set {ENV_VAR} or use --ssh-persist 0"
            )
        if stat.S_IMODE(st.st_mode) != 0o700:
            os.fchmod(fd, 0o700)
            _remove_foreign_entries(fd)
    finally:
        os.close(fd)


def _remove_foreign_entries(dir_fd: int) -> None:
    for name in os.listdir(dir_fd):
        try:
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            if st.st_uid != os.getuid() or not stat.S_ISSOCK(st.st_mode):
                if stat.S_ISDIR(st.st_mode):
                    continue  # not ours to judge; ssh never makes directories here
                os.unlink(name, dir_fd=dir_fd)
        except FileNotFoundError:
            pass


def master_pid(check_argv: list[str]) -> int | None:
    """Run an `ssh … -O check` argv; the master's pid when one answers, else None."""
    try:
        proc = subprocess.run(check_argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = _MASTER_RUNNING.search(proc.stderr + proc.stdout)
    return int(m.group(1)) if proc.returncode == 0 and m else None


def stop_masters(control_dir: str, ssh_program: str = "ssh") -> int:
    """`ssh -O exit` every master whose socket is in `control_dir`; returns how many answered.

    The socket path is given whole, so the host name on the command line is only a placeholder.
    """
    try:
        names = os.listdir(control_dir)
    except OSError:
        return 0
    stopped = 0
    for name in names:
        sock = os.path.join(control_dir, name)
        try:
            if not stat.S_ISSOCK(os.lstat(sock).st_mode):
                continue
            proc = subprocess.run(
                [
                    ssh_program,
                    "-o",
                    "BatchMode=yes",
                    "-o",
                    f"ControlPath={sock}",
                    "-O",
                    "exit",
                    "--",
                    "patchkit-master",
                ],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=10,
            )
        except (OSError, subprocess.TimeoutExpired):
            continue
        stopped += proc.returncode == 0
    return stopped

"""Remote target specs: `ssh://…`, `host:/path`, `docker://…`, `--container`, `--exec`.

The spec shapes and checks the ssh, docker and exec target kinds share (each kind is declared
in its own module: transport/ssh.py, transport/docker.py, transport/execprefix.py);
`parse_remote_target` tries the three in turn and returns None for a plain local directory.
Everything that later reaches a command line or a remote shell is validated here (host, user,
port, container name, root path) and refused with InvalidInput (exit 2) before anything is started. The exec prefix is the one free-form input: it is split with
shlex locally and quoted with shlex when it has to travel through SSH, never interpolated.

Accepted forms:
    ssh://[user@]host[:port]/abs/path      host may be an ssh_config alias; [v6] in brackets
    [user@]host:/abs/path                  scp-like; a colon before any slash means "remote"
    docker://CONTAINER/abs/path            local `docker exec -i CONTAINER sh -s`
    /abs/path + container=NAME             same as docker://NAME/abs/path
    /abs/path + exec_prefix='PREFIX'       local shlex.split(PREFIX) + ['sh', '-s']
    ssh target + container / exec_prefix   the prefix runs on the remote host, quoted

Transport options (keyword arguments; None means "not given"; unknown names are refused;
exec-prefix targets use timeout, remote_shell and container_engine and ignore the SSH ones):
    ssh_config       path of an ssh_config file (ssh -F); default: the user's own config
    ssh_options      iterable of "Key=Value" strings passed as `-o Key=Value`
    connect_timeout  seconds for TCP connect + SSH banner (default: ssh.CONNECT_TIMEOUT_S)
    timeout          overall seconds per operation, connection included (default: none)
    reuse            keep a ControlMaster connection between operations (default True)
    control_persist  seconds an idle control connection stays up (default 60)
    shared_master    keep the master in the per-user directory (transport/controldir.py) so
                     that later commands ride it; close() then leaves it up (default False)
    remote_shell     the remote command that reads the program (default "sh -s"), e.g.
                     "PATH=/opt/bb busybox sh -s"; after a container/exec prefix it is appended
                     to the prefix, so use `env PATH=… busybox sh -s` there
    ssh_program      the OpenSSH client to run (default "ssh")
    container_engine program for container=/docker:// targets (default "docker"; e.g. "podman")
    kubectl, k8s_container, kube_context   k8s:NS/SELECTOR:ROOT targets only (transport/k8s.py)
"""

from __future__ import annotations

import re
import shlex

from patchkit.errors import InvalidInput
from patchkit.transport import Transport

# A host name, an IPv4 address or an ssh_config alias: no leading '-', nothing a shell or ssh
# would read as syntax. Aliases with other characters are legal in ssh_config but not accepted
# here (one place to widen if ever needed).
_HOST = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*\Z")
_HOST_V6 = re.compile(r"\[([0-9A-Fa-f:.]+(?:%[A-Za-z0-9_.-]+)?)\]\Z")
_USER = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*\Z")
# docker/podman container names and ids: [a-zA-Z0-9][a-zA-Z0-9_.-]+
_CONTAINER = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*\Z")
_SSH_OPTION = re.compile(r"[A-Za-z][A-Za-z0-9]*=[^\0\r\n]*\Z")

# the options of a target reached through a local prefix (docker://, --container, --exec); the
# ssh kind reads these and its own (the whitelist is every kind's: patchkit.transport.option_names)
PREFIX_OPTIONS = ("timeout", "remote_shell", "container_engine")


def parse_remote_target(spec: str, **kw) -> Transport | None:
    """A Transport for a spec some kind other than the local fallback takes (the registry's, in
    its order: docker://, ssh shapes, --exec/--container prefixes, any registered kind), or None
    for a plain local directory."""
    from patchkit.transport import parse_target, prefixed_kind, target_kinds

    if prefixed_kind(spec) is not None:
        return parse_target(spec, **kw)
    for kind in target_kinds():
        if kind.prefix is None and not kind.fallback and kind.resolve is not None:
            found = kind.resolve(spec, **kw)
            if found is not None:
                return found
    return None


def given_prefix(
    spec: str, container: str | None, exec_prefix: str | None
) -> tuple[str | None, list[str] | None]:
    """(container, exec prefix words) given with a spec, each checked; never both."""
    if container is not None and exec_prefix is not None:
        raise InvalidInput(f"target {spec!r}: give --container or --exec, not both")
    if container is not None:
        container = check_container(container, spec)
    return container, split_exec_prefix(exec_prefix, spec) if exec_prefix is not None else None


# ---- spec parsing ---------------------------------------------------------------------------


def parse_ssh_spec(spec: str) -> tuple[str | None, str, int | None, str] | None:
    """(user, host, port, root) for ssh:// and scp-like specs; None for anything local."""
    if spec.startswith("ssh://"):
        rest = spec[len("ssh://") :]
        authority, slash, path = rest.partition("/")
        if not slash:
            raise InvalidInput(
                f"target {spec!r}: ssh:// needs an absolute path after the host, e.g. ssh://gpu1/opt/sglang"
            )
        user, hostport = _split_user(authority, spec)
        host, port = _split_host_port(hostport, spec)
        return user, host, port, check_root("/" + path, spec)
    if spec.startswith(("/", ".", "~")):
        return None
    # scp-like: a colon that comes before any slash marks a remote spec (as scp decides).
    head = spec.split("/", 1)[0]
    colon = spec.find("]:") + 1 if "[" in head else spec.find(":")
    if colon <= 0 or "/" in spec[:colon]:
        return None
    authority, path = spec[:colon], spec[colon + 1 :]
    user, host = _split_user(authority, spec)
    host = check_host(host, spec)
    if not path.startswith("/"):
        raise InvalidInput(
            f"target {spec!r}: the remote path must be absolute (host:/abs/path); "
            "for a local directory whose name has a colon write ./" + spec
        )
    return user, host, None, check_root(path, spec)


def _split_user(authority: str, spec: str) -> tuple[str | None, str]:
    if "@" not in authority:
        return None, authority
    user, _, host = authority.rpartition("@")
    if not _USER.match(user):
        raise InvalidInput(
            f"target {spec!r}: bad user name {user!r} (letters, digits, '_', '.', '-'; not starting with '-')"
        )
    return user, host


def _split_host_port(hostport: str, spec: str) -> tuple[str, int | None]:
    if hostport.startswith("["):
        end = hostport.find("]")
        host, tail = hostport[: end + 1], hostport[end + 1 :]
        if end < 0 or (tail and not tail.startswith(":")):
            raise InvalidInput(f"target {spec!r}: bad bracketed IPv6 host {hostport!r}")
        port_text = tail[1:] if tail else None
    else:
        host, colon, port_text = hostport.partition(":")
        port_text = port_text if colon else None
    return check_host(host, spec), (check_port(port_text, spec) if port_text is not None else None)


def split_docker_url(spec: str) -> tuple[str, str]:
    rest = spec[len("docker://") :]
    name, slash, path = rest.partition("/")
    if not slash:
        raise InvalidInput(
            f"target {spec!r}: docker:// needs an absolute path after the "
            "container, e.g. docker://sglang/sgl-workspace/sglang"
        )
    return check_container(name, spec), check_root("/" + path, spec)


# ---- validation -----------------------------------------------------------------------------


def check_host(host: str, spec: str) -> str:
    """Host names, IPv4/IPv6 literals and ssh_config aliases; refuse anything shell-like."""
    m = _HOST_V6.match(host)
    if m:
        return m.group(1)
    if not _HOST.match(host):
        raise InvalidInput(
            f"target {spec!r}: bad host {host!r} (letters, digits, '_', '.', '-', "
            "or [IPv6]; no leading '-', spaces, quotes or shell characters)"
        )
    return host


def check_port(text: str, spec: str) -> int:
    if not text.isascii() or not text.isdigit() or not 1 <= int(text) <= 65535:
        raise InvalidInput(f"target {spec!r}: bad port {text!r} (1..65535)")
    return int(text)


def check_root(path: str, spec: str) -> str:
    """An absolute POSIX path without NUL/CR/LF; trailing slashes dropped."""
    if not path.startswith("/"):
        raise InvalidInput(f"target {spec!r}: the target path {path!r} must be absolute")
    if any(ch in path for ch in ("\0", "\n", "\r")):
        raise InvalidInput(f"target {spec!r}: the target path contains NUL or a line break")
    if any(part == ".." for part in path.split("/")):
        raise InvalidInput(f"target {spec!r}: the target path may not contain '..'")
    stripped = path.rstrip("/")
    return stripped or "/"


def check_container(name: str, spec: str) -> str:
    if not isinstance(name, str) or not _CONTAINER.match(name):
        raise InvalidInput(
            f"target {spec!r}: bad container name {name!r} "
            "(letters, digits, '_', '.', '-'; starting with a letter or digit)"
        )
    return name


def split_exec_prefix(prefix: str, spec: str, what: str = "--exec prefix") -> list[str]:
    if any(ch in prefix for ch in ("\0", "\n", "\r")):
        raise InvalidInput(f"target {spec!r}: {what} contains NUL or a line break")
    try:
        words = shlex.split(prefix)
    except ValueError as e:
        raise InvalidInput(f"target {spec!r}: cannot split {what} {prefix!r}: {e}") from e
    if not words:
        raise InvalidInput(f"target {spec!r}: {what} is empty")
    if words[0].startswith("-"):
        raise InvalidInput(f"target {spec!r}: {what} must start with a program, not the option {words[0]!r}")
    return words


def checked_options(options: dict) -> dict:
    from patchkit.transport import check_options

    return check_options(options)


def check_ssh_options(values, spec: str) -> tuple[str, ...]:
    if isinstance(values, str):
        values = [values]
    out = []
    for value in values:
        if not isinstance(value, str) or not _SSH_OPTION.match(value):
            raise InvalidInput(f"target {spec!r}: ssh option {value!r} must look like Key=Value")
        out.append(value)
    return tuple(out)


# ---- building transports --------------------------------------------------------------------


def container_prefix(name: str, opts: dict) -> list[str]:
    engine = opts.get("container_engine", "docker")
    if not isinstance(engine, str) or not _CONTAINER.match(engine):
        raise InvalidInput(f"bad container_engine {engine!r}")
    return [engine, "exec", "-i", name]


def positive_seconds(value, name: str, spec: str) -> float | None:
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = -1.0
    if not number > 0:
        raise InvalidInput(f"target {spec!r}: {name} must be a positive number of seconds, not {value!r}")
    return number


def ssh_persist_options(seconds) -> dict:
    """Transport options for `ssh_persist` (invoke.yaml / --ssh-persist): N > 0 seconds keeps a
    shared ControlMaster for the next command; 0 keeps one per command, closed at its end."""
    try:
        number = float(seconds)
    except (TypeError, ValueError):
        number = -1.0
    if not number >= 0 or number != number or number == float("inf"):
        raise InvalidInput(f"ssh_persist must be a number of seconds >= 0 (0: off), not {seconds!r}")
    if number == 0:
        return {"shared_master": False}
    return {"shared_master": True, "control_persist": max(1.0, number)}

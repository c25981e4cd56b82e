"""SSH transport against a real sshd on loopback (tests/sshd_support.py), plus spec parsing."""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import shlex
import stat
import subprocess
import threading
import time

import pytest

from patchkit.errors import InvalidInput, TransportError
from patchkit.transport import parse_target
from patchkit.transport.remote import parse_remote_target
from patchkit.transport.ssh import SshTransport
from support.cli import invoke
from support.sshd import free_port, make_client_config, make_keys, silent_port_times_out

pytestmark = [pytest.mark.sshd, pytest.mark.wheels]


def ssh_target(server, root, **options) -> SshTransport:
    options.setdefault("ssh_config", str(server.client_config))
    return parse_target(f"{server.alias}:{root}", **options)


def counted(server, before: int) -> int:
    """Connections since `before`, once sshd has logged them."""
    server.wait_log(lambda s: s.connections() > before, timeout=2)
    return server.connections() - before


# ---- spec parsing (no server) -------------------------------------------------------------------


@pytest.mark.parametrize(
    "spec, user, host, port, root",
    [
        ("ssh://gpu1/opt/sglang", None, "gpu1", None, "/opt/sglang"),
        ("ssh://me@gpu1:2222/opt/sglang/", "me", "gpu1", 2222, "/opt/sglang"),
        ("ssh://[::1]:22/x", None, "::1", 22, "/x"),
        ("gpu-1.example.org:/srv/app", None, "gpu-1.example.org", None, "/srv/app"),
        ("deploy@gpu_2:/", "deploy", "gpu_2", None, "/"),
        ("[fe80::1%eth0]:/x", None, "fe80::1%eth0", None, "/x"),
        ("ssh://h/dir with space/it's", None, "h", None, "/dir with space/it's"),
    ],
)
def test_ssh_specs_parse(spec, user, host, port, root):
    t = parse_remote_target(spec)
    assert isinstance(t, SshTransport)
    assert (t.user, t.host, t.port, t.root) == (user, host, port, root)
    argv = t.argv()
    assert argv[-3:] == ["--", host, "sh -s"]
    assert root not in argv[:-1] or root == "/"  # the root never travels on the command line
    assert "BatchMode=yes" in argv
    t.close()


@pytest.mark.parametrize("spec", ["/abs/dir", "./a:b", "rel/dir", "~/x", "dir/with:colon"])
def test_local_specs_are_not_remote(spec):
    assert parse_remote_target(spec) is None


@pytest.mark.parametrize(
    "spec",
    [
        "ssh://-oProxyCommand=touch/x",  # option injection
        "-oProxyCommand=x:/p",
        "ssh://h;touch x/p",
        "h;touch x:/p",
        "h$(id):/p",
        "h`id`:/p",
        "'h':/p",
        'h"x:/p',
        "ssh://h x/p",
        "h\tx:/p",
        "ssh://u;id@h/p",
        "ssh://-l@h/p",
        "u$(id)@h:/p",
        "ssh://h:0/p",
        "ssh://h:65536/p",
        "ssh://h:22;id/p",
        "ssh://h:/p",
        "ssh://h:x/p",
        "ssh://h",
        "h:relative/path",
        "ssh://h/a/../b",
        "ssh://h/p\nq",
        "ssh://h/p\0q",
        "ssh://[::1/p",
        "ssh://[::1]x/p",
    ],
)
def test_bad_specs_are_refused(spec):
    with pytest.raises(InvalidInput) as info:
        parse_remote_target(spec)
    assert info.value.exit_code == 2


def test_bad_options_are_refused():
    with pytest.raises(InvalidInput, match="unknown transport option"):
        parse_remote_target("h:/p", ssh_cofig="x")
    with pytest.raises(InvalidInput, match="Key=Value"):
        parse_remote_target("h:/p", ssh_options=["-oProxyCommand=x"])
    with pytest.raises(InvalidInput, match="Key=Value"):
        parse_remote_target("h:/p", ssh_options=["Foo=bar\nHost *"])
    with pytest.raises(InvalidInput, match="connect_timeout"):
        parse_remote_target("h:/p", connect_timeout=0)
    with pytest.raises(InvalidInput, match="not found"):
        parse_remote_target("h:/p", ssh_config="/nonexistent/ssh_config")


def test_argv_shape_with_options(tmp_path):
    config = tmp_path / "cfg"
    config.write_text("")
    t = parse_remote_target(
        "ssh://me@gpu1:2200/opt",
        ssh_config=str(config),
        reuse=False,
        connect_timeout=3,
        ssh_options=["ServerAliveInterval=5"],
    )
    assert t.argv() == [
        "ssh",
        "-T",
        "-x",
        "-a",
        "-o",
        "BatchMode=yes",
        "-o",
        "ClearAllForwardings=yes",
        "-o",
        "ConnectTimeout=3",
        "-p",
        "2200",
        "-l",
        "me",
        "-F",
        str(config),
        "-o",
        "ServerAliveInterval=5",
        "--",
        "gpu1",
        "sh -s",
    ]
    assert t.control_dir is None


def test_container_and_exec_prefix_are_quoted_for_the_remote_shell():
    t = parse_remote_target("gpu1:/sgl-workspace/sglang", container="sglang_dev", reuse=False)
    assert t.argv()[-1] == "docker exec -i sglang_dev sh -s"
    t = parse_remote_target("gpu1:/w", exec_prefix="kubectl exec -i 'pod $(x)' --", reuse=False)
    assert t.argv()[-1] == "kubectl exec -i 'pod $(x)' -- sh -s"
    assert shlex.split(t.argv()[-1]) == ["kubectl", "exec", "-i", "pod $(x)", "--", "sh", "-s"]


@pytest.mark.parametrize("name", ["a b", "a'b", 'a"b', "$(touch x)", "`id`", "a;b", "a\nb", "-it", ""])
def test_hostile_container_names_are_refused(name):
    with pytest.raises(InvalidInput):
        parse_remote_target("gpu1:/w", container=name)
    with pytest.raises(InvalidInput):
        parse_remote_target(f"docker://{name}/w")


# ---- against a real sshd ------------------------------------------------------------------------


def test_program_runs_through_alias(sshd, tmp_path):
    t = ssh_target(sshd, tmp_path)
    try:
        root = shlex.quote(t.root).encode()
        result = t.run(b"echo hello; cd " + root + b" && pwd; echo oops >&2; exit 3")
    finally:
        t.close()
    assert result.returncode == 3
    assert result.stdout == f"hello\n{tmp_path}\n".encode()
    assert result.stderr == b"oops\n"
    assert t.runs == 1 and t.bytes_sent > 0


def test_sessions_get_the_fixture_home_not_roots(sshd, tmp_path):
    t = ssh_target(sshd, tmp_path, reuse=False)
    assert t.run(b'printf %s "$HOME"').stdout == str(sshd.workdir / "home").encode()


def test_program_runs_through_url_with_config(sshd, tmp_path):
    spec = f"ssh://{sshd.user}@127.0.0.1:{sshd.port}{tmp_path}"
    t = parse_target(spec, ssh_config=str(sshd.client_config), reuse=False)
    result = t.run(b"id -un; cat")  # `cat` sees the rest of the program: stdin is the program
    assert result.returncode == 0
    assert result.stdout.splitlines()[0] == sshd.user.encode()


def test_large_program_arrives_intact_over_stdin(sshd, tmp_path):
    payload = os.urandom(600_000).hex()  # 1.2 MB, one heredoc line
    program = (f"sha256sum <<'PK_EOF'\n{payload}\nPK_EOF\n").encode()
    t = ssh_target(sshd, tmp_path, reuse=False)
    result = t.run(program)
    expected = subprocess.run(["sha256sum"], input=(payload + "\n").encode(), capture_output=True).stdout
    assert result.stdout == expected
    assert t.bytes_sent == len(program)


def test_one_connection_per_operation_without_reuse(sshd, tmp_path):
    t = ssh_target(sshd, tmp_path, reuse=False)
    before = sshd.connections()
    t.run(b"true")
    t.run(b"true")
    assert counted(sshd, before) == 2


def test_control_master_reuse_and_cleanup(sshd, tmp_path):
    t = ssh_target(sshd, tmp_path)
    before = sshd.connections()
    first = t.run(b"echo one")
    second = t.run(b"echo two")
    assert (first.stdout, second.stdout) == (b"one\n", b"two\n")
    control_dir = t.control_dir
    assert stat.S_IMODE(os.stat(control_dir).st_mode) == 0o700
    assert len(os.listdir(control_dir)) == 1  # the master's socket
    assert counted(sshd, before) == 1
    time.sleep(0.2)
    assert sshd.connections() - before == 1  # still one: the second run rode the master
    t.close()
    assert not os.path.exists(control_dir)
    # the master is gone: sshd logs the disconnect of the one connection
    assert sshd.wait_log(lambda s: s.log_text().count("Disconnected from user") >= 1)
    t.close()  # idempotent


def test_operation_after_close_opens_a_fresh_master(sshd, tmp_path):
    t = ssh_target(sshd, tmp_path)
    t.run(b"true")
    first_dir = t.control_dir
    t.close()
    before = sshd.connections()
    assert t.run(b"echo again").stdout == b"again\n"
    assert t.control_dir != first_dir and os.path.isdir(t.control_dir)
    assert counted(sshd, before) == 1
    t.close()


def test_unauthorised_key_fails_fast_naming_the_host(sshd, tmp_path):
    stranger = make_keys(tmp_path / "stranger")
    own_config = sshd.client_config
    try:
        config = make_client_config(tmp_path / "cfg", [sshd], sshd.keys, identity=stranger.user_key)
    finally:
        sshd.client_config = own_config  # the session server keeps its own config
    t = parse_target(f"{sshd.alias}:/tmp", ssh_config=str(config))
    start = time.monotonic()
    with pytest.raises(TransportError) as info:
        t.run(b"touch /tmp/should-not-exist")
    assert time.monotonic() - start < 5
    message = str(info.value)
    assert message.startswith(sshd.alias)
    assert "permission denied" in message.lower() and "BatchMode" in message
    assert info.value.exit_code == 1
    t.close()


def test_closed_port_is_unreachable(sshd_keys, tmp_path):
    port = free_port()
    t = parse_target(f"ssh://root@127.0.0.1:{port}/tmp", reuse=False)
    with pytest.raises(TransportError) as info:
        t.run(b"true")
    assert f"root@127.0.0.1:{port}" in str(info.value)
    assert "refused" in str(info.value)


def test_connect_timeout_on_a_silent_server(sshd, tmp_path):
    # Accepts TCP but never sends a banner: ssh's ConnectTimeout covers the banner exchange.
    silent_port_times_out(
        lambda port: parse_target(
            f"ssh://root@127.0.0.1:{port}/tmp",
            reuse=False,
            connect_timeout=1,
            ssh_config=str(sshd.client_config),
        )
    )


@pytest.mark.parametrize("reuse", [False, True])
def test_overall_timeout_names_the_host_and_transport_recovers(sshd, tmp_path, reuse):
    t = ssh_target(sshd, tmp_path, reuse=reuse, timeout=1)
    start = time.monotonic()
    with pytest.raises(TransportError) as info:
        t.run(b"sleep 4")
    assert time.monotonic() - start < 3
    assert sshd.alias in str(info.value) and "1 s" in str(info.value)
    assert t.run(b"echo alive", timeout=10).stdout == b"alive\n"
    t.close()


def test_missing_remote_shell(sshd, tmp_path):
    t = ssh_target(sshd, tmp_path, reuse=False, remote_shell="pk-no-such-shell -s")
    with pytest.raises(TransportError) as info:
        t.run(b"true")
    assert sshd.alias in str(info.value) and "pk-no-such-shell" in str(info.value)


def test_busybox_remote_shell(sshd, busybox_bin, tmp_path):
    shell = f"PATH={shlex.quote(str(busybox_bin))} busybox sh -s"
    t = ssh_target(sshd, tmp_path, reuse=False, remote_shell=shell)
    result = t.run(b'readlink /proc/$$/exe; command -v sed; printf "a\\nb\\n" | sed -n 2p')
    exe, sed, line = result.stdout.decode().splitlines()
    assert exe.endswith("busybox") and sed == f"{busybox_bin}/sed" and line == "b"


HOSTILE = [
    "a b",
    "it's",
    'say "x"',
    "$(touch {m})",
    "`touch {m}`",
    "x; touch {m}",
    "x\ntouch {m}",
    "x && touch {m} #",
    "|touch {m}",
    "$HOME",
]


@pytest.mark.parametrize("word", HOSTILE)
def test_hostile_words_never_execute(sshd, tmp_path, word):
    marker = tmp_path / "INJECTED"
    word = word.format(m=marker)
    # As host, user or container: refused before anything starts.
    for spec, kw in [
        (f"ssh://{word}/tmp", {}),
        (f"ssh://{word}@{sshd.alias}/tmp", {}),
        (f"{sshd.alias}:/tmp", {"container": word}),
        (f"docker://{word}/tmp", {}),
    ]:
        with pytest.raises(InvalidInput):
            parse_target(spec, ssh_config=str(sshd.client_config), **kw)
    # scp-like form: refused, or (a slash before the colon) a local directory name, not a host.
    with contextlib.suppress(InvalidInput):
        assert parse_remote_target(f"{word}:/tmp") is None
    # As an --exec word through SSH: quoted, so it arrives as one literal argument
    # (line breaks are refused: not every remote login shell keeps them inside quotes).
    prefix = shlex.join(["env", f"PK_WORD={word}"])
    if "\n" in word:
        with pytest.raises(InvalidInput):
            ssh_target(sshd, tmp_path, exec_prefix=prefix)
    else:
        t = ssh_target(sshd, tmp_path, reuse=False, exec_prefix=prefix)
        result = t.run(b'printf "%s" "$PK_WORD"')
        assert result.stdout == word.encode()
    # As (part of) the root path: accepted only without line breaks, never on the command line.
    if "\n" in word:
        with pytest.raises(InvalidInput):
            parse_target(f"{sshd.alias}:/tmp/{word}", ssh_config=str(sshd.client_config))
    else:
        root = f"/tmp/{word}"
        t = parse_target(f"{sshd.alias}:{root}", ssh_config=str(sshd.client_config), reuse=False)
        assert t.root == root.rstrip("/")
        assert t.argv()[-1] == "sh -s"
        result = t.run(b"printf %s " + shlex.quote(t.root).encode())
        assert result.stdout == t.root.encode()
    assert not marker.exists()


# ---- fleets -------------------------------------------------------------------------------------


def test_fleet_of_servers_runs_in_parallel(sshd_factory, tmp_path):
    fleet = sshd_factory(3)
    assert len({s.port for s in fleet.servers}) == 3
    roots = []
    for i in range(3):
        (tmp_path / f"h{i}").mkdir()
        roots.append(str(tmp_path / f"h{i}"))
    transports = [parse_target(spec, ssh_config=str(fleet.client_config)) for spec in fleet.targets(roots)]
    program = b"echo \"$SSH_CONNECTION\" | cut -d' ' -f4"  # the server's port

    def one(t):
        return t.run(program)

    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        first = list(pool.map(one, transports))
        second = list(pool.map(one, transports))
    for server, a, b in zip(fleet.servers, first, second):
        assert a.stdout == b.stdout == f"{server.port}\n".encode()
        assert counted(server, 0) == 1  # two operations, one (reused) connection per host
    for t in transports:
        t.close()


def test_close_from_another_thread_is_safe(sshd, tmp_path):
    t = ssh_target(sshd, tmp_path)
    t.run(b"true")
    worker = threading.Thread(target=t.close)
    worker.start()
    worker.join(10)
    assert t.control_dir is None


def test_unknown_host_is_named(sshd):
    t = parse_target("pk-nowhere.invalid:/tmp", ssh_config=str(sshd.client_config), reuse=False)
    with pytest.raises(TransportError, match=r"^pk-nowhere\.invalid: unknown host"):
        t.run(b"true")


def test_forgotten_transport_still_cleans_up(sshd, tmp_path):
    import gc

    t = ssh_target(sshd, tmp_path)
    t.run(b"true")
    control_dir = t.control_dir
    del t
    gc.collect()
    assert not os.path.exists(control_dir)


@pytest.mark.parametrize("reuse", [False, True])
def test_killed_ssh_client_is_a_transport_error(sshd, tmp_path, reuse):
    # What fault injection meets: the error comes at once, but sshd does not stop a remote
    # program that no longer writes anything (no pty, no SIGHUP): it runs to its end. Target
    # programs must therefore be safe to finish unattended (and die on SIGPIPE if they write).
    # The client is killed once the remote program has started (its `began` file), not at a
    # fixed 0.5 s: on a loaded machine the login can take longer than that, and a client killed
    # before the program starts leaves nothing running to check.
    marker, began = tmp_path / "late", tmp_path / "began"
    t = ssh_target(sshd, tmp_path, reuse=reuse)
    t.run(b"true")  # with reuse: the master is up, the next client is a mux client
    killed_at = []

    def kill_once_started(proc):
        deadline = time.monotonic() + 30
        while not began.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        killed_at.append(time.monotonic())
        proc.kill()

    t.on_start = lambda proc: threading.Thread(target=kill_once_started, args=(proc,)).start()
    # `began` is touched after the program's only write: a client killed between the two would
    # have its channel closed under the `echo`, whose SIGPIPE ends the program (what the comment
    # above says of programs that write), and then no `late` file is the right outcome
    remote = f"echo started; touch {shlex.quote(str(began))}; sleep 1.5; touch {shlex.quote(str(marker))}"
    with pytest.raises(TransportError, match="killed by signal 9"):
        t.run(remote.encode())
    assert began.exists() and time.monotonic() - killed_at[0] < 0.9  # at once, as before: 0.5 + 0.9 s
    assert not marker.exists()
    deadline = time.monotonic() + 5
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert marker.exists()
    t.on_start = None
    assert t.run(b"echo next").stdout == b"next\n"
    t.close()


# ---- one connection across commands (shared ControlMaster, ssh_persist) ------------------------

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def invoke_cli(*args) -> subprocess.CompletedProcess:
    return invoke(*args, timeout=120)


def masters_running(control_dir) -> list[int]:
    """pids of ssh control masters serving a socket in control_dir (their title names it)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                title = fh.read().replace(b"\0", b" ")
        except OSError:
            continue
        if b"[mux]" in title and str(control_dir).encode() in title:
            pids.append(int(entry))
    return pids


@pytest.mark.parametrize("persist, connections", [(None, 1), ("0", 4)])
def test_four_invocations_one_connection(sshd, tmp_path, ssh_control_dir, persist, connections):
    """verify, apply, status, revert as four `invoke` runs: one login in sshd's log (default
    ssh_persist 60 s), four with --ssh-persist 0; the tree is back to its bytes either way."""
    from support.upstream import SERIES_059, sglang_installed

    root = sglang_installed("0.5.9", tmp_path / "site-packages")
    worker = root / "sglang/srt/speculative/eagle_worker.py"
    original = worker.read_bytes()
    common = [
        "--series",
        str(SERIES_059),
        "--target",
        sshd.url(str(root)),
        "--ssh-config",
        str(sshd.client_config),
    ]
    if persist is not None:
        common += ["--ssh-persist", persist]
    before_logins, before_tcp = sshd.accepted(), sshd.connections()
    outputs = {}
    for task in ("patch.verify", "patch.apply", "patch.status", "patch.revert"):
        proc = invoke_cli(task, *common)
        assert proc.returncode == 0, (task, proc.stdout + proc.stderr)
        outputs[task] = proc.stdout
    sshd.wait_log(lambda s: s.accepted() - before_logins >= connections, timeout=3)
    time.sleep(0.1)  # a late extra login would show up here
    assert sshd.accepted() - before_logins == connections, sshd.log_text()[-2000:]
    assert sshd.connections() - before_tcp == connections
    assert worker.read_bytes() == original
    if persist is None:
        assert "ssh master alive (pid " in outputs["patch.status"]
        assert "reused by this command" in outputs["patch.status"]
        assert len(masters_running(ssh_control_dir)) == 1  # waiting for the next command
        assert stat.S_IMODE(os.stat(ssh_control_dir).st_mode) == 0o700
    else:
        assert "ssh master" not in outputs["patch.status"]
        assert masters_running(ssh_control_dir) == [] and os.listdir(ssh_control_dir) == []


def test_shared_master_outlives_its_transport_until_stopped(sshd, tmp_path, ssh_control_dir):
    from patchkit.transport.controldir import stop_masters

    first = ssh_target(sshd, tmp_path, shared_master=True, control_persist=30)
    assert first.connection_probe() is None  # nothing alive yet
    before = sshd.connections()
    first.run(b"true")
    pid = first.master_pid()
    first.close()  # leaves the master to ControlPersist
    assert pid and masters_running(ssh_control_dir) == [pid]
    second = ssh_target(sshd, tmp_path, shared_master=True)
    assert second.run(b"echo again").stdout == b"again\n"
    assert second.master_pid() == pid
    assert second.connection_notes(pid) == [
        f"ssh master alive (pid {pid}, reused by this command): commands to this host within "
        "60 s of the last one share its connection"
    ]
    assert counted(sshd, before) == 1
    assert stop_masters(str(ssh_control_dir)) == 1
    deadline = time.monotonic() + 5
    while masters_running(ssh_control_dir) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert masters_running(ssh_control_dir) == [] and second.master_pid() is None


def test_control_dir_is_created_private(sshd, tmp_path, monkeypatch):
    from patchkit.transport.controldir import ENV_VAR

    fresh = f"/tmp/pkc-new-{os.getpid()}"
    monkeypatch.setenv(ENV_VAR, fresh)
    try:
        t = ssh_target(sshd, tmp_path, shared_master=True)
        assert t.run(b"echo ok").stdout == b"ok\n"
        st = os.stat(fresh)
        assert stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid == os.getuid()
        assert len(os.listdir(fresh)) == 1 and stat.S_ISSOCK(
            os.lstat(os.path.join(fresh, os.listdir(fresh)[0])).st_mode
        )
    finally:
        from patchkit.transport.controldir import stop_masters

        stop_masters(fresh)
        subprocess.run(["rm", "-rf", fresh])


def test_control_dir_with_a_wrong_mode_is_repaired(sshd, tmp_path, ssh_control_dir):
    os.chmod(ssh_control_dir, 0o777)
    planted = ssh_control_dir / "0123456789abcdef0123456789abcdef01234567"
    planted.write_text("not a socket\n")
    t = ssh_target(sshd, tmp_path, shared_master=True)
    assert t.run(b"echo ok").stdout == b"ok\n"
    assert stat.S_IMODE(os.stat(ssh_control_dir).st_mode) == 0o700
    assert not planted.exists()


@pytest.mark.parametrize("problem", ["foreign owner", "symlink", "file", "too long"])
def test_unsafe_control_dir_is_refused(sshd, tmp_path, monkeypatch, problem):
    import shutil
    import tempfile
    from pathlib import Path

    base = Path(tempfile.mkdtemp(prefix="pkc-u-", dir="/tmp"))  # short enough for sockets
    try:
        _refused(sshd, tmp_path, monkeypatch, problem, base)
    finally:
        shutil.rmtree(base)


def _refused(sshd, tmp_path, monkeypatch, problem, base):
    from patchkit.transport.controldir import ENV_VAR

    path = base / "ctl"
    if problem == "foreign owner":
        if os.getuid() != 0:
            pytest.skip("needs root to give the directory to another user")
        path.mkdir(mode=0o700)
        os.chown(path, 65534, 65534)
        expected = "belongs to uid 65534"
    elif problem == "symlink":
        (base / "real").mkdir(mode=0o700)
        path.symlink_to(base / "real")
        expected = "not a plain directory"
    elif problem == "file":
        path.write_text("")
        expected = "not a plain directory"
    else:
        path = tmp_path / ("x" * 80)
        expected = "too long for unix socket paths"
    monkeypatch.setenv(ENV_VAR, str(path))
    before = sshd.connections()
    t = ssh_target(sshd, tmp_path, shared_master=True)
    with pytest.raises(InvalidInput, match=expected) as info:
        t.run(b"true")
    assert "--ssh-persist 0" in str(info.value)
    assert sshd.connections() == before  # refused before any connection
    # Through the CLI: exit 2, the message, no traceback.
    proc = invoke_cli(
        "patch.status",
        "--series",
        os.path.join(REPO, "patches", "sglang-v0.5.9"),
        "--target",
        sshd.url(str(tmp_path)),
        "--ssh-config",
        str(sshd.client_config),
    )
    assert proc.returncode == 2 and expected in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr


def test_bad_ssh_persist_is_invalid_input(sshd, tmp_path):
    proc = invoke_cli(
        "patch.status",
        "--series",
        os.path.join(REPO, "patches", "sglang-v0.5.9"),
        "--target",
        sshd.url(str(tmp_path)),
        "--ssh-persist",
        "soon",
    )
    assert proc.returncode == 2 and "--ssh-persist 'soon': a number of seconds" in proc.stderr, proc.stderr

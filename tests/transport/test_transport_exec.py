"""Exec-prefix transports (docker://, --container, --exec) and the BusyBox target, run for real
where this machine allows: `env`, `chroot` into a BusyBox root, `unshare`. No container engine
runs here, so docker argv is checked by construction only."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import time

import pytest

from patchkit.errors import InvalidInput, TransportError
from patchkit.transport import LocalTransport, parse_target
from patchkit.transport.execprefix import ExecTransport
from patchkit.transport.remote import parse_remote_target
from support.sshd import make_busybox_dir


def test_docker_url_argv():
    t = parse_target("docker://sglang_dev/sgl-workspace/sglang/")
    assert isinstance(t, ExecTransport)
    assert t.argv() == ["docker", "exec", "-i", "sglang_dev", "sh", "-s"]
    assert t.root == "/sgl-workspace/sglang"
    assert t.label == "docker://sglang_dev/sgl-workspace/sglang/"


def test_container_option_on_a_path_and_other_engines():
    t = parse_target("/opt/app", container="c1")
    assert t.argv() == ["docker", "exec", "-i", "c1", "sh", "-s"] and t.root == "/opt/app"
    t = parse_target("docker://c1/opt/app", container_engine="podman")
    assert t.argv() == ["podman", "exec", "-i", "c1", "sh", "-s"]


def test_exec_prefix_argv_is_split_not_interpreted():
    t = parse_target("/w", exec_prefix="kubectl exec -i 'pod $(x)' -- ")
    assert t.argv() == ["kubectl", "exec", "-i", "pod $(x)", "--", "sh", "-s"]


@pytest.mark.parametrize(
    "spec, kw, match",
    [
        ("relative/dir", {"exec_prefix": "chroot /x"}, "absolute"),
        ("/w", {"exec_prefix": "env", "container": "c"}, "not both"),
        ("docker://c/w", {"container": "d"}, "already names"),
        ("docker://c/w", {"exec_prefix": "env"}, "already names"),
        ("docker://c", {}, "absolute path"),
        ("/w", {"exec_prefix": ""}, "empty"),
        ("/w", {"exec_prefix": "-it x"}, "start with a program"),
        ("/w", {"exec_prefix": "env 'unclosed"}, "cannot split"),
        ("/w", {"container": "c", "container_engine": "do cker"}, "container_engine"),
        ("/w", {"exec_prefix": "env", "timeout": -1}, "positive"),
    ],
)
def test_bad_exec_targets_are_refused(spec, kw, match):
    with pytest.raises(InvalidInput, match=match) as info:
        parse_target(spec, **kw)
    assert info.value.exit_code == 2


def test_ssh_only_options_are_ignored_by_exec_targets():
    t = parse_target("docker://c/w", connect_timeout=3, reuse=True, ssh_config="/nonexistent")
    assert t.argv() == ["docker", "exec", "-i", "c", "sh", "-s"]


def test_plain_local_path_is_not_remote():
    assert parse_remote_target("/some/dir") is None
    assert isinstance(parse_target("/some/dir"), LocalTransport)


def test_generic_prefix_really_runs(tmp_path):
    t = parse_target(str(tmp_path), exec_prefix="env PK_WHERE=inside")
    result = t.run(b'echo "$PK_WHERE"; cd ' + shlex.quote(t.root).encode() + b" && pwd; exit 4")
    assert result.returncode == 4
    assert result.stdout == f"inside\n{tmp_path}\n".encode()


@pytest.mark.parametrize(
    "word", ["$(touch {m})", "`touch {m}`", "x; touch {m}", "a b 'c'", '"; touch {m}; "']
)
def test_hostile_prefix_words_are_single_arguments(tmp_path, word):
    marker = tmp_path / "INJECTED"
    word = word.format(m=marker)
    t = parse_target(str(tmp_path), exec_prefix=shlex.join(["env", f"PK_WORD={word}"]))
    assert t.run(b'printf %s "$PK_WORD"').stdout == word.encode()
    assert not marker.exists()


def test_missing_prefix_program():
    t = parse_target("/w", exec_prefix="pk-no-such-program --flag")
    with pytest.raises(TransportError, match="pk-no-such-program"):
        t.run(b"true")


def test_prefix_that_cannot_start_the_shell(tmp_path):
    t = parse_target(str(tmp_path), exec_prefix="env", remote_shell="pk-no-such-shell -s")
    with pytest.raises(TransportError, match="could not start"):
        t.run(b"true")


def test_overall_timeout_on_exec_target(tmp_path):
    t = parse_target(str(tmp_path), exec_prefix="env", timeout=1)
    start = time.monotonic()
    with pytest.raises(TransportError, match="1 s"):
        t.run(b"sleep 5")
    assert time.monotonic() - start < 4


def _busybox_root(path):
    """A minimal root file system: BusyBox, its shared libraries, applet links."""
    busybox = shutil.which("busybox")
    if busybox is None:
        pytest.skip("busybox not installed")
    bindir = path / "bin"
    bindir.mkdir(parents=True)
    shutil.copy2(busybox, bindir / "busybox")
    ldd = subprocess.run(["ldd", busybox], capture_output=True, text=True).stdout
    for word in ldd.split():
        if word.startswith("/") and os.path.exists(word):
            dest = path / word.lstrip("/")
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(word, dest)
    make_busybox_dir(bindir, busybox="busybox")  # relative links: valid inside the chroot
    (path / "srv" / "app").mkdir(parents=True)
    return path


@pytest.mark.skipif(os.geteuid() != 0, reason="chroot needs root")
def test_chroot_prefix_into_a_busybox_root(tmp_path):
    root = _busybox_root(tmp_path / "rootfs")
    (root / "srv" / "app" / "f.txt").write_text("one\ntwo\n")
    t = parse_target("/srv/app", exec_prefix=shlex.join(["chroot", str(root)]))
    program = (
        f"cd {shlex.quote(t.root)} && sed -i 's/two/TWO/' f.txt && wc -l < f.txt && "
        "test ! -e /usr/lib/python3 && echo jailed"
    ).encode()
    result = t.run(program)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [b"2", b"jailed"]
    assert (root / "srv" / "app" / "f.txt").read_text() == "one\nTWO\n"


def test_unshare_prefix_runs_in_a_new_pid_namespace(tmp_path):
    probe = subprocess.run(["unshare", "--pid", "--fork", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"unshare not permitted here: {probe.stderr.decode().strip()}")
    t = parse_target(str(tmp_path), exec_prefix="unshare --pid --fork")
    assert t.run(b"echo $$").stdout == b"1\n"


def test_busybox_transport_uses_busybox_applets(busybox_transport, busybox_bin):
    t = busybox_transport
    root = shlex.quote(t.root).encode()
    program = (
        b"cd " + root + b" && printf 'a\\nb\\n' > f && sed -i 's/b/B/' f && "
        b"sha256sum f | cut -c1-8 && wc -l < f && command -v sed && "
        b'readlink /proc/$$/exe && t=$(mktemp ./x.XXXXXX) && mv "$t" g && cat f g'
    )
    result = t.run(program)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.decode().split()
    expected_sum = subprocess.run(["sha256sum"], input=b"a\nB\n", capture_output=True).stdout[:8].decode()
    assert lines[:5] == [expected_sum, "2", f"{busybox_bin}/sed", shutil.which("busybox"), "a"]
    assert os.path.exists(os.path.join(t.root, "g"))


def test_prefix_killed_by_a_signal(tmp_path):
    t = parse_target(str(tmp_path), exec_prefix="env")
    with pytest.raises(TransportError, match="killed by signal 15"):
        t.run(b"kill -TERM $$")  # `env` execs sh: the prefix process itself dies

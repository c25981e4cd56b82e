"""The engine over SSH: the real sglang-v0.5.9 series on an installed tree behind a loopback sshd.

Covers both target forms (`ssh://user@127.0.0.1:PORT/abs` and the `alias:/abs` form, each with the
fixture's generated ssh_config), exactly one TCP connection per operation (counted in sshd's
log), a BusyBox target over SSH, `--json` through the real CLI, BatchMode failures, hostile host
names and root paths through the CLI, symlinks leading out of the root, and read-only /
permission-denied targets (a read-only bind mount in a private mount namespace, or the program
run as `nobody`, set up by the remote command itself).
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from patchkit import ops
from patchkit.transport import parse_target
from support.cli import invoke
from support.crash_tree import AFTER as MULTI_AFTER, BEFORE as MULTI_BEFORE
from support.engine import git_diff, make_series, read_tree, write_tree
from support.upstream import SERIES_059, sglang_installed

pytestmark = [pytest.mark.sshd, pytest.mark.wheels]

REPO = Path(__file__).resolve().parents[2]
WORKER = "sglang/srt/speculative/eagle_worker.py"
WORKER_V2 = "sglang/srt/speculative/eagle_worker_v2.py"  # 0.5.9's 0008-0013
TIMER = "sglang/srt/speculative/phase_timer.py"
FILES = (WORKER, WORKER_V2, TIMER)


# ---- helpers ------------------------------------------------------------------------------------


def ssh_opts(server) -> ops.Options:
    return ops.Options(transport_options={"ssh_config": str(server.client_config)})


def one_connection(server, fn):
    """Run fn(); assert sshd took exactly one TCP connection meanwhile."""
    before = server.connections()
    result = fn()
    server.wait_log(lambda s: s.connections() > before, timeout=3)
    assert server.connections() - before == 1, f"{server.connections() - before} connections"
    return result


def installed_tree(dest: Path) -> Path:
    return sglang_installed("0.5.9", dest)


def remote_shell_in_namespace(setup: str) -> str:
    """`sh -s` started by the remote login shell inside a private mount namespace after setup."""
    return f"unshare -m sh -c {shlex.quote(setup + ' && exec sh -s')}"


def read_only_bind(path: Path) -> str:
    q = shlex.quote(str(path))
    return remote_shell_in_namespace(f"mount --bind {q} {q} && mount -o remount,ro,bind {q} {q}")


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict[str, dict[str, bytes | None]]:
    """Original and patched bytes of the installed tree, from a local GNU apply."""
    root = installed_tree(tmp_path_factory.mktemp("ref") / "site-packages")
    original = read_tree(root, FILES)
    res = ops.apply(str(SERIES_059), [str(root)])
    assert res.exit_code == 0, res.to_json()
    patched = read_tree(root, FILES)
    assert patched[TIMER] and patched[WORKER] != original[WORKER]
    return {"original": original, "patched": patched}


@pytest.fixture(scope="module")
def namespaces_work(tmp_path_factory):
    """Skip unless a private mount namespace with a read-only bind mount can be made here."""
    if shutil.which("unshare") is None:
        pytest.skip("unshare (util-linux) not installed")
    d = tmp_path_factory.mktemp("ro-probe")
    setup = read_only_bind(d).replace("exec sh -s", f"touch {shlex.quote(str(d / 'probe'))}")
    proc = subprocess.run(["sh", "-c", setup], cwd=d, capture_output=True, text=True)
    if "Read-only file system" not in proc.stderr:
        pytest.skip(
            f"cannot make a read-only bind mount in a private mount namespace "
            f"(needs CAP_SYS_ADMIN): {proc.stderr.strip()[:200]}"
        )


# ---- the real series, both target forms --------------------------------------------------------


@pytest.mark.parametrize("form", ["url", "alias"])
def test_sglang_series_round_trip_over_ssh(sshd, tmp_path, reference, form):
    root = installed_tree(tmp_path / "site-packages")
    target = sshd.url(str(root)) if form == "url" else f"{sshd.alias}:{root}"
    opts = ssh_opts(sshd)

    def op(name):
        return one_connection(sshd, lambda: getattr(ops, name)(str(SERIES_059), [target], opts))

    res = op("verify")
    host = res.hosts[0]
    assert (res.exit_code, host.state, host.layout) == (0, "pristine", "installed"), res.to_json()
    assert host.target.startswith("ssh://") and str(root) in host.target
    assert read_tree(root, FILES) == reference["original"]
    assert not (root / ".patchkit").exists()  # verify writes nothing under the root

    res = op("apply")
    assert (res.exit_code, res.hosts[0].state) == (0, "applied"), res.to_json()
    assert sorted(res.hosts[0].written) == sorted(FILES)  # paths as on the target
    assert read_tree(root, FILES) == reference["patched"]
    assert res.hosts[0].bytes_sent > 10_000  # the whole program travelled on stdin

    res = op("apply")
    assert res.exit_code == 0 and any("already applied" in m for m in res.hosts[0].messages)
    assert read_tree(root, FILES) == reference["patched"]

    res = op("status")
    assert (res.exit_code, res.hosts[0].state) == (0, "applied"), res.to_json()
    assert {f.state for f in res.hosts[0].files} == {"applied"}

    res = op("revert")
    assert (res.exit_code, res.hosts[0].state) == (0, "pristine"), res.to_json()
    assert read_tree(root, FILES) == reference["original"]
    assert not (root / ".patchkit" / "manifest").exists()
    assert op("status").hosts[0].state == "pristine"


def test_busybox_target_over_ssh_gives_identical_bytes(sshd, busybox_bin, tmp_path, reference):
    root = installed_tree(tmp_path / "site-packages")
    shell = f"PATH={shlex.quote(str(busybox_bin))} busybox sh -s"
    t = parse_target(f"{sshd.alias}:{root}", ssh_config=str(sshd.client_config), remote_shell=shell)
    try:
        before = sshd.connections()
        probe = t.run(b"readlink /proc/$$/exe; command -v sed; command -v sha256sum")
        exe, sed, sha = probe.stdout.decode().split()
        assert exe.endswith("busybox") and sed == f"{busybox_bin}/sed"
        assert sha == f"{busybox_bin}/sha256sum"
        for name, state in [("verify", "pristine"), ("apply", "applied"), ("status", "applied")]:
            res = getattr(ops, name)(str(SERIES_059), [t])
            assert (res.exit_code, res.hosts[0].state) == (0, state), res.to_json()
        assert read_tree(root, FILES) == reference["patched"]
        res = ops.revert(str(SERIES_059), [t])
        assert (res.exit_code, res.hosts[0].state) == (0, "pristine"), res.to_json()
        assert read_tree(root, FILES) == reference["original"]
        # A Transport object passed in is not closed by ops: five programs, one connection.
        assert t.runs == 5
        sshd.wait_log(lambda s: s.connections() > before)
        assert sshd.connections() - before == 1
    finally:
        t.close()


# ---- the CLI ------------------------------------------------------------------------------------


def test_cli_json_over_ssh(sshd, tmp_path, reference):
    root = installed_tree(tmp_path / "site-packages")
    target = sshd.url(str(root))
    common = [
        "--series",
        str(SERIES_059),
        "--target",
        target,
        "--ssh-config",
        str(sshd.client_config),
        "--json",
    ]
    # Three invocations, one connection: the first leaves an SSH master (ssh_persist, 60 s by
    # default) that the next two ride.
    before = sshd.connections()
    for task, state, files in [
        ("patch.apply", "applied", "patched"),
        ("patch.status", "applied", "patched"),
        ("patch.revert", "pristine", "original"),
    ]:
        proc = invoke(task, *common)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        doc = json.loads(proc.stdout)
        assert doc["exit_code"] == 0 and doc["series"] == "sglang-v0.5.9"
        (host,) = doc["hosts"]
        assert host["target"] == target and host["state"] == state, host
        assert host["bytes_sent"] > 10_000 and host["elapsed"] > 0
        assert read_tree(root, FILES) == reference[files]
    sshd.wait_log(lambda s: s.connections() > before, timeout=3)
    assert sshd.connections() - before == 1


def test_batchmode_failure_names_the_host(sshd, sshd_keys, tmp_path):
    # A client config whose key the server does not know: BatchMode must fail at once, no prompt.
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "stranger")],
        check=True,
        capture_output=True,
    )
    text = sshd.client_config.read_text().replace(str(sshd_keys.user_key), str(tmp_path / "stranger"))
    assert str(tmp_path / "stranger") in text
    config = tmp_path / "stranger_config"
    config.write_text(text)
    root = installed_tree(tmp_path / "site-packages")
    start = time.monotonic()
    proc = invoke(
        "patch.verify",
        "--series",
        str(SERIES_059),
        "--target",
        f"{sshd.alias}:{root}",
        "--ssh-config",
        str(config),
        timeout=30,
    )
    assert time.monotonic() - start < 10
    assert proc.returncode == 1, proc.stdout + proc.stderr
    out = proc.stdout + proc.stderr
    assert "unreachable" in out
    assert f"{sshd.alias}: SSH permission denied" in out and "BatchMode" in out
    assert not (root / ".patchkit").exists()


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
FORMS = [
    lambda w, s: ["--target", f"ssh://{w}/tmp"],  # host in a URL
    lambda w, s: ["--target", f"{w}:/tmp"],  # host, scp-like
    lambda w, s: ["--target", f"ssh://{w}@127.0.0.1:{s.port}/tmp"],  # user
    lambda w, s: ["--target", f"{s.alias}:/tmp", "--container", w],  # container through SSH
]


@pytest.mark.parametrize("index", range(len(HOSTILE)))
def test_hostile_host_user_container_names_through_cli(sshd, tmp_path, index):
    marker = tmp_path / "INJECTED"
    word = HOSTILE[index].format(m=marker)
    for form in (FORMS[index % 4], FORMS[(index + 1) % 4]):
        proc = invoke(
            "patch.apply",
            "--series",
            str(SERIES_059),
            "--ssh-config",
            str(sshd.client_config),
            *form(word, sshd),
        )
        # Refused as invalid, or (scp-like with a slash before the colon) a local path that
        # does not exist: never run.
        assert proc.returncode in (1, 2), proc.stdout + proc.stderr
        if proc.returncode == 1:
            assert "does not exist" in proc.stdout
        assert "Traceback" not in proc.stderr
        assert not marker.exists(), (word, form(word, sshd))


def test_hostile_root_paths_through_cli(sshd, tmp_path, reference):
    """Roots with spaces, quotes, $(), backticks, ';' and '|': patched, nothing executed."""
    marker = tmp_path / "INJECTED"
    roots = []
    for word in HOSTILE:
        word = word.format(m=marker)
        if "\n" in word:
            continue
        root = tmp_path / "roots" / word  # '/' in a word just makes nested folders
        root.parent.mkdir(parents=True, exist_ok=True)
        installed_tree(root)
        roots.append(root)
    targets = [a for root in roots for a in ("--target", f"{sshd.alias}:{root}")]
    common = ["--series", str(SERIES_059), "--ssh-config", str(sshd.client_config), *targets]
    proc = invoke("patch.apply", *common)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for root in roots:
        assert read_tree(root, FILES) == reference["patched"], root
    proc = invoke("patch.revert", *common)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for root in roots:
        assert read_tree(root, FILES) == reference["original"], root
    assert not marker.exists()
    # A line break in the root: refused before anything starts.
    word = HOSTILE[6].format(m=marker)
    proc = invoke(
        "patch.apply",
        "--series",
        str(SERIES_059),
        "--ssh-config",
        str(sshd.client_config),
        "--target",
        f"{sshd.alias}:{tmp_path}/{word}",
    )
    assert proc.returncode == 2 and "newline" in proc.stderr, proc.stdout + proc.stderr
    assert not marker.exists()


# ---- symlinks leading out of the root ----------------------------------------------------------


@pytest.mark.parametrize("what", ["directory", "file"])
def test_symlink_out_of_the_root_is_refused_on_the_target(sshd, tmp_path, what):
    root = installed_tree(tmp_path / "site-packages")
    outside = tmp_path / "outside"
    outside.mkdir()
    if what == "directory":
        link = root / "sglang" / "srt" / "speculative"
        shutil.move(str(link), str(outside / "speculative"))
        link.symlink_to(outside / "speculative")
        victim = outside / "speculative" / "eagle_worker.py"
    else:
        link = root / WORKER
        victim = outside / "eagle_worker.py"
        shutil.move(str(link), str(victim))
        link.symlink_to(victim)
    original = victim.read_bytes()
    for name in ("verify", "apply"):
        res = (
            ops.apply(str(SERIES_059), [f"{sshd.alias}:{root}"], ssh_opts(sshd))
            if name == "apply"
            else ops.verify(str(SERIES_059), [f"{sshd.alias}:{root}"], ssh_opts(sshd))
        )
        host = res.hosts[0]
        assert res.exit_code == 1, res.to_json()
        assert any("refusing to follow the symlink" in m and str(link) in m for m in host.messages), (
            host.messages
        )
    assert victim.read_bytes() == original
    assert (
        sorted(p.name for p in victim.parent.iterdir()) == ["eagle_worker.py", "eagle_worker_v2.py"]
        or what == "file"
    )
    assert not (root / ".patchkit" / "manifest").exists()
    assert not (root / ".patchkit" / "stage").exists()


def test_state_directory_symlink_out_of_the_root_is_refused(sshd, tmp_path):
    root = installed_tree(tmp_path / "site-packages")
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / ".patchkit").symlink_to(outside)
    res = ops.apply(str(SERIES_059), [f"{sshd.alias}:{root}"], ssh_opts(sshd))
    assert list(outside.iterdir()) == []  # nothing written outside the root
    assert res.exit_code == 1 and any(".patchkit" in m for m in res.hosts[0].messages)


# ---- read-only and permission denied -----------------------------------------------------------


def test_read_only_target_over_ssh(sshd, tmp_path, reference, namespaces_work):
    root = installed_tree(tmp_path / "site-packages")
    t = parse_target(
        f"{sshd.alias}:{root}", ssh_config=str(sshd.client_config), remote_shell=read_only_bind(root)
    )
    try:
        res = ops.apply(str(SERIES_059), [t])
        assert res.exit_code == 1, res.to_json()
        message = " ".join(res.hosts[0].messages)
        assert "Read-only file system" in message and str(root) in message, message
        assert ops.status(str(SERIES_059), [t]).hosts[0].state == "pristine"
        res = ops.revert(str(SERIES_059), [t])  # cannot even take the lock: refused or no-op
        assert res.exit_code in (0, 1) and res.hosts[0].state != "unknown", res.to_json()
    finally:
        t.close()
    assert read_tree(root, FILES) == reference["original"]
    assert not (root / ".patchkit").exists()


def test_permission_denied_over_ssh(sshd, reference):
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) not installed")
    # As root every write succeeds; run the target program as `nobody` instead. The tree must
    # be readable by nobody, so it lives outside pytest's 0700 temp folders.
    base = Path(tempfile.mkdtemp(prefix="pk-perm-", dir="/tmp"))
    try:
        base.chmod(0o755)
        root = installed_tree(base / "site-packages")
        shell = "setpriv --reuid=65534 --regid=65534 --clear-groups sh -s"
        t = parse_target(f"{sshd.alias}:{root}", ssh_config=str(sshd.client_config), remote_shell=shell)
        try:
            assert t.run(b"id -u").stdout == b"65534\n"
            res = ops.verify(str(SERIES_059), [t])  # reading is allowed, writing is not:
            assert res.exit_code == 1, res.to_json()  # verify fails where apply would
            assert any("apply would fail" in m for m in res.hosts[0].messages), res.to_json()
            assert res.hosts[0].files and all(f.state == "pristine" for f in res.hosts[0].files)
            res = ops.apply(str(SERIES_059), [t])
            assert res.exit_code == 1, res.to_json()
            message = " ".join(res.hosts[0].messages)
            assert "Permission denied" in message and str(root) in message, message
            res = ops.revert(str(SERIES_059), [t])  # no patchkit state: nothing to revert
            assert res.exit_code == 0 and res.hosts[0].state == "pristine", res.to_json()
        finally:
            t.close()
        assert read_tree(root, FILES) == reference["original"]
        assert not (root / ".patchkit").exists()
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_read_only_package_directory_changes_nothing(sshd, tmp_path, reference, namespaces_work):
    """State dir writable, package dir read-only: refused before staging; nothing is left."""
    root = installed_tree(tmp_path / "site-packages")
    t = parse_target(
        f"{sshd.alias}:{root}",
        ssh_config=str(sshd.client_config),
        remote_shell=read_only_bind(root / "sglang" / "srt" / "speculative"),
    )
    try:
        res = ops.apply(str(SERIES_059), [t])
        assert res.exit_code == 1, res.to_json()
        message = " ".join(res.hosts[0].messages)
        assert f"{root}/sglang/srt/speculative" in message and "read-only" in message, message
        status = ops.status(str(SERIES_059), [t]).hosts[0]
    finally:
        t.close()
    assert read_tree(root, FILES) == reference["original"]
    assert status.state == "pristine", status
    assert not any("interrupted" in m for m in status.messages), status.messages
    for leftover in ("manifest", "stage", "orig", "lock"):
        assert not (root / ".patchkit" / leftover).exists(), leftover


@pytest.fixture(scope="module")
def multi_series(tmp_path_factory):
    work = tmp_path_factory.mktemp("multi-series")
    patch = git_diff(MULTI_BEFORE, MULTI_AFTER, work)
    pinned = {k: v for k, v in MULTI_BEFORE.items() if v is not None}
    return make_series(work / "series", pinned, [("0001-multi.patch", patch)])


def test_read_only_second_directory_leaves_every_file_original(sshd, tmp_path, multi_series, namespaces_work):
    root = tmp_path / "t"
    write_tree(root, {k: v for k, v in MULTI_BEFORE.items() if v is not None})
    # lib/ is committed before pkg/: make only pkg/ read-only.
    t = parse_target(
        f"{sshd.alias}:{root}", ssh_config=str(sshd.client_config), remote_shell=read_only_bind(root / "pkg")
    )
    try:
        res = ops.apply(str(multi_series), [t])
    finally:
        t.close()
    assert res.exit_code == 1
    assert "pkg" in " ".join(res.hosts[0].messages), res.hosts[0].messages
    assert read_tree(root, MULTI_BEFORE.keys()) == MULTI_BEFORE
    assert not (root / ".patchkit" / "manifest").exists()

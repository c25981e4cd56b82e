"""patch.rebase --onto-target: a git checkout with local edits behind the loopback sshd is read
in one connection, pinned to exactly its text and HEAD, the series relocated onto it (exact and
merged+checked), and the target left byte-identical, .git included; then patch.verify passes."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from patchkit import ops
from patchkit.author import rebase as rb, upstream
from patchkit.author.targetread import target_source
from patchkit.engine.series import load_series
from support.cli import invoke as support_invoke
from support.upstream import EAGLE_WORKER, SERIES_059, git, sglang_checkout, sglang_installed, v1_part

pytestmark = [pytest.mark.sshd, pytest.mark.wheels]


def snapshot(root: Path) -> dict[str, tuple[int, bytes]]:
    """Every file under root (.git included): mode and bytes; directories by mode."""
    out = {}
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            p = Path(dirpath) / name
            st = p.lstat()
            out[str(p.relative_to(root))] = (st.st_mode, b"" if p.is_dir() else p.read_bytes())
    return out


def dev_checkout(dest: Path) -> tuple[Path, str]:
    """sglang 0.5.9 as a git checkout, then a developer's uncommitted edits to eagle_worker.py:
    a helper method inserted near the top (every later line moves) and a docstring line next
    to the prefill-cycle hunk rewritten (exact matching of that hunk fails)."""
    root, _ = sglang_checkout("0.5.9", dest, git_repo=True)
    head = git(root, "rev-parse", "HEAD").stdout.strip()
    path = root / EAGLE_WORKER
    text = path.read_text()
    anchor = "    def forward_batch_generation("
    assert text.count(anchor) == 1
    text = text.replace(anchor, "    def _dev_probe(self):\n        return None\n\n" + anchor)
    old_doc = "            the batch id (used for overlap schedule), and number of accepted tokens.\n"
    assert text.count(old_doc) == 1
    text = text.replace(old_doc, "            the batch id and the accepted-token count (dev build).\n")
    path.write_text(text)
    assert git(root, "status", "--porcelain").stdout.strip() == f"M {EAGLE_WORKER}"
    return root, head


def test_onto_target_over_ssh_reads_once_writes_nothing_and_verifies(sshd, tmp_path):
    root, head = dev_checkout(tmp_path / "sglang")
    before = snapshot(root)
    target = sshd.url(str(root))
    opts = {"transport_options": {"ssh_config": str(sshd.client_config)}}
    series = load_series(str(SERIES_059))
    seen = sshd.connections()
    source = target_source(series, target, **opts)
    sshd.wait_log(lambda s: s.connections() > seen, timeout=3)
    assert sshd.connections() - seen == 1, "one connection for the whole read"
    edited = (root / EAGLE_WORKER).read_bytes()
    assert source.files[EAGLE_WORKER] == edited and source.commit == head
    assert source.version is None and "git HEAD" in source.detail

    out = tmp_path / "out"
    result = rb.rebase(SERIES_059, target, new_source=source, out_dir=out)
    assert result.exit_code == 0, [h.reason for h in result.attention]
    methods = {h.method for h in result.hunks}
    assert methods == {"exact", "merged+checked"}
    merged = [h for h in result.hunks if h.method == "merged+checked"]
    assert [(h.patch, h.number) for h in merged] == [("0002-cycle.patch", 2)]
    pin = upstream.read_pin(out / "pin.toml")
    assert pin.commit == head and pin.version is None
    assert (next(iter(pin.files.values())).sha256, next(iter(pin.files.values())).lines) == (
        hashlib.sha256(edited).hexdigest(),
        edited.count(b"\n"),
    )
    assert "| merge3 |" in (out / "REBASE.md").read_text()
    assert snapshot(root) == before, "the target must be byte-identical, .git included"

    verdict = ops.verify(str(out), [target], ops.Options(**opts))
    assert verdict.exit_code == 0, verdict.to_json()
    assert snapshot(root) == before
    # the same pin refuses another commit: the pin is the checkout's HEAD, not just the text
    git(root, "commit", "-qam", "dev build")
    assert ops.verify(str(out), [target], ops.Options(**opts)).exit_code == 1


def test_onto_target_cli_and_bad_input(sshd, tmp_path):
    root, _ = dev_checkout(tmp_path / "sglang")
    before = snapshot(root)

    def invoke(*args):
        return support_invoke("patch.rebase", "--series", str(SERIES_059), *args)

    target = sshd.url(str(root))
    cfg = ["--ssh-config", str(sshd.client_config)]
    run = invoke("--onto-target", target, "--out", str(tmp_path / "out"), *cfg)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 merged+checked, 0 need attention" in run.stdout
    assert invoke("--onto-target", target, *cfg).returncode == 2  # no --out
    assert (
        invoke("--onto-target", target, "--onto", "0.5.10", "--out", str(tmp_path / "x")).returncode == 2
    )  # both
    gone = invoke("--onto-target", sshd.url(str(tmp_path / "nowhere")), "--out", str(tmp_path / "y"), *cfg)
    assert gone.returncode == 1 and "does not exist" in gone.stderr
    assert not (tmp_path / "y").exists()
    assert snapshot(root) == before


def test_onto_target_installed_tree_pins_the_dist_info_version(tmp_path):
    root = sglang_installed("0.5.10", tmp_path / "site-packages")
    before = snapshot(root)
    # 0.5.9's eagle_worker.py part (its appended EAGLEWorkerV2 patches have a hunk 0.5.10's
    # rewritten code leaves to a person; tests/author/test_rebase_v2.py covers those)
    series = v1_part(SERIES_059, tmp_path / "series")
    source = target_source(load_series(str(series)), str(root))
    assert source.version == "0.5.10" and source.commit is None
    result = rb.rebase(series, str(root), new_source=source, out_dir=tmp_path / "out")
    pin = upstream.read_pin(tmp_path / "out" / "pin.toml")
    assert (pin.version, pin.commit) == ("0.5.10", None)
    assert result.exit_code == 0 and not result.attention
    assert ops.verify(str(tmp_path / "out"), [str(root)]).exit_code == 0
    assert snapshot(root) == before


@pytest.mark.parametrize("ending", [b"\n", b""], ids=["newline", "no-final-newline"])
def test_read_is_byte_exact_under_busybox_and_an_exec_prefix(busybox_transport, tmp_path, ending):
    from support.engine import git_diff, make_series, write_tree

    old = b"def f():\n    a = 1\n    b = 2\n\tc = '\\\\n'  \r\n    return a" + ending
    new = old.replace(b"a = 1", b"a = 10")
    patched = old.replace(b"    b = 2\n", b"    b = 2\n    _pt.end('x')\n")
    series = make_series(
        tmp_path / "series",
        {"pkg/mod.py": old},
        [("0001.patch", git_diff({"pkg/mod.py": old}, {"pkg/mod.py": patched}, tmp_path / "d"))],
    )
    write_tree(Path(busybox_transport.root), {"pkg/mod.py": new})
    before = snapshot(Path(busybox_transport.root))
    loaded = load_series(str(series))
    for spec in (busybox_transport, busybox_transport.root):
        kw = {} if spec is busybox_transport else {"exec_prefix": "env PK_VIA=exec"}
        source = target_source(loaded, spec, **kw)
        assert source.files == {"pkg/mod.py": new}
    assert snapshot(Path(busybox_transport.root)) == before

"""patchkit.author.upstream: wheels by pinned sha256, git blobs at a rev, pin.toml."""

from __future__ import annotations

import hashlib
import subprocess
import tomllib
import zipfile
from pathlib import Path

import pytest

from patchkit.author import upstream
from patchkit.errors import EXIT_INVALID, EXIT_REFUSED, InvalidInput
from support.upstream import EAGLE_WORKER_WHEEL, default_wheelhouse, git

pytestmark = [pytest.mark.wheels]

SHA_059 = "2123c44d0d1b2941f13ef31ba19458d45191d060acac18523aace08dc3f5f4df"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    monkeypatch.setenv("PATCHKIT_CACHE", str(root))
    monkeypatch.delenv("PATCHKIT_WHEELHOUSE", raising=False)
    return root / "upstream"


def _no_pip(*args, **kwargs):
    raise AssertionError("pip was called although the wheel is cached")


def _make_wheel(directory: Path, dist: str, version: str, payload: bytes) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{dist}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(f"{dist}/mod.py", payload)
        zf.writestr(
            f"{dist}-{version}.dist-info/METADATA",
            f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n",
        )
        zf.writestr(
            f"{dist}-{version}.dist-info/WHEEL",
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        )
        zf.writestr(f"{dist}-{version}.dist-info/RECORD", "")
    return path


# ----------------------------------------------------------------------------- wheels


def test_fetch_real_wheel_checks_pin_and_then_works_offline(cache, monkeypatch):
    fetched = upstream.fetch_wheel("sglang", "0.5.9", wheelhouse=default_wheelhouse())
    assert fetched.trust == "pinned"
    assert fetched.sha256 == upstream.KNOWN_WHEELS["sglang-0.5.9-py3-none-any.whl"]
    assert fetched.path.parent == cache / "wheels" / "sglang-0.5.9"
    assert hashlib.sha256(fetched.path.read_bytes()).hexdigest() == fetched.sha256
    # Offline from now on: pip must not run again.
    monkeypatch.setattr(upstream, "_pip_download", _no_pip)
    again = upstream.fetch_wheel("sglang", "0.5.9")
    assert again.path == fetched.path and again.trust == "pinned"
    data = upstream.read_wheel_files(again.path, [EAGLE_WORKER_WHEEL])[EAGLE_WORKER_WHEEL]
    assert hashlib.sha256(data).hexdigest() == SHA_059
    assert upstream.count_lines(data) == 1032


def test_tampered_cached_wheel_is_refused(cache):
    fetched = upstream.fetch_wheel("sglang", "0.5.9", wheelhouse=default_wheelhouse())
    with open(fetched.path, "ab") as fh:
        fh.write(b"\0")
    with pytest.raises(upstream.WheelHashMismatch) as err:
        upstream.fetch_wheel("sglang", "0.5.9")
    assert err.value.exit_code == EXIT_REFUSED
    assert "differs from the pinned" in str(err.value)


def test_unknown_wheel_needs_trust_new_then_is_checked_against_the_record(cache, tmp_path):
    house = tmp_path / "house"
    wheel = _make_wheel(house, "demo_pkg", "1.0", b"x = 1\n")
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    with pytest.raises(upstream.UntrustedWheel) as err:
        upstream.fetch_wheel("demo-pkg", "1.0", wheelhouse=house)
    assert err.value.sha256 == digest and digest in str(err.value)
    assert "--trust-new" in str(err.value)
    new = upstream.fetch_wheel("demo-pkg", "1.0", wheelhouse=house, trust_new=True)
    assert new.trust == "new" and new.sha256 == digest
    record = new.path.with_name(new.path.name + ".sha256")
    assert record.read_text().split()[0] == digest
    assert upstream.fetch_wheel("demo-pkg", "1.0").trust == "recorded"
    new.path.write_bytes(new.path.read_bytes() + b"\0")
    with pytest.raises(upstream.WheelHashMismatch):
        upstream.fetch_wheel("demo-pkg", "1.0")


def test_pip_failure_says_what_and_where(cache, tmp_path):
    with pytest.raises(upstream.UpstreamError) as err:
        upstream.fetch_wheel("demo-pkg", "9.9", wheelhouse=tmp_path / "empty")
    assert "demo-pkg==9.9" in str(err.value) and str(tmp_path / "empty") in str(err.value)


@pytest.mark.parametrize("name,version", [("../x", "1.0"), ("sglang", "1.0; rm -rf /"), ("", "1")])
def test_bad_name_or_version_is_invalid_input(cache, name, version):
    with pytest.raises(InvalidInput) as err:
        upstream.fetch_wheel(name, version)
    assert err.value.exit_code == EXIT_INVALID


def test_read_wheel_files_names_a_missing_file(cache):
    fetched = upstream.fetch_wheel("sglang", "0.5.9", wheelhouse=default_wheelhouse())
    with pytest.raises(upstream.UpstreamError, match=r"no file sglang/nope\.py"):
        upstream.read_wheel_files(fetched.path, ["sglang/nope.py"])
    with pytest.raises(InvalidInput):
        upstream.read_wheel_files(fetched.path, ["../etc/passwd"])


# ----------------------------------------------------------------------------- trees


def test_installed_and_checkout_layouts(cache):
    wh = default_wheelhouse()
    inst = upstream.pypi_tree("sglang", "0.5.9", [EAGLE_WORKER_WHEEL], wheelhouse=wh)
    assert hashlib.sha256((inst / EAGLE_WORKER_WHEEL).read_bytes()).hexdigest() == SHA_059
    meta = (inst / "sglang-0.5.9.dist-info" / "METADATA").read_text()
    assert "Name: sglang\n" in meta and "Version: 0.5.9\n" in meta
    ck = upstream.pypi_tree("sglang", "0.5.9", [EAGLE_WORKER_WHEEL], layout="checkout")
    assert (ck / "python" / EAGLE_WORKER_WHEEL).read_bytes() == (inst / EAGLE_WORKER_WHEEL).read_bytes()
    assert not (ck / "sglang").exists()
    with pytest.raises(InvalidInput):
        upstream.pypi_tree("sglang", "0.5.9", [EAGLE_WORKER_WHEEL], layout="weird")


def test_checkout_tree_as_git_repo_returns_its_head(tmp_path):
    tree, commit = upstream.build_checkout_tree({"pkg/a.py": b"a = 1\n"}, tmp_path / "ck", git_repo=True)
    assert git(tree, "rev-parse", "HEAD").stdout.strip() == commit
    assert git(tree, "status", "--porcelain").stdout == ""
    assert (tree / "python/pkg/a.py").read_bytes() == b"a = 1\n"


# ----------------------------------------------------------------------------- git clones


@pytest.fixture
def clone(tmp_path):
    repo = tmp_path / "clone"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "t@t")
    git(repo, "config", "user.name", "t")
    shas = []
    for i in range(3):
        (repo / "src").mkdir(exist_ok=True)
        (repo / "src" / "m.py").write_text(f"version = {i}\n")
        git(repo, "add", "src/m.py")
        git(repo, "commit", "-q", "-m", f"c{i}")
        shas.append(git(repo, "rev-parse", "HEAD").stdout.strip())
        if i == 1:
            git(repo, "tag", "v1")
    git(repo, "checkout", "-q", "-b", "side", shas[0])
    (repo / "src" / "m.py").write_text("version = 'side'\n")
    git(repo, "commit", "-q", "-am", "side")
    shas.append(git(repo, "rev-parse", "HEAD").stdout.strip())
    git(repo, "checkout", "-q", "main")
    (repo / "src" / "m.py").write_text("dirty work tree\n")  # must stay untouched
    return repo, shas


def test_git_resolve_tag_branch_and_read_blobs_without_touching_worktree(clone, tmp_path):
    repo, shas = clone
    assert upstream.resolve_git_rev(repo, "v1") == shas[1]
    assert upstream.resolve_git_rev(repo, "side") == shas[3]
    assert upstream.resolve_git_rev(repo, shas[0][:10]) == shas[0]
    commit, files = upstream.read_git_files(repo, "v1", ["src/m.py"])
    assert commit == shas[1] and files == {"src/m.py": b"version = 1\n"}
    tree, commit = upstream.git_tree(repo, "side", ["src/m.py"], dest=tmp_path / "t")
    assert commit == shas[3] and (tree / "src/m.py").read_text() == "version = 'side'\n"
    assert (repo / "src/m.py").read_text() == "dirty work tree\n"
    assert git(repo, "rev-parse", "HEAD").stdout.strip() == shas[2]
    assert git(repo, "rev-parse", "--abbrev-ref", "HEAD").stdout.strip() == "main"


def test_git_errors_name_the_clone_and_rev(clone, tmp_path):
    repo, _ = clone
    with pytest.raises(upstream.UpstreamError, match="no commit named 'v9'"):
        upstream.resolve_git_rev(repo, "v9")
    with pytest.raises(upstream.UpstreamError, match=r"no file src/zz\.py"):
        upstream.read_git_files(repo, "v1", ["src/zz.py"])
    with pytest.raises(upstream.UpstreamError, match="not a git repository"):
        upstream.resolve_git_rev(tmp_path / "nowhere", "HEAD")


# ----------------------------------------------------------------------------- pin.toml


def test_pin_from_tree_hashes_and_counts_like_wc(tmp_path):
    tree = tmp_path / "tree"
    (tree / "python/pkg").mkdir(parents=True)
    (tree / "python/pkg/a.py").write_bytes(b"one\ntwo\nthree")  # no final newline
    (tree / "python/pkg/b.py").write_bytes(b"x\r\ny\n")
    pin_path = tmp_path / "series" / "pin.toml"
    pin = upstream.pin_from_tree(
        tree, ["python/pkg/a.py", "python/pkg/b.py"], "pkg", "1.0", "a" * 40, "python/", pin_path=pin_path
    )
    raw = tomllib.loads(pin_path.read_text())
    assert raw["upstream"] == {
        "name": "pkg",
        "version": "1.0",
        "commit": "a" * 40,
        "package_prefix": "python/",
    }
    for entry in raw["file"]:
        data = (tree / entry["path"]).read_bytes()
        wc = subprocess.run(["wc", "-l"], input=data, capture_output=True, check=True)
        assert entry["lines"] == int(wc.stdout.split()[0])
        assert entry["sha256"] == hashlib.sha256(data).hexdigest()
    assert list(pin.files) == ["python/pkg/a.py", "python/pkg/b.py"]


def test_pin_update_keeps_order_repins_and_reads_installed_layout(tmp_path):
    tree = tmp_path / "site"
    (tree / "pkg").mkdir(parents=True)
    (tree / "pkg/a.py").write_text("a\n")
    (tree / "pkg/b.py").write_text("b\n")
    pin_path = tmp_path / "pin.toml"
    upstream.pin_from_tree(
        tree,
        ["python/pkg/a.py", "python/pkg/b.py"],
        "pkg",
        "1.0",
        package_prefix="python/",
        pin_path=pin_path,
    )
    first = pin_path.read_bytes()
    (tree / "pkg/a.py").write_text("a\na2\n")
    pin = upstream.pin_from_tree(tree, None, "pkg", "1.1", package_prefix="python/", pin_path=pin_path)
    assert [(f.path, f.lines) for f in pin.files.values()] == [("python/pkg/a.py", 2), ("python/pkg/b.py", 1)]
    assert upstream.read_pin(pin_path).version == "1.1"
    (tree / "pkg/a.py").write_text("a\n")
    upstream.pin_from_tree(
        tree, ["python/pkg/a.py"], "pkg", "1.0", package_prefix="python/", pin_path=pin_path
    )
    assert pin_path.read_bytes() == first  # stable format: same inputs, same bytes


def test_pin_errors(tmp_path):
    with pytest.raises(InvalidInput, match="40 lowercase hex"):
        upstream.pin_from_tree(tmp_path, ["x"], "pkg", commit="abc")
    with pytest.raises(upstream.UpstreamError, match=r"no file 'python/x\.py'"):
        upstream.pin_from_tree(tmp_path, ["python/x.py"], "pkg", package_prefix="python/")
    with pytest.raises(InvalidInput, match="no existing pin"):
        upstream.pin_from_tree(tmp_path, None, "pkg", pin_path=tmp_path / "pin.toml")
    with pytest.raises(InvalidInput, match="unsafe"):
        upstream.pin_from_tree(tmp_path, ["../etc/passwd"], "pkg")


# ----------------------------------------------------------------------------- task entry points


def test_fetch_tree_defaults_from_a_series_pin(cache, tmp_path):
    from support.upstream import SERIES_059

    tree, commit = upstream.fetch_tree(
        series_dir=SERIES_059, wheelhouse=default_wheelhouse(), dest=tmp_path / "t"
    )
    assert commit is None
    pin = upstream.read_pin(SERIES_059 / "pin.toml")
    for entry in pin.files.values():
        data = (tree / entry.path).read_bytes()
        assert upstream.sha256_bytes(data) == entry.sha256
    inst, _ = upstream.fetch_tree(
        "sglang",
        "0.5.9",
        [next(iter(pin.files.values())).path],
        layout="installed",
        package_prefix="python/",
        dest=tmp_path / "i",
    )
    assert (inst / EAGLE_WORKER_WHEEL).read_bytes() == (
        tree / next(iter(pin.files.values())).path
    ).read_bytes()
    with pytest.raises(InvalidInput, match="needs a name, a version and paths"):
        upstream.fetch_tree("sglang", None, ["x"])


def test_fetch_tree_from_clone_and_pin_series(clone, tmp_path):
    repo, shas = clone
    sdir = tmp_path / "series"
    tree, commit = upstream.fetch_tree(paths=["src/m.py"], clone=repo, rev="v1", dest=tmp_path / "t1")
    assert commit == shas[1]
    upstream.pin_series(sdir, tree, ["src/m.py"], name="demo", commit=commit)
    assert upstream.read_pin(sdir / "pin.toml").commit == shas[1]
    # Default rev: the pinned commit.
    again, commit2 = upstream.fetch_tree(series_dir=sdir, clone=repo, dest=tmp_path / "t2")
    assert commit2 == shas[1] and (again / "src/m.py").read_text() == "version = 1\n"
    # Same files: version/commit kept. Changed files: the new upstream must be named.
    assert upstream.pin_series(sdir, again).commit == shas[1]
    newer, commit3 = upstream.fetch_tree(series_dir=sdir, clone=repo, rev="main", dest=tmp_path / "t3")
    with pytest.raises(InvalidInput, match=r"src/m\.py changed"):
        upstream.pin_series(sdir, newer)
    pin = upstream.pin_series(sdir, newer, commit=commit3)
    assert pin.commit == shas[2] and pin.name == "demo"
    assert next(iter(pin.files.values())).sha256 == upstream.sha256_bytes(b"version = 2\n")


def test_pip_is_asked_for_the_pinned_build_whatever_python_runs_it():
    """From 0.5.11 sglang ships per-interpreter wheels only; the cp311 one is pinned, so pip must
    fetch exactly that build on any interpreter (else the pin refuses what it got)."""
    assert (
        upstream.pinned_wheel_name("sglang", "0.5.23")
        == "sglang-0.5.23-cp311-cp311-manylinux_2_34_x86_64.whl"
    )
    assert upstream._tag_options("sglang", "0.5.23") == [
        "--python-version",
        "311",
        "--implementation",
        "cp",
        "--abi",
        "cp311",
        "--platform",
        "manylinux_2_34_x86_64",
    ]
    assert upstream._tag_options("sglang", "0.5.9") == []  # py3-none-any
    assert upstream._tag_options("sglang", "9.9.9") == []  # not pinned: pip's own choice
    sglang = [w for w in upstream.KNOWN_WHEELS if w.startswith("sglang-")]
    assert len(sglang) == len({w.split("-")[1] for w in sglang}) == 42

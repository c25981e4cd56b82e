"""Pristine upstream sources: PyPI wheels by exact version, or blobs of a local git clone.

Nothing here is committed: wheels and the trees built from them live in an ignored cache,
``<repo>/.cache/upstream`` (or ``$PATCHKIT_CACHE/upstream``). Once a wheel is in the cache
everything works offline.

Trust. A wheel is accepted when its sha256 equals the value pinned in ``KNOWN_WHEELS`` below.
A wheel we have no pin for is refused, and the refusal prints its sha256; pass
``trust_new=True`` (``--trust-new``) to accept it, which records the hash beside the cached
wheel (``<wheel>.sha256``) so that later runs check the wheel against that record
(trust on first use, said so in the result). Add the hash to ``KNOWN_WHEELS`` to make it a pin.

Layouts built from a wheel:
  installed  ``sglang/...`` plus ``sglang-0.5.9.dist-info/METADATA`` (Name, Version), as in
             site-packages;
  checkout   ``python/sglang/...`` (``package_prefix`` + the wheel path), optionally a git repo.
             The real upstream commit cannot be reproduced from a wheel: the repo gets its own
             commit, returned to the caller.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from patchkit.errors import InvalidInput, Refused
from patchkit.locations import cache_base
from patchkit.pin import Pin, PinnedFile, format_pin, read_pin, write_pin


class UpstreamError(Refused):
    """An upstream source could not be fetched, or is not what it claims to be."""


class UntrustedWheel(UpstreamError):
    """A wheel whose sha256 is neither pinned nor recorded; carries the hash to review."""

    def __init__(self, message: str, sha256: str):
        super().__init__(message)
        self.sha256 = sha256


class WheelHashMismatch(UpstreamError):
    """A wheel whose sha256 differs from its pin or its recorded hash."""


# Wheel file name -> sha256, checked on every use. Values as published on PyPI: the sglang
# 0.5.1 ... 0.5.23 rows (every release and .postN) were copied once from the simple index's
# own hashes (PEP 691 JSON, https://pypi.org/simple/sglang/) on 2026-12-01. Releases from
# 0.5.11 on ship per-interpreter wheels only: the cp311 manylinux_2_34_x86_64 one is pinned,
# and fetch_wheel asks pip for exactly those tags whatever interpreter runs it (a series pins
# .py files, which the interpreter-specific builds do not compile).
KNOWN_WHEELS: dict[str, str] = {
    "sglang-0.5.1-py3-none-any.whl": "572c02d83674245899f516af397a38d113935a97660f3e882d20c1c971820909",
    "sglang-0.5.1.post1-py3-none-any.whl": "79d22923502db99d2c41faad3ef423c7961bbabe8a9af8149aa0d27a7d4c093e",
    "sglang-0.5.1.post2-py3-none-any.whl": "10c6097a9a165252070a66b3c8bf38718e49e72019607f18f2cb70c50dbb4925",
    "sglang-0.5.1.post3-py3-none-any.whl": "f92f56f6fa6320012872da1fe37317e665df556af0272eff67af8afb3993ec0c",
    "sglang-0.5.2-py3-none-any.whl": "83aae146f3913ed0802bb1ea356facff47efe0e7d18041a3f143de9ef6e44b2c",
    "sglang-0.5.3-py3-none-any.whl": "14b20822b7c36d7069556e559181bcaa1d3d44b2b0fcbf8818313af4ca22ae7f",
    "sglang-0.5.3.post1-py3-none-any.whl": "0f224b43bda2a771c6a56b03f01bb3ee4aefdf213a322ca33451a845d6f938d8",
    "sglang-0.5.3.post2-py3-none-any.whl": "a2d12288e5c2fd8dd1d1036114ba6ab9ab9ff18822c53618e70566803b5ea160",
    "sglang-0.5.3.post3-py3-none-any.whl": "809fd0c8c0847cd95cf28364ff50475a4d5015c8857b22736c69f3eb12810f0e",
    "sglang-0.5.4-py3-none-any.whl": "342b370145e33f232bef21b73da119d4a96202a0386ebcd54cdbf46a11fbeda3",
    "sglang-0.5.4.post1-py3-none-any.whl": "ed919059d777f4c3a1e029239c16969188623e847ec0b9c23e2d4856e07f70f4",
    "sglang-0.5.4.post2-py3-none-any.whl": "3853ad6538a86b663836825adbda54d154cb4f244523bc72daff7de28bc83e36",
    "sglang-0.5.4.post3-py3-none-any.whl": "054f96cd9f80acc98de740cd6f79330d2e9b61c2efd0692da96f995a9f796821",
    "sglang-0.5.5-py3-none-any.whl": "3c57f135ec0a7a5cf6ae4ed5e0b231d7bf7e0fae588bbc1a881560f1c18db995",
    "sglang-0.5.5.post1-py3-none-any.whl": "a470f7c3ce837a8e414bbeb96da2563e9974f042e03425e8889b373aaeb58180",
    "sglang-0.5.5.post2-py3-none-any.whl": "938d0445dc8116e1b80c223efc875c6738eb6d69ebf78ace6817e06ac15a79d0",
    "sglang-0.5.5.post3-py3-none-any.whl": "0283d290a480e56201cab6e42bc5cf5f505f600a9508d004c06283b052f60203",
    "sglang-0.5.6-py3-none-any.whl": "c32b6a5bafcda41c2f299ed4a1fbe8401946076b4e010fe8feb5b8a9712bf66b",
    "sglang-0.5.6.post1-py3-none-any.whl": "717dd3e1a64a4ac4a14dc791d123c1f90d34fca809237d52e7af39238c560d24",
    "sglang-0.5.6.post2-py3-none-any.whl": "cb542f7adeec56bbb5598443c52d0f347fab74dbb5df09d37cad69eaec780c54",
    "sglang-0.5.7-py3-none-any.whl": "b77f9e5ca5a2ab19b3efba725958fc4de20ba97880e383738c695e8611b51100",
    "sglang-0.5.8-py3-none-any.whl": "b7fbd890f6edd87f46c6e3ce72d592316af316f183c9bd999c3cc44b20fa2451",
    "sglang-0.5.8.post1-py3-none-any.whl": "3fe5ddf6d8b47b234bb192737eb52c94e76282bf910b1185e020f88ec7367e6e",
    "sglang-0.5.9-py3-none-any.whl": "8a936c4d25fea605f44254e533cff2144c73ceffbc1f8738aba393461bbb64d1",
    "sglang-0.5.10-py3-none-any.whl": "ac8855a5d57dac8831fee526bca5212f1ae451f378e2ab08b3baecbc4deb4076",
    "sglang-0.5.10.post1-py3-none-any.whl": "a854a68b11caf6b4b55c241a44378a7cdede7ede325db85c955f131506703bc6",
    "sglang-0.5.11-cp311-cp311-manylinux_2_34_x86_64.whl": "fe0748beaff218d3e16c9018a5e19f018db06fc3c7ac4f90d2f93da1cf074b6f",
    "sglang-0.5.12-cp311-cp311-manylinux_2_34_x86_64.whl": "4ed786a38655851fd055ef57380c34d29b87753b53f63457309f51e5bf48c2e6",
    "sglang-0.5.12.post1-cp311-cp311-manylinux_2_34_x86_64.whl": "94b3f3cc6b97f1364f247b8d9c1d106ec63cf22c55d6b65bc40ff29b0206ef5f",
    "sglang-0.5.13-cp311-cp311-manylinux_2_34_x86_64.whl": "9d26266ab7e99165098f9e173f4a5a0ef6a0b64a6f30ef0b5ee859eead37e75a",
    "sglang-0.5.13.post1-cp311-cp311-manylinux_2_34_x86_64.whl": "1c1653ecf2893c7d7b1cf0c3e1cc9b7550ebad95c809de2f44bcc91b7a1e1fe3",
    "sglang-0.5.14-cp311-cp311-manylinux_2_34_x86_64.whl": "4fe16056b45c8aca00f5f90ceb174dc3a62a3f5dccf159c791370795cd00fc99",
    "sglang-0.5.15-cp311-cp311-manylinux_2_34_x86_64.whl": "21492759b4b99e117bd81610f633422f3fdae2896c2cde6931eab886deccc44f",
    "sglang-0.5.15.post1-cp311-cp311-manylinux_2_34_x86_64.whl": "8e182e1c449197cb6f98716a7cf432a3ea7af78c172f9b840ab28ad9e6cda9b4",
    "sglang-0.5.16-cp311-cp311-manylinux_2_34_x86_64.whl": "d5f345a18953dd35df568ac56bdcb7f5ee910ab39efea4469b714556d1070713",
    "sglang-0.5.17-cp311-cp311-manylinux_2_34_x86_64.whl": "575e38f5683624ded3b4bb267f637a098e5ed37d13a1d1ff5ea09bd781a04d16",
    "sglang-0.5.18-cp311-cp311-manylinux_2_34_x86_64.whl": "e97b585dd2d5db2802599feba47c84cce972f5e1231a6816fef996200207b5cf",
    "sglang-0.5.19-cp311-cp311-manylinux_2_34_x86_64.whl": "425e87377e725d03db8262382008f3fd9561a6cf5d82f485f8b9929f02ffe12b",
    "sglang-0.5.20-cp311-cp311-manylinux_2_34_x86_64.whl": "1573527042f4f6b4ead838302818595fc77fdc611dbcc2e40cd150fbc8f8513c",
    "sglang-0.5.21-cp311-cp311-manylinux_2_34_x86_64.whl": "96c029f75dec99baa33a5db3d41b1bebefdd6bcfba3a2f7c807fe1cf49a87c20",
    "sglang-0.5.22-cp311-cp311-manylinux_2_34_x86_64.whl": "cc9a0f15bd8f877a0584fdb7a1702240177a1f1cc8d17c978715161717b9037b",
    "sglang-0.5.23-cp311-cp311-manylinux_2_34_x86_64.whl": "00b3cd5b265ac76c64185fbb6b95424f324ddd9f428d0306b77bc9db9d859937",
    "transformers-5.17.0-py3-none-any.whl": "78ec1ce21579b38dfb83950a0658cd119f87212a2fcfdff478096ce9d6c03801",
}

_VERSION_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+!-]*$")
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


# ----------------------------------------------------------------------------- small helpers


def version_key(version: str) -> tuple[int, ...]:
    """``"0.5.10"`` -> ``(0, 5, 10, 0)``, ``"0.5.6.post2"`` -> ``(0, 5, 6, 2)``: release order."""
    main, _, post = version.partition(".post")
    return tuple(int(p) for p in main.split(".")) + (int(post) if post else 0,)


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def count_lines(data: bytes) -> int:
    """What ``wc -l`` prints: the number of newline bytes."""
    return data.count(b"\n")


def cache_root() -> Path:
    """``$PATCHKIT_CACHE/upstream`` or ``<repo>/.cache/upstream`` (ignored by git)."""
    base = os.environ.get("PATCHKIT_CACHE")
    root = Path(base) if base else cache_base()
    return root / "upstream"


def normalize_name(name: str) -> str:
    """Wheel file names use the distribution name with runs of -_. as one underscore."""
    return re.sub(r"[-_.]+", "_", name).lower()


def _check_name_version(name: str, version: str) -> None:
    if not _NAME_RE.match(name or ""):
        raise InvalidInput(f"upstream: bad distribution name {name!r}")
    if not _VERSION_RE.match(version or ""):
        raise InvalidInput(f"upstream: bad version {version!r} for {name}")


def _safe_relpath(path: str, what: str) -> str:
    p = path.replace("\\", "/")
    if not p or p.startswith("/") or any(part in ("", ".", "..") for part in p.split("/")):
        raise InvalidInput(f"{what}: unsafe or empty path {path!r}")
    return p


def installed_path(path: str, package_prefix: str | None) -> str:
    """Drop ``package_prefix`` (e.g. ``python/``) from a checkout path, if it starts with it."""
    if package_prefix and path.startswith(package_prefix):
        return path[len(package_prefix) :]
    return path


def locate_in_tree(tree: Path, path: str, package_prefix: str | None = None) -> Path:
    """The file for checkout path ``path`` in ``tree``, whichever layout the tree has."""
    tree = Path(tree)
    candidates = [tree / path]
    short = installed_path(path, package_prefix)
    if short != path:
        candidates.append(tree / short)
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise UpstreamError(f"{tree}: no file {path!r}" + (f" (nor {short!r})" if short != path else ""))


# ----------------------------------------------------------------------------- wheels


@dataclass
class FetchedWheel:
    path: Path
    sha256: str
    trust: str  # "pinned" | "recorded" (trusted on an earlier --trust-new) | "new" (just now)


def wheel_dir(name: str, version: str, cache: Path | None = None) -> Path:
    return (cache or cache_root()) / "wheels" / f"{normalize_name(name)}-{version}"


def _wheels_in(directory: Path, name: str, version: str) -> list[Path]:
    """Wheels of name==version in ``directory`` (file name: dist-version-...-platform.whl)."""
    if not directory.is_dir():
        return []
    found = []
    for p in directory.iterdir():
        parts = p.name.split("-")
        if (
            p.suffix == ".whl"
            and len(parts) >= 5
            and normalize_name(parts[0]) == normalize_name(name)
            and parts[1] == version
        ):
            found.append(p)
    return sorted(found)


def check_wheel(path: Path, *, trust_new: bool = False) -> FetchedWheel:
    """Verify ``path`` against its pin, or its recorded hash, or record it when trust_new."""
    path = Path(path)
    digest = sha256_file(path)
    pinned = KNOWN_WHEELS.get(path.name)
    record = path.with_name(path.name + ".sha256")
    if pinned is not None:
        if digest != pinned:
            raise WheelHashMismatch(
                f"{path}: sha256 {digest} differs from the pinned {pinned}; delete the file and fetch again"
            )
        return FetchedWheel(path, digest, "pinned")
    if record.is_file():
        recorded = record.read_text().split()[0]
        if digest != recorded:
            raise WheelHashMismatch(
                f"{path}: sha256 {digest} differs from the hash recorded on first use "
                f"({recorded}, in {record})"
            )
        return FetchedWheel(path, digest, "recorded")
    if not trust_new:
        raise UntrustedWheel(
            f"{path.name}: no pinned sha256 for this wheel; it has sha256 {digest}. "
            "Check it against the index, then pass --trust-new to record it "
            "(or add it to patchkit.author.upstream.KNOWN_WHEELS)",
            digest,
        )
    record.write_text(f"{digest}  {path.name}\n")
    return FetchedWheel(path, digest, "new")


def pinned_wheel_name(name: str, version: str) -> str | None:
    """The one wheel of name==version in KNOWN_WHEELS, or None."""
    found = [
        w
        for w in KNOWN_WHEELS
        if normalize_name(w.split("-")[0]) == normalize_name(name) and w.split("-")[1] == version
    ]
    return found[0] if len(found) == 1 else None


def _tag_options(name: str, version: str) -> list[str]:
    """pip options that select the pinned wheel's interpreter/platform build, when it has one.

    Without them pip picks the build for the running interpreter, which a cp311-only pin would
    then refuse on any other Python.
    """
    pinned = pinned_wheel_name(name, version)
    if pinned is None:
        return []
    python_tag, abi, platform = pinned[: -len(".whl")].split("-")[-3:]
    if not python_tag.startswith("cp") or platform == "any":
        return []
    return [
        "--python-version",
        python_tag[2:],
        "--implementation",
        "cp",
        "--abi",
        abi,
        "--platform",
        platform,
    ]


def _pip_download(name: str, version: str, dest: Path, wheelhouse: Path | None) -> None:
    argv = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--disable-pip-version-check",
        "--quiet",
        f"{name}=={version}",
        "-d",
        str(dest),
        *_tag_options(name, version),
    ]
    if wheelhouse is not None:
        argv += ["--no-index", "--find-links", str(wheelhouse)]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UpstreamError(f"pip download {name}=={version}: {exc}") from exc
    if proc.returncode != 0:
        where = f" from {wheelhouse}" if wheelhouse else " from the package index"
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise UpstreamError(f"pip could not download {name}=={version}{where}: " + " | ".join(tail))


def fetch_wheel(
    name: str,
    version: str,
    *,
    cache: Path | None = None,
    wheelhouse: Path | str | None = None,
    trust_new: bool = False,
) -> FetchedWheel:
    """The wheel of ``name==version`` in the cache, downloading it first if missing.

    ``wheelhouse`` (or ``$PATCHKIT_WHEELHOUSE``): a folder of wheels pip reads instead of the
    index (``--no-index --find-links``). The hash check is the same either way.
    """
    _check_name_version(name, version)
    target_dir = wheel_dir(name, version, cache)
    cached = _wheels_in(target_dir, name, version)
    if cached:
        return check_wheel(cached[0], trust_new=trust_new)
    if wheelhouse is None and os.environ.get("PATCHKIT_WHEELHOUSE"):
        wheelhouse = os.environ["PATCHKIT_WHEELHOUSE"]
    target_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target_dir, prefix=".download-") as tmp:
        tmp_path = Path(tmp)
        _pip_download(name, version, tmp_path, Path(wheelhouse) if wheelhouse else None)
        got = _wheels_in(tmp_path, name, version)
        if not got:
            raise UpstreamError(f"pip download {name}=={version} produced no wheel in {tmp}")
        fetched = check_wheel(got[0], trust_new=trust_new)
        final = target_dir / got[0].name
        os.replace(got[0], final)
        record = got[0].with_name(got[0].name + ".sha256")
        if record.exists():
            os.replace(record, final.with_name(final.name + ".sha256"))
    return FetchedWheel(final, fetched.sha256, fetched.trust)


def read_wheel_files(wheel: Path, paths: list[str]) -> dict[str, bytes]:
    """The bytes of ``paths`` (as inside the wheel, e.g. ``sglang/srt/...``)."""
    out: dict[str, bytes] = {}
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        for path in paths:
            path = _safe_relpath(path, str(wheel))
            if path not in names:
                raise UpstreamError(f"{Path(wheel).name}: has no file {path}")
            out[path] = zf.read(path)
    return out


def wheel_dist_info(wheel: Path) -> str:
    """The ``*.dist-info`` folder name inside the wheel (e.g. ``sglang-0.5.9.dist-info``)."""
    with zipfile.ZipFile(wheel) as zf:
        for entry in zf.namelist():
            top = entry.split("/", 1)[0]
            if top.endswith(".dist-info"):
                return top
    raise UpstreamError(f"{Path(wheel).name}: no .dist-info folder")


# ----------------------------------------------------------------------------- trees


def _write_files(dest: Path, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


def build_installed_tree(
    files: dict[str, bytes], dest: Path, *, name: str, version: str, dist_info: str | None = None
) -> Path:
    """A site-packages-like tree: the files plus a minimal ``<dist>.dist-info/METADATA``."""
    dest = Path(dest)
    _write_files(dest, files)
    info = dest / (dist_info or f"{normalize_name(name)}-{version}.dist-info")
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    return dest


def build_checkout_tree(
    files: dict[str, bytes],
    dest: Path,
    *,
    package_prefix: str = "python/",
    git_repo: bool = False,
    message: str = "pristine upstream files",
) -> tuple[Path, str | None]:
    """A source-checkout-like tree (``package_prefix`` + path). Returns (tree, commit or None)."""
    dest = Path(dest)
    _write_files(dest, {package_prefix + rel: data for rel, data in files.items()})
    if not git_repo:
        return dest, None
    import git  # GitPython; imported here to keep `import patchkit.author.upstream` light

    repo = git.Repo.init(dest)
    with repo.config_writer() as cw:
        cw.set_value("user", "name", "patchkit")
        cw.set_value("user", "email", "patchkit@localhost")
        cw.set_value("commit", "gpgsign", "false")
    repo.index.add([package_prefix + rel for rel in files])
    commit = repo.index.commit(message)
    return dest, commit.hexsha


def pypi_tree(
    name: str,
    version: str,
    paths: list[str],
    *,
    layout: str = "installed",
    package_prefix: str = "python/",
    dest: Path | None = None,
    cache: Path | None = None,
    wheelhouse: Path | str | None = None,
    trust_new: bool = False,
) -> Path:
    """A pristine tree of ``paths`` (wheel paths) from ``name==version``; cached by default.

    ``layout`` is ``installed`` or ``checkout`` (no git repo; use build_checkout_tree for one).
    A cached tree is rebuilt when a requested file is missing or differs from the wheel.
    """
    if layout not in ("installed", "checkout"):
        raise InvalidInput(f"upstream: layout must be 'installed' or 'checkout', not {layout!r}")
    wheel = fetch_wheel(name, version, cache=cache, wheelhouse=wheelhouse, trust_new=trust_new)
    files = read_wheel_files(wheel.path, paths)
    if dest is None:
        dest = (cache or cache_root()) / "trees" / f"{normalize_name(name)}-{version}" / layout
    dest = Path(dest)
    if layout == "installed":
        build_installed_tree(files, dest, name=name, version=version, dist_info=wheel_dist_info(wheel.path))
    else:
        build_checkout_tree(files, dest, package_prefix=package_prefix)
    return dest


# ----------------------------------------------------------------------------- git clones


def _open_repo(clone: Path):
    import git

    try:
        return git.Repo(clone)
    except (git.NoSuchPathError, git.InvalidGitRepositoryError) as exc:
        raise UpstreamError(f"{clone}: not a git repository") from exc


def resolve_git_rev(clone: Path, rev: str) -> str:
    """The 40-hex commit a tag, branch or commit-ish names in ``clone``."""
    import git

    repo = _open_repo(clone)
    try:
        return repo.commit(rev).hexsha
    except (git.BadName, ValueError, git.GitCommandError) as exc:
        raise UpstreamError(f"{clone}: no commit named {rev!r}") from exc


def read_git_files(clone: Path, rev: str, paths: list[str]) -> tuple[str, dict[str, bytes]]:
    """(commit, {path: bytes}) read from the blobs at ``rev``; the work tree is not touched."""
    repo = _open_repo(clone)
    commit_sha = resolve_git_rev(clone, rev)
    tree = repo.commit(commit_sha).tree
    out: dict[str, bytes] = {}
    for path in paths:
        path = _safe_relpath(path, str(clone))
        try:
            blob = tree / path
        except KeyError as exc:
            raise UpstreamError(f"{clone}@{rev} ({commit_sha[:12]}): no file {path}") from exc
        if blob.type != "blob":
            raise UpstreamError(f"{clone}@{rev}: {path} is not a file")
        out[path] = blob.data_stream.read()
    return commit_sha, out


def git_tree(
    clone: Path,
    rev: str,
    paths: list[str],
    *,
    dest: Path | None = None,
    cache: Path | None = None,
) -> tuple[Path, str]:
    """A pristine tree of ``paths`` at ``rev`` of a local clone: (tree, commit)."""
    commit_sha, files = read_git_files(clone, rev, paths)
    if dest is None:
        dest = (cache or cache_root()) / "trees" / f"git-{commit_sha}"
    _write_files(Path(dest), files)
    return Path(dest), commit_sha


# ----------------------------------------------------------------------------- pin.toml


def pin_from_tree(
    tree: Path,
    paths: list[str] | None,
    name: str,
    version: str | None = None,
    commit: str | None = None,
    package_prefix: str | None = None,
    *,
    pin_path: Path | None = None,
) -> Pin:
    """Hash ``paths`` (checkout paths as in the patches) in ``tree`` into a pin.

    With ``pin_path`` the pin is written there; an existing pin is updated: its file entries
    not named in ``paths`` are kept, named ones replaced, and ``paths=None`` re-pins every file
    it lists. The [upstream] table is rewritten from the arguments (a re-pin to another release
    must not keep the old version or commit by accident).
    """
    if commit is not None and not re.fullmatch(r"[0-9a-f]{40}", commit):
        raise InvalidInput(f"pin: commit must be 40 lowercase hex digits, not {commit!r}")
    existing: list[PinnedFile] = []
    if pin_path is not None and Path(pin_path).is_file():
        existing = list(read_pin(Path(pin_path)).files.values())
    if paths is None:
        if not existing:
            raise InvalidInput("pin: no paths given and no existing pin.toml to re-pin")
        paths = [entry.path for entry in existing]
    fresh: dict[str, PinnedFile] = {}
    for path in paths:
        path = _safe_relpath(path, "pin")
        data = locate_in_tree(Path(tree), path, package_prefix).read_bytes()
        fresh[path] = PinnedFile(path, sha256_bytes(data), count_lines(data))
    files = [fresh.pop(e.path) if e.path in fresh else e for e in existing]
    files += list(fresh.values())
    pin = Pin(name, version, commit, package_prefix, {f.path: f for f in files})
    if pin_path is not None:
        write_pin(pin_path, pin)
    return pin


__all__ = [
    "KNOWN_WHEELS",
    "FetchedWheel",
    "Pin",
    "PinnedFile",
    "UntrustedWheel",
    "UpstreamError",
    "WheelHashMismatch",
    "build_checkout_tree",
    "build_installed_tree",
    "cache_root",
    "check_wheel",
    "count_lines",
    "fetch_wheel",
    "format_pin",
    "git_tree",
    "installed_path",
    "locate_in_tree",
    "pin_from_tree",
    "pypi_tree",
    "read_git_files",
    "read_pin",
    "read_wheel_files",
    "resolve_git_rev",
    "sha256_bytes",
    "wheel_dist_info",
]


# ----------------------------------------------------------------------------- task entry points


def fetch_tree(
    name: str | None = None,
    version: str | None = None,
    paths: list[str] | None = None,
    *,
    series_dir: Path | None = None,
    clone: Path | None = None,
    rev: str | None = None,
    layout: str = "checkout",
    package_prefix: str | None = None,
    dest: Path | None = None,
    wheelhouse: Path | str | None = None,
    trust_new: bool = False,
) -> tuple[Path, str | None]:
    """``upstream.fetch``: a pristine tree from PyPI (by version) or a local clone (by rev).

    With ``series_dir`` the name, version, commit, package_prefix and paths default to the
    series' pin. ``paths`` are checkout paths (as in the patches); for a wheel the
    package_prefix is dropped to find them. Returns (tree, commit): the commit the clone's rev
    resolved to, or None for a wheel.
    """
    pin = read_pin(Path(series_dir) / "pin.toml") if series_dir is not None else None
    if pin is not None:
        name = name or pin.name
        paths = paths or list(pin.files)
        package_prefix = package_prefix if package_prefix is not None else pin.package_prefix
    if clone is not None:
        rev = rev or (pin.commit if pin else None) or (f"v{version}" if version else None)
        if not rev or not paths:
            raise InvalidInput("upstream.fetch from a clone needs a rev (or a pinned commit) and paths")
        tree, commit = git_tree(clone, rev, list(paths), dest=dest)
        return tree, commit
    if pin is not None:
        version = version or pin.version
    if not name or not version or not paths:
        raise InvalidInput(
            "upstream.fetch from PyPI needs a name, a version and paths "
            "(or --series with a pin that has them)"
        )
    prefix = package_prefix if package_prefix is not None else "python/"
    wheel_paths = [installed_path(p, prefix) for p in paths]
    tree = pypi_tree(
        name,
        version,
        wheel_paths,
        layout=layout,
        package_prefix=prefix,
        dest=dest,
        wheelhouse=wheelhouse,
        trust_new=trust_new,
    )
    return tree, None


def pin_series(
    series_dir: Path,
    tree: Path,
    paths: list[str] | None = None,
    *,
    name: str | None = None,
    version: str | None = None,
    commit: str | None = None,
    package_prefix: str | None = None,
) -> Pin:
    """``upstream.pin``: write or update ``<series>/pin.toml`` from a pristine tree.

    Name and package_prefix default to the existing pin. Its version and commit are kept
    only while the files hash the same: when a file changed, the new version and/or commit
    must be given (a pin must not keep naming the old release).
    """
    pin_path = Path(series_dir) / "pin.toml"
    old = read_pin(pin_path) if pin_path.is_file() else None
    if old is not None:
        name = name or old.name
        package_prefix = package_prefix if package_prefix is not None else old.package_prefix
    if not name:
        raise InvalidInput(f"{pin_path}: no existing pin; give the upstream name")
    fresh = pin_from_tree(
        tree, paths if paths else (list(old.files) if old else None), name, version, commit, package_prefix
    )
    if old is not None and version is None and commit is None:
        before = {f.path: f.sha256 for f in old.files.values()}
        moved = [f.path for f in fresh.files.values() if before.get(f.path, f.sha256) != f.sha256]
        if moved:
            raise InvalidInput(
                f"{pin_path}: {', '.join(moved)} changed; give --version and/or --commit "
                "of the upstream these files come from"
            )
        version, commit = old.version, old.commit
    return pin_from_tree(tree, paths or None, name, version, commit, package_prefix, pin_path=pin_path)

"""A second release in the same device call: its carried site as a file-level delta against another's.

    python3 bench/gpu/carry_delta.py build BASE_CARRY NEW_CARRY OUT_DIR     (on the CPU machine)
    python3 bench/gpu/carry_delta.py apply BASE_SITE DELTA_DIR NEW_SITE     (on the GPU machine)

``build`` reads two ``.carry-site`` folders of bench/gpu/build_carry.sh (site.tar.xz, RELEASE)
and writes OUT_DIR/delta.tar.xz (every file of the new site that the base lacks or holds with
other bytes), OUT_DIR/gone.txt (the files and folders of the base that the new site lacks) and
OUT_DIR/RELEASE and OUT_DIR/BASE. Two releases that share their sglang-kernel (0.5.14 and
0.5.15) differ by 7 MB, against 35 MB for a whole site: both fit one call's 64 MiB.

``apply`` copies the unpacked base site (run_h200.sh's /tmp/site-BASE, taken before a patch is
applied to it), removes what gone.txt names and every __pycache__, unpacks the delta, checks
that the release's dist-info is there, and marks NEW_SITE unpacked (run_h200.sh's setup then
leaves it as it is). The flashinfer data (.carry-fi) is not in the delta: it is copied with the
base, so the two releases must pin the same flashinfer (``build`` refuses otherwise).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path


def _tree(root: Path) -> tuple[dict[str, str], set[str]]:
    files: dict[str, str] = {}
    dirs: set[str] = set()
    for dirpath, dirnames, filenames in os.walk(root):
        for d in dirnames:
            dirs.add(os.path.relpath(os.path.join(dirpath, d), root))
        for f in filenames:
            p = os.path.join(dirpath, f)
            rel = os.path.relpath(p, root)
            if os.path.islink(p):
                files[rel] = "link:" + os.readlink(p)
            else:
                with open(p, "rb") as fh:
                    files[rel] = hashlib.sha256(fh.read()).hexdigest()
    return files, dirs


def _flashinfer(files: dict[str, str]) -> set[str]:
    return {
        p.split("/")[0]
        for p in files
        if p.startswith("flashinfer_python-") and p.endswith(".dist-info/METADATA")
    }


def build(base_carry: Path, new_carry: Path, out: Path) -> int:
    base_rel = (base_carry / "RELEASE").read_text().strip()
    new_rel = (new_carry / "RELEASE").read_text().strip()
    with tempfile.TemporaryDirectory() as tmp:
        trees = {}
        for name, carry in (("base", base_carry), ("new", new_carry)):
            root = Path(tmp) / name
            root.mkdir()
            with tarfile.open(carry / "site.tar.xz") as tar:
                tar.extractall(root, filter="fully_trusted")
            trees[name] = (root, *_tree(root))
        (_, bfiles, bdirs), (new, nfiles, ndirs) = trees["base"], trees["new"]
        if _flashinfer(bfiles) != _flashinfer(nfiles):
            print(
                f"carry_delta: {base_rel} and {new_rel} pin other flashinfers "
                f"({sorted(_flashinfer(bfiles))} / {sorted(_flashinfer(nfiles))}): carry {new_rel} whole"
            )
            return 2
        changed = sorted(p for p, h in nfiles.items() if bfiles.get(p) != h)
        gone = sorted(set(bfiles) - set(nfiles)) + sorted(bdirs - ndirs, key=lambda d: -d.count("/"))
        out.mkdir(parents=True, exist_ok=True)
        with tarfile.open(out / "delta.tar.xz", "w:xz", preset=6) as tar:
            for p in changed:
                tar.add(new / p, arcname=p, recursive=False)
        (out / "gone.txt").write_text("".join(g + "\n" for g in gone))
        (out / "RELEASE").write_text(new_rel + "\n")
        (out / "BASE").write_text(base_rel + "\n")
    size = (out / "delta.tar.xz").stat().st_size
    print(
        f"carry_delta: {new_rel} over {base_rel}: {len(changed)} files ({size >> 20} MiB), {len(gone)} gone"
    )
    return 0


def apply(base_site: Path, delta: Path, new_site: Path) -> int:
    release = (delta / "RELEASE").read_text().strip()
    if not (base_site / ".unpacked").is_file():
        print(
            f"carry_delta: {base_site} is not an unpacked site (run setup for {(delta / 'BASE').read_text().strip()})"
        )
        return 2
    if new_site.exists():
        shutil.rmtree(new_site)
    shutil.copytree(base_site, new_site, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
    for rel in (delta / "gone.txt").read_text().splitlines():
        p = new_site / rel
        if p.is_symlink() or p.is_file():
            p.unlink()
        elif p.is_dir():
            shutil.rmtree(p)
    with tarfile.open(delta / "delta.tar.xz") as tar:
        tar.extractall(new_site, filter="fully_trusted")
    if not (new_site / f"sglang-{release}.dist-info").is_dir():
        print(f"carry_delta: {new_site} holds no sglang-{release}.dist-info after the delta")
        return 1
    (new_site / ".unpacked").touch()
    print(f"carry_delta: {new_site}: sglang {release} from {base_site} and {delta / 'delta.tar.xz'}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("base", type=Path)
    b.add_argument("new", type=Path)
    b.add_argument("out", type=Path)
    a = sub.add_parser("apply")
    a.add_argument("base_site", type=Path)
    a.add_argument("delta", type=Path)
    a.add_argument("new_site", type=Path)
    args = ap.parse_args(argv)
    if args.cmd == "build":
        return build(args.base, args.new, args.out)
    return apply(args.base_site, args.delta, args.new_site)


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Symbol-level check, on a CPU machine, of whether an SGLang release's compiled extensions can
load on another torch than the one the release pins (the GPU image has torch 2.11.0+cu130;
SGLang 0.5.18+ pin torch 2.13.0 / 2.14.1).

For each RELEASE given on the command line:
  1. download the sglang wheel (cp312, manylinux x86_64, no deps) and read its Requires-Dist pins:
     torch, sglang-kernel, sgl-deep-gemm, flashinfer_python;
  2. download each pinned wheel that may hold compiled extensions (one at a time), extract its .so
     files, record for each: DT_NEEDED, the undefined dynamic symbols (strong / weak, in the
     order of the dynamic relocations: .rela.dyn then .rela.plt, the order in which ld.so resolves
     them under RTLD_NOW, which CPython's import uses) and torch-version strings; then delete the
     wheel and the .so files (the record is kept as JSON);
  3. download torch (the image's 2.11.0 and the release's own pin), record the dynamic symbols
     exported by torch/lib/lib{c10,torch,shm,caffe2}*.so (libgomp left out: third party) and the
     library names; delete the wheel;
  4. the "libtorch symbols" an extension needs: its strong undefined symbols that either torch
     exports, plus any in the c10:: / at:: / torch:: / caffe2:: namespaces that neither exports.
     Print how many, and which of them torch 2.11.0 and the release's own torch do not export
     (the first 20, demangled), and the one ld.so would report first ("undefined symbol: ...").
  5. with --dlopen: really dlopen (RTLD_NOW, CPython 3.12, as `import` does) the extensions a
     Hopper server loads at start (sgl_kernel/sm90/common_ops, deep_gemm/_C, sglang's own
     torch-linking .so) against each torch's real torch/lib, with the real ld.so; only the
     libraries neither torch nor the system provides (CUDA runtime, cuBLAS, cuDNN, NCCL, NVSHMEM,
     tvm-ffi...) are stubs, and the stubs never define a torch symbol. Prints ld.so's own message.
  The VERDICT line covers those start-up extensions (sm90 common_ops, deep_gemm, sglang's own).

This is a link-level check only: same symbol names do not prove the same class layouts or
inline-function behaviour, so "no missing symbol" means "passes the dynamic loader", not "works".

Usage (from the repository root):
  .venv/bin/python bench/gpu/abi_check.py 0.5.17 0.5.18 0.5.21 0.5.22 0.5.23 [--json out.json]
  options: --image-torch 2.11.0 (the torch to test against), --cache DIR (default .cache/abi),
           --all (print every .so, not only those that link libtorch), --dlopen (step 5; needs
           gcc and a CPython 3.12, --python PATH; keeps ~1 GB of torch libraries per torch)
Idempotent: the sglang wheels (~30 MB each) and the JSON records stay in the cache; the big
wheels (sglang-kernel ~400 MB, torch ~530 MB+) are deleted after extraction.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PLATFORMS = [
    "manylinux_2_35",
    "manylinux_2_34",
    "manylinux_2_31",
    "manylinux_2_28",
    "manylinux_2_27",
    "manylinux_2_26",
    "manylinux_2_24",
    "manylinux_2_17",
    "manylinux2014",
    "manylinux_2_5",
    "manylinux1",
]
# pinned packages whose wheels are checked for compiled extensions
CHECKED = ["sglang-kernel", "sgl-deep-gemm", "flashinfer_python"]
TORCH_LIB = re.compile(r"^lib(c10|torch|shm|caffe2)[\w.]*\.so")
TORCH_NS = re.compile(r"^_Z(?:T[VIS])?N[KVRO]*(?:3c10|2at|5torch|6caffe2)")
# the C++ runtime's own symbols (std::, the ABI support): libtorch re-exports some std::string
# instantiations, but libstdc++.so.6 provides them whatever the torch, so they are not counted
CXX_RUNTIME = re.compile(r"^(_Z(?:T[VIS]|GV)?N?[KVRO]*S[tabsiod]|_ZTVN10__cxxabiv|__cxa_|__gxx_|_Unwind_)")
RECORD_SCHEMA = 2
TORCH_STR = re.compile(rb"(?i)(torch|pytorch)[^\n]{0,40}?\b2\.\d+\.\d+|\b2\.\d+\.\d+\+cu\d+")
# which sgl_kernel .so are loaded where (sgl_kernel/__init__.py + load_utils.py)
ROLE = {
    "sgl_kernel/sm90/common_ops": "import, sm90 (H100/H200): required",
    "sgl_kernel/sm100/common_ops": "import, non-sm90 GPU or none: required",
    "sgl_kernel/common_ops": "import fallback",
    "sgl_kernel/flash_ops": "FA3 (try/except at import)",
    "sgl_kernel/flashmla_ops": "FlashMLA (try/except at import)",
    "sgl_kernel/spatial_ops": "spatial (try/except at import)",
    "deep_gemm/_C": "import deep_gemm",
}


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def sh(*cmd: str) -> str:
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def pip_download(spec: str, dest: Path) -> Path:
    """Download one wheel (no deps) for CPython 3.12 / manylinux x86_64; return its path."""
    name = norm(spec.split("==")[0])
    ver = spec.split("==")[1] if "==" in spec else None

    def found():
        for w in sorted(dest.glob("*.whl")):
            parts = w.name.split("-")
            if norm(parts[0]) == name and (ver is None or parts[1] == ver):
                return w
        return None

    if (w := found()) is not None:
        return w
    dest.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "-q",
        "--no-deps",
        "--only-binary=:all:",
        "--python-version",
        "3.12",
        "--implementation",
        "cp",
        "-d",
        str(dest),
    ]
    for p in PLATFORMS:
        cmd += ["--platform", f"{p}_x86_64"]
    print(f"  downloading {spec} ...", file=sys.stderr, flush=True)
    subprocess.run(["nice", *cmd, spec], check=True, stdout=subprocess.DEVNULL)
    if (w := found()) is None:
        raise SystemExit(f"pip downloaded no wheel for {spec} into {dest}")
    return w


def release_pins(release: str, cache: Path) -> dict:
    whl = pip_download(f"sglang=={release}", cache / "meta" / release)
    with zipfile.ZipFile(whl) as z:
        meta = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode()
        own_so = [n for n in z.namelist() if n.endswith(".so")]
    pins = {}
    for line in meta.splitlines():
        m = re.match(r"Requires-Dist: ([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?==([^ ;,]+)\s*(;.*)?$", line)
        if m and norm(m[1]) not in pins and not (m[3] and "extra ==" in m[3]):
            pins[norm(m[1])] = m[2]
    return {"wheel": whl.name, "pins": pins, "own_so": own_so}


# ---------------------------------------------------------------- shared-object records


def analyze_so(path: Path) -> dict:
    dyn = sh("readelf", "-dW", str(path))
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dyn)
    runpath = re.findall(r"\((?:RUNPATH|RPATH)\)\s+Library (?:runpath|rpath): \[([^\]]+)\]", dyn)
    strong, weak = set(), set()
    for line in sh("nm", "-D", "--undefined-only", str(path)).splitlines():
        f = line.split()
        if len(f) == 2:
            (strong if f[0] == "U" else weak).add(f[1].split("@")[0])
    # relocation order: readelf -r prints .rela.dyn, then .rela.plt, as ld.so processes them
    order, seen = [], set()
    p = subprocess.Popen(["readelf", "-rW", str(path)], stdout=subprocess.PIPE, text=True)
    for line in p.stdout:
        f = line.split()
        if len(f) >= 5 and f[2].startswith("R_X86_64") and f[2] != "R_X86_64_RELATIVE":
            s = f[4].split("@")[0]
            if s in strong and s not in seen:
                seen.add(s)
                order.append(s)
    p.wait()
    order += sorted(strong - seen)
    strs = set()
    p = subprocess.Popen(["strings", "-n", "6", str(path)], stdout=subprocess.PIPE)
    for line in p.stdout:
        if TORCH_STR.search(line) and len(strs) < 20:
            strs.add(line.strip()[:160].decode(errors="replace"))
    p.wait()
    # the newest symbol version each system library family is asked for (GLIBC_, GLIBCXX_, ...)
    verneed: dict[str, str] = {}
    for m in re.finditer(r"Name: ([A-Z_]+?)_(\d+(?:\.\d+)*)\s", sh("readelf", "-VW", str(path))):
        fam, v = m[1], m[2]
        if fam not in verneed or tuple(map(int, v.split("."))) > tuple(map(int, verneed[fam].split("."))):
            verneed[fam] = v
    return {
        "needed": needed,
        "runpath": runpath,
        "undefined": order,
        "weak": sorted(weak),
        "torch_strings": sorted(strs),
        "verneed": verneed,
    }


def package_record(spec: str, cache: Path) -> dict:
    """{so path in wheel: analyze_so(...)} for one pinned wheel; cached as JSON."""
    rec_path = cache / "records" / f"{norm(spec.replace('==', '-'))}.json"
    if rec_path.exists():
        rec = json.loads(rec_path.read_text())
        if rec.get("schema") == RECORD_SCHEMA:
            return rec
    tmp = Path(tempfile.mkdtemp(prefix="dl-", dir=cache))
    try:
        whl = pip_download(spec, tmp)
        rec = {"schema": RECORD_SCHEMA, "wheel": whl.name, "so": {}}
        with zipfile.ZipFile(whl) as z:
            sos = [n for n in z.namelist() if n.endswith(".so") or ".so." in n.rsplit("/", 1)[-1]]
            for n in sos:
                out = tmp / "x" / n
                out.parent.mkdir(parents=True, exist_ok=True)
                with z.open(n) as src, open(out, "wb") as dst:
                    shutil.copyfileobj(src, dst, 1 << 20)
                rec["so"][n] = analyze_so(out)
                out.unlink()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    rec_path.parent.mkdir(parents=True, exist_ok=True)
    rec_path.write_text(json.dumps(rec))
    return rec


def torch_exports(version: str, cache: Path) -> tuple[set[str], dict]:
    """Symbols exported by torch==version's torch/lib/lib{c10,torch,shm,caffe2}*.so."""
    sym_path = cache / "records" / f"torch-{version}.syms.gz"
    info_path = cache / "records" / f"torch-{version}.json"
    if not (sym_path.exists() and info_path.exists()):
        tmp = Path(tempfile.mkdtemp(prefix="dl-", dir=cache))
        try:
            whl = pip_download(f"torch=={version}", tmp)
            syms: set[str] = set()
            info = {"wheel": whl.name, "libs": {}}
            with zipfile.ZipFile(whl) as z:
                for n in z.namelist():
                    if n == "torch/version.py":
                        m = re.search(r"__version__ = '([^']+)'", z.read(n).decode())
                        info["version"] = m[1] if m else None
                    base = n.rsplit("/", 1)[-1]
                    if not (n.startswith("torch/lib/") and TORCH_LIB.match(base)):
                        continue
                    out = tmp / base
                    with z.open(n) as src, open(out, "wb") as dst:
                        shutil.copyfileobj(src, dst, 1 << 20)
                    lib = set()
                    for line in sh("nm", "-D", "--defined-only", str(out)).splitlines():
                        f = line.split()
                        if len(f) == 3:
                            lib.add(f[2].split("@")[0])
                    info["libs"][base] = len(lib)
                    syms |= lib
                    out.unlink()
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        sym_path.parent.mkdir(parents=True, exist_ok=True)
        with gzip.open(sym_path, "wt") as f:
            f.write("\n".join(sorted(syms)) + "\n")
        info_path.write_text(json.dumps(info))
    with gzip.open(sym_path, "rt") as f:
        syms = set(f.read().split())
    return syms, json.loads(info_path.read_text())


def demangle(names: list[str]) -> list[str]:
    if not names:
        return []
    out = subprocess.run(
        ["c++filt"], input="\n".join(names) + "\n", capture_output=True, text=True, check=True
    ).stdout.splitlines()
    return out


# ---------------------------------------------------------------- the real loader (--dlopen)


def extract(spec: str, want, dest: Path, cache: Path, done: str = ".done") -> Path:
    """Extract the wheel members for which want(name) holds under dest (kept; skipped when
    dest/done exists: pass the one member wanted, or leave the default marker)."""
    if (dest / done).exists():
        return dest
    tmp = Path(tempfile.mkdtemp(prefix="dl-", dir=cache))
    try:
        whl = pip_download(spec, tmp)
        with zipfile.ZipFile(whl) as z:
            for n in z.namelist():
                if want(n):
                    out = dest / n
                    out.parent.mkdir(parents=True, exist_ok=True)
                    with z.open(n) as src, open(out, "wb") as dst:
                        shutil.copyfileobj(src, dst, 1 << 20)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if done == ".done":
        (dest / done).touch()
    return dest


def system_libs() -> dict[str, str]:
    libs = {}
    for line in sh("/sbin/ldconfig", "-p").splitlines():
        m = re.match(r"\s+(\S+) \(libc6,x86-64[^)]*\) => (\S+)", line)
        if m and m[1] not in libs:
            libs[m[1]] = m[2]
    return libs


def dyn_syms(path: Path, defined: bool) -> set[str]:
    out = sh("nm", "-D", "--defined-only" if defined else "--undefined-only", str(path))
    return {f[-1].split("@")[0] for f in map(str.split, out.splitlines()) if f}


def dlopen_test(so: Path, torch_lib: Path, torchy, python: str, work: Path) -> str:
    """dlopen(so, RTLD_NOW) in `python` with LD_LIBRARY_PATH=torch_lib: the real ld.so, this
    torch's real libraries. Only libraries that are neither torch's nor the system's (CUDA, cuDNN,
    NCCL, tvm-ffi...) are replaced by stubs, which define every symbol the load asks of them,
    except any torch symbol (torchy): those must come from torch_lib, as on the image."""
    sysl = system_libs()
    todo, seen, objs, absent = [so], set(), [], set()
    while todo:
        p = todo.pop()
        objs.append(p)
        for n in re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", sh("readelf", "-dW", str(p))):
            if n in seen:
                continue
            seen.add(n)
            if (torch_lib / n).exists():
                todo.append(torch_lib / n)
            elif n not in sysl:
                absent.add(n)
    defined = set()
    for p in objs[1:]:
        defined |= dyn_syms(p, True)
    for n in seen & sysl.keys():
        defined |= dyn_syms(Path(sysl[n]), True)
    wanted, vers, symver = set(), {}, {}
    for p in objs:
        wanted |= dyn_syms(p, False)
        # the symbol versions the load asks of each library (cudaMalloc@libcudart.so.13, ...@NVSHMEM)
        f = None
        for line in sh("readelf", "-VW", str(p)).splitlines():
            if m := re.search(r"File: (\S+)", line):
                f = m[1]
            elif (m := re.search(r"^\s+0x\w+:\s+Name: (\S+)", line)) and f:
                vers.setdefault(f, set()).add(m[1])
        for line in sh("nm", "-D", "--undefined-only", str(p)).splitlines():
            if "@" in line:
                sym, v = line.split()[-1].split("@", 1)
                symver.setdefault(v.lstrip("@"), set()).add(sym)
    stub = sorted(s for s in wanted - defined if not torchy(s))
    stubset = set(stub)
    stubs = Path(tempfile.mkdtemp(prefix="stubs-", dir=work))
    try:
        asm = stubs / "stub.s"
        asm.write_text(
            "".join(f'.globl "{s}"\n.type "{s}",@function\n"{s}":\nxor %eax,%eax\nret\n' for s in stub)
        )
        for n in absent:
            # the symbol versions asked of it (NVIDIA's libraries version their symbols:
            # cudaMalloc@libcudart.so.13, nvshmem...@NVSHMEM); the rest in the first one
            nodes = sorted(vers.get(n, ())) or [n]
            (stubs / f"{n}.map").write_text(
                "".join(
                    f"{v} {{ global: {'*;' if i == 0 else ''}"
                    + "".join(f' "{x}";' for x in sorted(symver.get(v, set()) & stubset))
                    + " };\n"
                    for i, v in enumerate(nodes)
                )
            )
            r = subprocess.run(
                [
                    "gcc",
                    "-shared",
                    "-nostdlib",
                    "-o",
                    str(stubs / n),
                    f"-Wl,-soname,{n}",
                    f"-Wl,--version-script={stubs / n}.map",
                    str(asm),
                ],
                capture_output=True,
                text=True,
            )
            if r.returncode:
                raise SystemExit(f"stub {n}: {r.stderr[-2000:]}\n{(stubs / f'{n}.map').read_text()[:2000]}")
        code = (
            "import ctypes, sys\n"
            f"ctypes.CDLL({str(so)!r}, mode=sys.getdlopenflags())\n"
            "print('dlopen OK (flags %d)' % sys.getdlopenflags())"
        )
        r = subprocess.run(
            [python, "-c", code],
            capture_output=True,
            text=True,
            env={"PATH": "/usr/bin:/bin", "LD_LIBRARY_PATH": f"{torch_lib}:{stubs}"},
        )
    finally:
        shutil.rmtree(stubs, ignore_errors=True)
    if r.returncode == 0:
        return r.stdout.strip().splitlines()[-1]
    err = (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[-1]
    return err.replace(str(so.parent) + "/", "")


# ---------------------------------------------------------------- the check


def role(so: str) -> str:
    stem = so.split(".")[0]
    if stem in ROLE:
        return ROLE[stem]
    if "cpython-310" in so:
        return "CPython 3.10 only (not loadable on 3.12)"
    return "sglang's own extension" if not so.startswith(("sgl_kernel/", "deep_gemm/")) else "other"


def torchy_for(torches: dict[str, set[str]]):
    exported_any = set().union(*torches.values())

    def torchy(s):
        return bool((s in exported_any or TORCH_NS.match(s)) and not CXX_RUNTIME.match(s))

    return torchy


def loaded_at_import(spec: str, so: str) -> bool:
    """The .so a Hopper server loads whatever it serves: sm90 common_ops, deep_gemm's _C, and
    sglang's own extensions."""
    return so.split(".")[0] in ("sgl_kernel/sm90/common_ops", "deep_gemm/_C") or (
        spec.startswith("sglang==") and "cpython-310" not in so
    )


def check_so(rec: dict, torches: dict[str, set[str]], libs: dict[str, dict]) -> dict:
    torchy = torchy_for(torches)
    need = [s for s in rec["undefined"] if torchy(s)]
    weak_need = [s for s in rec["weak"] if torchy(s)]
    res = {
        "needed_torch_libs": [n for n in rec["needed"] if TORCH_LIB.match(n)],
        "n_need": len(need),
        "n_weak": len(weak_need),
        "missing": {},
        "missing_libs": {},
        "torch_strings": rec["torch_strings"],
        "verneed": rec.get("verneed", {}),
    }
    for ver, syms in torches.items():
        res["missing"][ver] = [s for s in need if s not in syms]
        res["missing_libs"][ver] = [n for n in res["needed_torch_libs"] if n not in libs[ver]["libs"]]
    return res


def find_python312() -> str:
    """A real CPython 3.12 binary (pyenv shims refuse versions not selected), else this one."""
    cands = [shutil.which("python3.12")] + sorted(Path.home().glob(".pyenv/versions/3.12*/bin/python3.12"))
    for c in cands:
        if c:
            r = subprocess.run(
                [str(c), "-c", "import sys; print(sys.executable, sys.version_info[:2])"],
                capture_output=True,
                text=True,
            )
            if r.returncode == 0 and r.stdout.split(" ", 1)[1].strip() == "(3, 12)":
                return r.stdout.split(" ", 1)[0]
    return sys.executable


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("releases", nargs="+")
    ap.add_argument("--image-torch", default="2.11.0")
    ap.add_argument("--cache", type=Path, default=ROOT / ".cache" / "abi")
    ap.add_argument("--all", action="store_true", help="show every .so, not only libtorch users")
    ap.add_argument("--json", type=Path, help="write the results here as JSON")
    ap.add_argument(
        "--dlopen",
        action="store_true",
        help="also dlopen the .so that `import sgl_kernel` (on sm90) / deep_gemm / sglang"
        " load, with the real ld.so and each torch's real libraries (CUDA libraries"
        " stubbed); keeps the torch libraries (~1 GB each) under CACHE/dlopen",
    )
    ap.add_argument(
        "--python",
        default=None,
        help="interpreter for --dlopen (the wheels are cp312; default: a CPython 3.12)",
    )
    args = ap.parse_args()
    if args.dlopen and not args.python:
        args.python = find_python312()
    args.cache.mkdir(parents=True, exist_ok=True)
    results = {}
    for release in args.releases:
        meta = release_pins(release, args.cache)
        pins = meta["pins"]
        own_torch = pins.get("torch")
        tv = [args.image_torch] + ([own_torch] if own_torch and own_torch != args.image_torch else [])
        torches, libs = {}, {}
        for v in tv:
            torches[v], libs[v] = torch_exports(v, args.cache)
        print(
            f"== sglang {release}: torch=={own_torch}, "
            + ", ".join(f"{p}=={pins[norm(p)]}" for p in CHECKED if norm(p) in pins)
        )
        print(
            "   torch builds: "
            + ", ".join(f"{v} = {libs[v].get('version')} ({libs[v]['wheel']})" for v in tv)
        )
        if meta["own_so"]:
            print(
                f"   (the sglang wheel itself holds {len(meta['own_so'])} .so: those linking libtorch"
                " are listed below)"
            )
        out = {"release": release, "torch_pin": own_torch, "pins": {}, "so": {}}
        pkgs = [(p, pins[norm(p)]) for p in CHECKED if norm(p) in pins]
        recs = [(f"{p}=={v}", package_record(f"{p}=={v}", args.cache)) for p, v in pkgs]
        if meta["own_so"]:
            recs.insert(0, (f"sglang=={release}", package_record(f"sglang=={release}", args.cache)))
        for spec, rec in recs:
            out["pins"][spec] = rec["wheel"]
            if not rec["so"]:
                print(f"   {spec}: {rec['wheel']}: no compiled extension in the wheel")
                continue
            for so, r in rec["so"].items():
                c = check_so(r, torches, libs)
                out["so"][f"{spec}:{so}"] = {**c, "role": role(so)}
                if not (c["n_need"] or c["needed_torch_libs"]) and not args.all:
                    continue
                miss = {v: len(c["missing"][v]) for v in tv}
                print(f"   {spec} {so} [{role(so)}]")
                print(
                    f"      DT_NEEDED torch libs: {' '.join(c['needed_torch_libs']) or '-'}; "
                    f"libtorch symbols needed: {c['n_need']} (+{c['n_weak']} weak); "
                    + "; ".join(f"missing from torch {v}: {miss[v]}" for v in tv)
                )
                for v in tv:
                    if c["missing_libs"][v]:
                        print(f"      torch {v} lacks library {c['missing_libs'][v]}")
                    if c["missing"][v]:
                        first = c["missing"][v][0]
                        print(f"      on torch {v} ld.so would stop at: undefined symbol: {first}")
                        for d in demangle(c["missing"][v][:20]):
                            print(f"        {d}")
                        if len(c["missing"][v]) > 20:
                            print(f"        ... and {len(c['missing'][v]) - 20} more")
                if c["verneed"]:
                    print(
                        "      system symbol versions asked for (newest): "
                        + ", ".join(f"{k}_{v}" for k, v in sorted(c["verneed"].items()))
                    )
                if c["torch_strings"]:
                    print(f"      torch-version strings: {c['torch_strings'][:5]}")
                if args.dlopen and loaded_at_import(spec, so):
                    k = extract(
                        spec,
                        lambda n, so=so: n == so,
                        args.cache / "dlopen" / norm(spec.replace("==", "-")),
                        args.cache,
                        so,
                    )
                    out["so"][f"{spec}:{so}"]["dlopen"] = {}
                    for v in tv:
                        t = extract(
                            f"torch=={v}",
                            lambda n: n.startswith("torch/lib/") and ".so" in n,
                            args.cache / "dlopen" / f"torch-{v}",
                            args.cache,
                        )
                        msg = dlopen_test(
                            k / so, t / "torch" / "lib", torchy_for(torches), args.python, args.cache
                        )
                        out["so"][f"{spec}:{so}"]["dlopen"][v] = msg
                        print(f"      dlopen on torch {v} ({Path(args.python).name}, RTLD_NOW): {msg}")
        # the verdict: the extensions a Hopper server cannot start without
        gate = {k: c for k, c in out["so"].items() if loaded_at_import(*k.split(":", 1))}
        for v in tv:
            bad = [(k, c["missing"][v][0]) for k, c in gate.items() if c["missing"][v]]
            out.setdefault("verdict", {})[v] = (
                "loads as far as symbols go"
                if not bad
                else "cannot load: "
                + "; ".join(f"{k.split(':', 1)[1]}: undefined symbol: {m}" for k, m in bad)
            )
            print(f"   VERDICT on torch {v}: {out['verdict'][v]}")
        results[release] = out
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

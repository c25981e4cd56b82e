"""Every example command of README.md and docs/*.md runs, so that an example cannot rot.

The examples are the fenced shell blocks (```sh, ```bash, ```shell, ```console). Each file's
blocks run in order in one bash session (a reader keeps ``T=...`` from one block to the next),
``set -euo pipefail``, in a folder of its own that looks like the checkout (``tasks.py``,
``patches/``, ``tests/`` linked, so ``invoke`` and relative paths work as written) with this
venv's ``invoke``/``patchkit`` first on PATH. What the examples need and this machine lacks is
stood in for, by rules a reader can check below (EXAMPLE_HOSTS, the ``invoke.yaml`` of
STANDIN_CONFIG, the ``python`` shim of SHIM), not by editing a block's text:

- a host (``gpu1:/opt/...``, ``ssh://gpu3/opt/...``) is a local folder under ``hosts/<host>/``
  holding the pinned files of the release the example expects (0.5.9; 0.5.14 where the example
  names that series); the patch tasks treat a local folder and an SSH target alike, and the SSH
  transport has its own tests;
- the SGLang server and benchmark are the tests' stand-ins (tests/support/standin_server.py):
  ``profile.remote``'s commands come from the folder's ``invoke.yaml``, as the README says they
  do, and ``python -m sglang.launch_server`` / ``python -m sglang.bench_serving`` reach the
  stand-ins through a ``python`` shim on PATH;
- fixed places an example names (port 30000, ``/tmp/demo``, ``/tmp/pk-timing``) move into the
  folder (another run of the suite may hold them), and ``<stamp>`` is the one run folder there;
- an instruction written as a comment that a script cannot follow by itself ("stop the server")
  becomes the command it describes (INSTRUCTIONS).

A block that cannot run here is listed in NOT_RUNNABLE with the reason; a block that is neither
run nor listed fails the test, and so does a listed block that no longer exists.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from support.sshd import free_port

pytestmark = [pytest.mark.slow, pytest.mark.wheels]

REPO = Path(__file__).resolve().parents[2]
STANDIN = REPO / "tests" / "support" / "standin_server.py"
SHELL_LANGS = {"sh", "bash", "shell", "console"}
DOCS = ["README.md", *sorted(p.relative_to(REPO).as_posix() for p in (REPO / "docs").glob("*.md"))]

# a block (its first line) -> why it does not run here
NOT_RUNNABLE = {
    "make profile-run   # the main job on its embedded default: apply -> run -> collect -> revert -> report": (
        "make profile-run is invoke profile.run (tests/profile/test_profile_default.py runs it); make test "
        "and make test-fast run this suite, which holds this test"
    ),
    'invoke profile.remote ... --server "... --speculative-num-steps 5 ..." --sample 1 --out runs/a   # one profiled run': (
        "its arguments are elided (...); the README's quick-start block runs the same three steps in full"
    ),
}

# host:/path and ssh://host/path in the examples -> the release of the pinned files there
EXAMPLE_HOSTS = {
    "gpu1/opt/venv/lib/python3.12/site-packages": "sglang-v0.5.9",
    "gpu2/opt/venv/lib/python3.12/site-packages": "sglang-v0.5.9",
    "gpu1/opt/sglang": "sglang-v0.5.9",
    "gpu2/opt/sglang": "sglang-v0.5.9",
    "gpu3/opt/sglang": "sglang-v0.5.14",
}
HOST_SPEC = re.compile(r"(?:ssh://)?\b(gpu\d)(?::|(?=/))(/opt/[\w./-]+)")

# comments that stand for a step -> the step
INSTRUCTIONS = {
    "# stop the server (its ranks flush on exit), then": 'kill -INT "$!" && { wait "$!" || true; }',
}

STANDIN_CONFIG = """\
patchkit:
  profile:
    remote:
      server_command: >-
        PYTHONPATH="$PATCHKIT_TARGET_ROOT" exec python3 {standin} serve --port {port}
        --speculative-algorithm EAGLE --speculative-num-steps 5 --speculative-eagle-topk 1
      bench_command: python3 {standin} bench --port {port} --requests 4 --cycles 12 --noise 0.02 --seed-file {root}/seed
      port: {port}
      poll_s: 0.1
      health_timeout_s: 30
      stop_grace_s: 3
      timer_sample: 1
      warmup: false
      repeat: 2
      spread_cache: "off"
"""

# python -m sglang.launch_server / bench_serving -> the stand-ins (the server imports the
# runtime from the host the example patched: hosts/gpu1's site-packages)
SHIM = """\
#!/bin/sh
case "$1 $2" in
  "-m sglang.launch_server")
    shift 2
    # a job the script starts with & ignores SIGINT, and a Python started so keeps ignoring it:
    # the default handler back, so that "stop the server" (INT) ends it as Ctrl-C would
    PATCHKIT_TARGET_ROOT={site} PYTHONPATH={site} exec python3 -c \
      'import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); sys.argv[0] = sys.argv[1]; del sys.argv[1]; runpy.run_path(sys.argv[0], run_name="__main__")' \
      {standin} serve "$@" ;;
  "-m sglang.bench_serving")
    shift 2
    port=""
    set -- "$@" --end
    while [ "$1" != --end ]; do  # bench_serving's options the stand-in lacks (its load) dropped
      case "$1" in
        --backend|--num-prompts) shift 2 ;;
        --port) port=$2; set -- "$@" "$1" "$2"; shift 2 ;;
        *) set -- "$@" "$1"; shift ;;
      esac
    done
    shift
    python3 - "$port" <<'EOF'
import sys, time, urllib.request
for _ in range(300):  # a reader starts the benchmark once the server is up
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{{sys.argv[1]}}/health", timeout=1)
        break
    except OSError:
        time.sleep(0.1)
EOF
    exec python3 {standin} bench --requests 4 "$@" ;;
esac
exec python3 "$@"
"""


def shell_blocks(doc: str) -> list[str]:
    """The fenced shell blocks of a file, in order (their text, continuation lines kept)."""
    text = (REPO / doc).read_text(encoding="utf-8")
    blocks = []
    for m in re.finditer(r"^```(\w*)\n(.*?)^```", text, re.M | re.S):
        body = m.group(2)
        if m.group(1) in SHELL_LANGS:
            blocks.append(body)
        elif not m.group(1):
            # an untagged block must not be a command a reader would run (it would escape the test)
            first = body.lstrip().split(" ", 1)[0]
            assert first not in ("invoke", "patchkit", "make", "python", "python3", "sh", "bash"), (
                f"{doc}: an untagged code block starts with {first!r}: tag it ```sh to have it run"
            )
    return blocks


def first_line(block: str) -> str:
    return block.strip().splitlines()[0]


def _examples() -> dict[str, list[str]]:
    return {doc: blocks for doc in DOCS if (blocks := shell_blocks(doc))}


def _prepare(root: Path, port: int) -> dict[str, str]:
    """The folder an example runs in: checkout links, hosts, the stand-in config and shim."""
    for name in ("tasks.py", "patches", "tests"):
        (root / name).symlink_to(REPO / name)
    (root / "invoke.yaml").write_text(STANDIN_CONFIG.format(standin=STANDIN, port=port, root=root))
    for host, series in EXAMPLE_HOSTS.items():
        subprocess.run(
            [sys.executable, "-m", "invoke", "upstream.fetch", "--series", f"patches/{series}", "--layout",
             "installed", "--dest", str(root / "hosts" / host)],
            cwd=root, check=True, capture_output=True, timeout=300,
        )  # fmt: skip
    shim = root / "shim"
    shim.mkdir()
    site = root / "hosts" / "gpu1/opt/venv/lib/python3.12/site-packages"
    (shim / "python").write_text(SHIM.format(site=site, standin=STANDIN))
    (shim / "python").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("INVOKE_", "PATCHKIT_"))}
    env.update(
        PATH=f"{shim}:{Path(sys.executable).parent}:{env.get('PATH', '/usr/bin:/bin')}",
        PATCHKIT_SPREAD_CACHE=str(root / "spread.json"),
        XDG_CONFIG_HOME=str(root / "xdg"),
    )
    return env


def localized(block: str, root: Path, port: int) -> str:
    """A block as it runs here (the module docstring's rules)."""
    out = []
    for line in block.splitlines():
        stripped = line.strip()
        if stripped in INSTRUCTIONS:
            line = INSTRUCTIONS[stripped]
        out.append(line)
    text = "\n".join(out)
    text = HOST_SPEC.sub(lambda m: str(root / "hosts" / (m.group(1) + m.group(2))), text)
    text = text.replace("/tmp/demo", str(root / "demo")).replace("/tmp/pk-timing", str(root / "pk-timing"))
    text = text.replace("30000", str(port))
    return text.replace("<stamp>", "$(ls runs/a | head -1)")


def test_every_example_is_run_or_listed_with_a_reason():
    firsts = [first_line(b) for blocks in _examples().values() for b in blocks]
    assert firsts, "no example found"
    stale = set(NOT_RUNNABLE) - set(firsts)
    assert not stale, f"NOT_RUNNABLE lists blocks the docs no longer have: {stale}"
    for host in {m.group(1) + m.group(2) for f in firsts for m in HOST_SPEC.finditer(f)}:
        assert host in EXAMPLE_HOSTS, f"an example names {host}: add it to EXAMPLE_HOSTS"


@pytest.mark.parametrize("doc", sorted(_examples()))
def test_the_examples_of(doc, tmp_path):
    blocks = [b for b in _examples()[doc] if first_line(b) not in NOT_RUNNABLE]
    if not blocks:
        pytest.skip(f"{doc}: every block is listed in NOT_RUNNABLE")
    port = free_port(4)  # --gpus 0,1,2,3 serves on port .. port + 3
    root = tmp_path / "checkout"
    root.mkdir()
    env = _prepare(root, port)
    script = "set -euo pipefail\n" + "\n".join(localized(b, root, port) for b in blocks)
    (root / "examples.sh").write_text(script)
    # its own process group: a server an example left in the background goes with it
    proc = subprocess.Popen(
        ["bash", "-x", "examples.sh"],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=300)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert proc.returncode == 0, (
        f"{doc}: an example failed (exit {proc.returncode}); the script: {root / 'examples.sh'}\n"
        + textwrap.shorten(out, 3000)
        + "\n"
        + err[-6000:]
    )

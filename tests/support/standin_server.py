"""Stand-ins for ``sglang.launch_server`` and ``sglang.bench_serving`` in the remote profile tests.

    python standin_server.py serve --port P [--startup-delay S] [--never-healthy]
                                   [--exit-after S] [--ignore-signals] [--pid-file F]
                                   [--speculative-algorithm A] [--speculative-num-steps N]
                                   [--speculative-eagle-topk K] [--disable-overlap-schedule]
                                   [--timed-workers v1,v2] [any other --speculative-* ...]
                                   [--tok-s R] [--order-file F] [--gpu-factor ID=F ...]
                                   [--fail-on-gpu ID] [--verify-scale F]
                                   [--root-factor ROOT=F ...] [--fail-on-root ROOT]
                                   [--kill-at N,M,... --kill-pid-file F [--kill-signal SIG]]
    python standin_server.py bench --port P [--also-port P2] [--requests N] [--cycles C] [--fail]
                                   [--delay S] [--started-file F] [--noise CV --seed-file F]

``serve`` is a small HTTP server on 127.0.0.1:P. It imports the timing runtime from the
patched SGLang tree on the target (``sglang.srt.speculative.phase_timer``, found through
PYTHONPATH=$PATCHKIT_TARGET_ROOT; it refuses to run when the module comes from anywhere else)
and starts a second process for "rank 1" (PATCHKIT_TIMER_RANK=1; ranks 2n and 2n+1 on node n = $PATCHKIT_NODE_RANK). ``GET /health`` answers 200
(503 with --never-healthy); ``POST /generate {"cycles": C}`` runs C fake EAGLE-like decode cycles
on both ranks through the real runtime (draft: draft_preprocess, draft_forward; verify:
target_verify, accept; draft_extend_after_decode) and answers the accepted counts. Python's
default signal handling is kept: SIGINT ends both processes through KeyboardInterrupt, so the
runtime's atexit hook writes the last records (--ignore-signals makes it ignore INT and TERM,
to test the escalation to KILL).

Speculation as SGLang 0.5.12 chooses it: without --speculative-algorithm the server is plain
(no timing runtime imported: the baseline runs on the reverted tree; one token per cycle).
With EAGLE/EAGLE3/STANDALONE it logs SGLang 0.5.12's own line, "Spec v2 is enabled by
default ..." or "Spec v1 is used ... because <reason>" (topk > 1, SGLANG_ENABLE_SPEC_V2=0,
--disable-overlap-schedule); the cycles call the runtime only when that worker is in
--timed-workers (a series that times one worker only). Accepted drafts per cycle follow the
fixed pattern, capped at --speculative-num-steps (default 3), whose value below 1 makes the
server exit 1 before listening (a failing sweep point). Other options are logged and ignored.
--log-noise-kb N: about N KiB of log lines after the worker line.
--plain-fails: without --speculative-algorithm the server exits 1 (a baseline that fails).
PK_HANG=FILE in the server's environment: the first /generate creates FILE and never answers.

``bench`` sends N requests and prints a result block in the style of sglang.bench_serving
(label in 40 columns, value) with the output token throughput and the accept length computed
from the server's answers; --fail prints an error and exits 1 after one request.

Known throughput distributions (the sweep verdict's tests): a server started with --tok-s R
(R > 0; a sweep matrix key ``tok-s=...`` sets it per point) answers R with every /generate,
and the benchmark then reports R x exp(N(0, CV)) as its output token throughput instead of
its own wall-clock rate (--noise CV, default 0). The noise is seeded: --seed-file F holds a
counter that every benchmark run increments and seeds with, so a test's numbers are the same
on every run. --order-file F: the server appends "R PID" to F when it starts (the run order).
--kill-at N,M --kill-pid-file F: the start that writes the N-th (M-th, ...) line of the order
file sends --kill-signal (default KILL) to the process whose pid F holds -- a sweep's controller
dying while this server starts, before its benchmark (the seeded numbers stay in step) -- and
then serves on, as a server orphaned by its controller would.

GPUs (profile.remote --gpus): the server logs CUDA_VISIBLE_DEVICES with its other env lines;
--gpu-factor ID=F (repeatable) multiplies the answered --tok-s by F when CUDA_VISIBLE_DEVICES
is ID (a faster or slower GPU); --fail-on-gpu ID makes the server exit 1 before listening when
it is ID (a broken GPU). --verify-scale F stretches target_verify's sleep by F (a point whose
verify phase is slower; default 1).

Targets as blocks (profile.remote --blocks hosts): --root-factor ROOT=F (repeatable) multiplies
the answered --tok-s by F when PATCHKIT_TARGET_ROOT is ROOT (a faster host); --fail-on-root
ROOT makes the server exit 1 before listening on that target (a broken host).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, HTTPServer

RUNTIME = "sglang.srt.speculative.phase_timer"


def load_runtime():
    import importlib

    pt = importlib.import_module(RUNTIME)
    root = os.environ.get("PATCHKIT_TARGET_ROOT", "")
    where = os.path.realpath(pt.__file__)
    if not root or not where.startswith(os.path.realpath(root) + os.sep):
        sys.exit(f"stand-in: {RUNTIME} came from {where}, not from the patched tree {root!r}")
    return pt


def accepted_for(cycle: int) -> int:
    """A fixed acceptance pattern: 3, 1, 2, 3, 1, 2, ... draft tokens accepted."""
    return (3, 1, 2)[cycle % 3]


class _Untimed:
    """A worker that no series times: every runtime call does nothing."""

    def __getattr__(self, name):
        return lambda *a, **k: None


def run_plain(count: int) -> list[int]:
    """Plain decoding: one token per cycle (a target forward), nothing timed."""
    for _ in range(count):
        time.sleep(0.0008)
    return [0] * count


VERIFY_SCALE = [1.0]  # --verify-scale


def run_cycles(pt, first: int, count: int, steps: int = 3) -> list[int]:
    if pt is None:
        return run_plain(count)
    accepted = []
    for i in range(first, first + count):
        n = min(accepted_for(i), steps)
        pt.cycle_begin(batch_size=1)
        pt.begin("draft")
        pt.begin("draft_preprocess")
        time.sleep(0.0002)
        pt.end("draft_preprocess")
        pt.begin("draft_forward")
        time.sleep(0.0006)
        pt.end("draft_forward")
        pt.end("draft")
        pt.begin("verify")
        pt.begin("target_verify")
        time.sleep(0.0008 * VERIFY_SCALE[0])
        pt.end("target_verify")
        pt.begin("accept")
        pt.end("accept")
        pt.end("verify")
        pt.begin("draft_extend_after_decode")
        time.sleep(0.0003)
        pt.end("draft_extend_after_decode")
        pt.cycle_end(accepted=n, accepted_per_req=[n])
        accepted.append(n)
    return accepted


def choose_worker(args, env) -> tuple[str | None, str | None]:
    """(worker, log line) as SGLang 0.5.12's server_args picks and logs it."""
    if args.speculative_algorithm is None:
        return None, None
    if args.speculative_algorithm.upper() not in ("EAGLE", "EAGLE3", "STANDALONE"):
        return "other", None
    reason = None
    if args.speculative_eagle_topk > 1:
        reason = "spec v2 currently only supports topk = 1"
    elif env.get("SGLANG_ENABLE_SPEC_V2", "1").lower() in ("0", "false"):
        reason = "SGLANG_ENABLE_SPEC_V2=False"
    elif args.disable_overlap_schedule:
        reason = "overlap schedule is disabled"
    if reason:
        return "v1", (f"Spec v1 is used for eagle/eagle3/standalone speculative decoding because {reason}.")
    return "v2", "Spec v2 is enabled by default for eagle/eagle3/standalone speculative decoding."


def runtime_for(args):
    """The timing runtime for the chosen worker, _Untimed for a worker not timed, None: plain."""
    worker, _ = choose_worker(args, os.environ)
    if worker is None:
        return None
    pt = load_runtime()
    return pt if worker in args.timed_workers.split(",") else _Untimed()


def worker(args) -> None:
    """Rank 1: one line "FIRST COUNT" in, cycles run, "ok" out; ends at EOF or on SIGINT."""
    pt = runtime_for(args)
    for line in sys.stdin:
        first, count = (int(x) for x in line.split())
        run_cycles(pt, first, count, args.speculative_num_steps)
        sys.stdout.write("ok\n")
        sys.stdout.flush()


def serve(args, passed: list[str]) -> None:
    node = int(os.environ.get("PATCHKIT_NODE_RANK", "0"))  # two "GPUs" per node
    os.environ["PATCHKIT_TIMER_RANK"] = str(2 * node)
    print(f"stand-in server: speculative options: {' '.join(passed) or 'none'}", flush=True)
    for name in sorted(os.environ):
        if name.startswith(("PATCHKIT_", "NCCL_", "PK_", "SGLANG_", "CUDA_")):
            print(f"stand-in server: env {name}={os.environ[name]}", flush=True)
    if args.order_file:
        with open(args.order_file, "a") as fh:
            fh.write(f"{args.tok_s:g} {os.getpid()}\n")
        with open(args.order_file) as fh:
            start = sum(1 for _ in fh)
        if args.kill_at and start in {int(n) for n in args.kill_at.split(",")}:
            with open(args.kill_pid_file) as fh:
                os.kill(int(fh.read()), getattr(signal, "SIG" + args.kill_signal))
    if args.speculative_num_steps < 1:
        print("ValueError: speculative_num_steps must be at least 1", flush=True)
        sys.exit(1)
    # a block of a sweep (a GPU, a target's root) that fails to start or runs faster
    gpu = os.environ.get("CUDA_VISIBLE_DEVICES")
    root = os.environ.get("PATCHKIT_TARGET_ROOT", "")
    for here, fail, factors, error in (
        (gpu, args.fail_on_gpu, args.gpu_factor, f"CUDA error: uncorrectable ECC error on GPU {gpu}"),
        (root, args.fail_on_root, args.root_factor, f"NCCL error: this host ({root}) lost its network"),
    ):
        if fail is not None and here == fail:
            print(f"RuntimeError: {error}", flush=True)
            sys.exit(1)
        for spec in factors:
            name, _, factor = spec.rpartition("=")
            if here == name:
                args.tok_s *= float(factor)
    if args.plain_fails and args.speculative_algorithm is None:
        print("stand-in server: plain server refused to start (--plain-fails)", flush=True)
        sys.exit(1)
    _, line = choose_worker(args, os.environ)
    if line:
        print(f"[stand-in] WARNING server_args.py: {line}", flush=True)
    for i in range(args.log_noise_kb):  # a long log: the worker line scrolls out of its tail
        print(f"stand-in server: decode batch {i:08d} " + "." * 990, flush=False)
    pt = runtime_for(args)
    timer = os.path.join(os.environ.get("PATCHKIT_TARGET_ROOT", ""), *RUNTIME.split(".")) + ".py"
    print(f"stand-in server: timing runtime in the target tree: {os.path.exists(timer)}", flush=True)
    hang = os.environ.get("PK_HANG", "no")
    if args.ignore_signals:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    env = dict(os.environ, PATCHKIT_TIMER_RANK=str(2 * node + 1))
    rank1 = subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), "worker", *passed],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    if args.pid_file:
        with open(args.pid_file, "w") as fh:
            fh.write(f"{os.getpid()} {rank1.pid}\n")
    print(f"stand-in server: pid {os.getpid()}, rank 1 pid {rank1.pid}, loading...", flush=True)
    time.sleep(args.startup_delay)
    state = {"cycles": 0}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, fmt, *a):  # one short line per request on stdout (the log)
            print("stand-in server:", fmt % a, flush=True)

        def reply(self, code: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            if self.path == "/health":
                if args.never_healthy:
                    self.reply(503, {"status": "loading"})
                else:
                    self.reply(200, {"status": "ok"})
            else:
                self.reply(404, {"error": self.path})

        def do_POST(self):
            if self.path != "/generate":
                self.reply(404, {"error": self.path})
                return
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])) or b"{}")
            if hang != "no":  # PK_HANG=FILE: touch FILE, then never answer
                open(hang, "w").close()
                time.sleep(600)
            count = int(body.get("cycles", 4))
            first = state["cycles"]
            rank1.stdin.write(f"{first} {count}\n")
            rank1.stdin.flush()
            accepted = run_cycles(pt, first, count, args.speculative_num_steps)
            rank1.stdout.readline()
            state["cycles"] += count
            self.reply(
                200, {"accepted": accepted, "tokens": sum(a + 1 for a in accepted), "tok_s": args.tok_s}
            )

    server = HTTPServer(("127.0.0.1", args.port), Handler)
    server.timeout = 0.1
    print(f"stand-in server: listening on 127.0.0.1:{args.port}", flush=True)
    deadline = time.monotonic() + args.exit_after if args.exit_after else None
    while True:
        server.handle_request()
        if deadline and time.monotonic() > deadline:
            print("stand-in server: simulated crash (CUDA out of memory)", flush=True)
            sys.exit(3)


def post(opener, url: str, cycles: int) -> dict:
    req = urllib.request.Request(
        url,
        method="POST",
        data=json.dumps({"cycles": cycles}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with opener.open(req, timeout=30) as resp:
        return json.loads(resp.read())


def bench(args) -> None:
    base = f"http://127.0.0.1:{args.port}"
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    if args.started_file:
        open(args.started_file, "w").close()
    start = time.monotonic()
    cycles = tokens = 0
    rate = 0.0
    for i in range(args.requests):
        for port in args.also_port:  # the other nodes of a multi-node stand-in
            post(opener, f"http://127.0.0.1:{port}/generate", args.cycles)
        answer = post(opener, f"{base}/generate", args.cycles)
        cycles += len(answer["accepted"])
        tokens += answer["tokens"]
        rate = answer.get("tok_s") or 0.0
        print(f"request {i + 1}/{args.requests}: {answer['tokens']} tokens", flush=True)
        if args.fail:
            print(
                "Traceback (most recent call last):\n  ...\nRuntimeError: stand-in benchmark "
                "failure: the dataset file is missing",
                file=sys.stderr,
                flush=True,
            )
            sys.exit(1)
        time.sleep(args.delay)
    duration = time.monotonic() - start
    throughput = tokens / duration
    if rate > 0:  # the server's set throughput, with seeded noise
        import math
        import random

        seed = 0
        if args.seed_file:
            try:
                with open(args.seed_file) as fh:
                    seed = int(fh.read().strip() or 0)
            except FileNotFoundError:
                pass
            with open(args.seed_file, "w") as fh:
                fh.write(f"{seed + 1}\n")
        throughput = rate * math.exp(random.Random(seed).gauss(0.0, args.noise))
    row = "{:<40} {:<10}".format
    print("\n{s:{c}^{n}}".format(s=" Serving Benchmark Result ", n=50, c="="))
    print(row("Backend:", "stand-in"))
    print(row("Successful requests:", args.requests))
    print(row("Benchmark duration (s):", f"{duration:.2f}"))
    print(row("Total generated tokens:", tokens))
    print(row("Request throughput (req/s):", f"{args.requests / duration:.2f}"))
    print(row("Output token throughput (tok/s):", f"{throughput:.2f}"))
    print(row("Peak output token throughput (tok/s):", f"{2 * tokens / duration:.2f}"))
    print(row("Accept length:", f"{tokens / cycles:.2f}"))
    print("=" * 50, flush=True)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve")
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--startup-delay", type=float, default=0.0)
    s.add_argument("--never-healthy", action="store_true")
    s.add_argument("--exit-after", type=float, default=0.0)
    s.add_argument("--ignore-signals", action="store_true")
    s.add_argument("--pid-file", default=None)
    s.add_argument("--plain-fails", action="store_true")
    s.add_argument("--log-noise-kb", type=int, default=0)
    s.add_argument("--tok-s", type=float, default=0.0)
    s.add_argument("--order-file", default=None)
    s.add_argument("--kill-at", default=None)
    s.add_argument("--kill-pid-file", default=None)
    s.add_argument("--kill-signal", default="KILL")
    s.add_argument("--gpu-factor", action="append", default=[])
    s.add_argument("--fail-on-gpu", default=None)
    s.add_argument("--root-factor", action="append", default=[])
    s.add_argument("--fail-on-root", default=None)
    w = sub.add_parser("worker")
    for p in (s, w):
        p.add_argument("--speculative-algorithm", default=None)
        p.add_argument("--speculative-num-steps", type=int, default=3)
        p.add_argument("--speculative-eagle-topk", type=int, default=1)
        p.add_argument("--disable-overlap-schedule", action="store_true")
        p.add_argument("--timed-workers", default="v1,v2")
        p.add_argument("--verify-scale", type=float, default=1.0)
    b = sub.add_parser("bench")
    b.add_argument("--port", type=int, required=True)
    b.add_argument("--also-port", type=int, action="append", default=[])
    b.add_argument("--requests", type=int, default=4)
    b.add_argument("--cycles", type=int, default=6)
    b.add_argument("--delay", type=float, default=0.0)
    b.add_argument("--fail", action="store_true")
    b.add_argument("--started-file", default=None)
    b.add_argument("--noise", type=float, default=0.0)
    b.add_argument("--seed-file", default=None)
    argv = sys.argv[1:] if argv is None else argv
    args, unknown = parser.parse_known_args(argv)
    if unknown and args.cmd == "bench":
        parser.error(f"unknown options {unknown}")
    if args.cmd in ("serve", "worker"):
        VERIFY_SCALE[0] = args.verify_scale
    if args.cmd == "serve":
        serve(args, _spec_options(argv[1:]))
    elif args.cmd == "worker":
        worker(args)
    else:
        bench(args)


def _spec_options(argv: list[str]) -> list[str]:
    """The options rank 1 needs to choose the same worker (and, logged, what was passed)."""
    keep, out = ("--speculative-", "--disable-overlap-schedule", "--timed-workers", "--verify-scale"), []
    for i, arg in enumerate(argv):
        if arg.startswith(keep) or (i and argv[i - 1].startswith(keep) and not arg.startswith("-")):
            out.append(arg)
    return out


if __name__ == "__main__":
    main()

"""SSH transport cost against a loopback sshd, measured side by side in one run.

    python bench/bench_ssh.py [-n 30] [--hosts 16] [--kex curve25519-sha256] [--json FILE]

Rows (median of N, the three kinds interleaved per iteration so drift hits them alike):
    bare        `ssh <same options> HOST true`           a fresh connection, no program
    transport   SshTransport(reuse=False).run(program)   a fresh connection + our program on stdin
    warm        SshTransport(reuse=True).run(program)    over a live ControlMaster connection
and the ratios transport/bare, warm/bare, the bytes sent per operation and the number of TCP
connections sshd logged per operation. With --hosts N (N > 1): the same program on N loopback
sshd instances at once (one thread per host, fresh connections) vs on one host, median of the
wall time of the whole group. All servers share this machine's cores, so the fleet figure is a
CPU-contention bound, not a network one.

Reusable pieces (the patch.verify / patch.apply / fleet benchmarks build on them):
    start_sshd(count)            -> SshdFleet (servers, client_config, aliases); .stop()
    make_client_config(...)      the ssh_config writer from tests/sshd_support.py
    bare_ssh_argv(fleet, alias)  the bare `ssh … true` argv with the transport's own options
    bare_ssh_true_median(fleet, alias, n)
    timed(fn) / median_of(fn, n)
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import sshd_support  # noqa: E402
from sshd_support import make_client_config  # noqa: E402,F401  (re-exported for reuse)

from patchkit.transport import parse_target  # noqa: E402

SMALL_PROGRAM = b"""set -eu
cd /tmp
printf 'patchkit-answer v1\\n'
for f in /etc/hostname /etc/os-release; do
  [ -f "$f" ] && wc -c < "$f"
done
printf 'end\\n'
"""


def start_sshd(count: int = 1, workdir: str | Path | None = None,
               kex: str | None = None) -> sshd_support.SshdFleet:
    """`count` loopback sshd instances with one client config; call `.stop()` when done.

    kex: restrict the servers' KexAlgorithms (the client follows), e.g. "curve25519-sha256"."""
    reason = sshd_support.missing_tools()
    if reason:
        raise SystemExit(f"bench_ssh: {reason}")
    workdir = Path(workdir) if workdir else sshd_support.scratch_dir("pk-bench-ssh-")
    extra = (f"KexAlgorithms {kex}",) if kex else ()
    return sshd_support.start_fleet(workdir, count, extra_config=extra)


def transport_for(fleet, alias: str, root: str = "/tmp", **options):
    options.setdefault("ssh_config", str(fleet.client_config))
    return parse_target(f"{alias}:{root}", **options)


def bare_ssh_argv(fleet, alias: str) -> list[str]:
    """`ssh HOST true` with exactly the options a non-reusing transport passes."""
    t = transport_for(fleet, alias, reuse=False)
    return t.ssh_args() + ["--", alias, "true"]


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def median_of(fn, n: int) -> float:
    return statistics.median(timed(fn) for _ in range(n))


def run_bare(argv: list[str]) -> None:
    subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, check=True)


def bare_ssh_true_median(fleet, alias: str, n: int = 20) -> float:
    argv = bare_ssh_argv(fleet, alias)
    return median_of(lambda: run_bare(argv), n)


def measure(fleet, n: int, program: bytes = SMALL_PROGRAM) -> dict:
    server = fleet.servers[0]
    alias = server.alias
    argv = bare_ssh_argv(fleet, alias)
    cold = transport_for(fleet, alias, reuse=False)
    warm = transport_for(fleet, alias, reuse=True)
    try:
        check = cold.run(program)
        if check.returncode != 0 or not check.stdout.startswith(b"patchkit-answer"):
            raise SystemExit(f"bench_ssh: the test program failed: {check.stderr!r}")
        warm.run(program)  # start the control master
        conns = {}
        for kind, fn in (("bare", lambda: run_bare(argv)), ("transport", lambda: cold.run(program)),
                         ("warm", lambda: warm.run(program))):
            before = server.connections()
            fn()
            time.sleep(0.2)  # sshd logs asynchronously
            conns[kind] = server.connections() - before
        times = {"bare": [], "transport": [], "warm": []}
        for _ in range(n):
            times["bare"].append(timed(lambda: run_bare(argv)))
            times["transport"].append(timed(lambda: cold.run(program)))
            times["warm"].append(timed(lambda: warm.run(program)))
    finally:
        cold.close()
        warm.close()
    med = {kind: statistics.median(values) for kind, values in times.items()}
    return {
        "n": n,
        "median_s": med,
        "p90_s": {k: sorted(v)[int(0.9 * (len(v) - 1))] for k, v in times.items()},
        "transport_over_bare": med["transport"] / med["bare"],
        "transport_overhead_s": med["transport"] - med["bare"],
        "warm_over_bare": med["warm"] / med["bare"],
        "bytes_sent_per_op": len(program),
        "connections_per_op": conns,
    }


def measure_fleet(fleet, n: int, program: bytes = SMALL_PROGRAM) -> dict:
    """Wall time of one program on every host at once vs on the first host alone."""
    from concurrent.futures import ThreadPoolExecutor

    transports = [transport_for(fleet, alias, reuse=False) for alias in fleet.aliases]
    single, group = [], []
    with ThreadPoolExecutor(len(transports)) as pool:
        def run_all():
            results = list(pool.map(lambda t: t.run(program), transports))
            if any(r.returncode != 0 for r in results):
                raise SystemExit("bench_ssh: the program failed on a fleet host")
        run_all()  # warm-up
        for _ in range(n):
            single.append(timed(lambda: transports[0].run(program)))
            group.append(timed(run_all))
    single_med, group_med = statistics.median(single), statistics.median(group)
    return {"hosts": len(transports), "n": n, "single_median_s": single_med,
            "fleet_median_s": group_med, "fleet_over_single": group_med / single_med}


def report(result: dict) -> str:
    med, p90 = result["median_s"], result["p90_s"]
    lines = [f"loopback sshd (kex: {result.get('kex')}), N={result['n']} interleaved, "
             f"{result['bytes_sent_per_op']} B program",
             f"{'kind':<10} {'median ms':>10} {'p90 ms':>9} {'conns/op':>9}"]
    for kind in ("bare", "transport", "warm"):
        lines.append(f"{kind:<10} {med[kind] * 1e3:>10.1f} {p90[kind] * 1e3:>9.1f} "
                     f"{result['connections_per_op'][kind]:>9}")
    lines += [f"transport / bare ssh true  : {result['transport_over_bare']:.2f}x "
              f"(overhead {result['transport_overhead_s'] * 1e3:+.1f} ms)",
              f"warm (ControlMaster) / bare: {result['warm_over_bare']:.2f}x  (target <= 0.75x)"]
    fleet = result.get("fleet")
    if fleet:
        lines.append(f"fleet of {fleet['hosts']} (parallel, fresh connections): "
                     f"{fleet['fleet_median_s'] * 1e3:.0f} ms vs one host "
                     f"{fleet['single_median_s'] * 1e3:.0f} ms = "
                     f"{fleet['fleet_over_single']:.2f}x  (N={fleet['n']})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=30, help="iterations per kind (default 30)")
    parser.add_argument("--hosts", type=int, default=1,
                        help="also run the program on this many sshd instances at once")
    parser.add_argument("--kex", help="server KexAlgorithms, e.g. curve25519-sha256")
    parser.add_argument("--json", help="also write the figures to this JSON file")
    args = parser.parse_args(argv)
    fleet = start_sshd(max(1, args.hosts), kex=args.kex)
    try:
        result = measure(fleet, args.n)
        result["kex"] = args.kex or "OpenSSH default"
        if args.hosts > 1:
            result["fleet"] = measure_fleet(fleet, max(5, args.n // 3))
    finally:
        fleet.stop()
        shutil.rmtree(fleet.workdir, ignore_errors=True)
    print(report(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""SSH cost against loopback sshd, measured side by side in one run.

    python bench/bench_ssh.py [-n 30] [--hosts 16] [--kex K] [--fleet-kex default,curve25519-sha256]
                              [--only transport,cli,persist,warm,fleet] [--json FILE] [--out FILE]

Sections (medians of N; the kinds inside a section interleaved per iteration, so drift hits
them alike; every kind uses the same ssh options: -F <generated config>, BatchMode, ...):
  transport  bare `ssh HOST true` vs SshTransport(reuse=False).run(small program) vs the same
             over a live ControlMaster; with --hosts N also the small program on N hosts at once.
  cli        `python -m invoke patch.verify|apply|revert` of the sglang-v0.5.9 series on an
             installed sglang 0.5.9 tree over SSH vs bare `ssh HOST true`: patchkit's overhead,
             invoke start-up, Python imports, compile, ControlMaster set-up and `-O exit` included
             (--ssh-persist 0: every invocation opens and closes its own connection).
  persist    verify, apply, status, revert as four `python -m invoke` runs in a row, with
             --ssh-persist 0 (four connections) vs the default 60 s (one shared master, started
             by the first run: every sequence starts with no master), side by side.
  warm       ops.verify(series, [transport]) on a Transport with a live control connection vs
             bare `ssh HOST true` (goal <= 0.75x).
  fleet      ops.apply of the series on --hosts loopback hosts (two-phase: stage everywhere,
             then commit) vs on one host, fresh connections each time, once per --fleet-kex.
Also: bytes sent per operation (the program size) and TCP connections per operation counted
in sshd's log. All servers share this machine's cores, so the fleet figure is a CPU-contention
bound (every host's handshake and sh/sed work runs here), not a network one.

Reusable pieces:
    start_sshd(count, kex=)      -> SshdFleet (servers, client_config, aliases); .stop()
    make_client_config(...)      the ssh_config writer from tests/support/sshd.py
    transport_for(fleet, alias, root, **options)
    bare_ssh_argv(fleet, alias)  the bare `ssh … true` argv with the transport's own options
    bare_ssh_true_median(fleet, alias, n)
    installed_tree(dest)         an installed sglang 0.5.9 tree (pinned wheel)
    timed(fn) / median_of(fn, n)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from patchkit import ops  # noqa: E402
from patchkit.author import upstream  # noqa: E402
from patchkit.transport import parse_target  # noqa: E402
from support import sshd as sshd_support  # noqa: E402
from support.sshd import make_client_config  # noqa: E402,F401  (re-exported for reuse)

SERIES = ROOT / "patches" / "sglang-v0.5.9"
WORKER = "sglang/srt/speculative/eagle_worker.py"
WORKER_V2 = "sglang/srt/speculative/eagle_worker_v2.py"  # 0.5.9 series 0008-0013

SMALL_PROGRAM = b"""set -eu
cd /tmp
printf 'patchkit-answer v1\\n'
for f in /etc/hostname /etc/os-release; do
  [ -f "$f" ] && wc -c < "$f"
done
printf 'end\\n'
"""


def start_sshd(
    count: int = 1, workdir: str | Path | None = None, kex: str | None = None
) -> sshd_support.SshdFleet:
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
        for kind, fn in (
            ("bare", lambda: run_bare(argv)),
            ("transport", lambda: cold.run(program)),
            ("warm", lambda: warm.run(program)),
        ):
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
    return {
        "hosts": len(transports),
        "n": n,
        "single_median_s": single_med,
        "fleet_median_s": group_med,
        "fleet_over_single": group_med / single_med,
    }


# ---- patch operations over SSH ---------------------------------------------------------------------


def installed_tree(dest: Path) -> Path:
    """An installed sglang 0.5.9 tree (files from the pinned wheel, sha256-checked)."""
    wheelhouse = os.environ.get("PATCHKIT_WHEELHOUSE") or ("/tmp/wh" if Path("/tmp/wh").is_dir() else None)
    return upstream.pypi_tree(
        "sglang", "0.5.9", [WORKER, WORKER_V2], layout="installed", dest=Path(dest), wheelhouse=wheelhouse
    )


def cli_argv(task: str, fleet, target: str, persist: str = "0") -> list[str]:
    return [
        sys.executable,
        "-m",
        "invoke",
        task,
        "--series",
        str(SERIES),
        "--target",
        target,
        "--ssh-config",
        str(fleet.client_config),
        "--ssh-persist",
        persist,
    ]


def run_cli(argv: list[str]) -> None:
    proc = subprocess.run(argv, cwd=ROOT, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(
            f"bench_ssh: {' '.join(argv[3:5])} failed ({proc.returncode}):\n{proc.stdout}{proc.stderr}"
        )


def connections_of(server, fn) -> int:
    before = server.connections()
    fn()
    time.sleep(0.2)  # sshd logs asynchronously
    return server.connections() - before


def measure_cli(fleet, n: int, workdir: Path) -> dict:
    """`python -m invoke patch.verify/apply/revert` over SSH vs bare `ssh HOST true`."""
    server = fleet.servers[0]
    root = installed_tree(workdir / "cli-site")
    target = f"{server.alias}:{root}"
    bare = bare_ssh_argv(fleet, server.alias)
    kinds = {
        "bare": lambda: run_bare(bare),
        "verify": lambda: run_cli(cli_argv("patch.verify", fleet, target)),
        "apply": lambda: run_cli(cli_argv("patch.apply", fleet, target)),
        "revert": lambda: run_cli(cli_argv("patch.revert", fleet, target)),
    }
    startup = [sys.executable, "-m", "invoke", "--list"]
    kinds_all = dict(kinds, invoke_list=lambda: run_cli(startup))
    conns = {k: connections_of(server, fn) for k, fn in kinds.items()}  # also a warm-up
    times = {k: [] for k in kinds_all}
    for _ in range(n):
        for kind, fn in kinds_all.items():  # apply then revert: the tree is pristine again
            times[kind].append(timed(fn))
    med = {k: statistics.median(v) for k, v in times.items()}
    return {
        "n": n,
        "median_s": med,
        "connections_per_op": conns,
        "overhead_s": {k: med[k] - med["bare"] for k in ("verify", "apply", "revert")},
    }


def measure_persist(fleet, n: int, workdir: Path) -> dict:
    """Four invocations (verify, apply, status, revert) without and with a shared master."""
    from patchkit.transport.controldir import ENV_VAR, stop_masters

    server = fleet.servers[0]
    root = installed_tree(workdir / "persist-site")
    target = f"{server.alias}:{root}"
    control_dir = Path(os.environ.setdefault(ENV_VAR, str(workdir / "ctl")))

    def sequence(persist: str) -> None:
        stop_masters(str(control_dir))  # each sequence starts with no master
        for task in ("patch.verify", "patch.apply", "patch.status", "patch.revert"):
            run_cli(cli_argv(task, fleet, target, persist))

    kinds = {"off": lambda: sequence("0"), "persist": lambda: sequence("60")}
    logins = {}
    for kind, fn in kinds.items():  # also a warm-up
        before = server.accepted()
        fn()
        time.sleep(0.2)
        logins[kind] = server.accepted() - before
    times = {k: [] for k in kinds}
    try:
        for _ in range(n):
            for kind, fn in kinds.items():
                times[kind].append(timed(fn))
    finally:
        stop_masters(str(control_dir))
    med = {k: statistics.median(v) for k, v in times.items()}
    return {
        "n": n,
        "median_s": med,
        "logins_per_sequence": logins,
        "persist_over_off": med["persist"] / med["off"],
        "saved_per_command_s": (med["off"] - med["persist"]) / 4,
    }


def measure_warm(fleet, n: int, workdir: Path) -> dict:
    """ops.verify on a Transport whose control connection is live vs bare `ssh HOST true`."""
    from patchkit.engine.series import load_series

    server = fleet.servers[0]
    root = installed_tree(workdir / "warm-site")
    bare = bare_ssh_argv(fleet, server.alias)
    warm = transport_for(fleet, server.alias, str(root), reuse=True)
    series = load_series(str(SERIES))

    def verify(what):
        res = ops.verify(what, [warm])
        if res.exit_code != 0:
            raise SystemExit(f"bench_ssh: warm verify failed: {res.to_json()}")
        return res

    try:
        verify(str(SERIES))  # starts the master
        conns = {"warm_verify": connections_of(server, lambda: verify(str(SERIES)))}
        kinds = {
            "bare": lambda: run_bare(bare),
            "warm_verify": lambda: verify(str(SERIES)),
            "warm_verify_loaded": lambda: verify(series),
        }
        times = {k: [] for k in kinds}
        for _ in range(n):
            for kind, fn in kinds.items():
                times[kind].append(timed(fn))
        sizes = {}
        for op in ("verify", "apply", "status", "revert"):
            res = getattr(ops, op)(str(SERIES), [warm])
            if res.exit_code != 0:
                raise SystemExit(f"bench_ssh: {op} failed: {res.to_json()}")
            sizes[op] = res.hosts[0].bytes_sent
    finally:
        warm.close()
    med = {k: statistics.median(v) for k, v in times.items()}
    return {
        "n": n,
        "median_s": med,
        "connections_per_op": conns,
        "bytes_sent": sizes,
        "warm_over_bare": med["warm_verify"] / med["bare"],
        "warm_loaded_over_bare": med["warm_verify_loaded"] / med["bare"],
    }


def measure_fleet_apply(hosts: int, n: int, kex: str | None, workdir: Path) -> dict:
    """ops.apply (two-phase) on `hosts` hosts at once vs on one host; fresh connections."""
    fleet = start_sshd(hosts, workdir / f"fleet-{kex or 'default'}", kex=kex)
    try:
        roots = [
            str(installed_tree(workdir / f"fleet-{kex or 'default'}" / f"site{i}")) for i in range(hosts)
        ]
        targets = fleet.targets(roots)
        opts = ops.Options(jobs=hosts, transport_options={"ssh_config": str(fleet.client_config)})

        def run(op, group):
            res = getattr(ops, op)(str(SERIES), group, opts)
            if res.exit_code != 0:
                raise SystemExit(f"bench_ssh: fleet {op} failed: {res.to_json()}")
            return res

        run("apply", targets)
        run("revert", targets)  # warm-up
        before = [s.connections() for s in fleet.servers]
        res = run("apply", targets)
        time.sleep(0.3)
        conns = [s.connections() - b for s, b in zip(fleet.servers, before)]
        bytes_per_host = res.hosts[0].bytes_sent
        run("revert", targets)
        single, group, cpu = [], [], {"wall": 0.0, "busy": 0.0, "client": 0.0}
        for _ in range(n):
            single.append(timed(lambda: run("apply", targets[:1])))
            run("revert", targets[:1])
            with CpuMeter() as meter:
                run("apply", targets)
            group.append(meter.wall)
            for key in cpu:
                cpu[key] += getattr(meter, key)
            run("revert", targets)
    finally:
        fleet.stop()
        shutil.rmtree(fleet.workdir, ignore_errors=True)
    s_med, g_med = statistics.median(single), statistics.median(group)
    cores = os.cpu_count() or 1
    client_per_host = cpu["client"] / n / hosts
    return {
        "hosts": hosts,
        "n": n,
        "kex": kex or "OpenSSH default",
        "single_median_s": s_med,
        "fleet_median_s": g_med,
        "fleet_over_single": g_med / s_med,
        "connections_per_host": sorted(set(conns)),
        "bytes_sent_per_host": bytes_per_host,
        "cpu_busy_fraction": cpu["busy"] / (cpu["wall"] * cores),
        "client_cpu_per_host_s": client_per_host,
        "server_cpu_per_host_s": (cpu["busy"] - cpu["client"]) / n / hosts,
        # If the hosts were other machines only the client side would run here.
        "projected_fleet_over_single": max(s_med, hosts * client_per_host / cores) / s_med,
    }


class CpuMeter:
    """Wall time, machine-wide busy CPU (/proc/stat) and this side's CPU (this process and the
    ssh clients it waited for) over a block."""

    def __enter__(self):
        self._t, self._busy, self._own = time.perf_counter(), _busy_s(), _own_cpu_s()
        return self

    def __exit__(self, *exc):
        self.wall = time.perf_counter() - self._t
        self.busy = _busy_s() - self._busy
        self.client = _own_cpu_s() - self._own
        return False


def _busy_s() -> float:
    try:
        with open("/proc/stat") as fh:
            fields = [int(x) for x in fh.readline().split()[1:]]
    except OSError:
        return 0.0
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def _own_cpu_s() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


# ---- report ---------------------------------------------------------------------------------------


def report(result: dict) -> str:
    lines = [f"bench_ssh on {os.cpu_count()} CPU cores, loopback sshd, {time.strftime('%Y-%m-%d %H:%M')}", ""]
    if "median_s" in result:
        lines += _report_transport(result) + [""]
    cli = result.get("cli")
    if cli:
        med = cli["median_s"]
        lines += [
            f"[cli] python -m invoke patch.* over SSH, sglang-v0.5.9 on an installed tree "
            f"(N={cli['n']} interleaved, kex: {result.get('kex')})",
            f"{'kind':<28} {'median ms':>10} {'overhead ms':>12} {'conns/op':>9}",
        ]
        lines.append(
            f"{'bare ssh HOST true':<28} {med['bare'] * 1e3:>10.1f} {'':>12} "
            f"{cli['connections_per_op']['bare']:>9}"
        )
        for kind in ("verify", "apply", "revert"):
            over = cli["overhead_s"][kind]
            lines.append(
                f"{'patch.' + kind:<28} {med[kind] * 1e3:>10.1f} {over * 1e3:>+12.1f} "
                f"{cli['connections_per_op'][kind]:>9}"
                f"   {'meets' if over <= 0.35 else 'MISSES'} <= 350 ms"
            )
        lines.append(
            f"{'(python -m invoke --list)':<28} {med['invoke_list'] * 1e3:>10.1f}"
            "   invoke start-up + tasks.py import, no SSH"
        )
        lines.append("")
    persist = result.get("persist")
    if persist:
        med, logins = persist["median_s"], persist["logins_per_sequence"]
        lines += [
            f"[persist] verify, apply, status, revert as four `python -m invoke` runs "
            f"(N={persist['n']} interleaved; sshd 'Accepted publickey' per sequence)",
            f"{'kind':<28} {'median ms':>10} {'per command':>12} {'logins':>7}",
            f"{'--ssh-persist 0':<28} {med['off'] * 1e3:>10.1f} "
            f"{med['off'] / 4 * 1e3:>12.1f} {logins['off']:>7}",
            f"{'--ssh-persist 60 (default)':<28} {med['persist'] * 1e3:>10.1f} "
            f"{med['persist'] / 4 * 1e3:>12.1f} {logins['persist']:>7}",
            f"persist / off: {persist['persist_over_off']:.2f}x "
            f"({persist['saved_per_command_s'] * 1e3:.0f} ms saved per command; "
            f"{'meets' if logins['persist'] == 1 else 'MISSES'} one login for four "
            "commands)",
            "",
        ]
    warm = result.get("warm")
    if warm:
        med = warm["median_s"]
        lines += [
            f"[warm] ops.verify on a Transport with a live control connection (N={warm['n']} interleaved)",
            f"bare ssh HOST true            {med['bare'] * 1e3:8.1f} ms",
            f"ops.verify(series dir, [t])   {med['warm_verify'] * 1e3:8.1f} ms = "
            f"{warm['warm_over_bare']:.2f}x bare  "
            f"({'meets' if warm['warm_over_bare'] <= 0.75 else 'MISSES'} <= 0.75x; "
            f"{warm['connections_per_op']['warm_verify']} new connections/op)",
            f"ops.verify(loaded Series, [t]) {med['warm_verify_loaded'] * 1e3:7.1f} ms = "
            f"{warm['warm_loaded_over_bare']:.2f}x bare",
            "bytes sent per operation (program on stdin): "
            + ", ".join(f"{op} {size:,} B" for op, size in warm["bytes_sent"].items()),
            "",
        ]
    for fl in result.get("fleet_apply", []):
        ratio = fl["fleet_over_single"]
        lines.append(
            f"[fleet] ops.apply (stage + commit) on {fl['hosts']} hosts vs 1, kex "
            f"{fl['kex']}: {fl['fleet_median_s'] * 1e3:.0f} ms vs "
            f"{fl['single_median_s'] * 1e3:.0f} ms = {ratio:.2f}x "
            f"({'meets' if ratio <= 2 else 'MISSES'} <= 2x; N={fl['n']}; connections "
            f"per host {fl['connections_per_host']}; {fl['bytes_sent_per_host']:,} B "
            "sent per host)"
        )
        lines.append(
            f"        CPU busy {fl['cpu_busy_fraction']:.0%} of {os.cpu_count()} cores "
            f"during the fleet runs; per host: client side (python + ssh) "
            f"{fl['client_cpu_per_host_s'] * 1e3:.0f} ms, the rest of the machine "
            f"(sshd, remote sh, other load) {fl['server_cpu_per_host_s'] * 1e3:.0f} ms "
            "CPU; were the servers other machines, this side's CPU alone would allow "
            f"~{fl['projected_fleet_over_single']:.2f}x (a lower bound)"
        )
    return "\n".join(lines).rstrip() + "\n"


def _report_transport(result: dict) -> list[str]:
    med, p90 = result["median_s"], result["p90_s"]
    lines = [
        f"[transport] small program, kex: {result.get('kex')}, N={result['n']} interleaved, "
        f"{result['bytes_sent_per_op']} B program",
        f"{'kind':<10} {'median ms':>10} {'p90 ms':>9} {'conns/op':>9}",
    ]
    for kind in ("bare", "transport", "warm"):
        lines.append(
            f"{kind:<10} {med[kind] * 1e3:>10.1f} {p90[kind] * 1e3:>9.1f} "
            f"{result['connections_per_op'][kind]:>9}"
        )
    lines += [
        f"transport / bare ssh true  : {result['transport_over_bare']:.2f}x "
        f"(overhead {result['transport_overhead_s'] * 1e3:+.1f} ms)",
        f"warm (ControlMaster) / bare: {result['warm_over_bare']:.2f}x  (target <= 0.75x)",
    ]
    fleet = result.get("fleet")
    if fleet:
        lines.append(
            f"fleet of {fleet['hosts']} (parallel, fresh connections): "
            f"{fleet['fleet_median_s'] * 1e3:.0f} ms vs one host "
            f"{fleet['single_median_s'] * 1e3:.0f} ms = "
            f"{fleet['fleet_over_single']:.2f}x  (N={fleet['n']})"
        )
    return lines


SECTIONS = ("transport", "cli", "persist", "warm", "fleet")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=30, help="iterations per kind (default 30)")
    parser.add_argument(
        "--hosts", type=int, default=16, help="fleet size for the transport and fleet sections (default 16)"
    )
    parser.add_argument("--kex", help="server KexAlgorithms for the single-host sections")
    parser.add_argument(
        "--fleet-kex",
        default="default,curve25519-sha256",
        help="comma-separated KexAlgorithms to run the fleet apply with ('default' = OpenSSH's own list)",
    )
    parser.add_argument(
        "--only",
        default=",".join(SECTIONS),
        help=f"comma-separated sections (default: all of {','.join(SECTIONS)})",
    )
    parser.add_argument("--json", help="also write the figures to this JSON file")
    parser.add_argument("--out", help="also write the report to this file")
    args = parser.parse_args(argv)
    sections = set(args.only.split(","))
    if sections - set(SECTIONS):
        parser.error(f"unknown section(s): {', '.join(sorted(sections - set(SECTIONS)))}")
    workdir = sshd_support.scratch_dir("pk-bench-ssh-")
    result: dict = {"kex": args.kex or "OpenSSH default"}
    fleet = start_sshd(max(1, args.hosts) if "transport" in sections else 1, workdir / "main", kex=args.kex)
    try:
        if "transport" in sections:
            result.update(measure(fleet, args.n))
            if args.hosts > 1:
                result["fleet"] = measure_fleet(fleet, max(5, args.n // 3))
        if "cli" in sections:
            result["cli"] = measure_cli(fleet, max(5, args.n // 2), workdir)
        if "persist" in sections:
            result["persist"] = measure_persist(fleet, max(5, args.n // 3), workdir)
        if "warm" in sections:
            result["warm"] = measure_warm(fleet, args.n, workdir)
    finally:
        fleet.stop()
    try:
        if "fleet" in sections and args.hosts > 1:
            result["fleet_apply"] = [
                measure_fleet_apply(
                    args.hosts, max(5, args.n // 4), None if kex == "default" else kex, workdir
                )
                for kex in args.fleet_kex.split(",")
                if kex
            ]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    text = report(result)
    print(text, end="")
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Timing that spends a budget (PATCHKIT_TIMER_BUDGET): the timed probability follows the
runtime's own host cost per timed cycle and the cycle period.

Each scenario runs the runtime in a fresh interpreter (helpers from support/timing_scripts.py) on
a fake clock: the runtime's perf_counter_ns is replaced by a counter that only the script's
"work" advances, and the timer's write (called once at each timed cycle's end) advances it
by COST ns, so that the cost the runtime measures per timed cycle is COST and the period
is the work plus that cost: no sleeps, the same numbers on every machine.
"""

import json
import math
import random

import pytest

from support.timing_scripts import fake_torch, read_records, run_script, with_fake_torch  # noqa: F401

FAKE_CLOCK = """
import json
import phase_timer as _pt
clock = [1_000_000_000]
_pt._perf = lambda: clock[0]
cost = [0]

def costly(timer):
    write = timer.writer.write
    def _write(final=False):
        clock[0] += cost[0]
        return write(final)
    timer.writer.write = _write

def cycle(work_ns, kind="decode"):
    _pt.cycle_begin(kind=kind, batch_size=8)
    _pt.begin("draft"); clock[0] += work_ns // 4; _pt.end("draft")
    _pt.begin("verify"); clock[0] += work_ns // 2; _pt.end("verify")
    _pt.note(accepted=3)
    _pt.cycle_end(tokens=11)
    clock[0] += work_ns - work_ns // 4 - work_ns // 2
"""


def fake_run(runtime_dir, out, body, env=None, configure="_pt.configure()"):
    script = FAKE_CLOCK + configure + "\ncostly(_pt._timer)\n" + body + "\n_pt.shutdown()\n"
    res = run_script(runtime_dir, script, env={"PATCHKIT_TIMER_SEED": "17", **(env or {})}, out_dir=out)
    assert res.returncode == 0, res.stderr
    return res


def one_file(out):
    (recs,) = read_records(out).values()
    return recs


def timed_flags(recs):
    cycles = sorted((r for r in recs if r["kind"] == "cycle"), key=lambda r: r["cycle"])
    return [r.get("timed") is not False for r in cycles]


def binomial_ok(k, n, p, sds=5.0):
    return abs(k - n * p) <= sds * math.sqrt(n * p * (1 - p))


def test_long_cycles_are_all_timed(runtime_dir, tmp_path):
    """15 ms cycles that cost the timer 120 us each: 1 % of the period (150 us) covers it."""
    out = tmp_path / "out"
    fake_run(runtime_dir, out, "cost[0] = 120_000\nfor i in range(1000):\n    cycle(15_000_000)")
    recs = one_file(out)
    header = recs[0]
    assert header["sampling"]["every"] is None and header["sampling"]["budget_pct"] == 1.0
    assert header["sampling"]["p"] == 1.0 and header["sampling"]["controller"]["method"] == "visible-cost"
    assert header["sampling"]["seed"] == 17
    flags = timed_flags(recs)
    assert len(flags) == 1000 and all(flags)
    samplings = [r for r in recs if r["kind"] == "sampling"]
    # the first decision is written (p unchanged), then every 16th: decisions at 64, 128, ...
    assert [s["cycle"] for s in samplings] == [64, 1024][: len(samplings)] and samplings
    first = samplings[0]
    assert first["p"] == first["prev_p"] == 1.0
    assert first["cost_ns"] == 120_000
    assert first["period_ns"] == pytest.approx(15_120_000, rel=0.01)
    assert first["timed"] == 64 and first["cycles"] == 64
    stats = recs[-1]
    assert stats["kind"] == "stats" and stats["sampling"]["p"] == 1.0
    assert stats["sampling"]["decisions"] == 15 and stats["sampling"]["changes"] == 0
    assert stats["sampling"]["cost_ns"] == 120_000


def test_costly_short_cycles_time_about_one_in_16(runtime_dir, tmp_path):
    """4 ms cycles that cost 500 us per timed cycle: 1 % of 4.5 ms is 45 us, p* = 0.09, the
    level below it 1/16; at 1/16 the period is 4.03 ms, p* 0.081: it stays there."""
    out = tmp_path / "out"
    fake_run(runtime_dir, out, "cost[0] = 500_000\nfor i in range(4000):\n    cycle(4_000_000)")
    recs = one_file(out)
    flags = timed_flags(recs)
    assert len(flags) == 4000 and all(flags[:64])  # the first window times every cycle
    samplings = [r for r in recs if r["kind"] == "sampling"]
    assert samplings[0]["cycle"] == 64 and samplings[0]["p"] == 1 / 16 and samplings[0]["prev_p"] == 1.0
    assert all(s["p"] == 1 / 16 for s in samplings)
    rest = flags[64:]
    assert binomial_ok(sum(rest), len(rest), 1 / 16), sum(rest)
    assert 1 / 20 <= sum(rest) / len(rest) <= 1 / 12.5
    stats = recs[-1]["sampling"]
    assert stats["p"] == 1 / 16 and stats["changes"] == 1 and stats["cost_ns"] == 500_000
    # the period shows the whole cost: the pairs measure it, the host time bounds it
    assert stats["host_cost_ns"] == 500_000 and stats["visible_ns"] == 500_000 and stats["pairs"] >= 32
    assert stats["period_ns"] == pytest.approx(4_000_000 + 500_000 / 16, rel=0.05)
    # every cycle still recorded; phases only in timed ones
    timed = {i for i, f in enumerate(flags) if f}
    assert {r["cycle"] for r in recs if r["kind"] == "phase"} == timed


def test_rate_rises_again_when_the_cost_drops_and_changes_only_at_boundaries(runtime_dir, tmp_path):
    out = tmp_path / "out"
    body = """
cost[0] = 500_000
for i in range(2000):
    cycle(4_000_000)
cost[0] = 20_000
for i in range(2000):
    cycle(4_000_000)
"""
    fake_run(runtime_dir, out, body)
    recs = one_file(out)
    samplings = [r for r in recs if r["kind"] == "sampling"]
    changes = [s for s in samplings if s["p"] != s["prev_p"]]
    # down at once; back up as the cost's running mean (halved each decision) comes down
    assert changes[0]["p"] == 1 / 16 and changes[0]["cycle"] == 64
    rises = [s["p"] for s in changes[1:]]
    assert rises == sorted(rises) and rises[-1] == 1.0 and len(rises) <= 4
    assert all(s["cycle"] % 64 == 0 for s in samplings)
    assert changes[1]["cycle"] > 2000 and changes[-1]["cycle"] < 2000 + 64 * 16
    flags = timed_flags(recs)
    assert all(flags[changes[-1]["cycle"] :])
    assert recs[-1]["sampling"]["changes"] == len(changes)


def test_an_idle_gap_is_not_a_long_cycle(runtime_dir, tmp_path):
    """A 30 s pause between two cycles (no request) would make that window's mean period
    huge: it counts at most twice the last period, so the rate rises one level at most."""
    out = tmp_path / "out"
    body = """
cost[0] = 500_000
for i in range(1500):
    cycle(4_000_000)
clock[0] += 30_000_000_000
for i in range(1500):
    cycle(4_000_000)
"""
    fake_run(runtime_dir, out, body)
    recs = one_file(out)
    samplings = [r for r in recs if r["kind"] == "sampling"]
    assert max(s["p"] for s in samplings if s["cycle"] > 64) <= 1 / 8
    assert samplings[-1]["p"] == 1 / 16 or recs[-1]["sampling"]["p"] == 1 / 16


def test_explicit_sample_fixes_the_rate(runtime_dir, tmp_path):
    out = tmp_path / "out"
    fake_run(
        runtime_dir,
        out,
        "cost[0] = 2_000_000\nfor i in range(1000):\n    cycle(4_000_000)",
        env={"PATCHKIT_TIMER_SAMPLE": "4", "PATCHKIT_TIMER_BUDGET": "1"},
    )
    recs = one_file(out)
    assert recs[0]["sampling"] == {
        "every": 4,
        "method": "bernoulli",
        "seed": 17,
        "seed_source": "env:PATCHKIT_TIMER_SEED",
    }
    assert not any(r["kind"] == "sampling" for r in recs)
    assert "sampling" not in recs[-1]
    flags = timed_flags(recs)
    assert binomial_ok(sum(flags), 1000, 0.25)
    # SAMPLE=1 (and 0): every cycle, whatever it costs, and no sampling in the header
    out1 = tmp_path / "one"
    fake_run(
        runtime_dir,
        out1,
        "cost[0] = 2_000_000\nfor i in range(300):\n    cycle(4_000_000)",
        env={"PATCHKIT_TIMER_SAMPLE": "1"},
    )
    recs = one_file(out1)
    assert "sampling" not in recs[0] and all(timed_flags(recs))
    # configure(sample=...) fixes it too
    out2 = tmp_path / "arg"
    fake_run(
        runtime_dir,
        out2,
        "cost[0] = 2_000_000\nfor i in range(300):\n    cycle(4_000_000)",
        configure="_pt.configure(sample=1)",
    )
    assert all(timed_flags(one_file(out2)))


@pytest.mark.parametrize(
    "raw, pct, warned",
    [
        ("abc", 1.0, True),
        ("-2", 1.0, True),
        ("nan", 1.0, True),
        ("inf", 1.0, True),
        ("2.5", 2.5, False),
        ("2.5%", 2.5, False),
        (" 0.25 ", 0.25, False),
        ("", 1.0, False),
    ],
)
def test_budget_values(runtime_dir, tmp_path, raw, pct, warned):
    out = tmp_path / "out"
    res = fake_run(
        runtime_dir,
        out,
        "cost[0] = 1000\nfor i in range(10):\n    cycle(4_000_000)",
        env={"PATCHKIT_TIMER_BUDGET": raw},
    )
    header = one_file(out)[0]
    assert header["sampling"]["budget_pct"] == pct
    message = "PATCHKIT_TIMER_BUDGET=%r is not a percent >= 0; using 1" % raw.strip()
    assert (message in res.stderr) == warned, res.stderr
    if not warned:
        assert res.stderr == ""


def test_zero_budget_times_no_cycle(runtime_dir, tmp_path):
    """0 % for timing: every cycle is still recorded (host start and end, attrs), none timed."""
    out = tmp_path / "out"
    res = fake_run(
        runtime_dir,
        out,
        "cost[0] = 1000\nfor i in range(200):\n    cycle(4_000_000)",
        env={"PATCHKIT_TIMER_BUDGET": "0"},
    )
    assert res.stderr == ""
    recs = one_file(out)
    assert recs[0]["sampling"]["budget_pct"] == 0.0 and recs[0]["sampling"]["p"] == 0.0
    cycles = [r for r in recs if r["kind"] == "cycle"]
    assert len(cycles) == 200 and all(c["timed"] is False for c in cycles)
    assert cycles[5]["attrs"] == {"kind": "decode", "batch_size": 8, "accepted": 3, "tokens": 11}
    assert not any(r["kind"] in ("phase", "sampling") for r in recs)
    assert recs[-1]["sampling"]["p"] == 0.0 and recs[-1]["sampling"]["decisions"] == 0


def test_configure_budget_argument(runtime_dir, tmp_path):
    out = tmp_path / "out"
    res = fake_run(
        runtime_dir,
        out,
        """
cost[0] = 500_000
for i in range(400):
    cycle(4_000_000)
for bad in (-1, "2", float("nan")):
    try:
        _pt.configure(budget=bad)
    except ValueError as exc:
        print("REFUSED", exc)
""",
        # 10 %: 4.5 ms * 10 % / 500 us = 0.9 -> 1/2
        configure="_pt.configure(budget=10)",
    )
    assert res.stdout.count("REFUSED budget must be a percent >= 0") == 3
    recs = one_file(out)
    assert recs[0]["sampling"]["budget_pct"] == 10.0
    assert next(r["p"] for r in recs if r["kind"] == "sampling") == 0.5


def test_ranks_with_one_seed_time_nested_sets(runtime_dir, tmp_path):
    """Two ranks, one seed: with the same costs they time the same cycles; with different
    costs (1/16 against 1/4) every cycle the costlier rank times is timed by the other."""
    sets = {}
    for name, cost in (("a", 500_000), ("b", 500_000), ("c", 120_000)):
        out = tmp_path / name
        fake_run(runtime_dir, out, "cost[0] = %d\nfor i in range(3000):\n    cycle(4_000_000)" % cost)
        recs = one_file(out)
        sets[name] = {i for i, f in enumerate(timed_flags(recs)) if f}
        sets[name + "_p"] = recs[-1]["sampling"]["p"]
    assert sets["a_p"] == 1 / 16 and sets["c_p"] == 1 / 4
    assert sets["a"] == sets["b"]
    assert sets["a"] < sets["c"]


def test_resolve_batch_follows_the_rate(runtime_dir, fake_torch, tmp_path):  # noqa: F811
    """Events mode: device times read 16 timed cycles at a time while every cycle is timed,
    16p at rate p (1 at 1/16), and every timed cycle gets its device times."""
    out = tmp_path / "out"
    body = with_fake_torch(
        fake_torch,
        FAKE_CLOCK
        + """
_pt.configure(mode="events")
costly(_pt._timer)
seen = []
cost[0] = 500_000
for i in range(1000):
    cycle(4_000_000)
    seen.append(_pt._timer.resolver.every)
print("RESOLVE", json.dumps(sorted(set(seen))), seen[10], seen[-1])
_pt.shutdown()
""",
        LAG_NS=0,
    )
    res = run_script(runtime_dir, body, env={"PATCHKIT_TIMER_SEED": "17"}, out_dir=out)
    assert res.returncode == 0, res.stderr
    assert "RESOLVE [1, 16] 16 1" in res.stdout
    recs = one_file(out)
    assert recs[0]["resolve_batch"] == 16
    samplings = [r for r in recs if r["kind"] == "sampling"]
    assert samplings[0]["resolve_batch"] == 1 and samplings[0]["p"] == 1 / 16
    timed = sorted(r["cycle"] for r in recs if r["kind"] == "cycle" and r.get("timed") is not False)
    assert sorted(r["cycle"] for r in recs if r["kind"] == "dev") == timed


# A device-bound engine (SGLang's v2 worker on a verify-bound model): the host launches a
# cycle, then waits for the device to finish the one before; what the timer costs the host
# while the device is busy costs the period nothing.
DEVICE_BOUND = """
deadline = [0]
def bound_cycle(host_ns, device_ns):
    start = clock[0]
    cycle(host_ns)
    deadline[0] = max(deadline[0], start) + device_ns
    clock[0] = max(clock[0], deadline[0])
"""


def test_hidden_cost_times_every_cycle(runtime_dir, tmp_path):
    """15 ms device-bound cycles, 2 ms of host work, 400 us of timer host time per timed
    cycle: 2.7 % of the period by host time (the host rule alone: p 1/4), none of it in the
    period. Once 32 pairs of adjacent timed/untimed cycles show it, every cycle is timed."""
    out = tmp_path / "out"
    body = DEVICE_BOUND + "cost[0] = 400_000\nfor i in range(1500):\n    bound_cycle(2_000_000, 15_000_000)"
    fake_run(runtime_dir, out, body)
    recs = one_file(out)
    samplings = [r for r in recs if r["kind"] == "sampling"]
    first = samplings[0]
    assert first["cycle"] == 64 and first["p"] == 1 / 4 and first["visible_ns"] is None
    assert first["host_cost_ns"] == first["cost_ns"] == 400_000
    up = next(s for s in samplings if s["p"] == 1.0 and s["prev_p"] < 1.0)
    assert up["visible_ns"] == 0 and up["cost_ns"] == 0 and up["host_cost_ns"] == 400_000
    assert up["pairs"] >= 32 and up["cycle"] <= 64 * 6
    flags = timed_flags(recs)
    assert len(flags) == 1500 and all(flags[up["cycle"] :])
    stats = recs[-1]["sampling"]
    assert stats["p"] == 1.0 and stats["visible_ns"] == 0 and stats["cost_ns"] == 0
    assert stats["host_cost_ns"] == 400_000 and stats["changes"] == 2


def test_partly_hidden_cost_is_what_the_period_shows(runtime_dir, tmp_path):
    """Device 4.4 ms, host 4 ms, timer 600 us: a timed cycle takes 4.6 ms, an untimed one
    4.4: 200 us show (pairs) of 600 us of host time. The host rule alone: p* = 1 % * 4.4 ms
    / 600 us = 0.073, 1/16; the pairs: p* = 0.22, and with the 25 % margin 1/8."""
    out = tmp_path / "out"
    body = DEVICE_BOUND + "cost[0] = 600_000\nfor i in range(4000):\n    bound_cycle(4_000_000, 4_400_000)"
    fake_run(runtime_dir, out, body)
    recs = one_file(out)
    samplings = [r for r in recs if r["kind"] == "sampling"]
    assert samplings[0]["p"] == 1 / 16 and samplings[0]["visible_ns"] is None
    stats = recs[-1]["sampling"]
    assert stats["host_cost_ns"] == 600_000 and stats["visible_ns"] == 200_000
    assert stats["cost_ns"] == 200_000 and stats["p"] == 1 / 8 and stats["changes"] == 2
    flags = timed_flags(recs)
    last = [s for s in samplings if s["p"] != s["prev_p"]][-1]
    rest = flags[last["cycle"] :]
    assert binomial_ok(sum(rest), len(rest), 1 / 8), sum(rest)


def test_another_workload_drops_the_pairs(runtime_dir, tmp_path):
    """Device-bound 15 ms cycles (every cycle timed), then a host-bound 4 ms workload where
    the timer's 500 us show in full: the newest periods fall by more than 1.25x, the pairs
    gathered at 15 ms no longer stand, the host rule takes over at once (1/16), and the new
    pairs agree with it."""
    out = tmp_path / "out"
    body = (
        DEVICE_BOUND
        + "cost[0] = 500_000\nfor i in range(1000):\n    bound_cycle(2_000_000, 15_000_000)\n"
        + "for i in range(3000):\n    cycle(4_000_000)\n"
    )
    fake_run(runtime_dir, out, body)
    recs = one_file(out)
    samplings = [r for r in recs if r["kind"] == "sampling"]
    before = [s for s in samplings if s["cycle"] <= 1000]
    assert before[-1]["p"] == 1.0 and before[-1]["visible_ns"] == 0
    drop = next(s for s in samplings if s["cycle"] > 1000 and s["p"] < 1.0)
    # the newest 64 periods: at the decision after 1024 mostly 15 ms still; at 1088 not
    assert drop["cycle"] == 1088 and drop["p"] <= 1 / 8
    assert drop["visible_ns"] is None and drop["pairs"] == 0 and drop["cost_ns"] == 500_000
    stats = recs[-1]["sampling"]
    assert stats["p"] == 1 / 16 and stats["visible_ns"] == 500_000 and stats["pairs"] >= 32
    flags = timed_flags(recs)
    low = next(s for s in samplings if s["p"] == 1 / 16)
    assert low["cycle"] <= drop["cycle"] + 64
    rest = flags[low["cycle"] :]
    assert binomial_ok(sum(rest), len(rest), 1 / 16), sum(rest)


def test_visible_cost_arithmetic(runtime_dir, tmp_path):
    """The pairs' one-sided 95 % upper bound: median + 1.645 * 1.2533 * 1.4826 * MAD / sqrt(n),
    at least 0; none below 32 pairs; pairs dropped when the newest periods' median moves more
    than 1.25x from the pairs' untimed periods' median (not below 16 newest periods)."""
    res = run_script(
        runtime_dir,
        """
import json
import phase_timer as pt
t = pt._Budget(1.0)
out = {}
def load(pairs, ref, now):
    t.pairs[:] = pairs
    t.pair_periods[:] = [ref] * len(pairs)
    t.periods[:] = now
load([100.0 * i for i in range(40)], 10e6, [10e6] * 64)
out["spread"] = t.visible_cost()
load([-50_000.0] * 40, 10e6, [12.4e6] * 64)
out["negative"] = t.visible_cost()
load([1.0] * 31, 10e6, [10e6] * 64)
out["few"] = t.visible_cost()
load([1.0] * 40, 10e6, [7.9e6] * 40)
out["moved"] = t.visible_cost()
out["after"] = [len(t.pairs), len(t.pair_periods)]
load([1.0] * 40, 10e6, [30e6] * 15)
out["too_few_now"] = t.visible_cost()
print(json.dumps(out))
""",
        out_dir=tmp_path / "out",
    )
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout)
    # 0, 100, ..., 3900: median 1950, MAD 1000
    assert got["spread"] == pytest.approx(1950 + 1.645 * 1.2533 * 1.4826 * 1000 / 40**0.5)
    assert got["negative"] == 0.0 and got["few"] is None and got["moved"] is None
    assert got["after"] == [0, 0] and got["too_few_now"] == 1.0


def test_controller_arithmetic(runtime_dir, tmp_path):
    """The levels and the margin for raising the rate, as functions of p*."""
    res = run_script(
        runtime_dir,
        """
import json
import phase_timer as pt
levels = {x: pt._level(x) for x in (5.0, 1.0, 0.99, 0.5, 0.3, 0.13, 0.125, 0.1, 0.0625, 0.05, 0.001, 0.0)}
print(json.dumps({str(k): v for k, v in levels.items()}))
""",
        out_dir=tmp_path / "out",
    )
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout)
    assert got == {
        "5.0": 0,
        "1.0": 0,
        "0.99": 1,
        "0.5": 1,
        "0.3": 2,
        "0.13": 3,
        "0.125": 3,
        "0.1": 4,
        "0.0625": 4,
        "0.05": 5,
        "0.001": 6,
        "0.0": 6,
    }


def test_hysteresis_keeps_a_level_at_its_edge(runtime_dir, tmp_path):
    """p* just above 1/8 after sitting at 1/16 (cost 300 us, 4 ms cycles: p* 0.134): the
    rate rises only where the budget allows 25 % more than the higher level (0.156)."""
    out = tmp_path / "out"
    body = """
cost[0] = 600_000
for i in range(1000):
    cycle(4_000_000)
cost[0] = 300_000   # p* = 0.01 * 4.02 ms / 300 us = 0.134: above 1/8, not 1.25 x 1/8
for i in range(2000):
    cycle(4_000_000)
"""
    fake_run(runtime_dir, out, body)
    recs = one_file(out)
    changes = [(s["cycle"], s["p"]) for s in recs if s["kind"] == "sampling" and s["p"] != s["prev_p"]]
    assert [p for _, p in changes] == [1 / 16], changes


def test_ab_blocks_follow_the_budget(runtime_dir, tmp_path):
    """With PATCHKIT_TIMER_AB the timed blocks are budgeted, the off blocks stay off."""
    out = tmp_path / "out"
    fake_run(
        runtime_dir,
        out,
        "cost[0] = 500_000\nfor i in range(2000):\n    cycle(4_000_000)",
        env={"PATCHKIT_TIMER_AB": "20"},
    )
    recs = one_file(out)
    cycles = {r["cycle"]: r for r in recs if r["kind"] == "cycle"}
    assert sorted(cycles) == list(range(2000))
    off = [c for i, c in cycles.items() if i // 20 % 2 == 1]
    assert all(c["ab"] == "off" for c in off)
    on = [c for i, c in cycles.items() if i // 20 % 2 == 0 and i >= 128]
    timed = sum(1 for c in on if c.get("timed") is not False)
    assert 0 < timed < len(on) / 4
    assert any(r["kind"] == "sampling" and r["p"] < 1 for r in recs)


# -- the report -------------------------------------------------------------------------


def test_report_says_budget_fraction_and_cost(runtime_dir, tmp_path):
    from patchkit.report import build_report, render_table

    out = tmp_path / "out"
    fake_run(runtime_dir, out, "cost[0] = 500_000\nfor i in range(3000):\n    cycle(4_000_000)")
    recs = one_file(out)
    n_timed = sum(timed_flags(recs))
    summary = build_report(out, tmp_path / "report", chart=False)
    data = json.loads((tmp_path / "report" / "summary.json").read_text())
    sampling = data["sampling"]
    assert sampling["every"] is None and sampling["seed"] == 17
    assert sampling["timed_cycles"] == n_timed and sampling["cycles"] == 3000
    budget = sampling["budget"]
    assert set(budget) == {
        "pct",
        "controller",
        "timed_fraction",
        "p_min",
        "p_max",
        "p_final",
        "changes",
        "cost_us",
        "host_cost_us",
        "visible_us",
        "period_ms",
        "period_source",
        "spent_pct",
        "weighted",
        "by_rank",
    }
    assert budget["pct"] == 1.0 and budget["controller"] == "visible-cost"
    assert budget["timed_fraction"] == pytest.approx(n_timed / 3000)
    assert budget["p_min"] == 1 / 16 and budget["p_max"] == 1.0 and budget["p_final"] == 1 / 16
    assert budget["changes"] == 1 and budget["weighted"] is True
    assert budget["cost_us"] == pytest.approx(500.0) and budget["host_cost_us"] == pytest.approx(500.0)
    assert budget["visible_us"] == pytest.approx(500.0)  # all of it shows (the period is host time)
    assert budget["period_ms"] == pytest.approx(4.03, abs=0.02) and budget["period_source"] == "runtime"
    assert budget["spent_pct"] == pytest.approx(100 * n_timed / 3000 * 0.5 / 4.03, rel=0.02)
    assert budget["by_rank"][0]["rank"] == 0 and budget["by_rank"][0]["p_final"] == 1 / 16
    line = next(ln for ln in render_table(summary).splitlines() if ln.startswith("timing budget"))
    assert line.startswith(
        f"timing budget 1% of the cycle period (visible-cost, bernoulli, seed 17): {n_timed} of 3000 "
        f"cycles timed ({100 * n_timed / 3000:.1f}%, p 1/16..1, 1 change); timer 500 µs per timed "
        f"cycle, cycle period {budget['period_ms']:.2f} ms: ~{budget['spent_pct']:.2f}% of the period "
        f"spent; shares weigh each timed cycle by 1/p"
    ), line
    # every cycle timed (long cycles): no weighting, the same figures as ever
    out2 = tmp_path / "long"
    fake_run(runtime_dir, out2, "cost[0] = 100_000\nfor i in range(300):\n    cycle(15_000_000)")
    summary = build_report(out2, tmp_path / "report2", chart=False)
    budget = summary.sampling["budget"]
    assert budget["timed_fraction"] == 1.0 and budget["p_min"] == budget["p_max"] == 1.0
    assert budget["weighted"] is False and budget["changes"] == 0
    assert "(100.0%, p 1, 0 changes)" in render_table(summary)


def test_report_says_what_the_period_hid(runtime_dir, tmp_path):
    """A device-bound run: the line gives the host time and the bound the pairs put on what
    showed; summary.json the three costs, each rank's too."""
    from patchkit.report import build_report, render_table

    out = tmp_path / "out"
    body = DEVICE_BOUND + "cost[0] = 400_000\nfor i in range(1200):\n    bound_cycle(2_000_000, 15_000_000)"
    fake_run(runtime_dir, out, body)
    summary = build_report(out, tmp_path / "report", chart=False)
    budget = summary.sampling["budget"]
    assert budget["host_cost_us"] == pytest.approx(400.0) and budget["visible_us"] == 0.0
    assert budget["cost_us"] == 0.0 and budget["spent_pct"] == 0.0 and budget["p_final"] == 1.0
    assert budget["by_rank"][0]["visible_us"] == 0.0 and budget["by_rank"][0][
        "host_cost_us"
    ] == pytest.approx(400.0)
    line = next(ln for ln in render_table(summary).splitlines() if ln.startswith("timing budget"))
    assert (
        "; timer 400 µs host time per timed cycle, at most 0 µs of it in the period, cycle period 15.00 ms"
        in line
    ), line


def test_report_before_any_decision(runtime_dir, tmp_path):
    """A run of fewer than 64 cycles: the cost measured so far (stats), the period from the
    cycle records."""
    from patchkit.report import build_report

    out = tmp_path / "out"
    fake_run(runtime_dir, out, "cost[0] = 200_000\nfor i in range(30):\n    cycle(4_000_000)")
    summary = build_report(out, tmp_path / "report", chart=False)
    budget = summary.sampling["budget"]
    assert budget["cost_us"] == pytest.approx(200.0, rel=0.05)
    assert budget["period_source"] == "cycles" and budget["period_ms"] == pytest.approx(4.2, rel=0.01)
    assert budget["timed_fraction"] == 1.0


def _synthetic(tmp_path, n_long=600, n_short=3000, p_short=1 / 16, seed=4):
    """A budgeted run on record: n_long 15 ms cycles (verify 80 % of them) timed at p 1,
    then n_short 4 ms cycles (verify 40 %) timed at p_short (a "sampling" record at the
    switch). Returns (folder, the verify share over every cycle, the unweighted share over
    the timed ones)."""
    rng = random.Random(seed)
    draw = random.Random(seed + 1)
    header = {
        "kind": "header",
        "schema": "patchkit.timing/1",
        "mode": "host",
        "rank": 0,
        "pid": 3,
        "host": "h",
        "clock": {"host_t0_ns": 0, "wall_t0_ns": 10**18},
        "sampling": {"every": None, "method": "bernoulli", "seed": 1, "p": 1.0, "budget_pct": 1.0},
    }
    recs = [header]
    t = 0
    all_verify = all_cycle = timed_verify = timed_cycle = 0
    for i in range(n_long + n_short):
        long = i < n_long
        if i == n_long:
            recs.append({"kind": "sampling", "cycle": i, "p": p_short, "prev_p": 1.0, "cost_ns": 1})
        length = int(rng.gauss(15e6 if long else 4e6, 3e5))
        verify = int(length * (0.8 if long else 0.4) * rng.uniform(0.95, 1.05))
        all_verify += verify
        all_cycle += length
        cycle = {"kind": "cycle", "cycle": i, "t0": t, "t1": t + length, "host_ns": length, "attrs": {}}
        if long or draw.random() < p_short:
            timed_verify += verify
            timed_cycle += length
            recs.append(
                {
                    "kind": "phase",
                    "name": "verify",
                    "cycle": i,
                    "depth": 0,
                    "parent": None,
                    "t0": t,
                    "t1": t + verify,
                    "host_ns": verify,
                    "graph": False,
                    "captured": False,
                }
            )
            recs.append(cycle)
        else:
            recs.append(dict(cycle, timed=False))
        t += length + 1000
    folder = tmp_path / "timing"
    folder.mkdir()
    (folder / "phase-timing.rank0.pid3.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    return folder, 100.0 * all_verify / all_cycle, 100.0 * timed_verify / timed_cycle


def test_shares_weigh_timed_cycles_by_one_over_p(tmp_path):
    """p varies with the cycle's kind of work (long cycles at 1, short ones at 1/16): the
    timed cycles over-represent the long ones 16-fold, and their plain share of verify is
    far from the run's; weighted by 1/p it is the run's, its interval covers it, and the
    mean cycle is the run's mean cycle."""
    from patchkit.report import build_report

    folder, truth, plain = _synthetic(tmp_path)
    summary = build_report(folder, tmp_path / "report", chart=False)
    verify = summary.phase("verify")
    assert abs(plain - truth) > 10  # it matters: 70 % of the cycle time sampled is long cycles
    assert verify["share_of_cycle"] == pytest.approx(truth, abs=1.0)
    lo, hi = verify["share_ci95"]
    assert lo <= truth <= hi
    assert summary.top_level_share == pytest.approx(truth, abs=1.0)
    # share = weighted mean phase / weighted mean cycle, as the table says
    assert verify["share_of_cycle"] == pytest.approx(
        100 * verify["per_cycle_host_ms"]["mean"] / summary.cycle["host_ms"]["mean"], rel=1e-9
    )
    mean_cycle = (600 * 15.0 + 3000 * 4.0) / 3600
    assert summary.cycle["host_ms"]["mean"] == pytest.approx(mean_cycle, rel=0.03)
    assert verify["per_cycle"] == pytest.approx(1.0)
    assert summary.sampling["budget"]["weighted"] is True
    assert summary.sampling["budget"]["p_min"] == 1 / 16


def test_one_rate_throughout_changes_nothing(tmp_path):
    """Every timed cycle drawn at one p: the report is the plain one (no weights)."""
    from patchkit.report import build_report
    from patchkit.report.load import load_timing_dir
    from patchkit.report.measured import cycle_weights

    folder, _, plain = _synthetic(tmp_path, n_long=0, n_short=2000, p_short=1 / 8)
    procs = load_timing_dir(folder)
    assert cycle_weights(procs, [{c["cycle"]: c for c in p.timed_cycles} for p in procs]) is None
    summary = build_report(folder, tmp_path / "report", chart=False)
    assert summary.phase("verify")["share_of_cycle"] == pytest.approx(plain, rel=1e-12)
    assert summary.sampling["budget"]["weighted"] is False

"""Every share of the cycle has its 95% interval: a percentile bootstrap over
whole timed cycles. Synthetic timing files (JSON lines in tmp_path) whose cycles are drawn
with a known share and noise, seeded: the interval covers the known share, narrows with more
cycles, the table says when there are too few cycles to read a share to within 2 points, and
the bootstrap agrees with a direct reference (and with scipy's, when scipy is installed)."""

import json
import math
import random
import re

import pytest

from patchkit.report import bootstrap, build_report, render_table
from patchkit.report.bootstrap import DASH, ratio_intervals, resample_indices
from patchkit.report.summarize import CI_TARGET_POINTS
from support.requires import requires

# a cycle: draft ~ U(0.5, 1.5) ms, verify ~ U(1, 5) ms, glue 0.2 ms; verify's share of the
# cycle is E[verify] / E[cycle] = 3 / (1 + 3 + 0.2)
DRAFT, VERIFY, GLUE = (0.5e6, 1.5e6), (1e6, 5e6), 200_000
TRUE_VERIFY = 100 * 3 / 4.2
TRUE_DRAFT = 100 * 1 / 4.2


def _cycle_times(rng: random.Random) -> tuple[int, int]:
    return int(rng.uniform(*DRAFT)), int(rng.uniform(*VERIFY))


def _write(folder, n, seed=1, rank=0, pid=1, mode="events", kinds=None, drift=0.0):
    """n cycles of draft (with a child draft_step) and verify, laid end to end; in events mode
    device times 1.1x the host's. `kinds`: {kind: count} of extra cycles after the decode
    ones (e.g. noisy prefill cycles). `drift`: verify scaled by 1 + x/4 (clipped to [0.2, 1.8],
    a symmetric clip: the mean share stays TRUE_VERIFY), x a stationary AR(1) of unit variance
    with this coefficient per cycle (a batch make-up that drifts over the run)."""
    rng = random.Random(seed)
    x = rng.gauss(0.0, 1.0)
    folder.mkdir(parents=True, exist_ok=True)
    recs: list[dict] = [
        {
            "kind": "header",
            "schema": "patchkit.timing/1",
            "mode": mode,
            "rank": rank,
            "pid": pid,
            "host": "h",
            "clock": {"host_t0_ns": 0, "wall_t0_ns": 1_764_600_000_000_000_000},
        }
    ]
    plan = [("decode", i) for i in range(n)]
    for kind, count in (kinds or {}).items():
        plan += [(kind, i) for i in range(count)]
    t = 0
    for index, (kind, _) in enumerate(plan):
        draft, verify = _cycle_times(rng)
        if drift:
            x = drift * x + math.sqrt(1 - drift * drift) * rng.gauss(0.0, 1.0)
            verify = int(verify * min(1.8, max(0.2, 1 + x / 4)))
        if kind != "decode":  # a noisy other kind: mostly its own phase
            draft, verify = int(rng.uniform(1e6, 20e6)), int(rng.uniform(1e6, 20e6))
        start = t
        phases = [
            ("draft", 0, None, draft),
            ("draft_step", 1, "draft", draft // 2),
            ("verify", 0, None, verify),
        ]
        for name, depth, parent, ns in phases:
            recs.append(
                {
                    "kind": "phase",
                    "name": name,
                    "cycle": index,
                    "depth": depth,
                    "parent": parent,
                    "t0": t,
                    "t1": t + ns,
                    "host_ns": ns,
                    "dev_ns": int(ns * 1.1) if mode == "events" else None,
                    "graph": False,
                    "captured": False,
                }
            )
            if depth == 0:
                t += ns
        t += GLUE
        recs.append(
            {
                "kind": "cycle",
                "cycle": index,
                "t0": start,
                "t1": t,
                "host_ns": t - start,
                "dev_ns": int((t - start) * 1.1) if mode == "events" else None,
                "attrs": {"kind": kind, "batch_size": 4, "accepted": 4},
            }
        )
        t += 1000
    (folder / f"phase-timing.rank{rank}.pid{pid}.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in recs)
    )
    return folder


def _report(tmp_path, name, n, **kw):
    folder = _write(tmp_path / name, n, **kw)
    return build_report(folder, tmp_path / f"{name}-out", chart=False)


def _hw(ci):
    return (ci[1] - ci[0]) / 2


def test_intervals_cover_the_known_share(tmp_path):
    """Over 40 independent runs of 200 cycles, the 95% intervals cover the share the cycles
    were drawn with about 95% of the time (binomial: 34 or more of 40 unless the interval
    is too narrow), on the device basis and for the host share alike."""
    covered = {"verify": 0, "draft": 0, "host verify": 0}
    runs = 40
    for seed in range(runs):
        summary = _report(tmp_path, f"r{seed}", 200, seed=100 + seed)
        verify, draft = summary.phase("verify"), summary.phase("draft")
        # device times are 1.1x host times throughout: the same share on both bases
        truth = {"verify": TRUE_VERIFY, "draft": TRUE_DRAFT, "host verify": TRUE_VERIFY}
        cis = {
            "verify": verify["share_ci95"],
            "draft": draft["share_ci95"],
            "host verify": verify["host_share_ci95"],
        }
        for key, (lo, hi) in cis.items():
            covered[key] += lo <= truth[key] <= hi
            assert 0.3 < hi - lo < 8  # a real interval, neither a point nor everything
        lo, hi = verify["share_ci95"]
        assert lo <= verify["share_of_cycle"] <= hi
    for key, hits in covered.items():
        assert hits >= 34, (key, hits)


@pytest.mark.slow  # 11 s: many simulated runs; make test-fast keeps the known-share coverage above
def test_intervals_cover_the_share_when_the_batch_drifts(tmp_path):
    """Cycles whose verify time drifts (AR(1), 0.9 a cycle): neighbouring cycles are alike, so
    resampling single cycles gives intervals far too narrow (about 40 % coverage); blocks of
    consecutive cycles keep the drift in the resamples."""
    runs, hits = 40, 0
    for seed in range(runs):
        report = _report(tmp_path, f"drift{seed}", 1000, seed=100 + seed, drift=0.9)
        lo, hi = report.phase("verify")["share_ci95"]
        hits += lo <= TRUE_VERIFY <= hi
    assert hits >= 34, hits
    assert "blocks of consecutive timed cycles" in report.share_ci["method"]


def test_intervals_narrow_with_more_cycles(tmp_path):
    few = _report(tmp_path, "few", 100)
    many = _report(tmp_path, "many", 2000)
    for name in ("draft", "draft_step", "verify"):
        w_few, w_many = _hw(few.phase(name)["share_ci95"]), _hw(many.phase(name)["share_ci95"])
        # 1/sqrt(cycles): 20 times the cycles, about 4.5 times narrower; each width rests on
        # 20 blocks (bootstrap.BLOCKS), so it varies by ~16 % itself
        assert 2.0 < w_few / w_many < 10.0, (name, w_few, w_many)
    assert _hw(many.top_level_share_ci95) < _hw(few.top_level_share_ci95)
    assert many.share_ci["timed_cycles"] == 2000 and few.share_ci["timed_cycles"] == 100


def test_too_few_cycles_note(tmp_path):
    few = _report(tmp_path, "few", 18)
    table = render_table(few)
    verify = few.phase("verify")
    assert _hw(verify["share_ci95"]) > CI_TARGET_POINTS
    info = few.share_ci
    need = info["cycles_for_target"]
    widest = info["widest"]["half_width"]
    assert need == math.ceil(18 * (widest / 2) ** 2)
    (note,) = [line for line in table.splitlines() if "too few" in line]
    assert note.startswith("note: 18 timed cycles are too few to read every share to within 2 points")
    assert f"±{widest:.1f}" in note and "1/sqrt(cycles)" in note
    shown = int(re.search(r"about (\d+) would do", note).group(1))
    assert abs(shown - need) <= 0.05 * need  # two significant figures
    # about that many cycles of the same kind do read every share to within about 2 points
    enough = _report(tmp_path, "enough", need, seed=5)
    assert max(_hw(e["share_ci95"]) for e in enough.phases) < 2.6
    many = _report(tmp_path, "many", 2000)
    assert many.share_ci["cycles_for_target"] is None
    assert "too few" not in render_table(many)


def test_table_prints_each_interval_beside_its_share(tmp_path):
    summary = _report(tmp_path, "t", 18)
    lines = render_table(summary).splitlines()
    assert "95% interval" in lines[1]
    for e in summary.phases:
        lo, hi = e["share_ci95"]
        row = next(x for x in lines if x.split()[:1] == [e["name"]])
        assert row.endswith(f"{e['share_of_cycle']:.1f}%  " + f"[{lo:.1f}{DASH}{hi:.1f}]".rjust(12))
    lo, hi = summary.top_level_share_ci95
    assert f"top-level phases cover {summary.top_level_share:.1f}% [{lo:.1f}{DASH}{hi:.1f}] of the cycle" in (
        "\n".join(lines)
    )
    assert any(x.startswith(f"[low{DASH}high] = the share's 95% interval: a bootstrap") for x in lines)


def test_note_per_kind_of_cycle(tmp_path):
    """With decode and prefill cycles, each kind's section has its own note: 2,000 decode
    cycles read to within 2 points, 12 noisy prefill cycles do not."""
    folder = _write(tmp_path / "t", 2000, kinds={"prefill": 12})
    summary = build_report(folder, tmp_path / "r", chart=False)
    table = render_table(summary)
    assert summary.cycle_kinds["decode"]["share_ci"]["cycles_for_target"] is None
    assert summary.cycle_kinds["prefill"]["share_ci"]["timed_cycles"] == 12
    notes = [line for line in table.splitlines() if "too few" in line]
    assert len(notes) == 1 and notes[0].startswith("note: 12 timed prefill cycles are too few")
    lines = table.splitlines()
    assert lines.index(notes[0]) > next(i for i, x in enumerate(lines) if x.startswith("prefill ("))
    for kind in ("decode", "prefill"):
        part = summary.cycle_kinds[kind]
        assert part["top_level_share_ci95"] is not None
        assert all(len(e["share_ci95"]) == 2 for e in part["phases"])


def test_summary_json_keys(tmp_path):
    folder = _write(tmp_path / "t", 50)
    build_report(folder, tmp_path / "r", chart=False)
    data = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert data["schema"] == "patchkit.report/1"  # keys added, none changed
    for e in data["phases"]:
        assert {
            "share_of_cycle",
            "host_share_of_cycle",
            "share_ci95",
            "host_share_ci95",
            "timed_cycles",
        } <= set(e)
        lo, hi = e["share_ci95"]
        assert lo <= hi and 0 <= lo <= 100 and e["timed_cycles"] == 50
        assert len(e["host_share_ci95"]) == 2
    assert len(data["top_level_share_ci95"]) == 2
    ci = data["share_ci"]
    assert ci["level"] == 95.0 and ci["resamples"] == bootstrap.RESAMPLES and ci["seed"] == bootstrap.SEED
    assert ci["timed_cycles"] == 50 and ci["host_timed_cycles"] == 50
    assert {"method", "widest", "target_points", "cycles_for_target"} <= set(ci)
    dc = data["decode_cycle"]
    assert set(dc["phase_shares_ci95"]) == set(dc["phase_shares"]) == {"draft", "verify"}
    assert len(dc["top_level_share_ci95"]) == 2
    kind = data["cycle_kinds"]["decode"]
    assert kind["share_ci"] == ci and kind["top_level_share_ci95"] == data["top_level_share_ci95"]


def test_ranks_of_one_cycle_are_one_unit(tmp_path):
    """Tensor-parallel ranks run the same cycle: their records of one cycle index are resampled
    together, so 2 ranks of 30 cycles are 30 units, not 60."""
    folder = tmp_path / "t"
    _write(folder, 30, seed=1, rank=0, pid=1)
    _write(folder, 30, seed=2, rank=1, pid=2)
    summary = build_report(folder, tmp_path / "r", chart=False)
    assert summary.cycle["count"] == 60
    assert summary.share_ci["timed_cycles"] == 30
    assert summary.phase("verify")["timed_cycles"] == 30


def test_reproducible_and_the_same_without_numpy(tmp_path, monkeypatch):
    folder = _write(tmp_path / "t", 60)
    first = build_report(folder, tmp_path / "a", chart=False)
    again = build_report(folder, tmp_path / "b", chart=False)
    assert first.to_dict()["phases"] == again.to_dict()["phases"]
    monkeypatch.setattr(bootstrap, "_numpy", lambda: None)
    plain = build_report(folder, tmp_path / "c", chart=False)
    for a, b in zip(first.phases, plain.phases):
        assert a["share_ci95"] == b["share_ci95"] and a["host_share_ci95"] == b["host_share_ci95"]
    assert first.top_level_share_ci95 == plain.top_level_share_ci95


def test_too_few_cycles_for_any_interval(tmp_path):
    summary = _report(tmp_path, "one", 1)
    assert summary.phase("verify")["share_of_cycle"] is not None
    assert summary.phase("verify")["share_ci95"] is None and summary.top_level_share_ci95 is None
    table = render_table(summary)
    row = next(x for x in table.splitlines() if x.split()[:1] == ["verify"])
    assert row.endswith("%" + " " * 13 + "-")


def _rows(n, seed=3):
    """Units as the report builds them: [draft, verify, cycle] ns of one cycle each."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        draft, verify = _cycle_times(rng)
        out.append([draft, verify, draft + verify + GLUE])
    return out


def _pct(ordered, q):
    pos = (len(ordered) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def _reference(rows, pairs, resamples=bootstrap.RESAMPLES, seed=bootstrap.SEED):
    """The bootstrap written out directly: each resample's units drawn one by one, the share
    recomputed as a ratio of sums, the 2.5th and 97.5th percentiles (linear, as numpy's)."""
    out = []
    n = len(rows)
    draws = [resample_indices(n, b, seed) for b in range(resamples)]
    for num, den in pairs:
        shares = sorted(
            100.0 * sum(rows[i][num] for i in idx) / sum(rows[i][den] for i in idx) for idx in draws
        )
        out.append((_pct(shares, 2.5), _pct(shares, 97.5)))
    return out


@pytest.mark.parametrize("n", [2, 7, 18, 150])
def test_bootstrap_equals_a_direct_reference(n):
    rows = _rows(n)
    pairs = [(0, 2), (1, 2)]
    expected = _reference(rows, pairs)
    assert ratio_intervals(rows, pairs, use_numpy=False) == expected
    assert ratio_intervals(rows, pairs, use_numpy=True) == expected


def test_resample_draws_are_uniform_and_differ_per_resample():
    n = 50
    counts = [0] * n
    draws = [resample_indices(n, b) for b in range(400)]
    for idx in draws:
        for i in idx:
            counts[i] += 1
    # 20,000 draws over 50 units: 400 each, sd 20
    assert min(counts) > 320 and max(counts) < 480
    assert len({tuple(d) for d in draws}) == 400
    assert resample_indices(n, 0, seed=1) != resample_indices(n, 0, seed=2)


def test_bootstrap_agrees_with_an_independent_resampler():
    """Against resamples drawn by Python's own generator (random.choices): percentile
    intervals of 4,000 resamples agree to within their Monte Carlo error."""
    rows = _rows(300, seed=9)
    rng = random.Random(4)
    shares = []
    for _ in range(4000):
        pick = rng.choices(rows, k=len(rows))
        shares.append(100.0 * sum(r[1] for r in pick) / sum(r[2] for r in pick))
    shares.sort()
    ref = (shares[int(0.025 * 3999)], shares[int(0.975 * 3999)])
    (ours,) = ratio_intervals(rows, [(1, 2)])
    width = ref[1] - ref[0]
    assert abs(ours[0] - ref[0]) < 0.1 * width and abs(ours[1] - ref[1]) < 0.1 * width


def test_bootstrap_agrees_with_scipy():
    stats = pytest.importorskip("scipy.stats")
    np = pytest.importorskip("numpy")
    rows = _rows(300, seed=9)
    num = np.array([r[1] for r in rows], dtype=float)
    den = np.array([r[2] for r in rows], dtype=float)
    res = stats.bootstrap(
        (num, den),
        lambda a, b: 100.0 * a.sum() / b.sum(),
        paired=True,
        vectorized=False,
        method="percentile",
        n_resamples=4000,
        confidence_level=0.95,
        random_state=np.random.default_rng(4),
    )
    lo, hi = res.confidence_interval
    (ours,) = ratio_intervals(rows, [(1, 2)])
    width = hi - lo
    assert abs(ours[0] - lo) < 0.1 * width and abs(ours[1] - hi) < 0.1 * width


def _budgeted(folder, change_at: int, p: float) -> None:
    """The run of `folder` as drawn under a budget: every cycle timed until `change_at`, then
    one in 1/p (the others untimed), and from there verify twice as long: the weighting by
    1/p moves the shares and their intervals."""
    path = next(folder.glob("*.jsonl"))
    recs = [json.loads(x) for x in path.read_text().splitlines()]
    recs[0]["sampling"] = {"every": None, "p": 1, "budget_pct": 1.0, "method": "bernoulli", "seed": 3}
    keep = round(1 / p)
    grown: dict[int, int] = {}
    untimed = {
        r["cycle"] for r in recs if r["kind"] == "cycle" and r["cycle"] >= change_at and r["cycle"] % keep
    }
    out = []
    for r in recs:
        if r["kind"] == "phase" and r["cycle"] in untimed:
            continue
        if r.get("cycle") == change_at and r["kind"] == "phase" and r["name"] == "draft":
            out.append({"kind": "sampling", "cycle": change_at, "p": p})
        if r.get("cycle", -1) >= change_at and r["cycle"] not in untimed:
            if r["kind"] == "phase" and r["name"] == "verify":
                extra = r["host_ns"]
                r["host_ns"] += extra
                r["dev_ns"] += int(extra * 1.1)
                grown[r["cycle"]] = extra
            elif r["kind"] == "cycle":
                r["host_ns"] += grown[r["cycle"]]
                r["dev_ns"] += int(grown[r["cycle"]] * 1.1)
        if r["kind"] == "cycle" and r["cycle"] in untimed:
            r["timed"] = False
        out.append(r)
    path.write_text("".join(json.dumps(r) + "\n" for r in out))


def test_the_charts_intervals_are_the_summarys_under_a_budget(tmp_path):
    from patchkit.report import load_timing_dir, select
    from patchkit.report.chart import share_bars

    folder = _write(tmp_path / "run", 400, seed=5)
    _budgeted(folder, change_at=200, p=0.25)
    summary = build_report(folder, tmp_path / "out", chart=False)
    data = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert data["sampling"]["budget"] is not None and data["sampling"]["timed_cycles"] == 250
    top = {e["name"]: e for e in data["phases"] if e["depth"] == 0}
    names = list(top)
    assert names == ["draft", "verify"]
    selection = select(load_timing_dir(folder), str(folder))
    [(label, shares, intervals)] = share_bars(
        selection.procs, selection.stall_sets, None, summary.basis, names
    )
    assert label == "r0 pid 1"
    assert shares == pytest.approx([top[n]["share_of_cycle"] for n in names])
    assert [list(ci) for ci in intervals[:2]] == [top[n]["share_ci95"] for n in names]
    lo, hi = data["top_level_share_ci95"]
    assert list(intervals[2]) == [max(100.0 - hi, 0.0), max(100.0 - lo, 0.0)]


@requires("matplotlib", reason="report.html: the report extra")
def test_table_page_and_summary_name_the_bootstrap_alike(tmp_path):
    """One wording for what the share bootstrap resamples (bootstrap.UNIT), in table.txt, in
    report.html's own words (not table.txt inside it) and in summary.json's share_ci.method."""
    out = tmp_path / "out"
    build_report(_write(tmp_path / "timing", 100), out)
    table = (out / "table.txt").read_text()
    page = (out / "report.html").read_text().split('<section id="table">')[0]
    method = json.loads((out / "summary.json").read_text())["share_ci"]["method"]
    assert bootstrap.UNIT == "blocks of consecutive timed cycles"
    for text in (table, page, method):
        assert f"bootstrap over {bootstrap.UNIT}" in text
        assert "whole cycles" not in text

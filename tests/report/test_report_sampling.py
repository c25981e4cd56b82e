"""Sampled timing (PATCHKIT_TIMER_SAMPLE=N) on the report side, over synthetic JSON lines in the
record format the runtime writes: cycles that were not timed are cycle records with host
times, attrs and "timed": false, and no phase records.

One synthetic run is written twice: fully timed, and with a seeded Bernoulli choice of 1 in
EVERY cycles timed (the others' phases dropped). The cycles themselves are identical, so the
sampled report must count the same cycles, requests and tokens, and its shares must agree
with the full ones within the sampling error.
"""

import json
import random

import pytest

from patchkit.report import build_report, render_table

EVERY = 4
CYCLES = 3000
SEED = 11


def _runs(tmp_path, stall_at: int | None = None):
    """(full folder, sampled folder, indices of the timed cycles)."""
    rng = random.Random(5)
    pick = random.Random(SEED)
    header = {
        "kind": "header",
        "schema": "patchkit.timing/1",
        "mode": "host",
        "rank": 0,
        "pid": 9,
        "host": "h",
        "clock": {"host_t0_ns": 0, "wall_t0_ns": 10**18},
    }
    full, sampled = [header], [dict(header, sampling={"every": EVERY, "method": "bernoulli", "seed": SEED})]
    timed_set = set()
    t = 1000
    for i in range(CYCLES):
        bs = rng.choice([1, 4, 8, 16])
        draft = int(rng.gauss(1.0e6 + 2e4 * bs, 1e5))
        verify = int(rng.gauss(2.5e6 + 8e4 * bs, 3e5))
        step = draft // 3
        glue = int(rng.expovariate(1 / 4e5))
        if i == stall_at:
            draft += 500_000_000  # a stall in a cycle the sampler skipped
        phases = [
            {
                "kind": "phase",
                "name": "draft",
                "cycle": i,
                "depth": 0,
                "parent": None,
                "t0": t,
                "t1": t + draft,
                "host_ns": draft,
                "dev_ns": None,
                "dev_off_ns": None,
                "graph": False,
                "captured": False,
            }
        ]
        for s in range(3):
            phases.append(
                {
                    "kind": "phase",
                    "name": "draft_step",
                    "cycle": i,
                    "depth": 1,
                    "parent": "draft",
                    "t0": t + s * step,
                    "t1": t + (s + 1) * step,
                    "host_ns": step,
                    "dev_ns": None,
                    "dev_off_ns": None,
                    "graph": False,
                    "captured": False,
                }
            )
        phases.append(
            {
                "kind": "phase",
                "name": "verify",
                "cycle": i,
                "depth": 0,
                "parent": None,
                "t0": t + draft,
                "t1": t + draft + verify,
                "host_ns": verify,
                "dev_ns": None,
                "dev_off_ns": None,
                "graph": False,
                "captured": False,
            }
        )
        length = draft + verify + glue
        cycle = {
            "kind": "cycle",
            "cycle": i,
            "t0": t,
            "t1": t + length,
            "host_ns": length,
            "dev_ns": None,
            "dev_gap_ns": None,
            "attrs": {"kind": "decode", "batch_size": bs, "accepted": bs},
        }
        full += phases + [cycle]
        timed = pick.random() < 1 / EVERY and i != stall_at
        if timed:
            timed_set.add(i)
            sampled += phases + [cycle]
        else:
            sampled.append(dict(cycle, timed=False))
        t += length + 1000
    folders = []
    for name, recs in (("full", full), ("sampled", sampled)):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "phase-timing.rank0.pid9.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
        folders.append(folder)
    return folders[0], folders[1], timed_set


@pytest.mark.slow  # times thousands of cycles twice (about 2 s)
def test_sampled_shares_match_full_timing(tmp_path):
    full_dir, sampled_dir, timed = _runs(tmp_path)
    full = build_report(full_dir, tmp_path / "rf", chart=False)
    sampled = build_report(sampled_dir, tmp_path / "rs")
    k = len(timed)
    assert abs(k - CYCLES / EVERY) < 4 * (CYCLES / EVERY) ** 0.5  # about 1 in EVERY
    assert full.sampling is None
    assert sampled.sampling == {
        "every": EVERY,
        "method": "bernoulli",
        "seed": SEED,
        "timed_cycles": k,
        "cycles": CYCLES,
    }
    # every cycle counted, timed or not; requests and tokens from all of them
    assert sampled.cycle["count"] == full.cycle["count"] == CYCLES
    assert sampled.decode_cycle["count"] == CYCLES and sampled.decode_cycle["timed_cycles"] == k
    assert sampled.decode["request_cycles"] == full.decode["request_cycles"]
    assert sampled.decode["tokens"] == full.decode["tokens"]
    # phases: counts are calls timed, statistics over the timed cycles
    for name, per in (("draft", 1), ("draft_step", 3), ("verify", 1)):
        entry = sampled.phase(name)
        assert entry["count"] == per * k and entry["per_cycle"] == per
        assert entry["per_cycle_host_ms"]["n"] == k
        assert full.phase(name)["count"] == per * CYCLES
        assert entry["share_of_cycle"] == pytest.approx(full.phase(name)["share_of_cycle"], abs=1.0), name
    assert sampled.top_level_share == pytest.approx(full.top_level_share, abs=1.0)
    assert sampled.decode_cycle["phase_shares"]["verify"] == pytest.approx(
        full.decode_cycle["phase_shares"]["verify"], abs=1.0
    )
    # the line under the table, and the data behind it
    table = render_table(sampled)
    assert (
        f"sampled timing (1 cycle in {EVERY}, bernoulli, seed {SEED}): {k} of {CYCLES} "
        f"cycles timed; shares and phase statistics from the timed cycles"
    ) in table
    assert "sampled timing" not in render_table(full)
    data = json.loads((tmp_path / "rs" / "summary.json").read_text())
    assert data["sampling"]["timed_cycles"] == k and data["sampling"]["every"] == EVERY
    # the trace shows every cycle, the untimed ones marked
    trace = json.loads((tmp_path / "rs" / "trace.json").read_text())
    spans = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["cat"] == "cycle"]
    assert len(spans) == CYCLES
    assert sum(1 for e in spans if e["args"].get("timed") is False) == CYCLES - k


def test_a_stall_in_an_untimed_cycle_is_counted_as_unsampled(tmp_path):
    _, sampled_dir, timed = _runs(tmp_path, stall_at=100)
    summary = build_report(sampled_dir, tmp_path / "r", chart=False)
    st = summary.stalls["decode"]
    (stall,) = [c for c in st["cycles"] if c["cycle"] == 100]
    assert stall["phase"] == "unsampled" and stall["ms"] > 500
    assert st["by_phase"]["unsampled"] >= stall["ms"]
    assert 100 not in timed and summary.cycle["count"] == CYCLES
    assert "in unsampled" in render_table(summary)


def test_only_untimed_records_still_say_sampled(tmp_path):
    """A cycle marked "timed": false in a file whose header does not say how it sampled."""
    header = {
        "kind": "header",
        "schema": "patchkit.timing/1",
        "mode": "host",
        "rank": 0,
        "pid": 2,
        "clock": {"host_t0_ns": 0, "wall_t0_ns": 0},
    }
    recs = [
        header,
        {
            "kind": "phase",
            "name": "verify",
            "cycle": 0,
            "depth": 0,
            "parent": None,
            "t0": 0,
            "t1": 50,
            "host_ns": 50,
            "graph": False,
            "captured": False,
        },
        {"kind": "cycle", "cycle": 0, "t0": 0, "t1": 100, "host_ns": 100, "attrs": {}},
        {"kind": "cycle", "cycle": 1, "t0": 200, "t1": 300, "host_ns": 100, "attrs": {}, "timed": False},
    ]
    (tmp_path / "phase-timing.rank0.pid2.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    summary = build_report(tmp_path, tmp_path / "r", chart=False)
    assert summary.sampling == {"every": None, "method": None, "seed": None, "timed_cycles": 1, "cycles": 2}
    assert summary.cycle["count"] == 2 and summary.phase("verify")["count"] == 1
    assert summary.phase("verify")["share_of_cycle"] == pytest.approx(50.0)
    assert "sampled timing: 1 of 2 cycles timed" in render_table(summary)


def test_stalls_on_device_time_in_events_mode(tmp_path):
    """Events mode: cycles are judged on device time; a cycle whose device time never came is
    judged on host time against the host median."""
    header = {
        "kind": "header",
        "schema": "patchkit.timing/1",
        "mode": "events",
        "rank": 0,
        "pid": 4,
        "clock": {"host_t0_ns": 0, "wall_t0_ns": 0},
    }
    recs = [header]
    for i in range(40):
        dev = 200_000_000 if i == 7 else 5_000_000  # a 200 ms GPU-side stall
        host = 300_000_000 if i == 39 else 1_000_000  # the last: slow on the host, unresolved
        t = i * 400_000_000
        recs.append(
            {
                "kind": "phase",
                "name": "verify",
                "cycle": i,
                "depth": 0,
                "parent": None,
                "t0": t,
                "t1": t + host // 2,
                "host_ns": host // 2,
                "dev_ns": None if i == 39 else dev * 3 // 4,
                "dev_off_ns": 0,
                "graph": True,
                "captured": False,
            }
        )
        recs.append(
            {
                "kind": "cycle",
                "cycle": i,
                "t0": t,
                "t1": t + host,
                "host_ns": host,
                "dev_ns": None if i == 39 else dev,
                "dev_gap_ns": None,
                "attrs": {"kind": "decode", "batch_size": 8},
            }
        )
    (tmp_path / "phase-timing.rank0.pid4.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    summary = build_report(tmp_path, tmp_path / "r", chart=False)
    assert summary.basis == "device"
    st = summary.stalls["decode"]
    found = {c["cycle"]: c for c in st["cycles"]}
    assert set(found) == {7, 39}
    assert found[7]["measure"] == "device" and found[7]["ms"] == 200.0
    assert found[7]["phase"] == "verify" and not found[7]["first_at_batch_size"]
    assert found[39]["measure"] == "host" and found[39]["ms"] == 300.0
    # the steady shares: 75% verify on the device, untouched by the stall
    assert summary.phase("verify")["share_of_cycle"] == pytest.approx(75.0)
    assert summary.cycle["steady"] == 38 and summary.cycle["count"] == 40

"""One run's numbers agree: every cycle count in table.txt, summary.json and profile.predict is
named by what it counts; the mean accepted lengths are labelled by the cycles they pool;
predict's header gives the run's own number of draft tokens; and a run whose stalls or timer
cost pass their thresholds says so, with what to do (patchkit.report.counts, .trust).

A known run on the fake clock (support.timing_files.FakeRuntime), shaped like profile.run's
transformers workload: 4 warm-up cycles before the measured window, then 3 generate() calls of
10 cycles each (the first of each call a ``prefill`` cycle), a 0.5 s pause between the calls
(the plain pass the workload runs between them), and one 400 ms stall in the second call.
"""

from __future__ import annotations

import json

import pytest

from patchkit.report import build_report
from patchkit.report.predict import predict_run, render
from patchkit.report.window import write_window
from support.timing_files import FakeRuntime

DECODE_ACCEPTED = (4, 2, 3)  # accepted drafts of decode cycle i: DECODE_ACCEPTED[i % 3], of 4


def _cycle(pt: FakeRuntime, accepted: int, prefill: bool, verify_s: float) -> None:
    pt.cycle_begin(batch_size=1, prefill=prefill)
    pt.begin("draft")
    pt.begin("draft_generate")
    pt.sleep(0.010)
    pt.end("draft_generate")
    pt.end("draft")
    pt.begin("verify")
    pt.begin("verify_forward")
    pt.sleep(verify_s)
    pt.end("verify_forward")
    pt.end("verify")
    pt.cycle_end(accepted=accepted, tokens=accepted + 1, drafted=4)


def known_run(folder, stall: bool = True, header: dict | None = None) -> FakeRuntime:
    pt = FakeRuntime()
    for i in range(4):  # warm-up
        _cycle(pt, 4, i == 0, 0.020)
    pt.sleep(0.1)
    start = pt.wall_ns()
    for call in range(3):
        for i in range(10):
            verify = 0.040 if i == 0 else 0.020
            if stall and call == 1 and i == 5:
                verify = 0.400
            _cycle(pt, 4 if i == 0 else DECODE_ACCEPTED[i % 3], i == 0, verify)
        pt.sleep(0.5)  # the plain pass between two assisted calls
    pt.write(folder, **(header or {}))
    write_window(folder, start, pt.wall_ns(), source="test")
    return pt


@pytest.fixture(scope="module")
def known(tmp_path_factory):
    root = tmp_path_factory.mktemp("known")
    known_run(root / "timing")
    summary = build_report(root / "timing", root, meta={"tokens_per_s": 50.0}, chart=False)
    return root, summary


# the run's counts, by hand: 30 cycles in the window (3 prefill, 27 decode), all timed; the stall
# leaves 29 in the statistics; a period needs the next cycle of the same call: 29 consecutive
# pairs, less the 2 whose next cycle begins a call, less the stall = 26 (3 prefill, 23 decode)
COUNTS = {
    "recorded": 30,
    "warmup_excluded": 4,
    "after_window_excluded": 0,
    "decode": 27,
    "prefill": 3,
    "timed": 30,
    "stalls": 1,
    "in_statistics": 29,
    "with_acceptance": 30,
    "decode_with_period": 23,
    "prefill_with_period": 3,
    "client_pauses": 0,
    "modelled": 23,
}


def test_summary_names_every_count(known):
    root, _ = known
    data = json.loads((root / "summary.json").read_text())
    counts = {k: v for k, v in data["cycle_counts"].items() if k != "scope"}
    assert counts == COUNTS
    # the same sets where other keys count them
    assert data["cycle"]["count"] == COUNTS["recorded"] and data["cycle"]["steady"] == COUNTS["in_statistics"]
    assert data["warmup_cycles"] == COUNTS["warmup_excluded"]
    assert data["acceptance"]["cycles_with_acceptance"] == COUNTS["with_acceptance"]
    assert data["time_split"]["decode"]["cycles"] == COUNTS["decode_with_period"]
    assert data["time_split"]["prefill"]["cycles"] == COUNTS["prefill_with_period"]
    # a decode cycle's period is its own 30 ms (+ the fake clock's nothing): the pauses are not in it
    assert data["time_split"]["decode"]["period_mean_ms"] == pytest.approx(30.0)


def test_the_table_says_each_count_by_its_name(known):
    root, _ = known
    table = (root / "table.txt").read_text()
    assert table.splitlines()[0].endswith(
        "mode host, 30 cycles recorded; times in ms, share = % of cycle host time"
    )
    assert (
        "cycles (lead rank): 30 recorded in the measured window (27 decode, 3 prefill; 4 warm-up before it "
        "and 0 after it excluded); 30 timed, 1 stall, 29 in the statistics; 30 carry acceptance; "
        "23 decode + 3 prefill with a period (time in cycles; 0 client pauses left out); "
        "23 decode cycles modelled by the what-if"
    ) in table
    assert "times: ms per cycle over the steady-state cycles (29: timed, not stalls)" in table
    assert "num_steps 4, 30 cycles carry it, 30 request steps" in table
    assert "decode 23 x 30.00 ms = 0.69 s, prefill 3 x 50.00 ms = 0.15 s" in table
    # 3 prefill cycles accepted 4, the 27 decode cycles 9 x (2 + 3 + 4): (12 + 81) / 30 + 1
    assert "mean accepted length: 4.10 tokens per request per verify step, pooled over the 30 cycles" in table


def test_predict_counts_the_same_cycles_and_labels_its_means(known):
    root, _ = known
    pred = predict_run(root, bootstrap=0)
    text = render(pred)
    assert pred["cycles"] == COUNTS["modelled"] and pred["timed_cycles"] == COUNTS["modelled"]
    head = text.splitlines()[0]
    assert head == (
        "what-if from one run at num-steps 4 (4 draft tokens per cycle), transformers: 23 decode cycles "
        "modelled (with a period and acceptance; the report's cycle counts name the rest), 23 of them timed"
    )
    assert pred["profiled"]["num_draft_tokens"] == 4 and [p["num_draft_tokens"] for p in pred["points"]] == [
        1,
        2,
        3,
        4,
    ]
    # the modelled decode cycles: decode cycles 1..8 of the calls but the last of each (no period)
    # and the stall; their accepted drafts, by hand
    modelled = [
        DECODE_ACCEPTED[i % 3] for call in range(3) for i in range(1, 9) if not (call == 1 and i == 5)
    ]
    assert len(modelled) == 23
    profiled = next(p for p in pred["points"] if p["profiled"])
    assert profiled["accept_length"] == pytest.approx(1 + sum(modelled) / 23)
    assert pred["accept_length_recorded"] == {"pooled": pytest.approx(4.1), "cycles": 30}
    assert (
        "accept len: tokens per request per verify step over the 23 modelled decode cycles; the report's mean "
        "accepted length pools all 30 cycles that carry acceptance (stalls and cycles without a period among them): 4.100"
    ) in text
    # decode tok/s: the modelled cycles' tokens over their 30 ms periods
    assert profiled["decode_tokens_per_s"] == pytest.approx((sum(modelled) + 23) / (23 * 0.030))
    assert "decode tok/s: the modelled decode cycles' tokens over their periods" in text
    assert "tok/s: the run's output tokens/s, measured at the profiled point" in text


def test_predict_header_gives_sglangs_own_draft_token_flag(tmp_path):
    pt = FakeRuntime()
    for i in range(24):
        pt.cycle_begin(batch_size=2)
        pt.begin("draft_forward")
        pt.sleep(0.003)
        pt.end("draft_forward")
        pt.begin("target_verify")
        pt.sleep(0.006)
        pt.end("target_verify")
        pt.cycle_end(accepted_per_req=[i % 4, 3])
    argv = ["sglang.launch_server", "--speculative-num-steps", "3", "--speculative-num-draft-tokens", "4"]
    pt.write(tmp_path / "timing", argv=argv)
    pred = predict_run(tmp_path, bootstrap=0)
    assert pred["profiled"]["num_draft_tokens"] == 4
    assert "(topk 1, --speculative-num-draft-tokens 4), sglang: 23 decode cycles modelled" in render(pred)


# -- warnings ------------------------------------------------------------------------------------


def test_a_run_with_stalls_past_the_threshold_warns_and_says_what_to_do(known):
    root, _ = known
    data = json.loads((root / "summary.json").read_text())
    # the stall's 410 ms of the 30 cycles' 1,340 ms (26 x 30 decode, 3 x 50 prefill, 410)
    (warning,) = data["warnings"]
    assert warning["what"] == "stalls" and warning["threshold_pct"] == 5.0
    assert warning["value_pct"] == pytest.approx(100 * 410 / 1340)
    table = (root / "table.txt").read_text()
    assert table.rstrip().splitlines()[-1] == warning["text"]
    assert warning["text"].startswith("warning: 1 stall took ")
    assert (
        "not the first cycle at their batch size" in warning["text"]
        and "Do: rerun on an idle machine" in warning["text"]
    )


def test_a_quiet_run_has_no_warning(tmp_path):
    known_run(tmp_path / "timing", stall=False)
    summary = build_report(tmp_path / "timing", tmp_path, chart=False)
    assert summary.warnings == [] and "warning:" not in (tmp_path / "table.txt").read_text()


def _with_budget(folder, cost_us: float, period_ms: float) -> None:
    """The records of a run under PATCHKIT_TIMER_BUDGET 1 % whose controller last measured
    ``cost_us`` per timed cycle and a ``period_ms`` period (every cycle timed)."""
    path = next(folder.glob("*.jsonl"))
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    lines[-1]["sampling"] = {"p": 1.0, "cost_ns": cost_us * 1e3, "period_ns": period_ms * 1e6, "changes": 0}
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))


@pytest.mark.parametrize("cost_us, warns", [(1449.0, True), (450.0, False)])
def test_a_timer_costing_more_than_twice_the_budget_warns(tmp_path, cost_us, warns):
    sampling = {"every": None, "p": 1, "budget_pct": 1.0, "method": "bernoulli", "seed": 3,
                "controller": {"method": "visible-cost"}}  # fmt: skip
    known_run(tmp_path / "timing", stall=False, header={"sampling": sampling})
    _with_budget(tmp_path / "timing", cost_us, 30.0)
    summary = build_report(tmp_path / "timing", tmp_path, chart=False)
    table = (tmp_path / "table.txt").read_text()
    spent = 100 * cost_us / 30_000
    assert summary.sampling["budget"]["spent_pct"] == pytest.approx(spent)
    assert f": ~{spent:.2f}% of the period spent" in table
    # the budget line is explained where it stands
    assert "(the budget: the runtime times as many cycles as keep its own measured cost within" in table
    if warns:
        (warning,) = summary.warnings
        assert warning["what"] == "timer_cost" and warning["value_pct"] == pytest.approx(4.83)
        assert warning["text"].startswith("warning: the timer's own cost was about 4.83% of the cycle period")
        assert "--sample 16" in warning["text"] and warning["text"] in table
    else:
        assert summary.warnings == []

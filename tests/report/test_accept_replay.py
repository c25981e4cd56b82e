"""bench/gpu/accept_check.replay: SGLang's own acceptance count rebuilt from patchkit's records.

The GPU harness compares the records of a real server with SGLang's per-request
``spec_correct_drafts_histogram``. With overlap scheduling a finished request runs one step more
(SGLang drops it), unless a prefill comes first. These schedules are written out by hand."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _accept_check():
    spec = importlib.util.spec_from_file_location("accept_check", ROOT / "bench" / "gpu" / "accept_check.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _prefill(n, bs):
    return {"cycle": n, "attrs": {"kind": "prefill", "batch_size": bs}}


def _decode(n, tokens):
    return {"cycle": n, "attrs": {"kind": "decode", "batch_size": len(tokens), "tokens": tokens}}


def test_overlap_a_finished_request_runs_once_more_and_is_not_counted():
    ac = _accept_check()
    # A and B want 4 output tokens (1 from the prefill). B finishes at decode 1, A at decode 2;
    # each runs one more decode step that SGLang drops
    cycles = [_prefill(0, 2), _decode(1, [2, 3]), _decode(2, [2, 4]), _decode(3, [1])]
    rep = ac.replay(cycles, requests=2, output_len=4, overlap=True)
    assert rep["batch_size_mismatches"] == 0
    assert rep["extra_steps"] == 2
    assert rep["histogram"] == [0, 2, 1]  # A: 1, 1 accepted drafts; B: 2


def test_overlap_a_prefill_in_between_takes_the_finished_request_out():
    ac = _accept_check()
    # B finishes at decode 1; the next batch is C's prefill, so B is gone by decode 2
    cycles = [
        _prefill(0, 2),
        _decode(1, [2, 3]),
        _prefill(2, 1),
        _decode(3, [3, 2]),
        _decode(4, [1, 2]),
        _decode(5, [4]),
    ]
    rep = ac.replay(cycles, requests=3, output_len=4, overlap=True)
    assert rep["batch_size_mismatches"] == 0
    assert rep["extra_steps"] == 2  # A at decode 4, C at decode 5
    assert rep["histogram"] == [0, 3, 2]


def test_without_overlap_a_finished_request_leaves_at_once():
    ac = _accept_check()
    cycles = [_prefill(0, 2), _decode(1, [2, 3]), _decode(2, [2])]
    rep = ac.replay(cycles, requests=2, output_len=4, overlap=False)
    assert rep["batch_size_mismatches"] == 0 and rep["extra_steps"] == 0
    assert rep["histogram"] == [0, 2, 1]


def test_a_wrong_model_of_the_scheduler_shows_as_batch_size_mismatches():
    ac = _accept_check()
    cycles = [_prefill(0, 2), _decode(1, [2, 3]), _decode(2, [2, 4]), _decode(3, [1])]
    rep = ac.replay(cycles, requests=2, output_len=4, overlap=False)  # the server had overlap on
    assert rep["batch_size_mismatches"] >= 1
    assert rep["first_mismatch"]["cycle"] == 2


def test_requests_before_the_benchmark_finish_at_their_prefill():
    ac = _accept_check()
    # one /health generation (0.5.17: one token) before the benchmark's single request
    health_step = {
        "cycle": 1,
        "attrs": {"kind": "decode", "batch_size": 1, "tokens": 4},
    }  # a number at batch 1
    cycles = [_prefill(0, 1), health_step, _prefill(2, 1), _decode(3, [3]), _decode(4, [2])]
    rep = ac.replay(cycles, requests=1, output_len=4, overlap=True)
    assert rep["batch_size_mismatches"] == 0
    assert rep["histogram"] == [0, 0, 1]
    assert rep["extra_steps"] == 2

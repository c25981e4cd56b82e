"""The static proof's rules on small worker files written here (no wheel): which paths it walks,
what it reports, and what it leaves to the runtime (exceptions). The shipped series against
their releases: tests/series/test_static_proof.py."""

from __future__ import annotations

import textwrap

import pytest

from patchkit.author import phaseproof

WORKER = "pkg/eagle_worker_v2.py"


def prove(body: str, *, extra: str = "") -> phaseproof.Proof:
    """The proof of one worker file: EAGLEWorkerV2.forward_batch_generation calls ``step``,
    whose body is ``body`` (indented here); ``extra`` is more module text."""
    source = "from pkg import phase_timer as _pt\n\n\n" + textwrap.dedent(
        """\
        class EAGLEWorkerV2:
            def forward_batch_generation(self, batch):
                return self.step(batch)

            def step(self, batch):
        """
    )
    source += textwrap.indent(textwrap.dedent(body), " " * 8) + textwrap.indent(
        textwrap.dedent(extra), " " * 4
    )
    return phaseproof.prove_files("synthetic", "nothing", "0", {WORKER: source})


def messages(proof: phaseproof.Proof) -> list[str]:
    return [f.message for f in proof.findings]


def test_phases_ended_on_both_branches_are_proven():
    proof = prove(
        """\
        _pt.cycle_begin(kind="decode")
        if batch.graph:
            _pt.begin("draft_forward", graph=True)
        else:
            _pt.begin("draft_forward")
        batch.run()
        _pt.end("draft_forward")
        _pt.cycle_end()
        return batch
        """
    )
    assert proof.ok, messages(proof)
    assert proof.entries == ["EAGLEWorkerV2.forward_batch_generation"]
    assert proof.reached == {
        "EAGLEWorkerV2.step": "EAGLEWorkerV2.forward_batch_generation -> EAGLEWorkerV2.step"
    }


def test_a_return_before_the_cycle_ends_is_found():
    proof = prove(
        """\
        _pt.cycle_begin(kind="prefill")
        if batch.empty:
            return None
        _pt.cycle_end()
        return batch
        """
    )
    assert messages(proof) == ["return (line 11) leaves 'cycle' open"]
    assert proof.findings[0].function == "EAGLEWorkerV2.step"


def test_an_end_on_one_branch_only_is_found():
    proof = prove(
        """\
        _pt.begin("accept")
        if batch.grammar:
            _pt.end("accept")
        """
    )
    assert messages(proof) == ["the function's end leaves 'accept' open"]


def test_ends_out_of_order_are_found():
    proof = prove(
        """\
        _pt.begin("verify_prepare")
        _pt.begin("target_verify")
        _pt.end("verify_prepare")
        _pt.end("target_verify")
        """
    )
    assert messages(proof) == [
        "end('verify_prepare') while 'target_verify' begun inside it is still open",
        "end('target_verify') where no 'target_verify' is open on this path",
    ]


def test_a_phase_begun_in_a_loop_must_end_in_it():
    ok = prove(
        """\
        for i in range(batch.steps):
            _pt.begin("draft_step", step=i)
            if batch.skip:
                _pt.end("draft_step")
                continue
            batch.step()
            _pt.end("draft_step")
        """
    )
    assert ok.ok, messages(ok)
    leaking = prove(
        """\
        for i in range(batch.steps):
            _pt.begin("draft_step", step=i)
            if batch.skip:
                continue
            _pt.end("draft_step")
        """
    )
    assert messages(leaking) == [
        "an iteration of this loop begins 'draft_step' and does not end it",
        "the function's end leaves 'draft_step' open",
    ]


def test_a_break_carries_its_stack_out_of_the_loop():
    proof = prove(
        """\
        while True:
            _pt.begin("draft_step")
            if batch.done:
                break
            _pt.end("draft_step")
        _pt.end("draft_step")
        """
    )
    assert proof.ok, messages(proof)


def test_finally_runs_on_a_return_and_a_raise_ends_a_path_unchecked():
    proof = prove(
        """\
        _pt.begin("target_verify")
        try:
            if batch.bad:
                raise ValueError(batch)
            return batch.run()
        finally:
            _pt.end("target_verify")
        """
    )
    assert proof.ok, messages(proof)


def test_a_handler_that_carries_on_starts_from_any_state_of_the_try_body():
    proof = prove(
        """\
        try:
            _pt.begin("accept")
            batch.sample()
            _pt.end("accept")
        except RuntimeError:
            return None
        return batch
        """
    )
    assert messages(proof) == ["return (line 14) leaves 'accept' open"]


def test_a_cycle_begun_inside_a_phase_is_found_also_across_a_call():
    inline = prove(
        """\
        _pt.begin("draft")
        _pt.cycle_begin(kind="decode")
        _pt.cycle_end()
        _pt.end("draft")
        """
    )
    assert messages(inline) == [  # and, as the runtime dropped it, the end finds no 'draft'
        "cycle_begin() while 'draft' is open (the runtime drops it)",
        "end('draft') where no 'draft' is open on this path",
    ]
    across = prove(
        """\
        _pt.begin("draft")
        self.cycle(batch)
        _pt.end("draft")
        """,
        extra="""\

            def cycle(self, batch):
                _pt.cycle_begin(kind="decode")
                _pt.cycle_end()
        """,
    )
    assert messages(across) == ["calls EAGLEWorkerV2.cycle, which begins a cycle, while 'draft' is open"]
    through_an_untimed_method = prove(
        """\
        _pt.begin("draft")
        self.run(batch)
        _pt.end("draft")
        """,
        extra="""\

            def run(self, batch):
                self.step_again(batch)

            def step_again(self, batch):
                _pt.begin("draft")
                _pt.end("draft")
        """,
    )
    assert messages(through_an_untimed_method) == [
        "calls EAGLEWorkerV2.step_again, which begins 'draft', while 'draft' is open"
    ]


def test_a_timed_function_no_call_reaches_is_found():
    proof = prove(
        "return batch\n",
        extra="""\

            def forward_draft_extend(self, batch):
                _pt.begin("draft_extend")
                _pt.end("draft_extend")
        """,
    )
    assert messages(proof) == [
        "holds timer lines but is not reached from EAGLEWorkerV2.forward_batch_generation"
    ]
    assert proof.findings[0].function == "EAGLEWorkerV2.forward_draft_extend"


@pytest.mark.parametrize(
    "made",
    [
        "Draft(batch)",
        "Draft(batch) if batch.last_rank else None",
        "None or Draft(batch)",
    ],
)
def test_calls_are_followed_through_attributes_holding_a_class_the_code_builds(made):
    """``self._draft_worker = Draft(...)`` and a call ``self.draft_worker.draft()`` through a
    base class's property, as EAGLEWorkerV2 has it, and a module function."""
    source = textwrap.dedent(
        f"""\
        from pkg import phase_timer as _pt


        def run_verify(batch):
            _pt.begin("target_verify")
            _pt.end("target_verify")


        class Draft:
            def draft(self, batch):
                _pt.begin("draft_forward")
                _pt.end("draft_forward")
                run_verify(batch)


        class BaseSpecWorker:
            @property
            def draft_worker(self):
                return self._draft_worker


        class EAGLEWorkerV2(BaseSpecWorker):
            def __init__(self, batch):
                self._draft_worker = {made}

            def forward_batch_generation(self, batch):
                self.draft_worker.draft(batch)
        """
    )
    proof = phaseproof.prove_files("synthetic", "nothing", "0", {WORKER: source})
    assert proof.ok, messages(proof)
    assert proof.reached["run_verify"] == (
        "EAGLEWorkerV2.forward_batch_generation -> Draft.draft -> run_verify"
    )


def test_a_use_of_the_timer_that_is_no_statement_is_found():
    proof = prove(
        """\
        with _pt.phase("accept"):
            batch.sample()
        _pt.begin("accept")
        _pt.end("accept")
        """
    )
    assert messages(proof) == ["`_pt`: a use of _pt the proof does not read"]


def test_an_attribute_the_proof_cannot_type_is_not_followed():
    """No property over ``self._draft_worker``: ``self.draft_worker`` is unknown, and the
    function only it reaches is reported, not assumed reached."""
    source = textwrap.dedent(
        """\
        from pkg import phase_timer as _pt


        class Draft:
            def draft(self, batch):
                _pt.begin("draft_forward")
                _pt.end("draft_forward")


        class EAGLEWorkerV2:
            def __init__(self, batch):
                self._draft_worker = Draft(batch)

            def forward_batch_generation(self, batch):
                self.draft_worker.draft(batch)
        """
    )
    proof = phaseproof.prove_files("synthetic", "nothing", "0", {WORKER: source})
    assert [(f.function, f.message) for f in proof.findings] == [
        ("Draft.draft", "holds timer lines but is not reached from EAGLEWorkerV2.forward_batch_generation")
    ]

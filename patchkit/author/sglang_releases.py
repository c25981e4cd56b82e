"""Every SGLang release 0.5.1 ... 0.5.23 (with its .postN releases) and the series that times it.

The data the series generator (patchkit.author.seriesgen), the matrix check (tests/series/test_series_matrix.py,
``make series-check``) and ``--series auto`` share. A release's *timed files* are the EAGLE worker
files it ships: ``eagle_worker.py`` (EAGLEWorker, "spec v1"), ``eagle_worker_v2.py``
(EAGLEWorkerV2, from 0.5.3.post2) and ``eagle_worker_common.py`` (verify code moved there in
0.5.16). A .postN whose timed files are byte-identical to an earlier release's shares that
release's series (its pin lists the .postN under ``also_versions``); otherwise it has its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from patchkit.author.timerplace import HandRule
from patchkit.upstream import version_key  # noqa: F401  (kept here for callers)

SPEC = "python/sglang/srt/speculative/"
V1 = SPEC + "eagle_worker.py"
V2 = SPEC + "eagle_worker_v2.py"
COMMON = SPEC + "eagle_worker_common.py"
WORKER_FILES = (V1, V2, COMMON)


@dataclass
class Release:
    version: str
    series: str  # folder under patches/
    files: tuple[str, ...]  # the worker files the release ships (all timed)
    generated: bool = True  # made by patchkit.author.seriesgen (False: hand-made earlier)
    append_v2: bool = False  # hand-made series whose eagle_worker_v2.py patches
    # seriesgen appends after the hand-made ones (from v2_ref)
    v1_ref: str | None = None  # series whose eagle_worker.py lines are the reference
    v2_ref: str | None = None  # series whose eagle_worker_v2.py (+ common) lines are
    aliases: dict[str, str] = field(default_factory=dict)  # ref function -> this release's
    hand: list = field(default_factory=list)  # timerplace.HandRule: placed by a person
    renames: dict[str, str] = field(default_factory=dict)  # text fixes a person decided
    note: str = ""


def _r(version, files, v1_ref=None, v2_ref=None, series=None, **kw) -> Release:
    return Release(version, series or f"sglang-v{version}", files, v1_ref=v1_ref, v2_ref=v2_ref, **kw)


BOTH = (V1, V2)
V2C = (V2, COMMON)

# Functions that took over a reference function's code in older releases (tried only when the
# reference's own function does not exist there).
MOVED_FUNCTIONS = {
    # 0.5.21 split the prefill branch of forward_batch_generation out into its own method.
    "EAGLEWorkerV2._forward_prefill_batch": "EAGLEWorkerV2.forward_batch_generation",
    # 0.5.16 moved EAGLEWorkerV2.verify's body into eagle_worker_common.run_eagle_verify.
    "run_eagle_verify": "EAGLEWorkerV2.verify",
}

# Functions renamed between releases, old name -> new name: patch.rebase's structural step
# looks a line's function up by either name, in both directions (rebase_aliases).
RENAMED_FUNCTIONS = {
    # 0.5.3 renamed the v1 cycle (0.5.1 and 0.5.2 return plain tuples from it).
    "EAGLEWorker.forward_batch_speculative_generation": "EAGLEWorker.forward_batch_generation",
}


def rebase_aliases() -> dict[str, str]:
    """Old or new qualified name -> the other, for a function renamed or whose code moved."""
    pairs = {**MOVED_FUNCTIONS, **RENAMED_FUNCTIONS}
    return {**{new: old for old, new in pairs.items()}, **pairs}


# 0.5.1 and 0.5.2: the cycle is EAGLEWorker.forward_batch_speculative_generation, returning plain
# tuples (not GenerationBatchResult), and forward_target_extend returns a 4-tuple with the bid.
_FBSG = "EAGLEWorker.forward_batch_speculative_generation"
_WHY_TUPLE = "this release returns a plain tuple where the reference returns GenerationBatchResult"
TUPLE_RETURNS = [
    HandRule(
        V1,
        _FBSG,
        "logits_output, next_token_ids, bid, seq_lens_cpu = self.forward_target_extend",
        "before",
        '_pt.cycle_begin(kind="prefill", batch_size=batch.batch_size())',
        "0002-cycle.patch",
        "the prefill branch's first statement",
    ),
    HandRule(
        V1,
        _FBSG,
        "return (logits_output, next_token_ids, bid, 0, False)",
        "before",
        "_pt.cycle_end()",
        "0002-cycle.patch",
        _WHY_TUPLE,
    ),
    HandRule(
        V1,
        _FBSG,
        "with self.draft_tp_context(self.draft_model_runner.tp_group):\n    spec_info",
        "before",
        '_pt.cycle_begin(kind="decode", batch_size=batch.batch_size())',
        "0002-cycle.patch",
        "the decode branch's first statement",
    ),
    HandRule(
        V1,
        _FBSG,
        "return (logits_output, verify_output.verified_id",
        "before",
        "_pt.cycle_end(accepted=sum(verify_output.accept_length_per_req_cpu), accepted_per_req=verify_output.accept_length_per_req_cpu)",
        "0002-cycle.patch",
        _WHY_TUPLE,
    ),
    HandRule(
        V1,
        "EAGLEWorker.forward_target_extend",
        "model_worker_batch = batch.get_model_worker_batch()",
        "before",
        '_pt.begin("target_extend")',
        "0007-prefill.patch",
        "as in the 0.5.9 series",
    ),
    HandRule(
        V1,
        "EAGLEWorker.forward_target_extend",
        "return (logits_output, next_token_ids, model_worker_batch.bid",
        "before",
        '_pt.end("target_extend")',
        "0007-prefill.patch",
        _WHY_TUPLE,
    ),
]

# Up to 0.5.12 EAGLEWorkerV2 works on a ModelWorkerBatch (no batch_size() method): the cycle's
# batch size is its seq_lens' length (a shape, no device work).
MWB = {"model_worker_batch.batch_size()": "model_worker_batch.seq_lens.shape[0]"}

# Up to 0.5.5.post1 EAGLEWorkerV2.forward_batch_generation tests is_decode() first (decode
# branch, then prefill in the else): the reference's branch anchors do not exist.
_FBG2 = "EAGLEWorkerV2.forward_batch_generation"
_WHY_ORDER = "decode branch first in this release (the reference tests is_extend() first)"
V2_CYCLES_DECODE_FIRST = [
    HandRule(
        V2,
        _FBG2,
        "draft_input: EagleDraftInput = model_worker_batch.spec_info",
        "before",
        '_pt.cycle_begin(kind="decode", batch_size=model_worker_batch.seq_lens.shape[0])',
        "0002-cycle.patch",
        _WHY_ORDER,
    ),
    HandRule(
        V2,
        _FBG2,
        "return batch_output",
        "before",
        "_pt.cycle_end(tokens=batch_output.accept_lens)",
        "0002-cycle.patch",
        "the decode branch's return",
        nth=0,
    ),
    HandRule(
        V2,
        _FBG2,
        "model_worker_batch.capture_hidden_mode = CaptureHiddenMode.FULL",
        "before",
        '_pt.cycle_begin(kind="prefill", batch_size=model_worker_batch.seq_lens.shape[0])',
        "0002-cycle.patch",
        _WHY_ORDER,
    ),
    HandRule(
        V2,
        _FBG2,
        "return batch_output",
        "before",
        "_pt.cycle_end()",
        "0002-cycle.patch",
        "the prefill branch's return",
        nth=1,
    ),
]


def _eager_draft_extend(worker: str, runner: str) -> list[HandRule]:
    """No draft-extend CUDA graph yet: the forward is one eager call."""
    why = "no draft-extend CUDA graph in this release: one eager forward"
    anchor = f"draft_logits_output = self.{runner}.model.forward("
    return [
        HandRule(
            V2,
            worker,
            anchor,
            "before",
            '_pt.begin("draft_extend_forward")',
            "0006-draft-extend-after-decode.patch",
            why,
        ),
        HandRule(
            V2,
            worker,
            anchor,
            "after",
            '_pt.end("draft_extend_forward")',
            "0006-draft-extend-after-decode.patch",
            why,
        ),
    ]


# 0.5.3.post2/3: EAGLEWorkerV2 subclasses EAGLEWorker; verify also runs the draft extend
# ("Batch 2") before it returns, and the prefill draft is EAGLEWorkerV2.forward_draft_extend.
_V = "EAGLEWorkerV2.verify"
_WHY_INLINE = "the draft extend runs inside verify in this release"
V2_053 = V2_CYCLES_DECODE_FIRST[:4] + [
    HandRule(
        V2,
        _V,
        "verify_input: EagleVerifyInput = batch.spec_info",
        "before",
        '_pt.begin("verify_prepare")',
        "0005-verify.patch",
        "verify's first statement",
    ),
    HandRule(
        V2,
        _V,
        "forward_batch_output = self.target_worker.forward_batch_generation(",
        "before",
        '_pt.end("verify_prepare")',
        "0005-verify.patch",
        "before the target forward",
    ),
    HandRule(
        V2,
        _V,
        "predict, accept_length, accept_index = verify_input.sample(",
        "before",
        '_pt.begin("accept")',
        "0005-verify.patch",
        "sampling and acceptance",
    ),
    HandRule(
        V2,
        _V,
        "draft_input = EagleDraftInput(hidden_states=logits_output.hidden_states)",
        "before",
        '_pt.end("accept")',
        "0005-verify.patch",
        _WHY_INLINE,
    ),
    HandRule(
        V2,
        _V,
        "draft_input = EagleDraftInput(hidden_states=logits_output.hidden_states)",
        "before",
        '_pt.begin("draft_extend_after_decode")',
        "0006-draft-extend-after-decode.patch",
        _WHY_INLINE,
    ),
    HandRule(
        V2,
        _V,
        "seq_lens_backup.record_stream(",
        "before",
        '_pt.end("draft_extend_after_decode")',
        "0006-draft-extend-after-decode.patch",
        "after the draft's top-k, before the next draft input is built",
    ),
    *_eager_draft_extend(_V, "draft_model_runner"),
    HandRule(
        V2,
        "EAGLEWorkerV2.forward_draft_extend",
        "pt = 0",
        "before",
        '_pt.begin("draft_extend")',
        "0007-prefill.patch",
        "the prefill draft extend of this release",
    ),
    HandRule(
        V2,
        "EAGLEWorkerV2.forward_draft_extend",
        "return next_draft_input",
        "before",
        '_pt.end("draft_extend")',
        "0007-prefill.patch",
        "the prefill draft extend of this release",
    ),
]


def _draft_steps(worker: str) -> list[HandRule]:
    """Up to 0.5.11 a draft step moves positions before its forward: the reference's end anchor
    (before positions.add_) would leave the forward out; the step ends after its hidden states."""
    why = "positions.add_ runs before the forward here; the step ends after the hidden states"
    return [
        HandRule(
            V2,
            worker,
            "forward_batch.input_ids = input_ids",
            "before",
            '_pt.begin("draft_step", step=i)',
            "0004-draft-steps.patch",
            why,
        ),
        HandRule(
            V2,
            worker,
            "hidden_states = logits_output.hidden_states",
            "after",
            '_pt.end("draft_step")',
            "0004-draft-steps.patch",
            why,
        ),
    ]


# Up to 0.5.13.post1 the prefill draft extend ends with `return next_draft_input` right after the
# top-k (later releases build the result differently).
PREFILL_DRAFT_EXTEND = [
    HandRule(
        V2,
        "EagleDraftWorker._draft_extend_for_prefill",
        "if not batch.forward_mode.is_idle()",
        "before",
        '_pt.begin("draft_extend")',
        "0007-prefill.patch",
        "the function's first statement (input ids)",
    ),
    HandRule(
        V2,
        "EagleDraftWorker._draft_extend_for_prefill",
        "return next_draft_input",
        "before",
        '_pt.end("draft_extend")',
        "0007-prefill.patch",
        "before the return, after the draft forward and top-k",
    ),
]

# Newest first: each generated release learns its anchors from the nearest newer series (or,
# for eagle_worker.py below 0.5.9, from the next newer one), so code moves a little per step.
RELEASES: list[Release] = [
    Release("0.5.23", "sglang-v0.5.23", V2C, generated=False),
    _r("0.5.22", V2C, v2_ref="sglang-v0.5.23"),
    _r("0.5.21", V2C, v2_ref="sglang-v0.5.22"),
    _r(
        "0.5.20",
        V2C,
        v2_ref="sglang-v0.5.21",
        hand=[
            # draft() returns build_eagle_verify_input(...) directly (0.5.21 assigns it first), so
            # there is no statement after the build in draft: the phase is the helper's body after
            # its idle early exit (multi-layer EAGLE, which shares the helper, records it too).
            HandRule(
                COMMON,
                "build_eagle_verify_input",
                "bs = batch.seq_lens.shape[0]",
                "before",
                '_pt.begin("build_tree")',
                "0003-draft.patch",
                "draft returns the helper's result directly: timed inside the helper",
            ),
            HandRule(
                COMMON,
                "build_eagle_verify_input",
                "return EagleVerifyInput(",
                "before",
                '_pt.end("build_tree")',
                "0003-draft.patch",
                "draft returns the helper's result directly: timed inside the helper",
            ),
        ],
    ),
    _r("0.5.19", V2C, v2_ref="sglang-v0.5.20"),
    _r("0.5.18", V2C, v2_ref="sglang-v0.5.19"),
    _r("0.5.17", V2C, v2_ref="sglang-v0.5.18"),
    _r("0.5.16", V2C, v2_ref="sglang-v0.5.17"),
    _r(
        "0.5.15.post1",
        (V2,),
        v2_ref="sglang-v0.5.16",
        hand=[
            # 0.5.16 moved the tree build into build_eagle_verify_input; here it is still inline.
            HandRule(
                V2,
                "EagleDraftWorker.draft",
                "tree_mask_buf, position_buf =",
                "before",
                '_pt.begin("build_tree")',
                "0003-draft.patch",
                "the tree is still built inline in draft (0.5.16 moved it to a helper)",
            ),
            HandRule(
                V2,
                "EagleDraftWorker.draft",
                "tree_mask, position, retrieve_index",
                "after",
                '_pt.end("build_tree")',
                "0003-draft.patch",
                "after build_tree_kernel_efficient, as in the 0.5.9 series",
            ),
        ],
    ),
    _r("0.5.15", (V2,), v2_ref="sglang-v0.5.15.post1"),
    _r("0.5.14", (V2,), v2_ref="sglang-v0.5.15"),
    _r("0.5.13.post1", (V2,), v2_ref="sglang-v0.5.14", hand=PREFILL_DRAFT_EXTEND),
    _r("0.5.13", (V2,), v2_ref="sglang-v0.5.13.post1"),
    Release(
        "0.5.12.post1",
        "sglang-v0.5.12",
        BOTH,
        generated=False,
        note="eagle_worker.py and eagle_worker_v2.py byte-identical to 0.5.12's",
    ),
    Release("0.5.12", "sglang-v0.5.12", BOTH, generated=False),
    _r(
        "0.5.11",
        BOTH,
        v1_ref="sglang-v0.5.10",
        v2_ref="sglang-v0.5.13",
        hand=_draft_steps("EagleDraftWorker.draft_forward"),
        renames={
            **MWB,
            # 0.5.11 renamed the per-request accepted-draft counts (0.5.12 renamed them again).
            "verify_output.accept_length_per_req_cpu": "verify_output.num_accepted_drafts_per_req_cpu",
        },
    ),
    Release(
        "0.5.10.post1",
        "sglang-v0.5.10",
        BOTH,
        generated=False,
        note="eagle_worker.py and eagle_worker_v2.py byte-identical to 0.5.10's",
    ),
    # 0.5.10 and 0.5.9: 0001-0007 (eagle_worker.py) are hand-made and the source of the rebase
    # tests and benchmarks; seriesgen appends 0008-0013 for eagle_worker_v2.py and leaves them be.
    Release(
        "0.5.10",
        "sglang-v0.5.10",
        BOTH,
        generated=False,
        append_v2=True,
        v2_ref="sglang-v0.5.11",
        renames=MWB,
    ),
    Release(
        "0.5.9", "sglang-v0.5.9", BOTH, generated=False, append_v2=True, v2_ref="sglang-v0.5.10", renames=MWB
    ),
    _r("0.5.8", BOTH, v1_ref="sglang-v0.5.9", v2_ref="sglang-v0.5.11", renames=MWB),
    _r(
        "0.5.8.post1",
        BOTH,
        series="sglang-v0.5.8",
        note="eagle_worker.py and eagle_worker_v2.py byte-identical to 0.5.8's",
    ),
    _r("0.5.7", BOTH, v1_ref="sglang-v0.5.8", v2_ref="sglang-v0.5.8", renames=MWB),
    _r("0.5.6.post1", BOTH, v1_ref="sglang-v0.5.7", v2_ref="sglang-v0.5.7", renames=MWB),
    _r(
        "0.5.6.post2",
        BOTH,
        series="sglang-v0.5.6.post1",
        note="eagle_worker.py and eagle_worker_v2.py byte-identical to 0.5.6.post1's",
    ),
    _r("0.5.6", BOTH, v1_ref="sglang-v0.5.6.post1", v2_ref="sglang-v0.5.6.post1", renames=MWB),
    _r("0.5.5.post3", BOTH, v1_ref="sglang-v0.5.6", v2_ref="sglang-v0.5.6", renames=MWB),
    _r(
        "0.5.5.post1",
        BOTH,
        v1_ref="sglang-v0.5.5.post3",
        v2_ref="sglang-v0.5.5.post3",
        renames=MWB,
        hand=V2_CYCLES_DECODE_FIRST
        + _eager_draft_extend("EagleDraftWorker._draft_extend_for_decode", "draft_runner"),
    ),
    _r(
        "0.5.5.post2",
        BOTH,
        series="sglang-v0.5.5.post1",
        note="eagle_worker.py and eagle_worker_v2.py byte-identical to 0.5.5.post1's",
    ),
    _r("0.5.5", BOTH, v1_ref="sglang-v0.5.5.post1", v2_ref="sglang-v0.5.5.post1", renames=MWB),
    _r(
        "0.5.4.post3",
        BOTH,
        series="sglang-v0.5.5",
        note="eagle_worker.py and eagle_worker_v2.py byte-identical to 0.5.5's (not to 0.5.4's)",
    ),
    _r("0.5.4.post2", BOTH, v1_ref="sglang-v0.5.5", v2_ref="sglang-v0.5.5", renames=MWB),
    _r("0.5.4", BOTH, v1_ref="sglang-v0.5.4.post2", v2_ref="sglang-v0.5.4.post2", renames=MWB),
    _r(
        "0.5.4.post1",
        BOTH,
        series="sglang-v0.5.4",
        note="eagle_worker.py and eagle_worker_v2.py byte-identical to 0.5.4's",
    ),
    _r(
        "0.5.3.post3",
        BOTH,
        v1_ref="sglang-v0.5.4",
        v2_ref="sglang-v0.5.4",
        renames=MWB,
        hand=V2_053 + _draft_steps("EAGLEWorkerV2.draft_forward"),
    ),
    _r("0.5.3.post2", BOTH, v1_ref="sglang-v0.5.3.post3", v2_ref="sglang-v0.5.3.post3", renames=MWB),
    _r("0.5.3.post1", (V1,), v1_ref="sglang-v0.5.3.post2"),
    _r("0.5.3", (V1,), v1_ref="sglang-v0.5.3.post1"),
    _r("0.5.2", (V1,), v1_ref="sglang-v0.5.3", hand=TUPLE_RETURNS),
    _r("0.5.1", (V1,), v1_ref="sglang-v0.5.2", hand=TUPLE_RETURNS),
    _r("0.5.1.post1", (V1,), series="sglang-v0.5.1", note="eagle_worker.py byte-identical to 0.5.1's"),
    _r("0.5.1.post2", (V1,), series="sglang-v0.5.1", note="eagle_worker.py byte-identical to 0.5.1's"),
    _r("0.5.1.post3", (V1,), series="sglang-v0.5.1", note="eagle_worker.py byte-identical to 0.5.1's"),
]

# Releases of 0.5.1 ... 0.5.23 (and their .postN) whose wheel is not on the package index.
NOT_ON_INDEX: list[str] = []


def by_version() -> dict[str, Release]:
    return {r.version: r for r in RELEASES}


def series_folders() -> list[str]:
    """Each shipped sglang series folder once, newest first."""
    seen: list[str] = []
    for r in RELEASES:
        if r.series not in seen:
            seen.append(r.series)
    return seen


def owner(release: Release) -> Release:
    """The release whose series folder ``release`` uses (itself unless it shares one)."""
    return next(r for r in RELEASES if r.series == release.series and f"sglang-v{r.version}" == r.series)


def wheel_path(path: str) -> str:
    return path[len("python/") :] if path.startswith("python/") else path

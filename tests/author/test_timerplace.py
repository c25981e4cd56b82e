"""patchkit.author.timerplace: timer lines placed by function and anchor statement, never by line, and
refused (not guessed) when the new release's code does not show the same structure."""

from __future__ import annotations

import textwrap

import pytest

from patchkit.author import timerplace as tp
from patchkit.errors import InvalidInput

PATH = "pkg/worker.py"

REF = textwrap.dedent("""\
    import os
    from pkg import phase_timer as _pt


    class Worker:
        def step(self, batch):
            _pt.begin("prepare")
            x = self.prepare(batch)
            _pt.end("prepare")
            _pt.begin("forward")
            y = self.model.forward(x, batch.size)
            out = self.sample(y)
            _pt.end("forward")
            return out
    """)


def _anchors(ref: str = REF):
    origins = ["0002-x.patch"] * len(ref.splitlines())
    return tp.learn(PATH, ref, origins)


def _place(new: str, ref: str = REF, **kw):
    target = tp.Target(PATH, new)
    result = tp.place(_anchors(ref), {PATH: target}, {PATH: PATH}, **kw)
    tp.add_imports("from pkg import phase_timer as _pt", result, {PATH: target})
    text = tp.render_states({PATH: new}, result.placements, ["0002-x.patch"])[-1][PATH]
    return result, text


def test_places_by_structure_when_code_moved_and_was_rewrapped():
    new = textwrap.dedent("""\
        import os
        import sys


        class Worker:
            def helper(self):
                return 1

            def step(self, batch):
                # new comment
                x = self.prepare(
                    batch
                )
                y = self.model.forward(
                    x, batch.size
                )
                out = self.sample(y)
                return out
        """)
    result, text = _place(new)
    assert not result.missing
    assert text == textwrap.dedent("""\
        import os
        import sys
        from pkg import phase_timer as _pt


        class Worker:
            def helper(self):
                return 1

            def step(self, batch):
                # new comment
                _pt.begin("prepare")
                x = self.prepare(
                    batch
                )
                _pt.end("prepare")
                _pt.begin("forward")
                y = self.model.forward(
                    x, batch.size
                )
                out = self.sample(y)
                _pt.end("forward")
                return out
        """)
    compile(text, PATH, "exec")


def test_a_renamed_parameter_is_matched_by_position_and_renamed_in_the_line():
    ref = REF.replace('_pt.begin("prepare")', '_pt.begin("prepare", n=batch.size)')
    new = REF.replace("batch", "mwb")
    new = "\n".join(ln for ln in new.splitlines() if "_pt" not in ln) + "\n"
    result, text = _place(new, ref)
    assert not result.missing
    assert '_pt.begin("prepare", n=mwb.size)' in text


def test_an_anchor_that_moved_to_another_function_is_not_followed_there():
    new = textwrap.dedent("""\
        import os


        class Worker:
            def prepare_all(self, batch):
                x = self.prepare(batch)
                return x

            def step(self, batch):
                x = self.prepare_all(batch)
                y = self.model.forward(x, batch.size)
                out = self.sample(y)
                return out
        """)
    result, text = _place(new)
    assert "prepare" in {a.phase for a, _ in result.missing}
    assert '_pt.begin("prepare")' not in text and '_pt.end("prepare")' not in text
    body = text.split("def prepare_all", 1)[1].split("def step", 1)[0]
    assert "_pt." not in body  # nothing placed in the function the statement moved to
    assert '_pt.begin("forward")' in text


def test_a_phase_is_placed_whole_or_not_at_all():
    new = textwrap.dedent("""\
        import os


        class Worker:
            def step(self, batch):
                x = self.prepare(batch)
                y = self.model.forward(x, batch.size)
                return self.finish(y)
        """)
    result, text = _place(new)
    # forward's begin still has its anchor, its end has none: neither is placed.
    assert '_pt.begin("forward")' not in text and '_pt.end("forward")' not in text
    assert {a.text for a, _ in result.missing} == {'_pt.begin("forward")', '_pt.end("forward")'}
    assert '_pt.begin("prepare")' in text


def test_a_phase_that_would_cover_other_work_is_refused():
    new = textwrap.dedent("""\
        import os


        class Worker:
            def step(self, batch):
                x = self.prepare(batch)
                y = self.model.forward(x, batch.size)
                self.log(y)
                self.save(y)
                self.flush(y)
                out = self.filter(y)
                return out
        """)
    result, text = _place(new)
    assert '_pt.begin("forward")' not in text
    assert any(a.phase == "forward" and "cover" in why for a, why in result.missing)


def test_ambiguous_anchors_are_refused():
    new = textwrap.dedent("""\
        import os


        class Worker:
            def step(self, batch):
                if batch.a:
                    x = self.prepare(batch)
                else:
                    x = self.prepare(batch)
                y = self.model.forward(x, batch.size)
                out = self.sample(y)
                return out
        """)
    ref = REF.replace('        _pt.begin("prepare")\n', '        n = batch.n\n        _pt.begin("prepare")\n')
    result, text = _place(new, ref)
    assert '_pt.begin("prepare")' not in text
    assert any(a.phase == "prepare" and "2 candidates" in why for a, why in result.missing)


def test_a_line_using_an_attribute_the_release_lacks_is_refused():
    ref = REF.replace('_pt.end("forward")', '_pt.end("forward", n=batch.num_tokens)')
    new = "\n".join(ln for ln in REF.splitlines() if "_pt" not in ln) + "\n"
    result, text = _place(new, ref)
    assert any("num_tokens" in why for _, why in result.missing)
    assert '_pt.begin("forward")' not in text


def test_never_after_a_return():
    ref = textwrap.dedent("""\
        from pkg import phase_timer as _pt


        def build(x):
            _pt.begin("build")
            tree = make(x)
            _pt.end("build")
            return tree
        """)
    new = textwrap.dedent("""\
        import os


        def build(x):
            return make(x)
        """)
    _result, text = _place(new, ref)
    assert "_pt." not in text.split("def build", 1)[1]


def test_open_at_returns_finds_a_phase_left_open():
    text = textwrap.dedent("""\
        def f(a):
            _pt.begin("p")
            if a:
                return 1
            _pt.end("p")
            return 2
        """)
    assert tp.open_at_returns(text) == [("f", 4, ["p"])]
    assert (
        tp.open_at_returns(text.replace("        return 1", '        _pt.end("p")\n        return 1')) == []
    )


def test_hand_rule_needs_exactly_one_statement():
    new = "\n".join(ln for ln in REF.splitlines() if "_pt" not in ln) + "\n"
    target = tp.Target(PATH, new)
    ok = tp.HandRule(PATH, "Worker.step", "out = self.sample", "before", '_pt.begin("s")', "p")
    assert tp._place_hand(ok, {PATH: target}, 0).line == new.splitlines().index(
        "        out = self.sample(y)"
    )
    bad = tp.HandRule(PATH, "Worker.step", "", "before", '_pt.begin("s")', "p")
    with pytest.raises(InvalidInput):
        tp._place_hand(bad, {PATH: target}, 0)
    lacking = tp.HandRule(
        PATH, "Worker.step", "out = self.sample", "before", '_pt.begin("s", n=batch.nope)', "p"
    )
    with pytest.raises(InvalidInput):
        tp._place_hand(lacking, {PATH: target}, 0)

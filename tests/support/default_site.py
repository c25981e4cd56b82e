"""The site profile.run's embedded default patches: the pinned transformers installed into a
temporary site (support.upstream's ``transformers_site``, one per test process). The fixture
``site``, imported by name into the test modules that use it, is that site; PHASE_TIMER, where
the default series puts the timing runtime in it."""

from __future__ import annotations

from pathlib import Path

import pytest

PHASE_TIMER = "transformers/generation/phase_timer.py"


@pytest.fixture
def site(transformers_site) -> Path:
    """The pinned transformers in a temporary site (support.upstream: one per test process)."""
    return transformers_site

"""Compatibility name: the upstream module moved to :mod:`patchkit.upstream`.

Pinned releases, wheel fetching and version keys sit below both the engine and authoring, so
that profile and engine code need not import authoring. ``patchkit.author.upstream`` stays
importable and is the very same module object (not a copy of its names), so that setting an
attribute on it -- as tests do to refuse wheel downloads -- is seen by every caller.
"""

import sys

from patchkit import upstream as _upstream

sys.modules[__name__] = _upstream

"""patchkit: pinned unified-diff series applied as exact, line-targeted sed edits."""

__version__ = "0.1.0"

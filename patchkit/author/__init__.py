"""The authoring side: writing patches (authoring), pinned upstream text (upstream), rebasing
a series onto a new release (rebase, relocate, merge3 + pystructure, rebase_result,
rebase_report, targetread), comparing series (seriesdiff), and generating a series per
release (sglang_releases, timerplace, seriesgen)."""

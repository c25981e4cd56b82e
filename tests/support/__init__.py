"""Helpers shared by the test modules (import as ``support.<module>``; tests/ is on sys.path)."""

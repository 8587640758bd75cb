"""The release, one place: pyproject.toml states the same number (tests/test_packaging checks they agree)."""

__version__ = "0.1.0"

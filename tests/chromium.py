"""Debian's Chromium, which the browser tests drive (`make chromium` installs it; no browser is downloaded)."""

from __future__ import annotations

import shutil

import pytest


def chromium_path() -> str:
    """The system Chromium's executable; fails the test, naming the fix, when there is none."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if path := shutil.which(name):
            return path
    pytest.fail("Chromium is not installed: `make chromium` (Debian package chromium) installs it")

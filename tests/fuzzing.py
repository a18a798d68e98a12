"""Hypothesis settings shared by the fuzz suites: bounded in `make test`, FUZZ_SCALE times longer in `make fuzz`."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

FUZZ_SCALE = int(os.environ.get("FUZZ_SCALE", "1"))  # `make fuzz` sets it; tests never read HALLUWATCH_*


def fuzz(examples: int) -> settings:
    """Hypothesis settings of a bounded fuzz run of ``examples`` inputs (times FUZZ_SCALE)."""
    return settings(
        max_examples=examples * FUZZ_SCALE,
        deadline=None,  # a loaded CI box is slow, not wrong; hangs are caught by the test timeout
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
    )

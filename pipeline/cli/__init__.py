"""The ``halluwatch`` command line: one module per command group, registered on :data:`main`.

Heavy modules (faust, chDB) are imported inside the commands that need them, so
``halluwatch --help`` and config errors answer instantly.
"""

from pipeline.cli import (  # noqa: F401 - each module registers its commands on main
    calibrate,
    demo,
    doctor,
    erase,
    labels,
    policy,
    rate,
    reports,
    silence,
    stream,
    training,
    ui,
)
from pipeline.cli.group import configured, main

__all__ = ["configured", "main"]

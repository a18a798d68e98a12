"""The settings file's ``detectors:`` section: what the detectors share, and one section per detector.

Derived from :data:`detectors.registry.DETECTORS`: each span-level detector's settings model
(its ``DETECTOR.config``) becomes the field named like the detector, so a new detector needs no
line here. Light like the registry: the detector packages' ``__init__`` modules only.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, Field, create_model

from detectors.config import SharedDetectorSettings
from detectors.registry import DETECTORS
from detectors.spec import DetectorKind

M = TypeVar("M", bound=BaseModel)


def with_detector_sections(base: type[M], name: str, kinds: Collection[DetectorKind]) -> type[M]:
    """``base`` and, after its fields, one per detector of ``kinds``: its settings, named like it."""
    sections: dict[str, Any] = {
        spec.name: (spec.config, Field(default_factory=spec.config)) for spec in DETECTORS if spec.kind in kinds
    }
    return create_model(name, __base__=base, __module__=base.__module__, __doc__=base.__doc__, **sections)


# mypy knows the shared fields; a detector reads its own section through its descriptor
# (``Ingredients.config(DETECTOR)``, ``DETECTOR.config_in(settings.detectors)``), typed.
if TYPE_CHECKING:
    DetectorSettings = SharedDetectorSettings
else:
    DetectorSettings = with_detector_sections(
        SharedDetectorSettings, "DetectorSettings", ("structural", "gate", "content")
    )

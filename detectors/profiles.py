"""Which embedding profile a built-in or trained file belongs to (light: settings load without numpy)."""

from __future__ import annotations

from detectors.config import DEFAULT_PROFILE, Profile


class ProfileMismatch(ValueError):
    """A learned model or thresholds file was made for another embedding profile; the message names both."""


def built_in_path(profile: Profile, name: str) -> str:
    """Where ``profile``'s built-in file ``name`` is, under ``detectors/data``: the default's at the top."""
    return name if profile == DEFAULT_PROFILE else f"{profile}/{name}"


def check_profile(trained_for: object, profile: Profile, where: str) -> None:
    """:class:`ProfileMismatch` unless the file ``where``, made for ``trained_for`` (None: accurate), fits."""
    made_for = trained_for or DEFAULT_PROFILE
    if made_for != profile:
        raise ProfileMismatch(
            f"{where} was trained for detectors.embeddings.profile {made_for!r}, not {profile!r}: its numbers "
            f"come from another encoder's features (use that profile, or `halluwatch train --profile {profile}`)"
        )

"""Which ``HALLUWATCH_*`` environment variables name a setting, and the closest one to a typo.

pydantic-settings reads the variables it knows and ignores every other one, so a misspelled
``HALLUWATCH_KAFKA_BOOTSTRAPS`` would leave the default in place without a word.  Start-up
checks every ``HALLUWATCH_*`` variable against the settings model instead: top-level fields,
nested models through ``__`` (``HALLUWATCH_ALERTING__SLACK_BOT_TOKEN``), anything below a
mapping field (its keys are the user's), and the variables that locate the settings.  Secret
files named ``halluwatch_*`` are checked the same way (other files in the directory are other
programs' secrets, as in a shared ``/run/secrets``).  Kubernetes' service links, which a
Service named ``halluwatch`` adds to every pod (``HALLUWATCH_SERVICE_HOST``, ``HALLUWATCH_PORT``
...), are not the user's spelling and pass.
"""

from __future__ import annotations

import difflib
import re
import types
import typing
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from pydantic import BaseModel

PREFIX = "HALLUWATCH_"
NESTED = "__"
# The variables Kubernetes sets for a Service named "halluwatch" (enableServiceLinks).
_SERVICE_LINK = re.compile(
    r"HALLUWATCH_(SERVICE_HOST|SERVICE_PORT(_\w+)?|PORT(_\d+_(TCP|UDP|SCTP)(_PROTO|_PORT|_ADDR)?)?)"
)


def unknown_settings_message(
    environ: Mapping[str, str], secrets_dir: Path | None, model: type[BaseModel], also_known: Iterable[str]
) -> str | None:
    """One line naming every variable and secret file that names no setting, or None if all do."""
    problems = [name + _hint(near) for name, near in unknown_variables(environ, model, also_known)]
    for path in _secret_files(secrets_dir):
        unknown = unknown_variables([path.name], model, also_known)
        if unknown:
            near = unknown[0][1]
            problems.append(f"in secret file {path}" + _hint(near.lower() if near else None))
    if not problems:
        return None
    return ("unknown setting " if len(problems) == 1 else "unknown settings ") + ", ".join(problems)


def unknown_variables(
    names: Iterable[str], model: type[BaseModel], also_known: Iterable[str]
) -> list[tuple[str, str | None]]:
    """Each ``HALLUWATCH_*`` name that names no setting, with the closest valid name (or None)."""
    known = {name.upper() for name in also_known}
    valid = sorted(known | set(_variable_names(model, PREFIX)))
    unknown = []
    for name in sorted(names):
        upper = name.upper()
        if (
            not upper.startswith(PREFIX)
            or upper in known
            or _SERVICE_LINK.fullmatch(upper)
            or _names_a_setting(model, upper[len(PREFIX) :])
        ):
            continue
        # Compared without the prefix every name shares, or any name looks close to any other.
        closest = difflib.get_close_matches(upper[len(PREFIX) :], [v[len(PREFIX) :] for v in valid], n=1, cutoff=0.6)
        unknown.append((name, PREFIX + closest[0] if closest else None))
    return unknown


def _hint(near: str | None) -> str:
    return f" (did you mean {near}?)" if near else ""


def _secret_files(secrets_dir: Path | None) -> list[Path]:
    """The files of ``secrets_dir`` meant for halluwatch (pydantic-settings reads only those)."""
    if secrets_dir is None or not secrets_dir.is_dir():
        return []  # pydantic-settings reports a missing or mistaken directory itself
    return sorted(p for p in secrets_dir.iterdir() if p.name.upper().startswith(PREFIX) and p.is_file())


def _names_a_setting(model: type[BaseModel], path: str) -> bool:
    """Whether ``FIELD__SUB__...`` (upper case) reaches a field of ``model``."""
    head, _, rest = path.partition(NESTED)
    fields = {name.upper(): info.annotation for name, info in model.model_fields.items()}
    if head not in fields:
        return False
    if not rest:
        return True
    nested = _model_of(fields[head])
    if nested is not None:
        return _names_a_setting(nested, rest)
    return _is_mapping(fields[head])  # a mapping's keys are free; a scalar has no parts


def _variable_names(model: type[BaseModel], prefix: str) -> Iterator[str]:
    for name, info in model.model_fields.items():
        variable = prefix + name.upper()
        yield variable
        nested = _model_of(info.annotation)
        if nested is not None:
            yield from _variable_names(nested, variable + NESTED)


def _model_of(annotation: object) -> type[BaseModel] | None:
    """The settings model an annotation holds (``Model`` or ``Model | None``), if any."""
    candidates = typing.get_args(annotation) if _is_union(annotation) else (annotation,)
    models = [c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)]
    return models[0] if len(models) == 1 else None


def _is_mapping(annotation: object) -> bool:
    candidates = typing.get_args(annotation) if _is_union(annotation) else (annotation,)
    return any(typing.get_origin(c) in (dict, Mapping) or c is dict for c in candidates)


def _is_union(annotation: object) -> bool:
    return typing.get_origin(annotation) in (typing.Union, types.UnionType)


def takes_json(model: type[BaseModel], path: str) -> bool:
    """Whether the variable ``FIELD__SUB__...`` (upper case) sets a model, a list or a mapping, hence reads JSON."""
    head, _, rest = path.partition(NESTED)
    fields = {name.upper(): info.annotation for name, info in model.model_fields.items()}
    if head not in fields:
        return False
    nested = _model_of(fields[head])
    if rest:
        return takes_json(nested, rest) if nested is not None else False  # below a mapping: the user's values
    candidates = typing.get_args(fields[head]) if _is_union(fields[head]) else (fields[head],)
    return nested is not None or _is_mapping(fields[head]) or any(typing.get_origin(c) in (list, tuple, set)
                                                                   for c in candidates)  # fmt: skip

r"""Reading untrusted topic records: strict JSON, typed fields, valid ids, or one error.

Every record the worker reads back from a topic (findings, alerts, retries, sampled calls,
log-join records, OTLP/JSON spans and logs) may come from a broken producer, an older or
newer worker, or someone who can write to the topic.  Its stage must either get a value it
can use, with every field of the type it is declared with, or :class:`MalformedRecord`,
which it dead-letters and goes past.  Python's ``json`` alone is not enough: it accepts
``NaN`` and ``Infinity``, reads ``1e400`` as an infinite float, recurses once per nesting
level (200,000 ``[`` raise ``RecursionError``), and lets ``"\ud800"`` through as a string
that no UTF-8 encoder (Kafka's, ClickHouse's) can write.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import types
import typing
from collections.abc import Callable, Mapping, Sequence, Set
from enum import Enum
from typing import Any, TypeVar

from detectors.llm_call import LLMCall

T = TypeVar("T")

# Nesting deeper than protobuf's own default recursion limit is never ours: OTLP payloads,
# findings evidence and LLM calls stay far below it.
MAX_NESTING = 100
# The widest integer a ClickHouse column of ours holds (UInt64 nanosecond times, Int64 counts).
_INT_RANGE = (-(2**63), 2**64 - 1)
_INVALID_IDS = {"0" * 32, "0" * 16}


class MalformedRecord(ValueError):
    """A record that is not what its topic carries; the reason says what is wrong, never quoting much of it."""


def json_document(value: bytes | str) -> Any:
    """``value`` parsed as strict JSON: UTF-8, finite numbers, nesting within :data:`MAX_NESTING`, valid strings."""
    try:
        document = json.loads(value, parse_constant=_refuse_constant, parse_float=_finite_float)
    except RecursionError as exc:
        raise MalformedRecord(f"JSON nested deeper than {MAX_NESTING} levels") from exc
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, a too long integer, our refusals
        raise MalformedRecord(f"not strict JSON: {exc}") from exc
    check_json(document)
    return document


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(f"number {text[:40]} out of range")
    return number


def check_json(document: Any) -> None:
    r"""Raise :class:`MalformedRecord` unless ``document`` nests within limits, with encodable text, finite numbers.

    Iterative, so no input makes it recurse; a string with a lone surrogate (``"\ud800"``) is
    valid JSON but not text any sink can write.  Also for values built in Python (evidence,
    attributes), whose floats may be NaN and whose sequences may be tuples.
    """
    pending: list[tuple[Any, int]] = [(document, 0)]
    while pending:
        value, depth = pending.pop()
        if isinstance(value, str):
            _check_text(value)
        elif isinstance(value, float) and not math.isfinite(value):
            raise MalformedRecord("a number out of range")
        elif isinstance(value, dict | list | tuple):
            if depth >= MAX_NESTING:
                raise MalformedRecord(f"JSON nested deeper than {MAX_NESTING} levels")
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for key, item in items:
                if isinstance(key, str):
                    _check_text(key)
                pending.append((item, depth + 1))


def _check_text(text: str) -> None:
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise MalformedRecord(f"text with an unpaired surrogate at {exc.start}") from exc


def field_of(raw: Any, name: str) -> Any:
    """``raw[name]`` of a record that must be a JSON object holding ``name``."""
    if not isinstance(raw, Mapping):
        raise MalformedRecord(f"a {type(raw).__name__}, not an object")
    if name not in raw:
        raise MalformedRecord(f"no {name!r}")
    return raw[name]


def decoded(decode: Callable[[], T], what: str) -> T:
    """``decode()``'s value, any error of the decoding turned into :class:`MalformedRecord` (``what`` names it).

    For constructors that read a parsed document with ``str()``, ``int()`` and indexing: their
    ``KeyError``, ``TypeError``, ``ValueError``, ``AttributeError`` or ``OverflowError`` all mean
    the same to a stage, a record it cannot use.
    """
    try:
        value = decode()
    except MalformedRecord:
        raise
    except (KeyError, IndexError, TypeError, ValueError, AttributeError, OverflowError, RecursionError) as exc:
        raise MalformedRecord(f"not {what}: {type(exc).__name__}: {exc}") from exc
    return checked(value, what)


def valid_severity(value: Any) -> int:
    """A severity read from a record: an integer of 0-255, as the tables' ``UInt8`` columns hold it."""
    number = int(value)
    if not 0 <= number <= 255:
        raise MalformedRecord(f"severity {number} out of range 0-255")
    return number


def valid_trace_id(trace_id: str) -> str:
    """``trace_id`` if it is one trace's id as we write it: 32 lowercase hex digits, not all zero."""
    if len(trace_id) != 32 or trace_id in _INVALID_IDS or not _is_lower_hex(trace_id):
        raise MalformedRecord(f"invalid trace id {trace_id[:40]!r}")
    return trace_id


def _is_lower_hex(text: str) -> bool:
    return all(character in "0123456789abcdef" for character in text)


def valid_id_bytes(trace_id: bytes, span_id: bytes) -> bool:
    """Whether OTLP ids name one span of one trace: 16 and 8 bytes, neither all zero (OTLP calls those invalid)."""
    return len(trace_id) == 16 and len(span_id) == 8 and any(trace_id) and any(span_id)


def checked(value: T, what: str) -> T:
    """``value`` (a dataclass) if every field holds its declared type, recursively; else :class:`MalformedRecord`.

    Constructors built on ``str(raw[...])`` and ``float(...)`` cast the top level, but nested
    values (tuples of dataclasses, mappings) arrive as the JSON had them; a list where a string
    was due fails only later, deep in a detector or a sink.  Floats must be finite and
    integers fit a ClickHouse column.
    """
    problem = _type_problem(value, type(value), 0)
    if problem:
        raise MalformedRecord(f"not {what}: {problem}")
    return value


def _type_problem(value: Any, annotation: Any, depth: int) -> str:
    """What is wrong with ``value`` as an ``annotation``, or "" when nothing is."""
    if depth > MAX_NESTING:
        return f"nested deeper than {MAX_NESTING} levels"
    if annotation is Any or annotation is object:
        return _json_problem(value)
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        problems = [_type_problem(value, option, depth) for option in typing.get_args(annotation)]
        return "" if "" in problems else problems[0]
    if annotation is type(None):
        return "" if value is None else f"{type(value).__name__} where none was due"
    if isinstance(annotation, type) and dataclasses.is_dataclass(annotation):
        if not isinstance(value, annotation):
            return f"{type(value).__name__} where {annotation.__name__} was due"
        hints = _hints(annotation)
        for f in dataclasses.fields(annotation):
            if problem := _type_problem(getattr(value, f.name), hints[f.name], depth + 1):
                return f"{f.name}: {problem}"
        return ""
    if origin is not None:
        return _container_problem(value, origin, typing.get_args(annotation), depth)
    return _scalar_problem(value, annotation)


def _container_problem(value: Any, origin: Any, args: tuple[Any, ...], depth: int) -> str:
    if origin is typing.Literal:
        return "" if value in args else f"{value!r} is none of {args}"
    if isinstance(origin, type) and issubclass(origin, Mapping):
        if not isinstance(value, Mapping):
            return f"{type(value).__name__} where a mapping was due"
        key_type, item_type = args or (Any, Any)
        for key, item in value.items():
            if problem := _type_problem(key, key_type, depth + 1) or _type_problem(item, item_type, depth + 1):
                return f"[{str(key)[:40]!r}]: {problem}"
        return ""
    if isinstance(origin, type) and issubclass(origin, Sequence | Set):
        if not isinstance(value, tuple | list | frozenset | set):
            return f"{type(value).__name__} where a sequence was due"
        item_types = [args[0]] * len(value) if not args or args[-1] is Ellipsis else list(args)
        if len(item_types) != len(value):
            return f"{len(value)} items where {len(item_types)} were due"
        for index, (item, item_type) in enumerate(zip(value, item_types, strict=True)):
            if problem := _type_problem(item, item_type if item_type is not Ellipsis else Any, depth + 1):
                return f"[{index}]: {problem}"
        return ""
    return _scalar_problem(value, origin)


def _scalar_problem(value: Any, annotation: Any) -> str:
    if annotation is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return f"{type(value).__name__} where a number was due"
        return "" if math.isfinite(value) else "a number out of range"
    if annotation is int:
        if isinstance(value, bool) or not isinstance(value, int):
            return f"{type(value).__name__} where an integer was due"
        return "" if _INT_RANGE[0] <= value <= _INT_RANGE[1] else "an integer out of range"
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return "" if isinstance(value, annotation) else f"{value!r} is no {annotation.__name__}"
    if isinstance(annotation, type):
        if not isinstance(value, annotation):
            return f"{type(value).__name__} where {annotation.__name__} was due"
        if isinstance(value, str):
            try:
                _check_text(value)
            except MalformedRecord as exc:
                return str(exc)
        return ""
    return _json_problem(value)


def _json_problem(value: Any) -> str:
    """What keeps a free-form value (evidence, attributes) from being written as strict JSON, or ""."""
    try:
        check_json(value)
    except MalformedRecord as exc:
        return str(exc)
    return ""


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def call_from_record(raw: Any) -> LLMCall:
    """The LLM call a stage wrote with :meth:`LLMCall.to_dict` (sampled calls, log-join records), checked whole."""
    call = decoded(lambda: LLMCall.from_dict(raw), "an LLM call")
    valid_trace_id(call.trace_id)
    return call

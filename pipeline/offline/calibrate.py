"""``halluwatch calibrate``: labelled scores in, a versioned thresholds file out (docs/operations.md).

Each hallucination detector's threshold is chosen on part of the labelled records (the
*fitting* part) and checked on the rest (the *held-out* part, picked by a hash of the
record id, so the same records are held out on every run over the same data).  A
threshold is either the one with the best recall at a target precision, or TruthLens's
cost-ratio threshold τ* = 1 / (1 + λ·(1-π)/π).  The agreement rule as a whole is then
re-evaluated with the new thresholds.  A record is flagged when ``score >= threshold``,
as the detectors flag.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from detectors.thresholds import Thresholds, load_thresholds
from detectors.verdict import NOT_HALLUCINATION_EVIDENCE, threshold_relative
from pipeline.agreement.rules import AgreementRule
from pipeline.calibration.alert_probability import GatedCall, RouteMinimum, RouteTargets, choose_route_minimums
from pipeline.config.policy import DEFAULT_POLICY
from pipeline.offline.evaluate import EvalOutput, EvalRecord
from pipeline.offline.scored_calls import DetectorScore, LabelledScores

THRESHOLDS_SCHEMA = "thresholds.schema.json"
KEPT = "kept: "  # prefix of ``chosen_by`` when a threshold was not changed


class CalibrationError(ValueError):
    """Calibration cannot produce thresholds worth writing (too few labelled positives)."""


@dataclass(frozen=True, slots=True)
class OperatingPoint:
    """Precision and recall of "flag when score >= threshold" on a set of labelled scores.

    Precision is 0.0 when nothing is flagged and recall 0.0 when there are no positives
    (as :func:`pipeline.offline.eval_metrics.binary_metrics`); the counts show when that happened.
    """

    threshold: float
    precision: float
    recall: float
    f1: float
    true_positives: int
    false_positives: int
    false_negatives: int

    @property
    def flagged(self) -> int:
        """How many records this point flags."""
        return self.true_positives + self.false_positives


def _point(threshold: float, true_positives: int, false_positives: int, false_negatives: int) -> OperatingPoint:
    flagged = true_positives + false_positives
    positives = true_positives + false_negatives
    precision = true_positives / flagged if flagged else 0.0
    recall = true_positives / positives if positives else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return OperatingPoint(threshold, precision, recall, f1, true_positives, false_positives, false_negatives)


def sweep(scores: Sequence[float], labels: Sequence[bool]) -> list[OperatingPoint]:
    """One operating point per distinct score used as the threshold, sorted by threshold.

    Every point flags at least the records at its own score, so its precision is always
    defined; the lowest threshold flags everything (precision = the label prior).
    """
    if len(scores) != len(labels):
        raise ValueError(f"{len(scores)} scores but {len(labels)} labels")
    positives = sum(labels)
    ranked = sorted(zip(scores, labels, strict=True), key=lambda pair: -pair[0])
    points: list[OperatingPoint] = []
    true_positives = false_positives = 0
    index = 0
    while index < len(ranked):  # lower the threshold one distinct score at a time
        threshold = ranked[index][0]
        while index < len(ranked) and ranked[index][0] == threshold:
            true_positives += ranked[index][1]
            false_positives += not ranked[index][1]
            index += 1
        points.append(_point(threshold, true_positives, false_positives, positives - true_positives))
    points.reverse()
    return points


def operating_point(scores: Sequence[float], labels: Sequence[bool], threshold: float) -> OperatingPoint:
    """Precision and recall of flagging ``score >= threshold``."""
    true_positives = sum(score >= threshold and label for score, label in zip(scores, labels, strict=True))
    false_positives = sum(score >= threshold and not label for score, label in zip(scores, labels, strict=True))
    return _point(threshold, true_positives, false_positives, sum(labels) - true_positives)


def choose_at_precision(points: Sequence[OperatingPoint], target: float, min_flagged: int = 1) -> OperatingPoint | None:
    """The point with the best recall among those with precision >= ``target`` (ties: the higher threshold).

    Only points flagging at least ``min_flagged`` records count: at the top of a sweep a
    handful of records reach any precision by chance.
    """
    eligible = [point for point in points if point.precision >= target and point.flagged >= min_flagged]
    return max(eligible, key=lambda point: (point.recall, point.threshold), default=None)


def cost_ratio_threshold(cost_ratio: float, prior: float) -> float:
    """TruthLens's optimal threshold τ* = 1 / (1 + λ·(1-π)/π), in [0, 1].

    ``cost_ratio`` is λ = C_FN / C_FP, what a missed hallucination costs relative to a
    false alarm (seed 002, proposition 1); ``prior`` is π, the share of hallucinated calls.
    """
    if cost_ratio < 0:
        raise ValueError(f"cost ratio must be >= 0, got {cost_ratio}")
    if not 0.0 < prior <= 1.0:
        raise ValueError(f"label prior must be in (0, 1], got {prior}")
    return min(max(1.0 / (1.0 + cost_ratio * (1.0 - prior) / prior), 0.0), 1.0)


@dataclass(frozen=True, slots=True)
class DetectorCalibration:
    """One detector's new threshold, why, and how it does on the fitting and held-out records.

    ``fit`` and ``heldout`` are None where the detector has no ``ok`` score in that part.
    ``scores``/``labels`` are all its ``ok`` records (both parts), for the histograms.
    """

    name: str
    threshold: float
    previous_threshold: float
    chosen_by: str  # "target_precision", "cost_ratio", or "kept: <reason>"
    detector_version: str
    fit: OperatingPoint | None
    heldout: OperatingPoint | None
    curve: tuple[OperatingPoint, ...]  # the sweep over the fitting records
    scores: tuple[float, ...]
    labels: tuple[bool, ...]

    @property
    def kept(self) -> bool:
        """Whether the previous threshold was kept."""
        return self.chosen_by.startswith(KEPT)


@dataclass(frozen=True, slots=True)
class AgreementCalibration:
    """The agreement rule with the new thresholds.

    ``fit``/``heldout`` are what ``AgreementRule.agrees`` says on each part (their
    ``threshold`` is 0.5, where "flagged" lies on the threshold-relative scale).  ``curve``
    sweeps each fitting record's *agreement score*: the second-highest
    ``threshold_relative(score, threshold)`` among its ``ok`` hallucination detectors, so a
    record makes a plain two-detector rule exactly when that score is >= 0.5.  Rules on
    severity can differ from the curve's 0.5 point.
    """

    fit: OperatingPoint
    heldout: OperatingPoint | None
    curve: tuple[OperatingPoint, ...]
    rules: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Calibration:
    """Everything ``halluwatch calibrate`` decided, and on what data."""

    detectors: dict[str, DetectorCalibration]  # every detector of the previous thresholds file
    agreement: AgreementCalibration
    previous_version: str
    dataset_sha256: str
    dataset_size: int
    positives: int
    label_prior: float
    holdout: float
    heldout_size: int
    min_positives: int
    min_flagged: int
    target_precision: float | None  # None when chosen by cost ratio
    cost_ratio: float | None
    # Gated routes' p_hallucination minimums; empty when not asked for or no record had a probability.
    alert_probability: tuple[RouteMinimum, ...] = ()


def is_held_out(record_id: str, holdout: float) -> bool:
    """Whether a record belongs to the held-out part: a fixed hash of its id, not a random draw."""
    digest = hashlib.sha256(record_id.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < holdout


def dataset_sha256(records: Sequence[LabelledScores]) -> str:
    """SHA-256 of the canonical JSON of ``[id, label, [[detector, status, score], ...]]``, sorted.

    It changes when a record, a label, or any detector's score or status changes (a new
    detector version), and not with the order of the records.
    """
    canonical = sorted(
        [r.id, r.hallucinated, sorted([name, s.status, s.score] for name, s in r.detectors.items())] for r in records
    )
    return hashlib.sha256(json.dumps(canonical, separators=(",", ":")).encode("utf-8")).hexdigest()


def calibrate(
    records: Sequence[LabelledScores],
    current: Thresholds,
    rule: AgreementRule,
    *,
    target_precision: float = 0.67,
    cost_ratio: float | None = None,
    min_positives: int = 30,
    min_flagged: int = 30,
    holdout: float = 0.3,
    routing: RouteTargets | None = None,
) -> Calibration:
    """New thresholds for the detectors of ``current``, chosen on labelled records.

    Only a detector's ``ok`` scores count.  A detector keeps its current threshold (and
    says why) when its fitting records hold fewer than ``min_positives`` positives or no
    threshold flagging at least ``min_flagged`` of them reaches the target precision (the
    standard error of a precision near 0.67 over 30 records is about 0.09).  The
    sentinel, whose flag does not mean "hallucinated", always keeps its own.  Raises
    :class:`CalibrationError` when the whole set has fewer than ``min_positives`` positives.

    With ``routing``, each gated route also gets the lowest ``p_hallucination`` minimum that
    keeps its false alarms under its target (:mod:`pipeline.calibration.alert_probability`), when
    the records carry probabilities.
    """
    if not 0.0 < target_precision <= 1.0:
        raise ValueError(f"target precision must be in (0, 1], got {target_precision}")
    if not 0.0 <= holdout < 1.0:
        raise ValueError(f"holdout must be in [0, 1), got {holdout}")
    if min_positives < 1 or min_flagged < 1:
        raise ValueError(f"min_positives and min_flagged must be positive, got {min_positives} and {min_flagged}")
    positives = sum(record.hallucinated for record in records)
    if positives < min_positives:
        raise CalibrationError(
            f"only {positives} of {len(records)} labelled records are hallucinated; calibration needs at least "
            f"{min_positives} positives (label more hallucinated examples, or lower the minimum)"
        )
    prior = positives / len(records)
    fitting = [r for r in records if not is_held_out(r.id, holdout)]
    heldout = [r for r in records if is_held_out(r.id, holdout)]
    tau = None if cost_ratio is None else cost_ratio_threshold(cost_ratio, prior)
    choice = _Choice(target_precision, tau, min_positives, min_flagged)
    detectors = {
        name: _calibrate_detector(name, threshold, fitting, heldout, choice)
        for name, threshold in current.by_detector.items()
    }
    thresholds = {name: detector.threshold for name, detector in detectors.items()}
    judged = any(r.p_hallucination is not None for r in records)
    calls = [GatedCall(flags_at(r, thresholds), r.p_hallucination, r.hallucinated, held_out=is_held_out(r.id, holdout))
             for r in records]  # fmt: skip
    return Calibration(
        detectors=detectors,
        agreement=_calibrate_agreement(fitting, heldout, thresholds, rule),
        alert_probability=tuple(choose_route_minimums(calls, routing)) if routing and judged else (),
        previous_version=current.version,
        dataset_sha256=dataset_sha256(records),
        dataset_size=len(records),
        positives=positives,
        label_prior=prior,
        holdout=holdout,
        heldout_size=len(heldout),
        min_positives=min_positives,
        min_flagged=min_flagged,
        target_precision=None if cost_ratio is not None else target_precision,
        cost_ratio=cost_ratio,
    )


@dataclass(frozen=True, slots=True)
class _Choice:
    """How thresholds are chosen: at a target precision, or at a fixed cost-ratio threshold."""

    target_precision: float
    cost_ratio_threshold: float | None
    min_positives: int
    min_flagged: int

    def choose(self, curve: Sequence[OperatingPoint], labels: Sequence[bool]) -> tuple[float | None, str]:
        """(threshold, chosen_by), or (None, why the current threshold is kept)."""
        positives = sum(labels)
        if not labels:
            return None, "no ok scores among the fitting records"
        if positives < self.min_positives:
            return None, f"{positives} positives among {len(labels)} ok fitting records, minimum {self.min_positives}"
        if self.cost_ratio_threshold is not None:
            return self.cost_ratio_threshold, "cost_ratio"
        point = choose_at_precision(curve, self.target_precision, self.min_flagged)
        if point is None:
            best = max((p.precision for p in curve if p.flagged >= self.min_flagged), default=0.0)
            return None, (
                f"no threshold flagging >= {self.min_flagged} records reaches precision "
                f"{self.target_precision:.2f} (best {best:.3f})"
            )
        return point.threshold, "target_precision"


def _ok_scores(records: Sequence[LabelledScores], name: str) -> tuple[list[float], list[bool]]:
    pairs = [(r.detectors[name].score, r.hallucinated) for r in records if _is_ok(r.detectors.get(name))]
    return [score for score, _ in pairs], [label for _, label in pairs]


def _is_ok(score: DetectorScore | None) -> bool:
    return score is not None and score.status == "ok"


def _calibrate_detector(
    name: str,
    previous: float,
    fitting: Sequence[LabelledScores],
    heldout: Sequence[LabelledScores],
    choice: _Choice,
) -> DetectorCalibration:
    # Several versions in one data set means mixed scores: list them all rather than hide it.
    version = ", ".join(
        sorted({r.detectors[name].detector_version for r in (*fitting, *heldout) if name in r.detectors} - {""})
    )
    if name in NOT_HALLUCINATION_EVIDENCE:
        return DetectorCalibration(
            name=name,
            threshold=previous,
            previous_threshold=previous,
            chosen_by=KEPT + "not a hallucination detector",
            detector_version=version,
            fit=None,
            heldout=None,
            curve=(),
            scores=(),
            labels=(),
        )
    fit_scores, fit_labels = _ok_scores(fitting, name)
    held_scores, held_labels = _ok_scores(heldout, name)
    curve = sweep(fit_scores, fit_labels)
    chosen, chosen_by = choice.choose(curve, fit_labels)
    threshold = previous if chosen is None else chosen
    return DetectorCalibration(
        name=name,
        threshold=threshold,
        previous_threshold=previous,
        chosen_by=chosen_by if chosen is not None else KEPT + chosen_by,
        detector_version=version,
        fit=operating_point(fit_scores, fit_labels, threshold) if fit_scores else None,
        heldout=operating_point(held_scores, held_labels, threshold) if held_scores else None,
        curve=tuple(curve),
        scores=(*fit_scores, *held_scores),
        labels=(*fit_labels, *held_labels),
    )


def _evidence(record: LabelledScores, thresholds: Mapping[str, float]) -> dict[str, DetectorScore]:
    """The record's ok scores of hallucination detectors that have a threshold."""
    return {
        name: score
        for name, score in record.detectors.items()
        if _is_ok(score) and name in thresholds and name not in NOT_HALLUCINATION_EVIDENCE
    }


def flags_at(record: LabelledScores, thresholds: Mapping[str, float]) -> dict[str, int]:
    """The record's hallucination detectors that flag at ``thresholds`` (name -> recorded severity)."""
    return {name: s.severity for name, s in _evidence(record, thresholds).items() if s.score >= thresholds[name]}


def _agreement_score(record: LabelledScores, thresholds: Mapping[str, float]) -> float:
    relative = sorted(
        (threshold_relative(s.score, thresholds[name]) for name, s in _evidence(record, thresholds).items()),
        reverse=True,
    )
    return relative[1] if len(relative) > 1 else 0.0


def alert_point(
    records: Sequence[LabelledScores], thresholds: Mapping[str, float], rule: AgreementRule
) -> OperatingPoint:
    """Precision and recall of the agreement alerts at ``thresholds``, each record under its policy's rules."""
    # Severity is as recorded: a detector that did not flag at its old threshold reported 0,
    # so rules with a minimum severity may under-count newly flagged records.
    alerts = [rule.first_match(flags_at(r, thresholds), r.p_hallucination, r.policy) is not None for r in records]
    labels = [r.hallucinated for r in records]
    true_positives = sum(a and label for a, label in zip(alerts, labels, strict=True))
    return _point(0.5, true_positives, sum(alerts) - true_positives, sum(labels) - true_positives)


def _calibrate_agreement(
    fitting: Sequence[LabelledScores],
    heldout: Sequence[LabelledScores],
    thresholds: Mapping[str, float],
    rule: AgreementRule,
) -> AgreementCalibration:
    curve = sweep([_agreement_score(r, thresholds) for r in fitting], [r.hallucinated for r in fitting])
    return AgreementCalibration(
        fit=alert_point(fitting, thresholds, rule),
        heldout=alert_point(heldout, thresholds, rule) if heldout else None,
        curve=tuple(curve),
        rules=tuple(r.name for r in rule.rules),
    )


def labelled_from_eval(
    records: Sequence[EvalRecord], outputs: Sequence[EvalOutput], policy_of: Callable[[EvalRecord], str] | None = None
) -> list[LabelledScores]:
    """Labelled scores from ``halluwatch eval``'s outputs of the same records; unlabelled ones are skipped.

    ``policy_of`` names each record's application policy (default: none matched).
    """
    return [
        LabelledScores(
            id=record.id,
            hallucinated=record.hallucinated,
            detectors={
                name: DetectorScore(
                    score=float(entry["score"]),
                    status=str(entry["status"]),
                    severity=int(entry.get("severity", 0)),
                    detector_version=str(entry.get("version", "")),
                )
                for name, entry in output.detectors.items()
            },
            policy=policy_of(record) if policy_of else DEFAULT_POLICY,
            p_hallucination=output.p_hallucination,
        )
        for record, output in zip(records, outputs, strict=True)
        if record.hallucinated is not None
    ]


def load_thresholds_schema() -> dict[str, Any]:
    """The JSON Schema of thresholds files (``schemas/thresholds.schema.json``)."""
    schema: dict[str, Any] = json.loads(resources.files("schemas").joinpath(THRESHOLDS_SCHEMA).read_text("utf-8"))
    return schema


def _metrics(point: OperatingPoint, prefix: str = "") -> dict[str, float]:
    return {f"{prefix}precision": round(point.precision, 4), f"{prefix}recall": round(point.recall, 4)}


def thresholds_document(
    calibration: Calibration,
    *,
    models: Mapping[str, str] | None = None,
    now: datetime | None = None,
    policies: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The thresholds file's content (see ``schemas/thresholds.schema.json``).

    ``policies`` is the per-policy section (:func:`pipeline.offline.policy_calibration.policies_document`).
    """
    created = (now or datetime.now(UTC)).astimezone(UTC)
    detectors: dict[str, dict[str, Any]] = {}
    for name, detector in calibration.detectors.items():
        entry: dict[str, Any] = {"threshold": detector.threshold, "previous_threshold": detector.previous_threshold}
        if detector.fit is not None:
            positives = detector.fit.true_positives + detector.fit.false_negatives
            entry |= _metrics(detector.fit) | {"f1": round(detector.fit.f1, 4), "positives": positives}
        if detector.heldout is not None:
            entry |= _metrics(detector.heldout, "heldout_")
        entry["chosen_by"] = detector.chosen_by
        if detector.detector_version:
            entry["detector_version"] = detector.detector_version
        detectors[name] = entry
    agreement = calibration.agreement
    choice = (
        {"cost_ratio": calibration.cost_ratio}
        if calibration.cost_ratio is not None
        else {"target_precision": calibration.target_precision}
    )
    return {
        "version": f"cal-{created:%Y%m%dT%H%M%SZ}-{calibration.dataset_sha256[:8]}",
        "created": created.isoformat(timespec="seconds").replace("+00:00", "Z"),
        "previous_version": calibration.previous_version,
        "dataset_sha256": calibration.dataset_sha256,
        "dataset_size": calibration.dataset_size,
        "positives": calibration.positives,
        "label_prior": round(calibration.label_prior, 4),
        **choice,
        "holdout": calibration.holdout,
        "heldout_size": calibration.heldout_size,
        "min_positives": calibration.min_positives,
        "min_flagged": calibration.min_flagged,
        "detectors": detectors,
        "agreement": {
            "rules": list(agreement.rules),
            **_metrics(agreement.fit),
            **(_metrics(agreement.heldout, "heldout_") if agreement.heldout else {}),
        },
        **(
            {"alert_probability": {m.route: m.to_dict() for m in calibration.alert_probability}}
            if calibration.alert_probability
            else {}
        ),
        "models": dict(models or {}),
        **({"policies": dict(policies)} if policies else {}),
    }


def write_thresholds(
    calibration: Calibration,
    path: Path,
    *,
    models: Mapping[str, str] | None = None,
    now: datetime | None = None,
    policies: Mapping[str, Any] | None = None,
) -> str:
    """Write the versioned thresholds file workers load (``HALLUWATCH_THRESHOLDS_FILE``); returns its version.

    ``models`` names the models the scores came from (e.g. ``{"embeddings": "... int8"}``).
    """
    document = thresholds_document(calibration, models=models, now=now, policies=policies)
    jsonschema.validate(document, load_thresholds_schema())  # never write a file the schema rejects
    path.parent.mkdir(parents=True, exist_ok=True)
    header = (
        f"# Written by `halluwatch calibrate` from {calibration.dataset_size} labelled records.\n"
        "# Point HALLUWATCH_THRESHOLDS_FILE at this file; workers log and stamp its version.\n"
    )
    path.write_text(header + yaml.safe_dump(document, sort_keys=False, allow_unicode=True, width=1000), "utf-8")
    return str(document["version"])


def _read_document(path: Path) -> tuple[Thresholds, dict[str, Any]]:
    thresholds = load_thresholds(path)  # the same checks a worker makes
    document = yaml.safe_load(path.read_text("utf-8"))
    # What the file itself says: the built-in thresholds it inherits are no change between files.
    return Thresholds(thresholds.version, thresholds.own), document


def _describe_dataset(document: Mapping[str, Any]) -> str:
    if not document.get("dataset_sha256"):
        return "none"
    return (
        f"{document.get('dataset_size', '?')} records, {document.get('positives', '?')} positives, "
        f"sha256 {str(document['dataset_sha256'])[:12]}"
    )


def _describe_metrics(entry: Mapping[str, Any]) -> str:
    parts = []
    if "precision" in entry:
        parts.append(f"P {entry['precision']:.2f} R {entry['recall']:.2f}")
    if "heldout_precision" in entry:
        parts.append(f"held-out P {entry['heldout_precision']:.2f} R {entry['heldout_recall']:.2f}")
    if "chosen_by" in entry:
        parts.append(str(entry["chosen_by"]))
    return "; ".join(parts)


def diff_thresholds(old_path: Path, new_path: Path) -> str:
    """What changed between two thresholds files: versions, data set, thresholds, agreement."""
    old, old_document = _read_document(old_path)
    new, new_document = _read_document(new_path)
    lines = [
        f"version: {old.version} -> {new.version}",
        f"dataset: {_describe_dataset(old_document)} -> {_describe_dataset(new_document)}",
        "detectors:",
    ]
    width = max(map(len, {*old.by_detector, *new.by_detector}), default=0)
    for name in sorted({*old.by_detector, *new.by_detector}):
        if name not in new.by_detector:
            lines.append(f"  - {name:<{width}}  {old.by_detector[name]:g} (removed)")
            continue
        metrics = _describe_metrics(new_document["detectors"][name])
        metrics = f"  ({metrics})" if metrics else ""
        if name not in old.by_detector:
            lines.append(f"  + {name:<{width}}  {new.by_detector[name]:g} (added){metrics}")
        else:
            before, after = old.by_detector[name], new.by_detector[name]
            change = f"{before:g} -> {after:g}" if before != after else f"{after:g} (unchanged)"
            lines.append(f"    {name:<{width}}  {change}{metrics}")
    agreements = [
        _describe_metrics(document.get("agreement") or {}) or "-" for document in (old_document, new_document)
    ]
    if agreements != ["-", "-"]:
        lines.append(f"agreement: {agreements[0]} -> {agreements[1]}")
    return "\n".join(lines)

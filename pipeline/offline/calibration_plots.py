"""PNG pictures of a calibration: PR curves with the chosen operating points, score histograms.

Figures are built with matplotlib's object API (no pyplot), so nothing needs a display
and no global figure state is left behind: PNGs render through the Agg canvas.
matplotlib is the ``calibrate`` extra, not a worker requirement: without it, importing this
module (``halluwatch calibrate`` does, before any work) is one line naming the extra.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from pathlib import Path

from detectors.extras import requires_extra

with requires_extra("calibrate", "halluwatch calibrate (its PR curves and histograms)"):
    from matplotlib.figure import Figure

from pipeline.offline.calibrate import Calibration, OperatingPoint

_BINS = [i / 20 for i in range(21)]


def write_plots(calibration: Calibration, out_dir: Path) -> list[Path]:
    """Write ``pr_<detector>.png`` per swept detector, ``pr_agreement.png`` and ``score_histograms.png``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    target = calibration.target_precision
    written = []
    for name, detector in calibration.detectors.items():
        if not detector.curve:
            continue  # nothing was swept (the sentinel, or no ok scores)
        figure = _pr_figure(
            name,
            f"chosen by {detector.chosen_by}",
            detector.curve,
            detector.fit,
            detector.heldout,
            target,
            f"\u03c4 = {detector.threshold:.3g}",
        )
        written.append(_save(figure, out_dir / f"pr_{name}.png"))
    agreement = calibration.agreement
    figure = _pr_figure(
        "agreement rule",
        f"rules {', '.join(agreement.rules)} with the new thresholds; "
        "curve: second-strongest detector's threshold-relative score",
        agreement.curve,
        agreement.fit,
        agreement.heldout,
        target,
        "alerts",
    )
    written.append(_save(figure, out_dir / "pr_agreement.png"))
    histograms = _histograms_figure(calibration)
    if histograms is not None:
        written.append(_save(histograms, out_dir / "score_histograms.png"))
    return written


def _pr_figure(
    title: str,
    subtitle: str,
    curve: Sequence[OperatingPoint],
    fit: OperatingPoint | None,
    heldout: OperatingPoint | None,
    target: float | None,
    chosen_label: str,
) -> Figure:
    figure = Figure(figsize=(6, 5), layout="constrained")
    axes = figure.add_subplot()
    axes.plot([p.recall for p in curve], [p.precision for p in curve], "-", color="tab:blue", label="fitting records")
    if target is not None:
        axes.axhline(target, linestyle="--", color="gray", label=f"target precision {target:.2f}")
    if fit is not None:
        axes.plot(
            fit.recall,
            fit.precision,
            "o",
            color="tab:red",
            markersize=8,
            label=f"chosen, on fitting records: P {fit.precision:.2f} R {fit.recall:.2f}",
        )
        axes.annotate(chosen_label, (fit.recall, fit.precision), xytext=(8, 8), textcoords="offset points")
    if heldout is not None:
        axes.plot(
            heldout.recall,
            heldout.precision,
            "s",
            markerfacecolor="none",
            color="tab:red",
            markersize=8,
            label=f"same, on held-out records: P {heldout.precision:.2f} R {heldout.recall:.2f}",
        )
    axes.set(xlim=(0, 1.02), ylim=(0, 1.02), xlabel="recall", ylabel="precision")
    figure.suptitle(title, fontsize=12)
    axes.set_title(textwrap.fill(subtitle, 70), fontsize=9)
    axes.grid(alpha=0.3)
    axes.legend(loc="lower left", fontsize=8)
    return figure


def _histograms_figure(calibration: Calibration) -> Figure | None:
    swept = [d for d in calibration.detectors.values() if d.scores]
    if not swept:
        return None
    figure = Figure(figsize=(7, 2.6 * len(swept)), layout="constrained")
    for axes, detector in zip(figure.subplots(len(swept), 1, squeeze=False)[:, 0], swept, strict=True):
        clean = [s for s, label in zip(detector.scores, detector.labels, strict=True) if not label]
        hallucinated = [s for s, label in zip(detector.scores, detector.labels, strict=True) if label]
        axes.hist(clean, bins=_BINS, alpha=0.6, color="tab:green", label=f"clean ({len(clean)})")
        axes.hist(hallucinated, bins=_BINS, alpha=0.6, color="tab:red", label=f"hallucinated ({len(hallucinated)})")
        axes.axvline(detector.threshold, color="black", label=f"threshold {detector.threshold:.3g}")
        if detector.previous_threshold != detector.threshold:
            axes.axvline(
                detector.previous_threshold,
                color="black",
                linestyle=":",
                label=f"previous {detector.previous_threshold:.3g}",
            )
        axes.set(xlim=(0, 1), xlabel=f"{detector.name} score", ylabel="records")
        axes.legend(fontsize=8)
    return figure


def _save(figure: Figure, path: Path) -> Path:
    figure.savefig(path, dpi=100)
    return path

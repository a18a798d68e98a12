"""``halluwatch monitors``: each monitor's groups, their rate now against their baseline, open incidents."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from pipeline.config.monitors import MonitorConfig
from pipeline.monitors.evaluate import GroupKey, GroupRates, Incident, IncidentStatus, baseline, open_threshold


def monitor_lines(
    name: str, config: MonitorConfig, rates: Iterable[GroupRates], latest: Mapping[GroupKey, Incident]
) -> list[str]:
    """A header line for the monitor, then one line per group (open incidents first, then by rate)."""
    header = (
        f"{name}: route {config.route}, by {', '.join(config.group_by)}; {config.window_minutes} min "
        f"against {config.baseline_days} days; at least {config.min_calls} calls"
    )
    by_key = {r.key: r for r in rates}
    open_ = {key: incident for key, incident in latest.items() if incident.status is IncidentStatus.OPEN}
    keys = sorted(
        set(by_key) | set(open_), key=lambda k: (k not in open_, -by_key[k].window.rate if k in by_key else 0)
    )
    lines = [header] + [_group_line(config, key, by_key.get(key), open_.get(key)) for key in keys]
    return lines if keys else [header, "  no calls with findings in the baseline period"]


def _group_line(config: MonitorConfig, key: GroupKey, rates: GroupRates | None, incident: Incident | None) -> str:
    where = " / ".join(value or "(none)" for value in key)
    if rates is None:
        now = "no calls in the window"
    else:
        now = f"{rates.window.rate:6.1%} of {rates.window.calls} calls"
        found = baseline(rates, config.min_calls)
        if found is None:
            now += ", no baseline yet"
        else:
            source, counts = found
            now += f", baseline {counts.rate:.1%} ({source}), opens at {open_threshold(config, counts.rate):.1%}"
    state = f"  OPEN since {incident.opened_at:%Y-%m-%d %H:%M} UTC ({incident.incident_id})" if incident else ""
    return f"  {where}: {now}{state}"

"""The ``alerts`` table's row of one delivery: the alert record, flattened where the router writes it.

The table's columns are :data:`pipeline.sinks.rows.ALERT_COLUMNS`, beside the other tables';
the row is built here, in the alerting room, because the alert record is this room's.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from pipeline.alerting.alert import Alert, DeliveryStatus


def alert_row(
    alert: Alert, destination: str, status: DeliveryStatus, attempts: int, error: str, now: datetime
) -> list[Any]:
    """One ``alerts`` row, in ``ALERT_COLUMNS`` order."""
    # Final statuses outrank in-flight retries; later attempts outrank earlier ones.
    state_version = attempts + (1 << 16 if status.final else 0)
    return [
        alert.alert_id,
        alert.trace_id,
        alert.rule,
        alert.route,
        destination,
        alert.service,
        alert.model,
        alert.operation,
        alert.policy,
        alert.severity,
        alert.detector_names,
        alert.headline,
        json.dumps([d.to_dict() for d in alert.detectors], ensure_ascii=False, default=str),
        str(status),
        attempts,
        error[:2000],
        state_version,
        alert.created_at,
        now,
    ]

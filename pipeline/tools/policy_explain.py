"""``halluwatch policy explain``: the effective policy of a call, and where each value came from."""

from __future__ import annotations

from collections.abc import Mapping

from detectors.thresholds import load_thresholds
from pipeline.alerting.routes import describe_route
from pipeline.config.policy import call_identity
from pipeline.config.policy_book import EffectivePolicy, PolicyBook
from pipeline.config.settings import Settings


def explain(
    settings: Settings, service: str, operation: str = "", model: str = "", attributes: Mapping[str, str] | None = None
) -> list[str]:
    """Lines describing the policy a call with this identity gets, each value with its origin."""
    book = PolicyBook(settings, load_thresholds(settings.thresholds_file, settings.detectors.embeddings.profile))
    policy = book.for_identity(call_identity(service, operation, model, attributes or {}))
    matched = settings.policies.get(policy.name)
    header = f"policy: {policy.name}" + (
        f"  (match: {matched.match.describe()})" if matched else "  (no policy matched)"
    )
    rows = [
        ("disabled_detectors", ", ".join(sorted(policy.disabled_detectors)) or "(none)", "disabled_detectors"),
        ("content_mode", policy.content_mode, "content_mode"),
        ("sample_rate", f"{policy.sample_rate:g}", "sample_rate"),
        ("flag_probability", f"{policy.flag_probability:g}", "flag_probability"),
        ("rules", "; ".join(_rule_line(policy, rule.name) for rule in policy.rules) or "(none: never alerts)", "rules"),
        ("routes", ", ".join(f"{a} -> {b}" for a, b in sorted(policy.routes.items())) or "(as named)", "routes"),
        *(
            (f"threshold {name}", f"{value:g}", f"thresholds.{name}")
            for name, value in sorted(policy.thresholds.items())
        ),
    ]
    width = max(len(name) for name, _, _ in rows)
    lines = [header, *(f"  {name:<{width}}  {value}  [{policy.origin[key]}]" for name, value, key in rows)]
    used = sorted({policy.routes.get(rule.route, rule.route) for rule in policy.rules})
    return lines + [f"  route {route}: {describe_route(settings.alerting, route)}" for route in used]


def _rule_line(policy: EffectivePolicy, name: str) -> str:
    rule = next(rule for rule in policy.rules if rule.name == name)
    route = policy.routes.get(rule.route, rule.route)
    via = f" (route {rule.route} -> {route})" if route != rule.route else f" (route {route})"
    gate = f", p_hallucination >= {rule.min_probability:g}" if isinstance(rule.min_probability, float) else ""
    return name + via + gate

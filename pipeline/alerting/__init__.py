"""Alerts out: the record, its renderings, destinations, routes and rate limits, and the router stage.

The router delivers each alert once to each destination of its route (Slack, PagerDuty, log).

Everything but ``stage`` is free of faust.
"""

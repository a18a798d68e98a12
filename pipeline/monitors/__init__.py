"""Rate monitors: a group's flag rate against its own baseline opens, updates and resolves one incident.

``evaluate`` is the pure decision core; ``store`` reads rates and incidents from ClickHouse;
``runner`` decides, notifies the route's destinations and records incidents; ``grouping``
puts per-trace alerts under an open incident; ``stage`` runs the monitors on the worker;
``view`` writes the ``halluwatch monitors`` lines.
"""

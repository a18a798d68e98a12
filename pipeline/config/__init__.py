"""What every command reads: typed settings, connections, secrets, content policy, sections.

The bottom of the pipeline: imports only ``detectors.config`` and its own modules, and loads
no model runtime, so every command can read its settings quickly.
"""

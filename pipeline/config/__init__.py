"""What every command reads: typed settings, connections, secrets, content policy, sections.

The bottom of the pipeline: imports only the detectors' settings models (their registry and
packages' ``__init__`` modules, never their runtimes) and its own modules, and loads no model
runtime, so every command can read its settings quickly.
"""

"""Example traces for the demo, the tests and the benchmarks.

The content lives in data files beside this package's modules: examples.yaml (the
requests, their sources and expected verdicts), schemas.yaml (tools and output schemas)
and traffic.yaml (the infrastructure spans of benchmark traffic).  The code writes that
content in each instrumentation convention (writers), records it with the real
OpenTelemetry SDK (recorder, recording) and clones it into benchmark traffic (traffic).
"""

from pipeline.tools.example_traces.examples import (
    EXAMPLE_OUTPUT_SCHEMAS,
    EXAMPLES,
    LOG_EVENT_EXAMPLES,
    TOOL_DEFINITIONS,
    ConventionName,
    Example,
    Tool,
    example_registries,
)
from pipeline.tools.example_traces.recording import example_log_event_telemetry, example_traces
from pipeline.tools.example_traces.traffic import mixed_traffic

__all__ = [
    "EXAMPLES",
    "EXAMPLE_OUTPUT_SCHEMAS",
    "LOG_EVENT_EXAMPLES",
    "TOOL_DEFINITIONS",
    "ConventionName",
    "Example",
    "Tool",
    "example_log_event_telemetry",
    "example_registries",
    "example_traces",
    "mixed_traffic",
]

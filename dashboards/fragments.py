"""SQL that a panel and a command must say identically, written once: panels name it ``{{name}}``.

:func:`dashboards._parse` puts each fragment in the panel's query when it loads the file, so the
Grafana JSON, ``halluwatch report`` and the tests all run the whole text.
"""

from __future__ import annotations

# Why a call is unverified, aggregated over its rows of ``findings``: the sentinel found a factual
# prompt with nothing to check the answer against; its text was cut at max_call_chars before the
# detectors saw it (every finding's evidence names what was cut); the coverage detector's reasons
# (an answer in a language the embedding model does not cover, a source cut at max_source_chars);
# a detector that failed on it.  Empty: the detectors could check the call.
UNVERIFIED_REASONS = """arrayDistinct(arrayConcat(
        arrayFilter(r -> r != '', groupArray(multiIf(
            detector = 'sentinel' AND flagged AND summary = 'unverified_factual', 'no sources for a factual prompt',
            status = 'error', concat(detector, ' failed'),
            ''))),
        if(arrayExists(t -> has(t, 'output_messages'), groupArray(JSONExtract(evidence, 'truncated', 'Array(String)'))),
           ['answer cut at max_call_chars'], []),
        if(arrayExists(t -> hasAny(t, ['input_messages', 'system_instructions', 'sources']),
                       groupArray(JSONExtract(evidence, 'truncated', 'Array(String)'))),
           ['context cut at max_call_chars'], []),
        arrayFlatten(groupArray(if(detector = 'coverage' AND flagged,
                                   JSONExtract(evidence, 'reasons', 'Array(String)'), [])))
    ))"""

FRAGMENTS = {"unverified_reasons": UNVERIFIED_REASONS}

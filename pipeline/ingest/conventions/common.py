"""Rows every convention shares: attributes halluwatch defines itself.

``halluwatch.response.logprobs`` carries per-token logprobs for conventions that have
none, as a JSON string ``[{"token", "logprob", "top_logprobs": [{"token", "logprob"}]}]``
(the seed's ``llm.response.tokens_json`` shape, i.e. OpenAI's ``logprobs.content``).
"""

from __future__ import annotations

from pipeline.ingest.conventions import values
from pipeline.ingest.conventions.engine import Row

HALLUWATCH_ROWS: tuple[Row, ...] = (("halluwatch.response.logprobs", "logprobs", values.token_logprobs),)

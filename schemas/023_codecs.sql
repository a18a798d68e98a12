-- Codecs where they pay (bench/storage.py, bytes per call before and after, in bench/README.md):
-- ZSTD for text, whose word statistics LZ4 does not exploit; the ids as well (hex digits: half
-- of each byte is redundant, which only an entropy coder removes).  New parts are written with
-- them at once, older parts as merges rewrite them.
ALTER TABLE {database}.llm_calls
    MODIFY COLUMN trace_id CODEC(ZSTD(3)),
    MODIFY COLUMN span_id CODEC(ZSTD(3)),
    MODIFY COLUMN parent_span_id CODEC(ZSTD(3)),
    MODIFY COLUMN prompt CODEC(ZSTD(3)),
    MODIFY COLUMN answer CODEC(ZSTD(3)),
    MODIFY COLUMN grounding CODEC(ZSTD(3)),
    MODIFY COLUMN logprobs_json CODEC(ZSTD(3)),
    MODIFY COLUMN attributes CODEC(ZSTD(3)),
    MODIFY COLUMN erasable CODEC(ZSTD(3))

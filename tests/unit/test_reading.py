"""Which parts of a call's sources the model reads (detectors/text/reading.py)."""

from __future__ import annotations

from detectors.config import ReadingConfig
from detectors.text.reading import choose, parts_of, unread_lines

TOWER = "The Eiffel Tower was built between 1887 and 1889 by Gustave Eiffel's company for the World's Fair."
FILLER = " ".join(f"Shipment {i} left warehouse {i % 13} on a rainy morning with {i * 7} crates." for i in range(120))


def test_parts_are_whole_sentences_within_the_limit() -> None:
    parts = parts_of(FILLER, 500)
    assert all(end - start <= 500 for start, end in parts)
    assert all(FILLER[start:end].startswith("Shipment") and FILLER[end - 1] == "." for start, end in parts)
    assert parts[0][0] == 0 and parts[-1][1] == len(FILLER)
    long_sentence = "word " * 300  # no sentence end: cut at spaces
    assert all(end - start <= 500 for start, end in parts_of(long_sentence, 500))


def test_a_short_call_is_read_whole_and_says_nothing() -> None:
    boats = "Unrelated text about boats."
    reading = choose("It was built in 1889.", "When was it built?", [TOWER, boats], ReadingConfig())
    assert reading.complete and reading.evidence() == {}
    assert reading.ranges == (((0, len(TOWER)),), ((0, len(boats)),))


def test_a_long_call_reads_what_the_answer_is_about_and_says_what_it_left() -> None:
    source = FILLER[:3000] + " " + TOWER + " " + FILLER[3000:]
    config = ReadingConfig(min_chars=0, max_chars=1500)
    reading = choose("Gustave Eiffel's company built the tower for the World's Fair.", "", [source, FILLER], config)
    tower_at = source.index(TOWER)
    assert any(start <= tower_at < end for start, end in reading.ranges[0])  # the part with the tower
    assert len(reading.ranges[1]) == 1  # a source with nothing in common still gets its best part read
    assert not reading.complete and reading.read_chars <= 1500 + 500
    evidence = reading.evidence()
    assert evidence["read_chars"] == reading.read_chars
    assert evidence["unread_chars"] == len(source) + len(FILLER) - reading.read_chars > 10_000
    (line,) = unread_lines(evidence)
    assert line.startswith(f"{evidence['unread_chars']:,} characters of the sources not read by the model")


def test_the_floor_is_read_whatever_it_shares_and_the_cap_bounds_the_rest() -> None:
    answer = "Shipment crates left the warehouse."  # shares words with every part
    floor = choose("Nothing in common here at all.", "", [FILLER], ReadingConfig(min_chars=2000, max_chars=2000))
    assert 1500 <= floor.read_chars <= 2000
    capped = choose(answer, "", [FILLER], ReadingConfig(min_chars=0, max_chars=3000))
    assert 2500 <= capped.read_chars <= 3000
    assert capped.ranges[0] == tuple(sorted(capped.ranges[0]))  # in reading order

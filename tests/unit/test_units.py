"""detectors/data/units.yaml as the quantity extractor reads it: every unit is found, and converts right."""

from __future__ import annotations

from importlib import resources

import pytest
import yaml

from detectors.text.quantities import _SYMBOL_UNITS, Kind, extract_values

TABLE = yaml.safe_load(resources.files("detectors.data").joinpath("units.yaml").read_text("utf-8"))
UNITS = [
    (name, dimension, entry["factor"])
    for dimension, entries in TABLE.items()
    for entry in entries
    for name in entry["names"]
]


def written(name: str) -> str:
    """How a text spells the unit: symbols keep their case ("kW", "MB"), words are lowercase in the table."""
    return next((symbol for symbol in _SYMBOL_UNITS if symbol.lower() == name and symbol != name), name)


@pytest.mark.parametrize(("name", "dimension", "factor"), UNITS, ids=[name for name, _, _ in UNITS])
def test_every_unit_is_found_and_converted_to_its_base_unit(name: str, dimension: str, factor: float) -> None:
    (mention,) = extract_values(f"It measured 7 {written(name)} in total.")
    assert (mention.kind, mention.family) == (Kind.QUANTITY, f"quantity:{dimension}")
    assert mention.low == mention.high == pytest.approx(7 * factor)


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ("1 km", "1,000 metres"),
        ("1 mile", "5,280 feet"),
        ("1 foot", "12 inches"),
        ("1 hectare", "10,000 square metres"),
        ("1 kg", "1,000 grams"),
        ("1 pound", "16 ounces"),
        ("1 tonne", "1,000 kilograms"),
        ("2 hours", "120 minutes"),
        ("1 week", "7 days"),
        ("1 year", "12 months"),
        ("1 decade", "10 years"),
        ("1 GiB", "1,024 MiB"),
        ("1 TB", "1,000 gigabytes"),
        ("1 litre", "1,000 ml"),
        ("36 km/h", "10 m/s"),
        ("1 MW", "1,000 kilowatts"),
        ("1 kWh", "1,000 Wh"),
        ("1 GHz", "1,000 MHz"),
    ],
)
def test_units_of_one_dimension_convert_consistently(one: str, other: str) -> None:
    (left,), (right,) = extract_values(one), extract_values(other)
    assert left.family == right.family
    assert left.low == pytest.approx(right.low, rel=1e-4)  # the table rounds some factors (ounce: 28.3495 g)

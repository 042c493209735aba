import pytest

from scenarios.spec import units


@pytest.mark.parametrize("text,ms", [("15ms", 15.0), ("0.25s", 250.0), ("500us", 0.5), (" 2 s ", 2000.0)])
def test_durations(text, ms):
    assert units.parse_duration_ms(text) == ms


@pytest.mark.parametrize("bad", [15, 1.5, True, "15", "15 min", "-3ms", None])
def test_bad_durations(bad):
    with pytest.raises(ValueError):
        units.parse_duration_ms(bad)


@pytest.mark.parametrize("value,mbit", [(10, 10.0), (2.5, 2.5), ("700kbit", 0.7), ("1Gbit", 1000.0), ("5Mbit/s", 5.0)])
def test_rates(value, mbit):
    assert units.parse_rate_mbit(value) == pytest.approx(mbit)


@pytest.mark.parametrize("value,n", [(1000, 1000), ("10MB", 10**7), ("10MiB", 10 * 2**20), ("1.5kB", 1500)])
def test_sizes(value, n):
    assert units.parse_size_bytes(value) == n


def test_tc_formatting_is_exact():
    assert units.format_mbit(0.7) == "700kbit"
    assert units.format_mbit(10) == "10000kbit"
    assert units.format_mbit(0.0005) == "0.5kbit"
    assert units.format_ms(15.0) == "15ms" and units.format_ms(0.5) == "0.5ms"

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


@pytest.mark.parametrize("value,n", [(1000, 1000), ("10MB", 10**7), ("10MiB", 10 * 2**20), ("1.5kB", 1500),
                                     ("10Mb", 10**7), ("2gib", 2 * 2**30), ("0.5TiB", 2**39), ("0.25tb", 25 * 10**10)])
def test_sizes(value, n):
    assert units.parse_size_bytes(value) == n


@pytest.mark.parametrize("value", ["1TB", "1tb", " 1 Tb ", "1000GB", 10**12, "0.9094947017729282379150390625TiB"])
def test_a_size_of_exactly_1_tb_is_the_largest(value):
    """The docs' limit, "at most 1 TB", written as a size (issue 28: '1TB' was refused)."""
    assert units.parse_size_bytes(value) == 10**12


@pytest.mark.parametrize("value,msg", [
    ("1.000000000001TB", "must be at most 1TB, 1000000000000 bytes (got '1.000000000001TB', 1000000000001 bytes)"),
    (10**12 + 1, "must be at most 1TB, 1000000000000 bytes (got 1000000000001)"),
    ("1TiB", "(got '1TiB', 1099511627776 bytes)"),
    ("0.3KiB", "must be a whole number of bytes (got '0.3KiB', 307.2 bytes)"),
    ("1PB", "must be a size such as 10000000, '10MB' or '10MiB' (units b, kB, MB, GB, TB, KiB, MiB, GiB, TiB"),
])
def test_sizes_over_1_tb_or_not_whole_bytes_are_refused(value, msg):
    with pytest.raises(ValueError) as e:
        units.parse_size_bytes(value)
    assert msg in str(e.value)


def test_tc_formatting_is_exact():
    assert units.format_mbit(0.7) == "700kbit"
    assert units.format_mbit(10) == "10000kbit"
    assert units.format_mbit(0.0005) == "0.5kbit"
    assert units.format_ms(15.0) == "15ms" and units.format_ms(0.5) == "0.5ms"

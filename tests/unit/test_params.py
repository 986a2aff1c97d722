"""Parameter coercion and range checks shared by every component."""
import pytest

from bufferbloat.core.errors import ParameterError, UsageError
from bufferbloat.core.params import (
    Param,
    check_number,
    check_params,
    check_port,
    check_range,
    env_number,
)

RATE = Param("rate_mbit", float, 10.0, "rate", lo=0, lo_open=True, hi=100)
LOSS = Param("loss_pct", float, 0.0, "loss", lo=0, hi=100)


@pytest.mark.parametrize("value", [0, -1, "-3", 101, "inf", "nan", "ten", None, True, [1]])
def test_rate_rejects(value):
    with pytest.raises(ParameterError):
        RATE.coerce(value)


@pytest.mark.parametrize("value,expected", [(1.5, 1.5), ("1.5", 1.5), (100, 100.0)])
def test_rate_accepts(value, expected):
    assert RATE.coerce(value) == expected


def test_loss_bounds_inclusive():
    assert LOSS.coerce(0) == 0 and LOSS.coerce(100) == 100
    with pytest.raises(ParameterError, match="loss_pct"):
        LOSS.coerce(100.5)


def test_check_params_fills_defaults_and_rejects_unknown():
    assert check_params("x", [RATE, LOSS], {"loss_pct": "2"}) == {"rate_mbit": 10.0,
                                                                  "loss_pct": 2.0}
    with pytest.raises(UsageError, match="valid: loss_pct, rate_mbit"):
        check_params("x", [RATE, LOSS], {"rate": 1})


@pytest.mark.parametrize("name", ["h1; rm -rf /", "$(reboot)", "a b", "", "x" * 16, "-h", 3])
def test_names_that_could_reach_a_shell_are_refused(name):
    with pytest.raises(ParameterError):
        Param("host", str, None, "a host name").coerce(name)


def test_tool_arguments_and_ranges():
    assert check_number("x", "2.5", 0, 10) == 2.5 and check_port("80") == 80
    for bad in (0, 65536, "x", None):
        with pytest.raises(ParameterError):
            check_port(bad)
    with pytest.raises(ParameterError, match="> 0 and <= 1"):
        check_number("x", 0, 0, 1, lo_open=True)
    assert check_range("--time", 5, 1, 86400, " s") == 5
    for bad in (0, 1e6, float("nan"), True, "5"):
        with pytest.raises(UsageError, match=r"invalid value for --time: .* \(allowed: 1 to "
                                             r"86400 s\)"):
            check_range("--time", bad, 1, 86400, " s")


def test_environment_numbers():
    env = {"A": "2.5", "N": "7", "EMPTY": " ", "BAD": "x", "FRAC": "1.5", "HIGH": "200"}
    assert env_number("A", 1.0, 0, 10, "s", environ=env) == 2.5
    assert env_number("N", 1, 0, 99, "0 to 99", conv=int, environ=env) == 7
    assert env_number("EMPTY", 3, 0, 99, "x", environ=env) == 3
    assert env_number("UNSET", None, 0, 99, "x", environ=env) is None
    for name, conv in (("BAD", float), ("FRAC", int), ("HIGH", float)):
        with pytest.raises(UsageError, match=f"invalid value for {name}: "):
            env_number(name, 1, 0, 99, "0 to 99", conv=conv, environ=env)
    with pytest.raises(KeyError):       # the caller's own error class
        env_number("BAD", 1, 0, 99, "x", environ=env, error=KeyError)

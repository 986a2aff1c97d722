"""Parameter coercion and range checks shared by every component."""
import pytest

from bufferbloat.errors import ParameterError, UsageError
from bufferbloat.params import Param, check_name, check_params

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
        check_name("host", name)

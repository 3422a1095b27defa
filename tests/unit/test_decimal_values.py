"""Exact unscaled integers of decimals of every precision (no 28-digit context rounding)."""

from __future__ import annotations

import decimal

import hypothesis.strategies as st
import pytest
from hypothesis import given

from appendtable.errors import InvalidArgumentError
from appendtable.metadata.values import unscaled
from tests.helpers import strategies


@given(
    st.integers(1, 38)
    .flatmap(lambda p: st.tuples(st.just(p), st.integers(0, p)))
    .flatmap(lambda ps: st.tuples(st.just(ps[1]), strategies.decimals(*ps)))
)
def test_unscaled_is_the_exact_integer_of_the_digits(case: tuple[int, decimal.Decimal]) -> None:
    scale, value = case
    digits = format(value, "f").replace("-", "").replace(".", "")
    expected = int(digits) * (-1 if value.is_signed() else 1)
    assert unscaled(value, scale) == expected
    assert unscaled(value, scale + 3) == expected * 1000  # at a larger scale too


@pytest.mark.parametrize("text", ["1.25", "NaN", "Infinity", "-1E-3"])
def test_values_without_an_unscaled_integer_at_the_scale_are_refused(text: str) -> None:
    with pytest.raises(InvalidArgumentError):
        unscaled(decimal.Decimal(text), 1 if text != "-1E-3" else 2)

"""Pearson's r and Spearman's rho (elmo.correlation) against independent float64 formulas."""
import math

import numpy as np
import pytest

from elmo.correlation import average_ranks, pearson, spearman, undefined_reason


def _ranks_by_counting(x):
    """Average ranks by definition: 1 + values below + (equal values - 1) / 2. O(N^2)."""
    x = np.asarray(x, dtype=np.float64)
    return np.array([1 + (x < v).sum() + ((x == v).sum() - 1) / 2 for v in x])


@pytest.mark.parametrize("seed", range(5))
def test_against_numpy_and_ranks_by_counting(seed):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 6, size=40).astype(float)          # many ties
    y = x + rng.normal(size=40)
    assert pearson(x, y) == pytest.approx(np.corrcoef(x, y)[0, 1], abs=1e-12)
    np.testing.assert_array_equal(average_ranks(x), _ranks_by_counting(x))
    expected = np.corrcoef(_ranks_by_counting(x), _ranks_by_counting(y))[0, 1]
    assert spearman(x, y) == pytest.approx(expected, abs=1e-12)


def test_known_values():
    # a monotone but not linear relation: rho is 1, r is below it
    x = [1, 2, 3, 4, 5]
    y = [1, 4, 9, 16, 100]
    assert spearman(x, y) == 1.0
    assert pearson(x, y) < 0.95
    assert spearman(x, [5, 4, 3, 2, 1]) == -1.0
    # ties: ranks (1.5, 1.5, 3) against (1, 2, 3) -> r of the ranks = sqrt(3)/2
    assert spearman([1, 1, 2], [1, 2, 3]) == pytest.approx(math.sqrt(3) / 2, abs=1e-15)


def test_scale_does_not_overflow_or_change_r():
    x = np.array([1.0, 2.0, 4.0, 3.0])
    y = np.array([2.0, 1.0, 5.0, 4.0])
    assert pearson(x * 1e200, y * 1e-200) == pytest.approx(pearson(x, y), abs=1e-12)


@pytest.mark.parametrize("x, y, reason", [([], [], "0 items"), ([1.0], [2.0], "1 item"),
                                          ([1, 1, 1], [1, 2, 3], "constant")])
def test_undefined_is_nan_with_a_reason(x, y, reason):
    assert math.isnan(pearson(x, y)) and math.isnan(spearman(x, y))
    assert reason in undefined_reason(x, y)
    assert undefined_reason([1, 2], [2, 1]) is None


@pytest.mark.parametrize("x, y", [([1, 2], [1]), ([[1, 2]], [[1, 2]]), ([1, float("nan")], [1, 2]),
                                  ([1, float("inf")], [1, 2])])
def test_bad_input_is_refused(x, y):
    with pytest.raises(ValueError):
        pearson(x, y)
    with pytest.raises(ValueError):
        spearman(x, y)


def _exact_pearson(x, y) -> float:
    """r in exact rational arithmetic (only the final square root rounds)."""
    from fractions import Fraction
    fx, fy = [Fraction(v) for v in x], [Fraction(v) for v in y]
    mx, my = sum(fx) / len(fx), sum(fy) / len(fy)
    num = sum((a - mx) * (b - my) for a, b in zip(fx, fy))
    r2 = num * num / (sum((a - mx) ** 2 for a in fx) * sum((b - my) ** 2 for b in fy))
    return math.sqrt(r2) if num >= 0 else -math.sqrt(r2)


@pytest.mark.parametrize("seed", range(20))
def test_values_near_the_float64_limits_against_exact_arithmetic(seed):
    """Values near 1.8e308 overflowed the sum behind the mean: r was NaN, which the clamp to
    [-1, 1] made +1 (x = [1e308, 1e308, 0] against [1, 2, 3] read as a perfect correlation;
    it is -0.87). Each r, also of subnormal values, is compared with exact rationals; 1e-12
    bounds float64's rounding over sums of at most 8 products many times over."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 9))
    x = rng.uniform(-1, 1, size=n) * float(rng.choice([1.79e308, 1e300, 1.0, 1e-300, 1e-315]))
    y = rng.uniform(-1, 1, size=n) * float(rng.choice([1.79e308, 1.0, 1e-310]))
    if undefined_reason(x, y):       # (a subnormal draw can round to a constant side)
        return
    assert pearson(x, y) == pytest.approx(_exact_pearson(x, y), abs=1e-12)
    assert pearson([1e308, 1e308, 0.0], [1.0, 2.0, 3.0]) == pytest.approx(-math.sqrt(3) / 2, abs=1e-12)
    assert pearson([1e308, 1.5e308, -1e308], [3.0, 1.0, 2.0]) == pytest.approx(
        _exact_pearson([1e308, 1.5e308, -1e308], [3.0, 1.0, 2.0]), abs=1e-12)

"""numexpr's own expression tests (numexpr/tests/test_numexpr.py, its
`tests` table: arithmetic, %, **, comparisons, where, the one- and
two-argument functions) run through uopjit.evaluate, against NumPy's
result of the same expression, with numexpr's own measure of agreement
(allclose with atol 1e-5 for float32 and 1e-8 for float64; where NumPy has
NaNs or infinities, as many of them). As numexpr's suite does, every
expression runs on float32 and float64 operands, each with every operand
an array, `a` a scalar, or `b` a scalar. Left out, as the math library's
scope says: complex operands, and numexpr's `int` dtype (64-bit integers,
which uopjit does not have). The names numexpr takes from NumPy
(arctan2, arcsin, ...) are spelled as uopjit spells them (atan2, asin,
...); `copy(x)` and `conj(x)` of a real are x."""
import re

import numpy as np
import pytest

import uopjit

numexpr_tests = pytest.importorskip("numexpr.tests.test_numexpr")

NAMES = {"arctan2": "atan2", "arcsin": "asin", "arccos": "acos", "arctan": "atan", "arcsinh": "asinh",
         "arccosh": "acosh", "arctanh": "atanh", "copy": "", "conj": ""}


def translate(expr):
    """The expression in uopjit's language, or None when it has no meaning
    there (`.real` of a complex)."""
    if ".real" in expr:
        return None
    return re.sub(r"\b(%s)\(" % "|".join(NAMES), lambda m: NAMES[m.group(1)] + "(", expr)


def operands(dtype, scalar):
    """numexpr's test operands for one dtype and scalar case."""
    size = 100
    values = {"a": np.arange(2 * size, dtype=dtype)[::2], "a2": np.zeros([size, size], dtype=dtype),
              "b": np.arange(size, dtype=dtype) / size, "c": np.arange(size, dtype=dtype),
              "d": np.arange(size, dtype=dtype), "e": np.arange(size, dtype=dtype)}
    if scalar == 1:
        values["a"] = values["a"][size // 2]
    if scalar == 2:
        values["b"] = values["b"][size // 2]
    return values


def cases():
    for section, exprs in numexpr_tests.tests:
        for expr in exprs:
            for dtype in (np.float32, np.float64):
                for scalar in (0, 1, 2):
                    yield pytest.param(expr, dtype, scalar, id="%s-%s-%s-scalar%d" % (section, expr, dtype.__name__, scalar))


@pytest.mark.parametrize("expr,dtype,scalar", list(cases()))
def test_numexpr_expression(expr, dtype, scalar):
    source = translate(expr)
    if source is None:
        pytest.skip("%r reads a complex number's .real" % expr)
    values = operands(dtype, scalar)
    namespace = dict(vars(np))
    namespace.update(values)
    with np.errstate(all="ignore"):
        want = eval(expr, namespace)  # what numexpr's suite compares with: NumPy's result
    used = {name: np.asarray(v) for name, v in values.items() if re.search(r"\b%s\b" % name, source)}
    got = uopjit.evaluate(source, **used)
    assert numexpr_tests.equal(np.asarray(want), np.asarray(got), False), (expr, source, want, got)

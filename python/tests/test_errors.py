"""Bad calls raise with a message that says what is wrong, and write nothing."""
import numpy as np
import pytest

import uopjit


def test_parse_errors_carry_uopjits_message_and_column():
    with pytest.raises(uopjit.Error) as e:
        uopjit.Kernel("1/(1+exp(-x)")
    assert e.value.status == "UJ_ERR_PARSE"
    assert "column 13" in str(e.value) and "expected" in str(e.value)
    with pytest.raises(uopjit.Error, match="line 2"):
        uopjit.Kernel("y = x\nz = * 2")


def test_shape_mismatch_names_the_operands_and_writes_nothing():
    out = np.full(3, 7.0)
    with pytest.raises(uopjit.Error) as e:
        uopjit.evaluate("y = x + b", x=np.ones(3), b=np.ones(4), out=out)
    assert e.value.status == "UJ_ERR_SHAPE" and "'x'" in e.value.message and "'b'" in e.value.message
    np.testing.assert_array_equal(out, 7.0)
    with pytest.raises(uopjit.Error, match="UJ_ERR_SHAPE"):
        uopjit.evaluate("y = x * 2", x=np.ones(3), out=np.empty(4))


def test_arguments_are_checked_by_name():
    k = uopjit.Kernel("y = a * x")
    with pytest.raises(TypeError, match="missing input 'a'"):
        k(x=np.ones(2))
    with pytest.raises(TypeError, match="'z' is not an input"):
        k(x=np.ones(2), a=1.0, z=1.0)
    with pytest.raises(TypeError, match="given twice"):
        k(1.0, a=1.0, x=np.ones(2))
    with pytest.raises(TypeError, match="names 'q', which is not an output"):
        k(x=np.ones(2), a=1.0, out={"q": np.empty(2)})
    with pytest.raises(ValueError, match="unknown engine 'gpu'"):
        uopjit.Kernel("y = x", engine="gpu")
    with pytest.raises(uopjit.Error, match="UJ_ERR_INVALID"):
        uopjit.Kernel("y = x", threads=100000)


def test_dtypes_uopjit_lacks_are_refused():
    with pytest.raises(TypeError, match="int64.*astype"):
        uopjit.evaluate("y = x + 1", x=np.arange(3))
    with pytest.raises(TypeError, match="complex128"):
        uopjit.evaluate("y = x + 1", x=np.ones(3, complex))


def test_out_arrays_must_be_writable_in_place():
    x = np.ones((4, 4))
    strided = np.empty((4, 8))[:, ::2]
    with pytest.raises(ValueError, match="not a C-contiguous"):
        uopjit.evaluate("y = x * 2", x=x, out=strided)
    frozen = np.empty((4, 4))
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        uopjit.evaluate("y = x * 2", x=x, out=frozen)
    with pytest.raises(TypeError, match="is f32, but output 'y' is f64"):
        uopjit.evaluate("y = x * 2", x=x, out=np.empty((4, 4), np.float32))
    with pytest.raises(TypeError, match="out= has 1 arrays for 2 outputs"):
        uopjit.Kernel("a = x; b = x")(x=x, out=[np.empty((4, 4))])


def test_a_declared_dtype_is_enforced_by_the_library():
    with pytest.raises(uopjit.Error) as e:
        uopjit.evaluate("x: f64\ny = x * 2", x=np.ones(3, np.float32))
    assert e.value.status == "UJ_ERR_INVALID" and "f64" in e.value.message

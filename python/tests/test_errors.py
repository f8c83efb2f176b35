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


@pytest.mark.parametrize("source,offset,line,column", [
    ("y = x\0 + 100", 5, 1, 6), ("x\0 + 100", 1, 1, 2), ("y = x\nz = x\0 * 2", 11, 2, 6), ("\0", 0, 1, 1)])
def test_a_nul_in_the_source_is_refused_not_cut_off_at(source, offset, line, column):
    x = np.arange(4.0)
    where = f"offset {offset}, line {line}, column {column}"
    with pytest.raises(ValueError, match=f"source text contains a NUL character at {where}"):
        uopjit.Kernel(source)(x=x)
    with pytest.raises(ValueError, match=f"NUL character at {where}"):
        uopjit.evaluate(source, x=x)


def test_a_nul_in_an_engine_name_is_refused():
    with pytest.raises(ValueError, match="engine .*NUL character at offset 4"):
        uopjit.Kernel("y = x", engine="auto\0junk")


@pytest.mark.parametrize("value", [2 ** 31, 2 ** 32, 3_000_000_000, -2 ** 31 - 1, 2 ** 63, 2 ** 100, -2 ** 70])
def test_python_ints_out_of_the_integer_dtype_raise_not_wrap(value):
    # As NumPy 2 (NEP 50) does for int32_array + value: an OverflowError
    # naming the input, never a value wrapped modulo 2**32.
    x = np.arange(4, dtype=np.int32)
    with pytest.raises(OverflowError, match="input 'b' .*out of bounds for i32"):
        uopjit.evaluate("x + b", x=x, b=value)
    with pytest.raises(OverflowError, match="input 'b'"):
        uopjit.Kernel("y = x * b")(x=x, b=value)
    with pytest.raises(OverflowError, match="input 'b'"):
        uopjit.evaluate("x: i32\nb: i32\ny = b + 0 * x", x=np.zeros(3, np.int32), b=value)


def test_python_ints_at_the_ends_of_the_integer_range_are_exact():
    x = np.zeros(2, dtype=np.int32)
    for value in (2 ** 31 - 1, -2 ** 31, True):
        got = uopjit.evaluate("x + b", x=x, b=value)
        assert got.dtype == np.int32 and got.tolist() == [int(value)] * 2


def test_python_ints_beyond_every_float_raise_naming_the_input():
    with pytest.raises(OverflowError, match="input 'b'"):
        uopjit.evaluate("x + b", x=np.ones(2, np.float32), b=10 ** 400)
    with pytest.raises(OverflowError, match="input 'b'"):
        uopjit.evaluate("a + b", a=1.0, b=-10 ** 400)
    big = uopjit.evaluate("x + b", x=np.zeros(1, np.float32), b=2 ** 70)  # representable: rounded, as NumPy
    assert big.dtype == np.float32 and big[0] == np.float32(2 ** 70)


def test_floats_for_a_declared_integer_input_are_not_truncated():
    k = uopjit.Kernel("x: i32\nb: i32\ny = x + b")
    x = np.arange(3, dtype=np.int32)
    for value in (2.7, -0.5, float("nan"), float("inf")):
        with pytest.raises(TypeError, match="input 'b' .*whole number"):
            k(x=x, b=value)
    with pytest.raises(OverflowError, match="input 'b'"):
        k(x=x, b=2.0 ** 31)
    assert k(x=x, b=2.0).tolist() == [2, 3, 4]


@pytest.mark.parametrize("threads,error", [(2 ** 32 + 1, OverflowError), (2 ** 63, OverflowError),
                                           (2.0, TypeError), ("2", TypeError)])
def test_thread_counts_beyond_a_c_int_raise_not_wrap(threads, error):
    with pytest.raises(error, match="threads"):
        uopjit.Kernel("y = x", threads=threads)
    with pytest.raises(error, match="threads"):
        uopjit.evaluate("y = x", x=np.ones(2), threads=threads)

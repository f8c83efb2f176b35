"""f16 and bf16, where the loaded library has them (they are looked up by
name, so an older library refuses them by name): NumPy float16 arrays, and
bfloat16 as ml_dtypes arrays or uint16 bits marked with uopjit.bf16."""
import numpy as np
import pytest

import uopjit
from uopjit import _dtypes, _lib


def bf16_bits_to_f32(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16_bits(values):
    """Round to nearest even, as uopjit's stores do (finite values only)."""
    u = values.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def test_the_bf16_mark_takes_only_16_bit_integers():
    with pytest.raises(TypeError, match="uint16"):
        uopjit.bf16(np.zeros(3, np.float32))
    with pytest.raises(TypeError):
        uopjit.bf16(np.zeros(3, np.int64))


def test_numbers_as_bf16_round_to_nearest_even():
    for value, bits in [(1.0, 0x3F80), (3.0, 0x4040), (1 + 2 ** -8, 0x3F80), (1 + 3 * 2 ** -8, 0x3F82),
                        (-2.5, 0xC020), (float("inf"), 0x7F80)]:
        array = _dtypes.number_array(value, "bf16")
        got = array.view(np.uint16) if _dtypes.BFLOAT16 is not None else array
        assert int(got) == bits, f"{value}: {int(got):#x} != {bits:#x}"


def test_f16_arrays(rng):
    x = (rng.random(1000) * 4 - 2).astype(np.float16)
    if "f16" not in _lib.DTYPES:
        with pytest.raises(TypeError, match="input 'x' is f16, which this libuopjit .* does not have"):
            uopjit.evaluate("y = x * 3 + 1", x=x)
        return
    y = uopjit.evaluate("y = x * 3 + 1", x=x)
    assert y.dtype == np.float16
    np.testing.assert_array_equal(y, (x.astype(np.float32) * 3 + 1).astype(np.float16))


def test_bf16_bits_in_and_out(rng):
    bits = f32_to_bf16_bits(rng.random(1000, dtype=np.float32) * 4 - 2)
    if "bf16" not in _lib.DTYPES:
        with pytest.raises(TypeError, match="input 'x' is bf16, which this libuopjit"):
            uopjit.evaluate("y = x * 3 + 1", x=uopjit.bf16(bits))
        return
    expected = f32_to_bf16_bits(bf16_bits_to_f32(bits) * np.float32(3) + np.float32(1))
    y = uopjit.evaluate("y = x * 3 + 1", x=uopjit.bf16(bits))
    got = y.view(np.uint16) if _dtypes.BFLOAT16 is not None else y
    assert got.dtype == np.uint16
    np.testing.assert_array_equal(got, expected)
    scaled = uopjit.evaluate("y = x * c", x=uopjit.bf16(bits), c=3.0)  # the number becomes bf16 too
    got = scaled.view(np.uint16) if _dtypes.BFLOAT16 is not None else scaled
    np.testing.assert_array_equal(got, f32_to_bf16_bits(bf16_bits_to_f32(bits) * np.float32(3)))
    into = np.zeros_like(bits)
    uopjit.evaluate("y = x * 3 + 1", x=uopjit.bf16(bits), out=uopjit.bf16(into))
    np.testing.assert_array_equal(into, expected)

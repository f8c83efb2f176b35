"""Shared fixtures of the uopjit Python tests: a seeded generator whose seed
is printed when a test fails (pytest shows captured output of failures)."""
import numpy as np
import pytest

SEED = 20241126


@pytest.fixture
def rng():
    print(f"random seed {SEED}")
    return np.random.default_rng(SEED)

"""jax.numpy, as far as the tests need it: arrays of `count` items."""
from jax._src.array import ArrayImpl

float32 = 4
uint8 = 1


def ones(count, dtype=float32, device=0):
    return ArrayImpl(count * dtype, device)


zeros = ones
arange = ones


def sharded_ones(count, devices=2, dtype=float32):
    """An array split over `devices` devices: no single buffer."""
    return ArrayImpl(count * dtype, 0, devices)

"""A JAX loop for the GPU suite: prints the device's own memory figures."""
import json
import os
import sys

import jax
import jax.numpy as jnp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tracer_snapshot import snapshot  # noqa: E402


def main():
    key = jax.random.PRNGKey(0)
    x = jax.random.normal(key, (1024, 1024))
    for _ in range(10):
        x = jnp.tanh(x @ x.T / 1024.0)
    x.block_until_ready()
    stats = jax.devices()[0].memory_stats() or {}
    snapshot()
    print(json.dumps({"mean": float(x.mean()),
                      "bytes_in_use": stats.get("bytes_in_use"),
                      "pool_bytes": stats.get("pool_bytes"),
                      "bytes_reserved": stats.get("bytes_reserved"),
                      "bytes_limit": stats.get("bytes_limit")}), flush=True)


if __name__ == "__main__":
    main()

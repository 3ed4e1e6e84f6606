"""``fiamma.random``: the default generator's seeding and state functions (torch.random)."""

from fiamma._random import (
    Generator,
    default_generator,
    fork_rng,
    get_rng_state,
    initial_seed,
    manual_seed,
    seed,
    set_rng_state,
)

__all__ = ["Generator", "default_generator", "fork_rng", "get_rng_state", "initial_seed",
           "manual_seed", "seed", "set_rng_state"]

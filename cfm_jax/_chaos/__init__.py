"""Implementation of :mod:`cfm_jax.chaos` (the public module): spec and buckets, deviations,
references, compiled programs."""

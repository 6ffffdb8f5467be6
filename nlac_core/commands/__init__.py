"""Subcommands of ``python -m nlac_core``, one module per area; each has ``register(subparsers)``."""

"""Writes for trajectories: imports, exports, cached project aggregates."""

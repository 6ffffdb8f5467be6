"""NLAC Studio core: typed records, formats, metrics (and, in later issues, the
Natural Language Actor-Critic algorithm). Pure Python: never imports Django,
Celery, torch or vLLM at import time, so the web process stays light."""

__version__ = "0.1.0"

"""Importers and exporters, one module per external format; see ``registry``."""

from nlac_core.formats.base import FormatError, Item, Shard
from nlac_core.formats.registry import FORMATS, detect, read, sharded

__all__ = ["FORMATS", "FormatError", "Item", "Shard", "detect", "read", "sharded"]

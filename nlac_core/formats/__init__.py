"""Importers and exporters, one module per external format; see ``registry``."""

from nlac_core.formats.base import FormatError, Item
from nlac_core.formats.registry import FORMATS, detect, read

__all__ = ["FORMATS", "FormatError", "Item", "detect", "read"]

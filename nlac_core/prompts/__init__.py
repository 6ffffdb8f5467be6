"""Every prompt the product sends, in one place: see ``base`` for templates and ids."""

from nlac_core.prompts.base import PromptTemplate, Rendered

__all__ = ["PromptTemplate", "Rendered"]

"""The base of every config section (experiment and its parts): frozen, strict about keys,
documented by attribute docstrings."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["Section"]


class Section(BaseModel):
    """Base of every config section: frozen, strict about keys, documented by attribute docstrings."""

    # allow_inf_nan=False: YAML's .nan/.inf would pass every unbounded float (a NaN reward imputation
    # poisons the whole run), so no field accepts them.
    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True, allow_inf_nan=False)

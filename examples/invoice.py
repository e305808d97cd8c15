"""The example type: an invoice with line items, as a pipeline would declare it."""

from __future__ import annotations

from datetime import date
from enum import StrEnum

from pydantic import BaseModel, Field


class Currency(StrEnum):
    EUR = "EUR"
    USD = "USD"
    GBP = "GBP"


class LineItem(BaseModel):
    description: str = Field(min_length=1)
    quantity: int = Field(ge=1)
    unit_price: float = Field(ge=0)


class Invoice(BaseModel):
    """An invoice as found in a supplier's e-mail or PDF."""

    number: str = Field(pattern=r"^[A-Z]{2,4}-[0-9]{3,6}$")
    issued: date
    supplier: str
    currency: Currency
    items: list[LineItem] = Field(min_length=1)
    notes: str | None = None

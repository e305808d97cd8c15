"""A support ticket, triaged: the type of the README's batch example.

Bounded so that a 135M model finishes every answer: two closed choices and a short summary.

    allama batch run examples/batch/tickets --type examples/batch/ticket.py:Ticket \\
        --prompt examples/batch/prompt.txt --out /tmp/tickets.jsonl
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class Ticket(BaseModel):
    category: Literal["billing", "bug", "account", "shipping"]
    priority: Literal["low", "normal", "urgent"]
    summary: str = Field(min_length=1, max_length=80)

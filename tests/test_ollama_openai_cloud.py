"""Ollama's cloud applies no `format` (its documentation: no structured outputs there), and
its `/v1` endpoint turns a response format into that `format`: a cloud model through
`ollama-openai` (`gpt-oss:120b-cloud` on a local server, any model on `https://ollama.com`)
is sent the schema and recorded not enforced, as the native preset refuses to rely on it."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

import allama
from allama import ChatRequest, ExtractionMode, Extractor, SchemaEnforcement


class Person(BaseModel):
    name: str


@pytest.mark.parametrize(
    ("base_url", "model", "enforcement"),
    [
        ("http://localhost:11434/v1", "gpt-oss:120b-cloud", SchemaEnforcement.NOT_ENFORCED),
        ("http://localhost:11434/v1", "minimax-m2:cloud", SchemaEnforcement.NOT_ENFORCED),
        ("https://ollama.com/v1", "gpt-oss:120b", SchemaEnforcement.NOT_ENFORCED),
        ("https://Ollama.com/v1", "gpt-oss:120b", SchemaEnforcement.NOT_ENFORCED),
        ("https://api.ollama.com/v1", "llama3", SchemaEnforcement.NOT_ENFORCED),
        ("http://localhost:11434/v1", "gpt-oss:120b", SchemaEnforcement.APPROXIMATE),
        ("http://box.example/ollama.com/v1", "llama3", SchemaEnforcement.APPROXIMATE),
    ],
)
def test_a_cloud_model_is_not_enforced(
    base_url: str, model: str, enforcement: SchemaEnforcement
) -> None:
    target = allama.provider("ollama-openai", base_url=base_url)
    plan = Extractor().plan(target, Person, ChatRequest(model).user("x"))
    assert (plan.mode, plan.enforcement) == (ExtractionMode.NATIVE, enforcement)

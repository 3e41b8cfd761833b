"""Prices per million tokens, to turn token usage into dollars.

The built-in table holds list prices of a few common hosted models (USD per million tokens, as
published by the providers in 2025); prices change, so a run config can override or extend it with
``llm.prices`` (by model name) or ``llm.price`` (for the configured model). Unknown models cost 0.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class Price(BaseModel):
    model_config = ConfigDict(extra="forbid")

    input_per_million: float = Field(ge=0, description="USD per million prompt tokens")
    output_per_million: float = Field(ge=0, description="USD per million completion tokens")

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.input_per_million + completion_tokens * self.output_per_million) / 1e6


DEFAULT_PRICES: dict[str, Price] = {
    "gpt-4o": Price(input_per_million=2.50, output_per_million=10.00),
    "gpt-4o-mini": Price(input_per_million=0.15, output_per_million=0.60),
    "gpt-4.1": Price(input_per_million=2.00, output_per_million=8.00),
    "gpt-4.1-mini": Price(input_per_million=0.40, output_per_million=1.60),
    "gpt-4.1-nano": Price(input_per_million=0.10, output_per_million=0.40),
    "o4-mini": Price(input_per_million=1.10, output_per_million=4.40),
}


def find_price(model: str | None, table: dict[str, Price]) -> Price | None:
    """Exact name first, else the longest table key the model name starts with
    ('gpt-4o-mini-2024-07-18' -> 'gpt-4o-mini'); a 'provider/' prefix is ignored."""
    if not model:
        return None
    names = [model, model.rsplit("/", 1)[-1]]
    for name in names:
        if name in table:
            return table[name]
    for name in names:
        matches = [key for key in table if name.startswith(key + "-")]
        if matches:
            return table[max(matches, key=len)]
    return None

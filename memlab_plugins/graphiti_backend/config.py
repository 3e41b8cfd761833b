"""Configuration of the ``graphiti`` backend."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from memlab_plugins.llm_systems import ExtractingConfig


class GraphitiConfig(ExtractingConfig):
    invalidated: Literal["mark", "hide"] = Field(
        default="mark",
        description="facts Graphiti invalidated (a later episode contradicted them): shown with their end date "
        "and marked no longer true, or left out of retrieval",
    )
    reranker: Literal["rrf", "mmr", "episode_mentions", "cross_encoder"] = Field(
        default="rrf",
        description="Graphiti's edge reranker over its BM25 + cosine candidates (rrf: Graphiti's default search; "
        "cross_encoder: cosine of the memlab embedder, no reranking model)",
    )
    store_raw_episode_content: bool = Field(
        default=True, description="keep each episode's conversation text in the graph (Graphiti's default)"
    )
    max_coroutines: int = Field(default=4, ge=1, description="Graphiti's concurrent LLM/DB operations per step")
    telemetry: bool = Field(default=False, description="allow Graphiti's anonymous telemetry (PostHog)")

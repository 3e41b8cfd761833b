"""Configuration of the ``mem0`` backend: what a user may set, and the ``locomo-eval`` preset."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from memlab.forget import ForgetRequests
from memlab.memory import BackendConfig

DEFAULT_EMBEDDER = "huggingface"
MINILM_DIMS = 384
# memlab embedders that can be served to mem0 through its ``langchain`` embedder provider.
MEMLAB_EMBEDDERS = ("minilm", "sentence-transformers", "hashing", "bge-m3")
PRESETS = ("locomo-eval", "personamem-baseline")
# The PersonaMem v1 reference Mem0 baseline (bowen-upenn/PersonaMem baselines/run.py, context_mode
# "mem0", with chat_lib.split_on_system and mem0_lib.build_config): for every question a fresh memory,
# one memory.add per session of the history up to the question (a session starts at its system turn,
# which is added with it), mem0's LLM extraction with its default prompts, one user, and
# memory.search(question, limit=top_k) with top_k 5. "A fresh memory per question" is the run's
# --replay rebuild (required; preflight refuses the preset without it); "one add per session" is an
# infer_window no session reaches. Not reproducible offline: the reference's embedder is mem0's default
# (OpenAI text-embedding-3-small) and its LLM the answering model (gpt-4o / gpt-4o-mini).
PERSONAMEM_BASELINE_TOP_K = 5
ONE_ADD_PER_SESSION = 1_000_000
# mem0's evaluation searches each speaker's memories with top_k 30
# (mem0ai/mem0 evaluation/run_experiments.py default, results/mem0_results_top_30_*.json); the
# preset's k counts both speakers, so k stays a bound on the items a retrieve returns.
LOCOMO_EVAL_TOP_K_PER_SPEAKER = 30
LOCOMO_EVAL_TOP_K = 2 * LOCOMO_EVAL_TOP_K_PER_SPEAKER

# mem0's evaluation sets these custom instructions on its project before adding LoCoMo.
# Verbatim from mem0ai/mem0, evaluation/src/memzero/add.py (``custom_instructions``); data, not code.
LOCOMO_EVAL_CUSTOM_INSTRUCTIONS = """
Generate personal memories that follow these guidelines:

1. Each memory should be self-contained with complete context, including:
   - The person's name, do not use "user" while creating memories
   - Personal details (career aspirations, hobbies, life circumstances)
   - Emotional states and reactions
   - Ongoing journeys or future plans
   - Specific dates when events occurred

2. Include meaningful personal narratives focusing on:
   - Identity and self-acceptance journeys
   - Family planning and parenting
   - Creative outlets and hobbies
   - Mental health and self-care activities
   - Career aspirations and education goals
   - Important life events and milestones

3. Make each memory rich with specific details rather than general statements
   - Include timeframes (exact dates when possible)
   - Name specific activities (e.g., "charity race for mental health" rather than just "exercise")
   - Include emotional context and personal growth elements

4. Extract memories only from user messages, not incorporating assistant responses

5. Format each memory as a paragraph with a clear narrative structure that captures the person's experience, challenges, and aspirations
"""


class Mem0Config(BackendConfig):
    embedder: str | dict[str, Any] = Field(
        default=DEFAULT_EMBEDDER,
        description="'huggingface': mem0's own huggingface provider on the packaged all-MiniLM-L6-v2; "
        "'minilm' | 'sentence-transformers' | 'hashing' | 'bge-m3': a memlab embedder served through mem0's "
        "langchain provider (shares the process-wide model and the run's embedding cache); or a full mem0 "
        "embedder config {'provider': ..., 'config': {..., 'embedding_dims': N}}",
    )
    embedder_model: str | None = Field(
        default=None, description="model id or local path for 'huggingface' or the memlab embedder"
    )
    vector_store: dict[str, Any] | None = Field(
        default=None,
        description="a full mem0 vector_store config; default: mem0's qdrant provider in embedded mode "
        "(SQLite on disk, crash-safe) under <data_dir>/qdrant",
    )
    collection: str = Field(default="memlab", pattern=r"^[A-Za-z0-9_\-]{1,64}$")
    llm: dict[str, Any] | None = Field(
        default=None,
        description="a memlab LLM config (memlab.llm.LLMConfig: OpenAI-compatible endpoint, LangChain class, "
        "local model) that mem0 uses for fact extraction; none: messages are stored verbatim",
    )
    infer: bool | None = Field(
        default=None, description="run mem0's LLM fact extraction (default: when an LLM is configured)"
    )
    infer_window: int = Field(
        default=2, ge=1, description="messages per add() call when inferring (2: one user/assistant exchange)"
    )
    on_extraction_error: Literal["skip", "raise"] = Field(
        default="skip",
        description="a window the LLM endpoint refuses (a prompt over the model's window, a 4xx): skip it and "
        "count it in extraction_stats, or raise; a bad setup or an endpoint still down after retries always raises",
    )
    custom_instructions: str | None = Field(
        default=None,
        description="mem0's custom extraction instructions (preset locomo-eval: mem0's evaluation instructions)",
    )
    preset: Literal["locomo-eval", "personamem-baseline"] | None = Field(
        default=None,
        description="'locomo-eval': mem0's LoCoMo evaluation setup - each conversation under two user ids "
        "(one per speaker, roles flipped), names in the text, session timestamps, top_k 60 = 30 per speaker; "
        "'personamem-baseline': the PersonaMem v1 reference Mem0 baseline - LLM extraction required, one add "
        "per session, top_k 5, a fresh memory per question (run with --replay rebuild)",
    )
    threshold: float = Field(default=0.1, ge=0.0, le=1.0, description="mem0 search: minimum semantic score")
    batch_embed: bool = Field(
        default=True, description="embed each ingested session in one model call, before the store is locked"
    )
    bulk_insert: bool = Field(
        default=True,
        description="infer=False only: what mem0's add(infer=False) stores, written with mem0's batch inserts "
        "(16 messages per insert); false: one mem0 add() per message. Both are all or nothing across a crash",
    )
    telemetry: bool = Field(
        default=False,
        description="allow mem0's anonymous telemetry (PostHog); decided once per process, at mem0's first import",
    )
    forget_requests: ForgetRequests = False

    @model_validator(mode="before")
    @classmethod
    def _apply_preset(cls, data: Any) -> Any:
        """A preset fills defaults; keys the user sets explicitly still win."""
        if isinstance(data, dict) and data.get("preset") == "locomo-eval":
            data = {
                "top_k": LOCOMO_EVAL_TOP_K,
                "custom_instructions": LOCOMO_EVAL_CUSTOM_INSTRUCTIONS,
                "infer_window": 2,
                **data,
            }
        if isinstance(data, dict) and data.get("preset") == "personamem-baseline":
            data = {"top_k": PERSONAMEM_BASELINE_TOP_K, "infer_window": ONE_ADD_PER_SESSION, **data}
        return data

    @model_validator(mode="after")
    def _check(self) -> Mem0Config:
        if isinstance(self.embedder, str) and self.embedder not in (DEFAULT_EMBEDDER, *MEMLAB_EMBEDDERS):
            raise ValueError(
                f"embedder {self.embedder!r}: use 'huggingface', one of {', '.join(MEMLAB_EMBEDDERS)}, "
                "or a mem0 embedder config dict"
            )
        if isinstance(self.embedder, dict):
            config = self.embedder.get("config") or {}
            if "provider" not in self.embedder or not isinstance(config, dict) or not config.get("embedding_dims"):
                raise ValueError(
                    "a mem0 embedder config needs 'provider' and config.embedding_dims "
                    "(the vector store is sized from it)"
                )
        if self.vector_store is not None and "provider" not in self.vector_store:
            raise ValueError("vector_store needs a 'provider' (a mem0 vector_store config)")
        if self.preset == "personamem-baseline" and not (self.llm is not None or self.infer):
            raise ValueError(
                "preset personamem-baseline extracts facts with an LLM, as the reference does: set llm "
                '(--mem0.llm \'{"base_url": ..., "model": ...}\'), or infer true with a chat_model in Python'
            )
        if self.preset == "personamem-baseline" and self.infer is False:
            raise ValueError("preset personamem-baseline needs LLM extraction: infer false contradicts it")
        return self

    @property
    def speaker_perspectives(self) -> bool:
        """locomo-eval stores each conversation once per speaker (two mem0 user ids, speakers only)."""
        return self.preset == "locomo-eval"

    @property
    def required_replay(self) -> str | None:
        """The run replay a preset needs to be what it says (checked by the run's preflight)."""
        return "rebuild" if self.preset == "personamem-baseline" else None

    @property
    def uses_llm(self) -> bool:
        """Whether mem0's LLM fact extraction runs (a ``chat_model=`` passed in Python also turns it on)."""
        return self.infer if self.infer is not None else self.llm is not None

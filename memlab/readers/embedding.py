"""The LLM-free reader: picks the option best supported by a remembered turn.

An option is supported when some memory item is both similar to the option and relevant to the
question. With unit vectors ``o`` (option), ``m`` (item) and ``q`` (question)::

    score(option) = max over items of  o·m + relevance_weight * q·m

Open questions (LoCoMo) get an extractive answer: the most relevant remembered turn.

A question that asks for something *new* ("suggest something new", "ideas I haven't tried", matched
by ``novelty_cues`` on the question's wording, never on its type label) turns the rule around: the
right option answers the request but is one the memory does NOT already hold, so an option scores
its relevance to the question minus how well memory already holds it (``novelty`` in the
answer's metadata)::

    score(option) = o·q - novelty_weight * max over items of  o·m

``novelty_weight`` 0.6 was chosen on the dev history and the synthetic data together
(``python benchmarks/reader_design.py [--dataset synthetic:personas=8,seed=101]`` prints the
grid, rag top-10): on the 128k dev
history's 14 cue-matched questions, w = 0.3/0.6/1.0 answer 8/6/3 right (the memory-support rule:
6, question-only: 8), and new-ideas questions go from 3/7 to 4/7; on synthetic rag top-10 (seed
101, 25 questions) w = 0.3/0.6/1.0 answer 11/16/21 (memory support: 1, question only: 6).

A question about how something *changed* ("how has my opinion of X evolved?", ``change_cues``,
again its wording only) is about order, which an embedding does not see: "from dislike to
indifference" and "from indifference to dislike" embed alike. When memory says how an item changed
(``MemoryItem.metadata["timeline"]``: its stances oldest first, as the profile backend gives them),
the reader reads the stances an option walks through, in order (each piece of the option between
"from", "to", "then", "now", commas ... is matched against ``stance_descriptions``), and an option
whose sequence is the timeline of the item most relevant to the question gains ``change_weight``.
A backend without timelines is read exactly as before. 0.1 and the matching thresholds were
chosen on synthetic seeds 7 and 8 (50 questions; profile 16 -> 33 right for any weight from 0.05
to 0.3), never on the sweep's seeds; the dev history has no question of this type.

The relevance term keeps a long memory (``full_context`` hands over every turn) from rewarding an
option that merely resembles some unrelated turn. With no memory at all (the ``none`` control) the
reader falls back to question-option similarity, which measures the reader's own blind bias.

Design notes, measured on the PersonaMem 128k dev history only (135 questions, MiniLM;
``python benchmarks/reader_design.py``): over the whole history, the relevance term lifts plain
max similarity from 0.615 to 0.681 (w=0.5; 0.644 at w=0.25, 0.674 at w=1.0), and on rag's top-10
the variants are within noise (0.66-0.68); averaging the top 3 items instead of the max hurts on
long memories (0.548 over all turns), and subtracting the options' centroid ("what makes this
option different") hurts everywhere (0.615 on rag top-10, 0.326 over all turns).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import Field, field_validator

from memlab.devices import check_device
from memlab.embedders import Embedder, embed_ahead, get_embedder
from memlab.errors import MemlabError
from memlab.readers.base import Reader, ReaderConfig, argmax, strip_option_label
from memlab.types import Answer, Question, Retrieval

NO_ANSWER = "No information available."

# Wordings of a request for something the user has not done yet (case-insensitive regexes).
NOVELTY_CUES = (
    r"\bsomething new\b",
    r"\bnew (idea|ideas|thing|things|activity|activities|way|ways|approach)\b",
    r"\bfresh (idea|ideas|take|way|ways)\b",
    r"\bhaven'?t (tried|done|heard)\b",
    r"\bnever (tried|done)\b",
    r"\bnot tried\b",
    r"\btry next\b",
    r"\bsomething different\b",
)

# Wordings of a question about how something changed over time (case-insensitive regexes).
CHANGE_CUES = (
    r"\bevolv(e|ed|es|ing)\b",
    r"\b(changed|shifted|developed)\b",
    r"\bover time\b",
    r"\bsince we (started|began|first)\b",
    r"\b(journey|trajectory|progression)\b",
)
# What each stance of a timeline means, to read which stance a piece of an option expresses.
STANCE_DESCRIPTIONS = {
    "likes": "likes it, enjoys it, loves it, keen on it",
    "dislikes": "dislikes it, does not enjoy it, hates it",
    "neutral": "neutral about it, indifferent, does not mind either way",
}
# Where an account of a change divides into its steps.
_STEP_BOUNDARY = re.compile(
    r"[,;.]|\b(?:from|to|then|now|later|until|before|after|initially|eventually|but|and)\b", re.IGNORECASE
)
# A piece expresses a stance when it is this similar to its description, and that much more than to any other.
_STANCE_MIN_SIMILARITY = 0.3
_STANCE_MARGIN = 0.05


def _collapse(stances: list[str]) -> list[str]:
    """A stance repeated in a row is one step: likes, likes, dislikes -> likes, dislikes."""
    return [s for i, s in enumerate(stances) if i == 0 or stances[i - 1] != s]


class EmbeddingReaderConfig(ReaderConfig):
    embedder: str = Field(default="minilm", description="embedder kind (see memlab.embedders)")
    model: str | None = Field(default=None, description="model id or local path for the embedder")
    device: str | None = Field(
        default=None,
        description="cpu, cuda, cuda:N, mps or auto; None: the run's --device, else cpu (a backend that loads "
        "the same model on the same device shares it with the reader)",
    )
    relevance_weight: float = Field(default=0.5, ge=0.0, description="weight of question-item relevance")
    max_items: int = Field(default=4000, ge=1, description="at most this many items are read (newest kept)")
    max_item_chars: int = Field(default=2000, ge=50)
    novelty_weight: float = Field(
        default=0.6,
        ge=0.0,
        description="how much an option already held by memory loses, for questions that ask for something new",
    )
    novelty_cues: list[str] = Field(
        default=list(NOVELTY_CUES),
        description="regexes on the question text that ask for something the memory does not already hold",
    )
    change_weight: float = Field(
        default=0.1,
        ge=0.0,
        description="for questions about how something changed: what an option gains when the stances it walks "
        "through, in order, are the timeline of the remembered item most relevant to the question",
    )
    change_cues: list[str] = Field(
        default=list(CHANGE_CUES), description="regexes on the question text that ask how something changed"
    )
    stance_descriptions: dict[str, str] = Field(
        default_factory=lambda: dict(STANCE_DESCRIPTIONS),
        description="timeline stance -> words that express it (matched against the pieces of an option)",
    )

    @field_validator("device")
    @classmethod
    def _device_spelling(cls, value: str | None) -> str | None:
        return None if value is None else check_device(value)


class EmbeddingReader(Reader):
    name = "embedding"
    description = "LLM-free: the option best supported by a remembered turn relevant to the question"
    writes_open_answers = False  # an open question gets the most relevant remembered turn, not an answer
    Config = EmbeddingReaderConfig
    config: EmbeddingReaderConfig

    def __init__(
        self,
        config: ReaderConfig | Mapping[str, Any] | None = None,
        *,
        embedder: Embedder | None = None,
        cache_dir: str | Path | None = None,
    ) -> None:
        super().__init__(config, cache_dir=cache_dir)
        self._embedder = embedder
        self._novelty = self._cues("novelty_cues")
        self._change = self._cues("change_cues")
        self._stances: tuple[list[str], np.ndarray] | None = None  # names, embedded descriptions

    def _cues(self, field: str) -> list[re.Pattern[str]]:
        try:
            return [re.compile(cue, re.IGNORECASE) for cue in getattr(self.config, field)]
        except re.error as exc:
            raise MemlabError(f"invalid config for reader {self.name!r}: bad {field} regex: {exc}") from exc

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:  # loaded on first use: describe() must not load a model
            device = self.config.device if self.config.embedder != "hashing" else None
            self._embedder = get_embedder(
                self.config.embedder, self.config.model, cache_dir=self.cache_dir, device=device
            )
        return self._embedder

    def describe(self) -> str:
        model = f"({self.config.model})" if self.config.model else ""
        return f"embedding[{self.config.embedder}{model}]"

    def _memory_texts(self, retrieval: Retrieval) -> list[str]:
        if retrieval.items:
            texts = [item.text for item in retrieval.items]
        else:  # backends that only render context: read it line by line
            texts = [line for line in retrieval.context.splitlines() if line.strip()]
        texts = [t[: self.config.max_item_chars] for t in texts if t.strip()]
        return texts[-self.config.max_items :]

    def prepare(self, questions: Sequence[Question]) -> None:
        """Embed every question (as a query) and every option in two large batches, before the replay.

        ``answer`` then finds them in the embedding cache; only the retrieved items are new to it.
        """
        embed_ahead(self.embedder, [q.text for q in questions], query=True)
        # (The pieces of options that stances_in reads are left to answer: they are needed only when
        # the backend gives timelines, which is not known before the replay.)
        embed_ahead(
            self.embedder, [strip_option_label(o) for q in questions if q.is_multiple_choice for o in q.options]
        )

    def answer(self, question: Question, retrieval: Retrieval) -> Answer:
        if not question.is_multiple_choice:
            return self._answer_open(question, retrieval)
        texts = self._memory_texts(retrieval)
        # The options and the remembered items in one call: one batch, not two small forward passes.
        labels = [strip_option_label(o) for o in question.options]
        documents = self.embedder.embed(labels + texts)
        options, items = documents[: len(labels)], documents[len(labels) :]
        query = self.embedder.embed([question.text], query=True)[0]
        if not texts:
            scores = options @ query
            return Answer(choice=argmax(scores.tolist()), scores=scores.tolist(), metadata={"blind": True})
        if self.asks_for_novelty(question):
            similarity = options @ items.T
            best = similarity.argmax(axis=1)
            scores = options @ query - self.config.novelty_weight * similarity[np.arange(len(options)), best]
            metadata = {"support_items": [int(b) for b in best], "novelty": True}
        else:
            support = options @ items.T + self.config.relevance_weight * (items @ query)[None, :]
            best = support.argmax(axis=1)
            scores = support[np.arange(len(options)), best]
            metadata = {"support_items": [int(b) for b in best]}
        timeline = self._timeline(retrieval, query) if self.asks_about_change(question) else None
        if timeline:
            walked = [self.stances_in(strip_option_label(o)) for o in question.options]
            scores = scores + self.config.change_weight * np.array([float(w == timeline) for w in walked])
            metadata.update(timeline=timeline, option_stances=walked)
        return Answer(choice=argmax(scores.tolist()), scores=[float(s) for s in scores], metadata=metadata)

    def asks_for_novelty(self, question: Question) -> bool:
        """True when the question's wording asks for something the user has not done yet."""
        return any(cue.search(question.text) for cue in self._novelty)

    def asks_about_change(self, question: Question) -> bool:
        """True when the question's wording asks how something changed over time."""
        return any(cue.search(question.text) for cue in self._change)

    def _timeline(self, retrieval: Retrieval, query: np.ndarray) -> list[str] | None:
        """The stances, oldest first, of the item with a timeline that is most relevant to the question."""
        known = self.config.stance_descriptions
        candidates = []
        for item in retrieval.items:
            timeline = item.metadata.get("timeline")
            if isinstance(timeline, list):
                steps = _collapse([s for s in timeline if s in known])
                if len(steps) > 1:
                    candidates.append((item.text[: self.config.max_item_chars], steps))
        if not candidates:
            return None
        relevance = self.embedder.embed([text for text, _ in candidates]) @ query
        return candidates[int(relevance.argmax())][1]

    def stances_in(self, text: str) -> list[str]:
        """The stances ``text`` walks through, in order: "went from indifference to dislike" -> neutral, dislikes."""
        if self._stances is None:
            names = list(self.config.stance_descriptions)
            self._stances = names, self.embedder.embed([self.config.stance_descriptions[n] for n in names])
        names, described = self._stances
        pieces = [p.strip() for p in _STEP_BOUNDARY.split(text) if p and p.strip()]
        if not pieces or len(names) < 2:
            return []
        found = []
        for similarity in self.embedder.embed(pieces) @ described.T:
            second, first = np.sort(similarity)[-2:]
            if first >= _STANCE_MIN_SIMILARITY and first - second >= _STANCE_MARGIN:
                found.append(names[int(similarity.argmax())])
        return _collapse(found)

    def _answer_open(self, question: Question, retrieval: Retrieval) -> Answer:
        """Extractive answer to an open question: the remembered turn most relevant to it, or an
        abstention when memory is empty (so LoCoMo's token F1 has an LLM-free baseline)."""
        texts = self._memory_texts(retrieval)
        if not texts:
            return Answer(text=NO_ANSWER, metadata={"blind": True})
        query = self.embedder.embed([question.text], query=True)[0]
        relevance = self.embedder.embed(texts) @ query
        best = int(relevance.argmax())
        return Answer(text=texts[best], scores=[float(relevance[best])], metadata={"support_items": [best]})

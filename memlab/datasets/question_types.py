"""PersonaMem question types: the labels each data file uses, and the paper's seven skill names.

Results always carry **the file's own label** (``Question.type`` is the ``question_type`` cell,
unchanged), so per-type columns line up with the paper's and MemOS's tables, which group by the
released labels too. Two labels of one file are never merged or swapped.

The files name the types inconsistently (see docs/datasets.md for the table):

- the released ``questions_32k.csv`` uses seven labels, four of them the paper's names
  (``recall_user_shared_facts``, ``track_full_preference_evolution``,
  ``provide_preference_aligned_recommendations``, ``suggest_new_ideas``) and three older ones
  (``recalling_the_reasons_behind_previous_updates``, ``generalizing_to_new_scenarios``,
  ``recalling_facts_mentioned_by_the_user``);
- the older 128k file (our dev history) uses six older, descriptive names.

The authors' own renaming of older names to the paper's (``question_type_mapping`` in
bowen-upenn/PersonaMem ``inference.py``) is :data:`LEGACY_NAMES`. memlab uses it only to order
and label columns (:func:`type_mapping`), never to relabel results.

:data:`CANONICAL_TYPES` are the paper's seven names, which memlab's synthetic generator uses.
"""

from __future__ import annotations

from collections.abc import Iterable

RECALL_FACTS = "recall_user_shared_facts"
ACKNOWLEDGE_LATEST = "acknowledge_latest_user_preferences"
TRACK_EVOLUTION = "track_full_preference_evolution"
REVISIT_REASONS = "revisit_reasons_behind_preference_updates"
RECOMMEND = "provide_preference_aligned_recommendations"
SUGGEST_NEW = "suggest_new_ideas"
GENERALIZE = "generalize_to_new_scenarios"

# The paper's seven skills, in the paper's order.
CANONICAL_TYPES: tuple[str, ...] = (
    RECALL_FACTS,
    ACKNOWLEDGE_LATEST,
    TRACK_EVOLUTION,
    REVISIT_REASONS,
    RECOMMEND,
    SUGGEST_NEW,
    GENERALIZE,
)

# The seven labels of the released questions_32k.csv (question counts there in the comments).
RELEASED_TYPES: tuple[str, ...] = (
    "recall_user_shared_facts",  # 129
    "recalling_facts_mentioned_by_the_user",  # 17
    "track_full_preference_evolution",  # 139
    "recalling_the_reasons_behind_previous_updates",  # 99
    "provide_preference_aligned_recommendations",  # 55
    "suggest_new_ideas",  # 93
    "generalizing_to_new_scenarios",  # 57
)

# The six labels of the older 128k file (128k-dev/questions.csv).
OLDER_128K_TYPES: tuple[str, ...] = (
    "recalling_facts_mentioned_by_the_user",
    "recalling_the_latest_user_preferences",
    "recalling_the_reasons_behind_previous_updates",
    "recommendation_aligned_with_users_latest_preferences",
    "identifying_new_things_not_mentioned_by_the_user",
    "generalizing_past_reasons_in_memory_to_new_scenarios",
)

# Older name -> the paper's name, as the authors rename them (bowen-upenn/PersonaMem inference.py,
# question_type_mapping), plus the two spellings the release and that function add.
LEGACY_NAMES: dict[str, str] = {
    "recalling_facts_mentioned_by_the_user": RECALL_FACTS,
    "identifying_new_things_not_mentioned_by_the_user": SUGGEST_NEW,
    "recalling_the_latest_user_preferences": ACKNOWLEDGE_LATEST,
    "acknowledge_latest_preferences": ACKNOWLEDGE_LATEST,  # the authors' spelling of the paper name
    "tracking_the_full_sequence_of_preference_updates": TRACK_EVOLUTION,
    "recalling_the_reasons_behind_previous_updates": REVISIT_REASONS,
    "recommendation_aligned_with_users_latest_preferences": RECOMMEND,
    "generalizing_past_reasons_in_memory_to_new_scenarios": GENERALIZE,
    "generalizing_to_new_scenarios": GENERALIZE,  # released label, not in the authors' function
}

KNOWN_TYPES: frozenset[str] = frozenset((*CANONICAL_TYPES, *RELEASED_TYPES, *OLDER_128K_TYPES, *LEGACY_NAMES))

# Short labels of the paper's types for tables and plots.
SHORT_NAMES: dict[str, str] = {
    RECALL_FACTS: "recall facts",
    ACKNOWLEDGE_LATEST: "latest preference",
    TRACK_EVOLUTION: "preference evolution",
    REVISIT_REASONS: "reasons for updates",
    RECOMMEND: "aligned recommendation",
    SUGGEST_NEW: "new ideas",
    GENERALIZE: "generalize",
}


def canonical_type(name: str) -> str | None:
    """The paper's name for one label (itself for a paper name; ``None`` if unknown)."""
    if name in CANONICAL_TYPES:
        return name
    return LEGACY_NAMES.get(name)


def type_mapping(names: Iterable[str]) -> dict[str, str | None]:
    """For the labels used in one file: the paper type each may be shown as, or ``None`` if unknown.

    A label keeps its own name when its paper type is also used in the file, or when another of
    the file's labels has the same paper type: the released file has both
    ``recall_user_shared_facts`` and ``recalling_facts_mentioned_by_the_user``, and they stay two
    types. So this mapping is one-to-one on every file; it is for display, never for results.
    """
    used = set(names)
    targets: dict[str, list[str]] = {}
    for name in used:
        paper = canonical_type(name)
        if paper is not None:
            targets.setdefault(paper, []).append(name)
    mapping: dict[str, str | None] = {}
    for name in used:
        paper = canonical_type(name)
        if paper is None:
            mapping[name] = name if name in KNOWN_TYPES else None
        elif len(targets[paper]) > 1:
            mapping[name] = name  # several labels of this file share the paper type: keep each
        else:
            mapping[name] = paper
    return mapping

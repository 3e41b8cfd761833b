"""The seven PersonaMem question types and the names the data files actually use for them.

The paper defines seven skills. The files name them inconsistently: the older dev file uses six
descriptive names, and the released ``questions_32k.csv`` uses the paper's names for four types
but older names for the other three - and puts the paper name ``recall_user_shared_facts`` on the
"acknowledge latest user preferences" questions. The mapping below was decided by reading the
options of each type in both files (see docs/datasets.md):

- release ``recall_user_shared_facts`` (129 questions): the user mentions something in passing
  ("I went to a comedy show"); options say "I remember you like comedy shows" / "I thought you
  preferred avoiding them" / another item / a reply that ignores the user. That is the same
  format as the dev file's ``recalling_the_latest_user_preferences`` -> acknowledge latest.
- ``recalling_facts_mentioned_by_the_user`` (release 17, dev 35): the user asks a general
  question and the options differ by which earlier event of the user they build on ("like the
  board game tournament you hosted") -> recall user-shared facts.

A file that uses ``acknowledge_latest_user_preferences`` itself follows the paper's names, so there
``recall_user_shared_facts`` keeps its own meaning; :func:`type_mapping` decides this per file.
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

# In the paper's order.
CANONICAL_TYPES: tuple[str, ...] = (
    RECALL_FACTS,
    ACKNOWLEDGE_LATEST,
    TRACK_EVOLUTION,
    REVISIT_REASONS,
    RECOMMEND,
    SUGGEST_NEW,
    GENERALIZE,
)

# Every non-canonical name seen in the PersonaMem files.
LEGACY_NAMES: dict[str, str] = {
    # older dev file (128k-dev/questions.csv)
    "recalling_facts_mentioned_by_the_user": RECALL_FACTS,
    "recalling_the_latest_user_preferences": ACKNOWLEDGE_LATEST,
    "recalling_the_reasons_behind_previous_updates": REVISIT_REASONS,
    "recommendation_aligned_with_users_latest_preferences": RECOMMEND,
    "identifying_new_things_not_mentioned_by_the_user": SUGGEST_NEW,
    "generalizing_past_reasons_in_memory_to_new_scenarios": GENERALIZE,
    # released questions_32k.csv (besides canonical names and the two above)
    "generalizing_to_new_scenarios": GENERALIZE,
}

# The release's mislabelled name: only used when the file does not also use the paper's name.
RELEASE_ACKNOWLEDGE_ALIAS = RECALL_FACTS

# Short labels for tables and plots.
SHORT_NAMES: dict[str, str] = {
    RECALL_FACTS: "recall facts",
    ACKNOWLEDGE_LATEST: "latest preference",
    TRACK_EVOLUTION: "preference evolution",
    REVISIT_REASONS: "reasons for updates",
    RECOMMEND: "aligned recommendation",
    SUGGEST_NEW: "new ideas",
    GENERALIZE: "generalize",
}


def type_mapping(names: Iterable[str]) -> dict[str, str | None]:
    """Canonical type for each raw name used in one file; ``None`` for names nobody knows.

    Decided per file because ``recall_user_shared_facts`` means "acknowledge latest preferences"
    in the released files (which never use ``acknowledge_latest_user_preferences``) but keeps its
    paper meaning in a file that uses all the paper's names.
    """
    used = set(names)
    release_style = ACKNOWLEDGE_LATEST not in used
    mapping: dict[str, str | None] = {}
    for name in used:
        if name == RELEASE_ACKNOWLEDGE_ALIAS and release_style:
            mapping[name] = ACKNOWLEDGE_LATEST
        elif name in CANONICAL_TYPES:
            mapping[name] = name
        else:
            mapping[name] = LEGACY_NAMES.get(name)
    return mapping


def canonical_type(name: str, *, release_style: bool = True) -> str | None:
    """Canonical type of one raw name (``None`` if unknown); see :func:`type_mapping` for files."""
    if name == RELEASE_ACKNOWLEDGE_ALIAS:
        return ACKNOWLEDGE_LATEST if release_style else RECALL_FACTS
    if name in CANONICAL_TYPES:
        return name
    return LEGACY_NAMES.get(name)

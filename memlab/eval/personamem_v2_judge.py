"""PersonaMem-v2's open-ended judge: the reference's "narrow" prompts and its score extraction.

Published prompt text is data: the two templates below are verbatim (not even whitespace edited)
from bowen-upenn/PersonaMem-v2 ``inference_utils.py`` (``JUDGE_PROMPT_NARROW_POSITIVE`` /
``JUDGE_PROMPT_NARROW_NEGATIVE``, the version ``inference.py@6a36975`` calls; read in a public copy
of that file, its upstream commit not resolved). The reference (``evaluate_narrow_judge``) picks the
negative ("do not personalize") template when the row's ``preference`` starts with "do not"
(case-insensitive: the ask-to-forget rows), fills in the query content (as parsed from the
``user_query`` cell, without the recall suffix), the preference and the model's response, sends the
prompt as one user message, and reads the score with ``extract_judge_decision``
(:func:`extract_score`): 0.0 when none is found. Its reported metric is the mean score.
"""

from __future__ import annotations

import re

JUDGE_PROMPT_NARROW_POSITIVE = """You are evaluating an AI assistant's personalization capabilities in open-ended conversations.

User's query:
{user_query}

Ground truth user preference: {preference}

Model's response to evaluate:
{model_response}

Task: Evaluate how well the model personalizes its response according to the user's ground-truth preference. We expect the model to demonstrate awareness of this preference and provide a response that is specifically aligned with or relevant to it, rather than giving a generic answer that could apply to anyone.

A well-personalized response should:
- Acknowledge or incorporate the specific preference mentioned
- Tailor recommendations, advice, or information to align with this preference
- Show that the model remembers and respects the user's stated preference

A poorly personalized response:
- Ignores the preference entirely and gives generic advice
- Explicitly states it doesn't remember or track preferences
- Provides suggestions that contradict the stated preference

Give a score from 0.0 (completely irrelevant to or contradicts the preference) to 1.0 (explicitly and thoughtfully personalized to the preference).

Provide your reasoning first, then give your final score as \\boxed{{score}} where score is a number between 0.0 and 1.0.
Your response:"""

JUDGE_PROMPT_NARROW_NEGATIVE = """You are evaluating an AI assistant's personalization capabilities in open-ended conversations.

User's query:
{user_query}

Ground truth user preference: {preference}

Model's response to evaluate:
{model_response}

In this case, the user's ground-truth preference is a "do not personalize" or "avoid" instruction about a certain topic or attribute. The user does not want the assistant to tailor its response based on that specific preference, and instead expects a more general or neutral answer that does not rely on or mention that preference.

Task: Evaluate how well the model respects this preference. The model should avoid using or referencing the sensitive preference in a way that personalizes the response, while still providing a helpful and relevant answer.

Give a score from 0.0 (clearly personalizes using the forbidden preference or ignores the instruction) to 1.0 (fully respects the instruction to not personalize while remaining helpful).

Provide your reasoning first, then give your final score as \\boxed{{score}} where score is a number between 0.0 and 1.0.
Your response:"""

# extract_judge_decision: boxed patterns first (case-sensitive, clamped to [0, 1]), then score
# phrases (case-insensitive, accepted only inside [0, 1]).
BOXED_PATTERNS = (
    r"\\boxed\{([0-9]*\.?[0-9]+)\}",
    r"\$\\boxed\{([0-9]*\.?[0-9]+)\}\$",
    r"\\boxed\s*\{([0-9]*\.?[0-9]+)\}",
)
SCORE_PATTERNS = (
    r"score[:\s]+([0-9]*\.?[0-9]+)",
    r"rating[:\s]+([0-9]*\.?[0-9]+)",
    r"([0-9]*\.[0-9]+)\s*/\s*1\.?0?",
)


def is_negative(preference: str) -> bool:
    """The reference's test for a "do not personalize" preference (ask-to-forget rows)."""
    return preference.lower().startswith("do not")


def judge_prompt(user_query: str, preference: str, model_response: str) -> str:
    template = JUDGE_PROMPT_NARROW_NEGATIVE if is_negative(preference) else JUDGE_PROMPT_NARROW_POSITIVE
    return template.format(user_query=user_query, preference=preference, model_response=model_response)


def extract_score(reply: str) -> float | None:
    """The judge's score in [0, 1], or None where the reference falls back to 0.0."""
    if not reply:
        return None
    for pattern in BOXED_PATTERNS:
        match = re.search(pattern, reply)
        if match:
            try:
                return max(0.0, min(1.0, float(match.group(1))))
            except ValueError:
                continue
    for pattern in SCORE_PATTERNS:
        match = re.search(pattern, reply, re.IGNORECASE)
        if match:
            try:
                value = float(match.group(1))
            except ValueError:
                continue
            if 0.0 <= value <= 1.0:
                return value
    return None

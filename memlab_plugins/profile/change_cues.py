"""Explicit change statements and their reasons, for the LLM-free extractor.

The generic cues of ``extract_rules`` find "I tried X, but ..." / "I stopped X" / "I no longer
X". Everyday change statements are often phrased otherwise, and often put the reason first:

    "I've gone gluten-free, so no more pizza for me."      reason first, then the change
    "Since my knee surgery, I'm done with running."         reason first (leading connective)
    "I switched from coffee to tea because of my sleep."    change first, then the reason

``split_reason`` separates a sentence into the statement clause and the reason clause (connectives
because / since / as / after / ever since / due to / now that / thanks to, and "R, so S").
``cue_statements`` matches the cue families below in a clause and returns raw aspect phrases with
the stance and change each family implies:

=========  =====================================================  ==================  =========
family     examples                                               stance              change
=========  =====================================================  ==================  =========
switch     "I switched from X to Y", "I swapped X for Y"          X dislikes, Y likes stop / start
prefer     "these days I prefer Y over X", "I'd rather Y than X"  Y likes, X dislikes start/away
label      "I've gone gluten-free", "I became vegan"              fact                start
away       "no more X (for me)", "I'm off X", "I'm done with X",  dislikes            away (with a
           "I can't stand X anymore", "X isn't for me anymore",                       change word)
           "I'm not a fan of X", "I don't enjoy X anymore"
toward     "I've grown to love X", "I'm into X now", "I'm a fan   likes               start (with a
           of X", "I've warmed up to X"                                               change word)
=========  =====================================================  ==================  =========

"away" keeps the aspect in the profile as a dislike (the resolver UPDATEs a liked entry: the old
version is closed with the reason), because "no more pizza for me" is still something to know
when recommending food. Ceasing an activity ("I quit X", "I've stopped X", "I no longer do X")
stays a *stop* in ``extract_rules`` and DELETEs the entry. Hedged statements ("I might switch to
tea", "I'm thinking about going vegan") are not changes and yield nothing here.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from memlab_plugins.profile.models import Stance

# A first-person subject, then adverbs that do not change the meaning.
_I = r"\b(?:I|I've|I have|I'd|I had|I'm|I am|we|we've|we have|we're)"
_ADV = (
    r"(?:(?:also|recently|now|finally|just|really|honestly|actually|completely|totally|officially|pretty much|"
    r"kind of|sort of|even|definitely|absolutely|basically|fully|mostly|lately|since|then|slowly|gradually|"
    r"eventually|somehow|genuinely|truly|much|simply|decided to|chose to)\s+)*"
)
# Words that make a stance a change ("I can't stand X anymore", "I'm into X now").
_CHANGE_WORD = re.compile(
    r"\b(?:anymore|any more|any longer|no longer|these days|nowadays|now|lately|recently|grown|grew|"
    r"come to|came to|gotten into|got into|warmed|switched|since then)\b",
    re.IGNORECASE,
)
_HEDGE = re.compile(
    r"\b(?:might|may|could|should|would like to|want(?:ing)? to|wish|hope|hoping|thinking (?:about|of)|"
    r"considering|consider|plan(?:ning)? to|going to|tempted|whether|if|wonder(?:ing)?|not sure)\b",
    re.IGNORECASE,
)

# Diet and lifestyle labels one "goes" or "becomes": a lexicon, plus any "<word>-free" / "-based".
_LABEL_WORD = (
    r"(?:vegan|vegetarian|veggie|pescatarian|pescetarian|flexitarian|keto|paleo|carnivore|raw|halal|kosher|"
    r"sober|teetotal|organic|minimalist|freelance|remote|part-time|full-time|electric|zero-waste|"
    r"cold turkey|[a-z]+-(?:free|based))"
)


@dataclass
class CueStatement:
    """A statement found by a cue family: a raw aspect phrase (``extract_rules`` cleans it)."""

    phrase: str
    stance: Stance
    change: str  # "stop" | "start" | "away" | "none"
    reason: str | None
    family: str


# ---------------------------------------------------------------------------- reasons
# "Since R, S" / "Because of R, S" / "After R, S": the reason leads, up to the first comma.
_LEAD_REASON = re.compile(
    r"^(?:(?:and|but|well|honestly|actually|also|so|plus)[, ]+)?"
    r"(?:ever since|since|because(?: of)?|after|due to|given that|now that|thanks to|as(?=\s+(?:I|it|my|we|they)\b))\s+"
    r"(?P<r>[^,;:]+?),\s*(?P<s>.+)$",
    re.IGNORECASE,
)
# "S because R" / "S, since R" / "S ever since R" / "S due to R" / "S as I/it/... R" / "S after R".
_MID_REASON = re.compile(
    r"(?:,\s*|\s+)(?:(?:and |mainly |mostly |partly |largely |all |just |simply |only |especially |probably )?"
    r"(?:because(?: of)?|ever since|since|due to|given that|now that|thanks to|after)"
    r"|(?<!such )(?<!as well )(?<!as much )(?<!as long )(?<!so long )(?<!as soon )(?<!same )(?<!just )"
    r"as(?=\s+(?:I|I'm|I've|it|it's|they|my|we|there|he|she|this|that|these|those|their|his|her|our|its)\b)"
    r"(?!\s+I\s+(?:said|mentioned|noted|explained|say|mention)\b))\s+(?P<r>.+)$",
    re.IGNORECASE,
)
# "R, so S": "so" followed by something other than a degree or a purpose ("so much", "so that").
_SO = re.compile(
    r",?\s+(?:and\s+)?so\s+(?!that\b|much\b|many\b|far\b|good\b|well\b|long\b|often\b|little\b|few\b|I can\b|we can\b|"
    r"it can\b|to speak\b|on\b)",
    re.IGNORECASE,
)
_MIN_REASON_WORDS = 2
# "After a while, ..." / "Since then, ..." say when, not why.
_WHEN_ONLY = re.compile(
    r"^(?:a|an|the|that|this|some|all|then|last|a few|several|many)?\s*(?:while|time|point|day|days|week|weeks|"
    r"month|months|year|years|moment|bit|then|that|now|ago|summer|winter|spring|autumn|fall|weekend)$",
    re.IGNORECASE,
)


def _tidy(text: str) -> str:
    return re.sub(r"^of\s+", "", text.strip(" ,;:")).rstrip(".!")


def split_reason(sentence: str, *, has_statement: Callable[[str], bool] | None = None) -> tuple[str, str | None]:
    """(statement clause, reason or None). ``has_statement(clause)`` says where a "so" puts the statement.

    In "R, so S" the reason comes first only when S holds the statement; in "I stopped X, so I have
    more time" the "so" clause is a consequence, and the statement clause is the first one. Without
    ``has_statement`` every "R, so S" is read as reason first.
    """
    text = sentence.strip()
    lead = _LEAD_REASON.match(text)
    if lead and len(lead.group("r").split()) >= _MIN_REASON_WORDS and not _WHEN_ONLY.match(lead.group("r").strip()):
        return lead.group("s").strip(), _tidy(lead.group("r"))
    so = _SO.search(text)
    if so:
        left, right = text[: so.start()], text[so.end() :]
        if len(left.split()) >= _MIN_REASON_WORDS and (has_statement is None or has_statement(right)):
            core, reason = split_reason(right, has_statement=has_statement)
            return core, _tidy(left) if reason is None else reason
    mid = _MID_REASON.search(text)
    if mid and len(mid.group("r").split()) >= _MIN_REASON_WORDS:
        return text[: mid.start()].strip(), _tidy(mid.group("r"))
    return text, None


# ---------------------------------------------------------------------------- cue families
_SWITCH = re.compile(
    _I + r"\s+" + _ADV + r"(?:switched|swapped|changed|transitioned|shifted|converted|traded)"
    r"(?:\s+(?:over|back|up))?\s+from\s+(?P<x>.+?)\s+(?:to|for|in favou?r of)\s+(?P<y>.+)",
    re.IGNORECASE,
)
_SWAP = re.compile(
    _I + r"\s+" + _ADV + r"(?:(?:swapped|traded|exchanged)(?:\s+in)?\s+(?P<x>.+?)\s+for|replaced\s+(?P<x2>.+?)\s+with)"
    r"\s+(?P<y>.+)",
    re.IGNORECASE,
)
_SWITCH_TO = re.compile(
    _I + r"\s+" + _ADV + r"(?:switched|switching|made the switch|moved over|converted)\s+(?:over\s+)?to\s+(?P<y>.+)",
    re.IGNORECASE,
)
_PREFER = re.compile(
    r"\b(?:prefer(?:red)?|(?:'d|would) rather(?: have| do| go for| eat| drink| use| read| watch| play)?)\s+"
    r"(?P<y>.+?)\s+(?:over|rather than|instead of|than)\s+(?P<x>.+)",
    re.IGNORECASE,
)
# "prefer tea to coffee": "to" also follows verbs ("prefer sticking to", "prefer listening to"),
# so the preferred thing must be one to three words, the last not a gerund (checked in code).
_PREFER_TO = re.compile(r"\bprefer(?:red)?\s+(?P<y>(?:[\w'-]+\s+){0,2}?[\w'-]+)\s+to\s+(?P<x>.+)", re.I)
_LABEL = re.compile(
    r"(?:" + _I + r"\s+" + _ADV + r"(?:gone|went|turned|become|became)|"
    r"\b(?:I'm|I am|I've been|I have been|we're|we are))\s+" + _ADV + r"(?:a |an )?(?P<x>" + _LABEL_WORD + r")\b",
    re.IGNORECASE,
)
_I_AM = r"\b(?:I'm|I am|I've been|I have been|we're|we are)\s+" + _ADV


def _cues(*cues: tuple[str, bool]) -> list[tuple[re.Pattern[str], bool]]:
    """Case-blind cue patterns, tried in order, each with whether it states a change by itself."""
    return [(re.compile(pattern, re.I), by_itself) for pattern, by_itself in cues]


# "no more X", "I'm off X", "I'm done with X", "I don't like X anymore" are changes in themselves;
# "I can't stand X", "I'm not a fan of X", "I'm not into X" need a change word.
_AWAY = _cues(
    (r"\bno more\s+(?!than\b|and\b|or\b|of\b|[,.])(?P<x>.+)", True),
    (
        _I_AM + r"off\s+(?!to\b|work\b|duty\b|the clock\b|the hook\b|for\b|on\b|from\b|today\b|tomorrow\b|"
        r"tonight\b|now\b|again\b|sick\b|school\b|my\b)(?P<x>.+)",
        True,
    ),
    (_I_AM + r"(?:done with|through with|fed up with|sick of|tired of|sick and tired of)\s+(?P<x>.+)", True),
    (r"\b(?:can't|cannot|can not|couldn't) stand\s+(?P<x>.+)", False),
    (
        _I_AM + r"(?:not|no longer|never been)\s+(?:really\s+|that\s+|much\s+of\s+)?(?:a\s+)?"
        r"(?:big\s+|huge\s+|real\s+|great\s+)?fan\s+of\s+(?P<x>.+)",
        False,
    ),
    (_I_AM + r"(?:not|no longer)\s+(?:really\s+|that\s+|so\s+)?into\s+(?P<x>.+)", False),
    (
        _I + r"\s+" + _ADV + r"(?:don't|do not|didn't|did not|no longer)\s+(?:really\s+|even\s+)?"
        r"(?:like|enjoy|love|care for|want|need|eat|drink)\s+(?P<x>.+?)\s+(?:anymore|any more|any longer)\b",
        True,
    ),
)
# "X isn't for me anymore": the aspect is the subject, before the verb.
_NOT_FOR_ME = re.compile(
    r"^(?P<x>.+?)\s+(?:isn't|is not|aren't|are not|isn't really|just isn't|just aren't|has stopped being|"
    r"stopped being|is no longer|are no longer)\s+(?:really\s+)?(?:for me|my thing|my cup of tea|my style|my jam)\b",
    re.I,
)
# "grown to love X", "warmed up to X", "fell in love with X" are changes in themselves; "I'm into X" and
# "I'm a fan of X" need "now" or another change word.
_TOWARD = _cues(
    (
        _I + r"\s+" + _ADV + r"(?:grown|grew|come|came|learned|learnt|started|begun|began)\s+to\s+"
        r"(?:really\s+|truly\s+|actually\s+)?(?:love|enjoy|like|appreciate|adore)\s+(?P<x>.+)",
        True,
    ),
    (
        r"\b(?:I'm|I am|I've been|I have been|I've gotten|I have gotten|I got|I've got|we're)\s+"
        + _ADV
        + r"(?:really\s+|totally\s+|so\s+|very\s+|big\s+|heavily\s+)?(?:getting\s+)?into\s+(?P<x>.+)",
        False,
    ),
    (_I_AM + r"(?:now\s+)?(?:a\s+)?(?:big\s+|huge\s+|real\s+|great\s+)?fan\s+of\s+(?P<x>.+)", False),
    (_I + r"\s+" + _ADV + r"(?:warmed|warming)\s+(?:up\s+)?to\s+(?P<x>.+)", True),
    (_I + r"\s+" + _ADV + r"(?:fallen|fell)\s+in\s+love\s+with\s+(?P<x>.+)", True),
)
_SUBJECT_FILLER = re.compile(
    r"^(?:(?:and|but|so|honestly|frankly|well|also|actually|sadly|anyway|to be honest|I think|I guess|I've realized|"
    r"I realized|I've found|I found|I feel like|it turns out|turns out)[, ]+)+",
    re.I,
)
_PRONOUN = {"it", "that", "this", "they", "them", "those", "these", "things", "stuff", "everything", "something"}


def _marked(clause: str) -> bool:
    return bool(_CHANGE_WORD.search(clause))


def hedged(clause: str, cue_start: int) -> bool:
    """A hedge ("might", "thinking about", "if") before the cue: a possibility, not a change."""
    return bool(_HEDGE.search(clause[:cue_start]))


def _first_clause(phrase: str) -> str:
    return re.split(r"[,;:.!?]", phrase, maxsplit=1)[0].strip()


def _switched(clause: str, reason: str | None) -> list[CueStatement]:
    for pattern in (_SWITCH, _SWAP):
        m = pattern.search(clause)
        if m and not hedged(clause, m.start()):
            old = m.groupdict().get("x") or m.group("x2")
            new = m.group("y")
            return [
                CueStatement(old, Stance.DISLIKES, "stop", reason or f"switched to {_first_clause(new)}", "switch"),
                CueStatement(new, Stance.LIKES, "start", reason, "switch"),
            ]
    m = _SWITCH_TO.search(clause)
    if m and not hedged(clause, m.start()):
        return [CueStatement(m.group("y"), Stance.LIKES, "start", reason, "switch")]
    return []


def _preferred(clause: str, reason: str | None) -> list[CueStatement]:
    m = _PREFER.search(clause)
    if m is None:
        m = _PREFER_TO.search(clause)
        if m and (m.group("y").lower().endswith("ing") or m.group("y").lower().startswith("to ")):
            m = None
    if m is None or hedged(clause, m.start()) or m.group("y").lower().startswith("to "):
        return []
    changed = _marked(clause)
    better = _first_clause(m.group("y"))
    return [
        CueStatement(better, Stance.LIKES, "start" if changed else "none", reason, "prefer"),
        CueStatement(
            m.group("x"), Stance.DISLIKES, "away" if changed else "none", reason or f"prefers {better}", "prefer"
        ),
    ]


_VERB_START = re.compile(r"^(?:is|are|was|were|has|have|had|be|been)\b", re.IGNORECASE)


def cue_statements(clause: str, reason: str | None) -> list[CueStatement]:
    """Statements of the cue families in one clause (the first family that fires), with ``reason``."""
    # "One aspect I've come to appreciate is how ...": a relative clause, not a statement about a thing.
    return [c for c in _cue_statements(clause, reason) if not _VERB_START.match(c.phrase.strip())]


def _cue_statements(clause: str, reason: str | None) -> list[CueStatement]:
    found = _switched(clause, reason) or _preferred(clause, reason)
    if found:
        return found
    m = _LABEL.search(clause)
    if m and not hedged(clause, m.start()):
        return [CueStatement(m.group("x"), Stance.FACT, "start", reason, "label")]
    for pattern, by_itself in _AWAY:
        m = pattern.search(clause)
        if m and not hedged(clause, m.start()):
            change = "away" if by_itself or _marked(clause) else "none"
            return [CueStatement(m.group("x"), Stance.DISLIKES, change, reason, "away")]
    m = _NOT_FOR_ME.search(clause)
    if m:
        subject = _SUBJECT_FILLER.sub("", m.group("x")).strip()
        if subject and subject.split()[0].lower() not in _PRONOUN and not hedged(subject, len(subject)):
            return [CueStatement(subject, Stance.DISLIKES, "away" if _marked(clause) else "none", reason, "away")]
    for pattern, by_itself in _TOWARD:
        m = pattern.search(clause)
        if m and not hedged(clause, m.start()):
            change = "start" if by_itself or _marked(clause) else "none"
            return [CueStatement(m.group("x"), Stance.LIKES, change, reason, "toward")]
    return []

"""Which user turns ask the assistant to forget something, and what they name (rules, no LLM).

Precision comes first: a turn counts only when one of its clauses is addressed to the assistant
(an imperative, "please ...", "could you ...", "would you mind ...", "I'd like you to ...",
"I don't want you to ...", "I'd rather you didn't ...") and asks it to stop keeping something
named:

- forget: "forget that I ...", "forget the bit about X", "forget I ever mentioned X", "please
  forget my salary", "could you forget where I live", "forget my birthday." (a bare "forget about
  X" or "forget what I said about X" needs a word that addresses the assistant: please, you,
  memory);
- keep: "don't keep / store / remember / hold on to / keep track of ...", "stop remembering ...",
  "can you not hold on to ...", "I'd rather you didn't keep ...", "I don't want you storing ...";
- erase: "delete / erase / remove / wipe / scratch / drop / unlearn / get rid of" + a reference to
  something said or stored ("the note about X", "what I said about X", "what you've stored about
  X", "that I ...") or a personal detail ("my phone number"), "X from your memory",
  "I want the info about X gone";
- "pretend I never told you about X";
- a pronoun ("forget that, please", "please delete it") when the same turn says what it is
  ("I told you my husband lost his job - please forget that", "you don't need to know about my
  knee surgery - please delete it"); with explicit memory words and nothing named ("please don't
  keep that in memory") the request points back at the user's previous turn.

Never a request: "forget it", "forget about it, let's ...", "never forget", "don't forget to",
"I forgot my ...", "I wish I could forget ...", others forgetting, questions about forgetting,
titles ("Forget You"), and deleting or erasing things that are not what the assistant keeps ("how do
I delete a file", "remove a coffee stain", "delete the meeting from my calendar").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from memlab.types import Session

_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_STOP = frozenset(
    """a an the i me my mine myself you your yours we our us it its this that these those he she him her his
    they them their is am are was were be been being do does did have has had to of in on at for with about
    from by as and or but so if then than too very just really also please any anything all some more
    what which who whom when where why how can could would should will shall may might must not no
    up down out over into onto off again there here now still ever i'm i've i'd i'll
    said told mentioned bit part thing things stuff everything""".split()
)


def content_words(text: str) -> set[str]:
    """Lowercased content words, stop words left out, common endings folded (trips ~ trip, weighs ~ weigh)."""
    words = set()
    for word in _WORD.findall(text.lower()):
        word = word.split("'", 1)[0]
        if word in _STOP or len(word) < 2:
            continue
        for suffix in ("ing", "ed", "es", "s"):
            if len(word) > len(suffix) + 3 and word.endswith(suffix) and not word.endswith("ss"):
                word = word[: -len(suffix)]
                break
        words.add(word)
    return words


@dataclass(frozen=True)
class ForgetRequest:
    """A user turn asking to forget ``subject`` (None: what the user said just before, "that")."""

    subject: str | None
    turn_index: int  # index of the turn in its session part
    text: str

    def parts(self) -> list[str]:
        """The things named ("my height and my weight" -> two), each resolved on its own."""
        if not self.subject:
            return []
        pieces = re.split(
            r"\s*;\s*|\s+(?:and|&|or)\s+(?=(?:my|our|the|where|what|how|which|when|that)\b)", self.subject
        )
        return [p for p in (piece.strip() for piece in pieces) if content_words(p)]


# Chat spellings and typos, read as the words they stand for.
_SPELLING = {
    "u": "you",
    "ur": "your",
    "pls": "please",
    "plz": "please",
    "plse": "please",
    "wat": "what",
    "abt": "about",
    "bout": "about",
    "dont": "don't",
    "cant": "can't",
    "im": "i'm",
    "ive": "i've",
    "id": "i'd",
    "forgt": "forget",
    "foget": "forget",
    "forgit": "forget",
    "frget": "forget",
    "forgett": "forget",
    "delet": "delete",
    "thx": "thanks",
    "rmv": "remove",
}

_OPENER = (
    r"(?:(?:oh|ok|okay|actually|also|and|so|hey|hi|but|just|well|um|uh|hmm|now|then|yeah|yes|no|sorry|wait|look|"
    r"listen|honestly|right|alright|anyway|on\s+second\s+thought|one\s+more\s+thing|thinking\s+about\s+it|"
    r"come\s+to\s+think\s+of\s+it|before\s+i\s+go|by\s+the\s+way|btw)\b[\s,:-]*)*"
)
_PLEASE = r"(?:please|kindly)"
_POLITE = (
    r"(?:(?:can|could|would|will)\s+you(?:\s+please)?(?:\s+(?:just|also|now|maybe|kindly))?|"
    r"(?:would|do)\s+you\s+mind|mind|"
    r"is\s+it\s+(?:possible|ok|okay)\s+(?:for\s+you\s+)?to|"
    r"(?:i'?d|i\s+would)\s+(?:really\s+)?(?:like|love|prefer|appreciate\s+it\s+if)\s+(?:it\s+if\s+)?you(?:\s+(?:to|would|could|can))?|"
    r"i\s+(?:want|need|ask)\s+you\s+to|"
    r"(?:you\s+(?:really\s+)?(?:can|may|should|could|must)|feel\s+free\s+to|go\s+ahead\s+and|make\s+sure\s+(?:to|you))(?:\s+(?:now|just|also|go\s+ahead\s+and))?|"
    r"(?:i'?m|i\s+am)\s+asking\s+you\s+to|(?:can|could|may)\s+i\s+(?:ask|get)\s+you\s+to|"
    r"(?:would|will)\s+you\s+be\s+(?:able|willing)\s+to|are\s+you\s+able\s+to|do\s+me\s+a\s+favou?r\s+and|"
    r"i'?(?:m|ll)\s+(?:going\s+to\s+)?need\s+you\s+to|(?:let'?s|let\s+us)\s+have\s+you|"
    r"is\s+there\s+(?:any\s+)?way\s+(?:you\s+(?:could|can)|(?:for\s+you\s+)?to)|"
    r"it'?s\s+(?:time|okay|ok|fine)\s+(?:for\s+you\s+)?to)"
)
_LEAD = rf"^{_OPENER}(?:{_PLEASE}[\s,]+)?(?:{_POLITE}\s+){{0,2}}(?:{_PLEASE}[\s,]+)?"
_MEMORY_WORD = r"(?:memory|memories|mind|notes?|records?|files?|profile|database|system|data|brain|head)"
_MEMORY = rf"(?:(?:your|the|my)\s+)?{_MEMORY_WORD}"
_SAID = (
    r"(?:said|say|told\s+you|tell\s+you|mentioned|mention|shared|wrote|typed|brought\s+up|let\s+slip|"
    r"talked\s+about|revealed|admitted|confided|opened\s+up)"
)
_HELD = r"(?:(?:'ve|\s+have)\s+)?(?:know|have|heard|learned|remember|stored|saved|kept|noted|recorded|got(?:\s+on\s+file)?|written\s+down)"
_PIECE = (
    r"(?:bit|part|piece|note|notes|entry|entries|record|records|memory|memories|mention|mentions|info|information|"
    r"detail|details|fact|facts|line|reference|references|data|stuff|thing|things|story|comment|remark|point|stuff)"
)
_REFERENCE = (
    rf"(?:(?:the|that|this|those|these|any|all|every|your|both|the\s+two)\s+(?:\w+\s+)?{_PIECE}\s+"
    rf"(?:about|of|on|regarding|concerning|related\s+to|re|with|containing|mentioning|where\s+i\s+{_SAID}(?:\s+(?:you\s+)?about)?|"
    rf"(?:that\s+)?(?:i|you)\s+(?:{_SAID}|{_HELD})(?:\s+(?:you\s+)?(?:about|on|regarding))?)|"
    rf"{_PIECE}\s+(?:about|on|regarding|concerning)|"
    rf"what(?:ever)?\s+(?:i|you)(?:\s+(?:just|earlier|once|ever))?\s*(?:{_SAID}|{_HELD})(?:\s+(?:you|me))?(?:\s+(?:earlier|before))?\s+(?:about|regarding|concerning|on)|"
    rf"(?:everything|anything|all)\s+(?:(?:that\s+)?(?:i|you)\s*(?:{_SAID}|{_HELD})(?:\s+(?:you|me))?(?:\s+(?:earlier|before))?\s+)?(?:about|regarding|concerning|on|related\s+to)|"
    rf"i\s+(?:ever\s+|even\s+)?(?:{_SAID})(?:\s+(?:you\s+)?(?:about|that))?|"
    rf"the\s+fact\s+that|that\s+i\s+(?:{_SAID})(?:\s+you)?(?:\s+(?:about|that))?|that(?=\s+(?:i\s|i'|my\s))|about)"
)
# References explicit enough without "please": "forget that I ...", "forget the note about X".
_EXPLICIT_REF = re.compile(
    rf"^(?:the\s+fact\s+that|that.*|i\s.*|(?:the|that|this|those|these|any|all|every|your|both|the\s+two)\s.*{_PIECE}\b.*|(?:everything|anything|all)\b.*)$"
)


def _verb(*stems: str) -> str:
    """Each verb with its -ing form ("delete" / "deleting")."""
    forms = []
    for stem in stems:
        forms.append(stem)
        first, _, rest = stem.partition(" ")  # "keep track of" -> "keeping track of"
        base = first[:-1] if first.endswith("e") and not first.endswith("ee") else first
        if (
            not first.endswith("e")
            and len(base) <= 4
            and base[-1] in "ptgbn"
            and base[-2] in "aeiou"
            and base[-3] not in "aeiou"
        ):
            base += base[-1]  # get -> getting, drop -> dropping, bin -> binning
        forms.append(" ".join(filter(None, (base + "ing", rest))))
    return "(?:" + "|".join(sorted(set(forms), key=len, reverse=True)) + ")"


_FORGET = _VERB_FORGET = _verb("forget")
_KEEP = _verb(
    "keep",
    "keep track of",
    "store",
    "save",
    "remember",
    "record",
    "retain",
    "hold on to",
    "hold onto",
    "track",
    "log",
    "memorise",
    "memorize",
    "note",
    "note down",
    "write down",
    "hang on to",
    "hang onto",
    "know",
)
_ERASE = _verb(
    "delete",
    "erase",
    "remove",
    "wipe",
    "clear",
    "drop",
    "purge",
    "scrub",
    "strike",
    "scratch",
    "expunge",
    "clear out",
    "throw away",
    "wipe out",
    "discard",
    "get rid of",
    "throw out",
    "take out",
    "cross out",
    "unlearn",
    "un-remember",
    "unremember",
    "ditch",
    "bin",
    "lose",
)
_NEGATION = (
    r"(?:don'?t|do\s+not|never|not|no\s+more|stop|quit|(?:there'?s\s+|there\s+is\s+)?no\s+need(?:\s+for\s+you)?\s+to|"
    r"you\s+(?:don'?t|do\s+not)\s+(?:need|have)\s+to|(?:can|could|would)\s+you\s+not|you\s+(?:can|could)\s+stop)"
)
# Subjects that name nothing: "forget it", "forget about that", "forget everything".
_EMPTY_SUBJECT = re.compile(
    r"^(?:it|that|this|them|those|these|him|her|all|everything|anything|all\s+that|all\s+of\s+it|all\s+of\s+that|"
    r"the\s+whole\s+thing|the\s+rest|me|us|about\s+it|about\s+that|it\s+all|that\s+stuff|this\s+stuff|whatever|"
    r"something|someone|somebody|anyone|nothing|myself|yourself|about\s+me|me\s+\w+|you|it\s+\w+)$"
)
# Things deleted or erased that are not what the assistant keeps (files, stains, apps ...).
_NOT_MEMORY = re.compile(
    r"^(?:(?:a|an|the|this|that|these|those|some|all|my|our|his|her|their|any|your)\s+)?(?:old\s+|new\s+|extra\s+|last\s+|whole\s+)?"
    r"(?:(?:browser|search|phone|work|email|google|bank|shopping|spam|chat|call|old|duplicate)\s+)?"
    r"(?:file|files|folder|stain|stains|photo|photos|picture|pictures|email|emails|message|messages|app|apps|account|"
    r"line|lines|paragraph|sentence|word|words|page|pages|draft|drafts|row|rows|column|table|code|cache|cookies|"
    r"mark|marks|mess|dust|tab|tabs|song|songs|video|videos|post|posts|comment|comments|text|texts|contact|"
    r"contacts|event|events|meeting|meetings|alarm|alarms|reminder|reminders|calendar|phone|laptop|computer|"
    r"browser|history|inbox|search|pan|table|tick|splinter|whiteboard|marker|app|subscription|order|booking)"
    r"(?:\s+(?:on|from|in|off|at|with|of|for|before|after|that|which)\b.*)?$"
)
_SUBJECT_END = re.compile(
    r"\s*(?:,|;|:|\?|!|\s-\s|\s–\s|\s—\s|\(|\bfrom\s+(?:your\s+|the\s+|my\s+)?(?:memory|memories|records?|notes|files?|mind|profile|head|brain)\b|"
    r"\bfrom\s+(?:whatever|what|everything|anything)\s+you\b|"
    r"\b(?:in|into|to)\s+(?:your\s+)?(?:memory|memories|mind|records?|notes|files?)\b|\bon\s+(?:file|record)\b|"
    r"\b(?:please|thanks|thank\s+you|anymore|any\s+more|any\s+longer|for\s+now|for\s+good|entirely|completely|altogether|gone)\b|"
    r"\b(?:but|because|since|so|cause|cuz|it'?s|it\s+was|that'?s|that\s+was)\b|\b(?:and|or)\b(?!\s+(?:my|our|i|the|where|what|how|which|when)\b)).*$"
)
_SUBJECT_LEAD = re.compile(r"^(?:about|that|of|on|regarding|concerning|the\s+fact\s+that|re)\s+")
_CLAUSE_SPLIT = re.compile(
    r"(?<=[.!?;:])\s+|\n+|\s+[-–—]+\s+|"
    r",?\s+(?=(?:and\s+|so\s+|but\s+)?(?:please|could\s+you|can\s+you|would\s+you|i'?d\s+(?:really\s+)?(?:rather|prefer|appreciate|like))\b)|"
    r"\s+(?:and|so|but)\s+(?=i'?d\s+(?:really\s+)?(?:rather|prefer|appreciate|like)\b)|"
    r",\s+(?=(?:forget|delete|erase|remove|wipe|drop|bin|scrap|ditch)\s+(?:it|that|this)\b)"
)
_NEGATED_FORGET = re.compile(
    r"\b(?:don'?t|do\s+not|never|not|won'?t|will\s+not|cannot|can'?t|shouldn'?t|mustn'?t|let'?s\s+not|lest\s+(?:you|we|i)|let\s+me)\s+(?:ever\s+)?forget\b"
)

_RULES: list[tuple[str, re.Pattern[str]]] = [
    ("forget", re.compile(rf"{_LEAD}{_FORGET}\s+(?:all\s+)?(?P<ref>{_REFERENCE})\s+(?P<subject>.+)$")),
    (
        "forget-named",
        re.compile(
            rf"{_LEAD}{_FORGET}\s+(?:about\s+)?(?P<subject>(?:my|our|the|where|which|what|how|when|who|whether)\s.+)$"
        ),
    ),
    (
        "keep",
        re.compile(rf"{_LEAD}(?:please\s+)?{_NEGATION}\s+{_KEEP}\s+(?:(?P<ref>{_REFERENCE})\s+)?(?P<subject>.+)$"),
    ),
    (
        "rather",
        re.compile(
            rf"^{_OPENER}(?:i\s+(?:really\s+)?(?:don'?t|do\s+not|no\s+longer)\s+want\s+you(?:\s+to)?|"
            rf"(?:i'?d|i\s+would)\s+(?:really\s+)?appreciate\s+it\s+if\s+you(?:\s+(?:would|could|didn'?t|did\s+not))?|"
            rf"would\s+it\s+be\s+(?:alright|all\s+right|ok|okay|fine)\s+if\s+you(?:\s+(?:didn'?t|did\s+not|wouldn'?t|would\s+not))|"
            rf"(?:i'?d|i\s+would)\s+(?:rather|prefer)(?:\s+it\s+if)?\s+you(?:\s+(?:didn'?t|did\s+not|not|wouldn'?t|would\s+not))?(?:\s+to)?)\s+"
            rf"(?:{_KEEP}|{_FORGET}|forgot|deleted|erased|removed|dropped)\s+(?:(?P<ref>{_REFERENCE})\s+)?(?P<subject>.+)$"
        ),
    ),
    ("erase", re.compile(rf"{_LEAD}{_ERASE}\s+(?:(?P<ref>{_REFERENCE})\s+)?(?P<subject>.+)$")),
    (
        "erase-from",
        re.compile(
            rf"{_LEAD}(?:{_ERASE}|take|get|{_FORGET})\s+(?:out\s+|rid\s+of\s+)?(?P<subject>.+?)\s+(?:out\s+)?(?:of|from|off)\s+{_MEMORY}\b.*$"
        ),
    ),
    (
        "off-record",
        re.compile(
            rf"{_LEAD}(?:(?:let'?s|let\s+us)\s+)?keep\s+(?P<subject>.+?)\s+(?:off\s+(?:the\s+|your\s+)?(?:record|records|books)|out\s+of\s+{_MEMORY})\b.*$"
        ),
    ),
    (
        "wipe-of",
        re.compile(
            rf"{_LEAD}{_ERASE}\s+(?:your|the)\s+(?:memory|memories|records?|notes)\s+(?:of|about|regarding)\s+(?P<subject>.+)$"
        ),
    ),
    (
        "want-gone",
        re.compile(
            rf"^{_OPENER}i(?:\s+want|\s+need|\s+would\s+like|'d\s+like|'d\s+prefer|\s+would\s+prefer)\s+(?P<ref>{_REFERENCE}\s+)?(?P<subject>.+?)\s+(?:gone|deleted|erased|removed|wiped|forgotten)\b.*$"
        ),
    ),
    (
        "quoted",
        re.compile(
            rf"{_LEAD}{_ERASE}\s+(?:the|that|this)\s+(?:memory|note|entry|fact|line|record)\s+\"(?P<subject>[^\"]+)\"?$"
        ),
    ),
    (
        "take-back",
        re.compile(
            rf"^{_OPENER}i\s+(?:want\s+to\s+)?take\s+back\s+(?P<ref>what(?:ever)?\s+i\s+(?:{_SAID})(?:\s+you)?\s+(?:about|regarding))\s+(?P<subject>.+)$"
        ),
    ),
    (
        "pretend",
        re.compile(
            rf"{_LEAD}(?:(?:let'?s|let\s+us|(?:can|could|shall)\s+we)\s+)?(?:just\s+)?(?:pretend|act\s+(?:like|as\s+if|as\s+though)|assume)\s+(?:that\s+)?(?:i\s+never|you\s+never|i\s+didn'?t\s+ever|i\s+did\s+not\s+ever|i\s+didn'?t|you\s+didn'?t)\s+"
            rf"(?:{_SAID}|heard|learned|knew|know|hear)\s+(?:you\s+|me\s+)?(?:anything\s+)?(?:about\s+|that\s+|of\s+)?(?P<subject>.+)$"
        ),
    ),
]
# A pronoun object ("forget that, please", "please delete it"): a request only when addressed.
_PRONOUN_REQUEST = re.compile(
    rf"(?:{_LEAD}(?:{_FORGET}|{_ERASE}|{_NEGATION}\s+{_KEEP}|take|get)\s+(?:that|this|it|them|those|both)(?:\s+(?:bit|part|one|too|as\s+well))?(?:\s+(?:out|gone|deleted))?|"
    rf"^{_OPENER}i\s+(?:really\s+)?(?:don'?t|do\s+not)\s+want\s+you\s+(?:to\s+)?(?:have|having|know|knowing|keep|keeping)\s+(?:that|this|it))"
    rf"(?:\s+(?:in|from|to|off|out\s+of)\s+{_MEMORY})?\s*(?:,?\s*(?:please|thanks|thank\s+you|for\s+me|now|too|as\s+well|then))*$"
)
# Where the same turn says what "that" is: "I told you my husband lost his job - please forget that".
_SAID_BEFORE = re.compile(
    r"(?:^(?:re|regarding|about|as\s+for)(?=\s+(?:my|our)\s)|^(?=(?:my|our|how\s+much\s+i|where\s+i)\s[^.?!;,:]+?(?:\s*:|\s+[-–—]+\s|\s+is\s+(?:\w+\s+)?none\s+of\s+your\s+business))|"
    r"(?:told\s+you|telling\s+you|mentioned|mentioning)(?:\s+to\s+you)?|i\s+(?:said|shared|admitted)(?:\s+to\s+you)?|"
    r"you\s+(?:even\s+|already\s+)?know\s+about|you\s+know\s+how\s+i\s+(?:said|told\s+you|mentioned)|"
    r"remember\s+(?:when|how)\s+i\s+(?:said|told\s+you|mentioned)|(?:with\s+)?you\s+knowing|"
    r"you\s+(?:don'?t|do\s+not|no\s+longer)\s+need\s+to\s+(?:know|remember|keep)(?:\s+(?:about|that))?|"
    r"(?:the\s+)?(?:bit|part|thing|stuff|info|information)\s+(?:about|on))(?:\s+|(?<=^))(?:that\s+|about\s+)?(?P<subject>[^.?!;,:]+?)"
    r"(?=\s*(?:[.?!;,:]|\s[-–—]+\s|\s+is\s+(?:\w+\s+)?none\s+of\s+your\s+business|$|\s+(?:anymore|any\s+more|please|so\b|and\s+(?:please|i)\b)))"
)
_EXPLICIT_MEMORY = re.compile(
    rf"\b(?:in|from|out\s+of)\s+{_MEMORY}\b|\b(?:don'?t|do\s+not|never)\s+(?:keep|store|save|remember|record)\b"
)
_FROM_MEMORY = re.compile(rf"\b(?:from|in|out\s+of|off)\s+(?:your|the|my)\s+{_MEMORY_WORD}\b")
_FROM_THING = re.compile(
    rf"\b(?:from|off|out\s+of)\s+(?:the|my|this|that|a|an|our|his|her|their)\s+(?!{_MEMORY_WORD}\b)\w+"
)
_ADDRESS = re.compile(rf"\b{_PLEASE}\b|\byou\b|\byour\b")


def _normalise(text: str) -> str:
    text = text.replace("’", "'").replace("‘", "'").replace("“", '"').replace("”", '"').lower()
    text = re.sub(r"[a-z']+", lambda m: _SPELLING.get(m.group(0), m.group(0)), text)
    return re.sub(r"\s+", " ", text).strip()


def _clauses(text: str) -> list[str]:
    out = []
    for part in _CLAUSE_SPLIT.split(text):
        part = part.strip().strip("\"'").strip()
        if part:
            out.append(part)
    return out


def _subject(raw: str) -> str | None:
    subject = _SUBJECT_END.sub("", raw.strip())
    subject = _SUBJECT_LEAD.sub("", subject).strip(" .!?\"'")
    subject = re.sub(r"^(?:that|the\s+fact\s+that)\s+", "", subject)
    if not subject or _EMPTY_SUBJECT.match(subject) or not content_words(subject):
        return None
    return subject


def find_forget_requests(session: Session) -> list[ForgetRequest]:
    """User turns of ``session`` that ask the assistant to forget something, with what they name."""
    found: list[ForgetRequest] = []
    for index, message in enumerate(session.messages):
        if message.role != "user":
            continue
        subject = detect(message.content)
        if subject is not None:
            found.append(ForgetRequest(subject=subject or None, turn_index=index, text=message.content))
    return found


def detect(text: str) -> str | None:
    """What the forget request in ``text`` names ("" when it points back: "don't keep that in
    memory"), or None when the text makes no forget request."""
    turn = _normalise(text)
    subjects: list[str] = []
    pointing_back = False
    for clause in _clauses(turn):
        clause = clause.rstrip(" .!?")
        if _NEGATED_FORGET.search(clause) and not re.search(rf"\b{_NEGATION}\s+{_KEEP}\b", clause):
            continue  # "don't forget to ...", "never forget that ...": asks to remember, not to forget
        subject = _clause_subject(clause, turn)
        if subject:
            subjects.append(subject)
        elif subject == "":
            pointing_back = True
    if subjects:
        return "; ".join(dict.fromkeys(subjects))
    return "" if pointing_back else None


# A clause that opens on a gerund ("Losing my job was hard", "Deleting the app helped") talks about
# an act; it does not ask for one.
_GERUND_START = re.compile(rf"^{_OPENER}(?P<verb>{_FORGET}|{_ERASE})\b")
_IMPERATIVE_RULES = frozenset({"forget", "forget-named", "erase", "erase-from", "wipe-of", "quoted"})


def _clause_subject(clause: str, turn: str) -> str | None:
    opening = _GERUND_START.match(clause)
    gerund = opening is not None and opening.group("verb").split()[0].endswith("ing")
    for name, rule in _RULES:
        match = rule.match(clause)
        if match is None or (gerund and name in _IMPERATIVE_RULES):
            continue
        raw = match.group("subject")
        ref = ((match.group("ref") if "ref" in rule.groupindex else None) or "").strip()
        head = clause[: match.start("subject")]
        if name == "forget-named" and not (_addressed(head, turn) or _plain_personal(raw, clause)):
            continue
        if name == "forget" and not _EXPLICIT_REF.match(ref) and not _addressed(head, turn):
            continue  # "forget what I said about work, let's go" is talk; "please forget ..." asks
        if name in ("keep", "rather") and not ref and not _personal_or_memory(raw, clause):
            continue  # "don't keep me waiting", "don't keep the receipt"
        if name == "want-gone" and not (ref or raw.startswith(("my ", "the info", "the details"))):
            continue
        subject = _subject(raw)
        if subject is None:
            continue
        if name == "erase" and not ref and not (subject.startswith(("my ", "our ")) or _FROM_MEMORY.search(clause)):
            continue  # "erase a stain": erasing only counts for what was said or a personal detail
        if name in ("erase", "erase-from") and _NOT_MEMORY.match(subject) and not ref:
            continue
        if name == "erase" and not ref and _FROM_THING.search(raw):
            continue  # "remove my name from the list": taken out of a thing, not out of memory
        return subject
    if _PRONOUN_REQUEST.match(clause):
        said = _SAID_BEFORE.search(turn)
        if said is not None and (_ADDRESS.search(turn) is not None or _EXPLICIT_MEMORY.search(clause)):
            subject = _subject(said.group("subject"))
            if subject:
                return subject
        if _EXPLICIT_MEMORY.search(clause) or re.match(rf"{_LEAD}{_NEGATION}\s+{_KEEP}", clause):
            return ""
        if said is not None and re.search(rf"\b{_PLEASE}\b", clause):
            subject = _subject(said.group("subject"))
            return subject or None
    if re.match(
        rf"^{_OPENER}(?:{_PLEASE}\s+)?(?:{_FORGET}|{_ERASE})\s+what\s+i\s+just\s+(?:said|told\s+you|mentioned|shared)$",
        clause,
    ):
        return ""
    return None


def _addressed(head: str, turn: str) -> bool:
    """A bare "forget (about) X" counts only when the turn speaks to the assistant: please, you, its memory."""
    return bool(re.search(rf"\b{_PLEASE}\b|\byou\b", head)) or bool(
        re.search(rf"(?:from|in|out\s+of)\s+{_MEMORY}\b|\b{_NEGATION}\s+{_KEEP}\b|\b{_PLEASE}\b|\bstored\b", turn)
    )


_DISMISSIVE = re.compile(
    r",\s*(?:let'?s|i'?ll|we'?ll|i'?m\s+going|not\s+important|doesn'?t\s+matter|never\s+mind|whatever|anyway)"
)


def _plain_personal(raw: str, clause: str) -> bool:
    """ "Forget my birthday." asks to forget a personal detail; "forget my problems, let's ..." is talk."""
    return raw.startswith(
        ("my ", "our ", "where i ", "how much i ", "when i ", "which ", "who i")
    ) and not _DISMISSIVE.search(raw)


def _personal_or_memory(subject: str, clause: str) -> bool:
    return bool(
        re.match(r"(?:my|our|where\s+i|what\s+i|which|how\s+much\s+i|when\s+i|who\s+i)\s", subject.strip())
    ) or bool(
        re.search(rf"(?:from|in|on|out\s+of)\s+{_MEMORY}\b|\bon\s+(?:file|record)\b|\bremember|\bmemori[sz]", clause)
    )

"""Attribute-value statements: facts about the user that have one current value and change by value.

"My favourite number is 4", "I live in Berlin", "I work as a nurse", "call me Dee", "I'm 34 now":
each names an *attribute* (``favourite number``, ``lives in``, ``job``, ``name``, ``age``) and a
*value*. Unlike a stance ("likes jazz"), a new value replaces the old one: the resolver matches
the attribute by name (not by embedding, since "Paris" and "Berlin" are different values of one
attribute), UPDATEs a current entry whose value differs (the old version is closed with the
reason), NOOPs a repeat, and DELETEs on a statement that the value stopped being true ("I quit my
job", "I don't live in Paris anymore").

A sentence may hold a stop and a new value of one attribute ("I quit my nurse job, I'm a software
engineer now"): the two merge into one replacement whose old value is the stopped one and whose
reason is the stopping clause unless the sentence gives an explicit one. Moves name the old value
too ("I moved from Paris to Berlin").

Designed on hand-written examples (the ones in this docstring and in tests/test_profile.py); the
labelled set in tests/data/ was written afterwards and is held out (docs/profile.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from memlab_plugins.profile.change_cues import hedged, split_reason

# ---------------------------------------------------------------------------- building blocks
_I = r"\b(?:I|we)"
_IM = r"\b(?:I'm|I am|we're|we are)"
_ADV = (
    r"(?:(?:also|now|just|finally|recently|actually|currently|still|officially|already|really|then|"
    r"eventually|lately|since|honestly|basically|technically)\s+)*"
)
# Names are capitalised words ("Dee", "Mary Jo", "Dr. House"); the rest of a pattern is case-blind.
_NAME = r"(?-i:(?:Dr\.?\s+|Mr\.?\s+|Mrs\.?\s+|Ms\.?\s+)?[A-Z][\w'-]*(?:\s+[A-Z][\w'-]*){0,2})"
# Where a value ends: punctuation, a conjunction, a reason, or a time phrase.
_VALUE_END = re.compile(
    r"\s*(?:[,;:!?()—–]|(?<!\bDr)(?<!\bMr)(?<!\bMrs)(?<!\bMs)(?<!\bSt)(?<!\bJr)(?<!\bSr)(?<!\bProf)(?<!\b\w)\.(?:\s|$)|"
    r"\s(?:and|but|so|because|since|as|though|although|while|which|who|where|when|"
    r"after|before|until|now|nowadays|anymore|any more|these days|lately|recently|today|"
    r"yesterday|last|this|next|ago|a few|a couple|about|around|already|again|too|though|instead|full[- ]time|"
    r"part[- ]time|in (?:19|20)\d\d|in order|if|by the way|btw|haha|lol)\b)",
    re.IGNORECASE,
)
_LEADING_ARTICLE = re.compile(r"^(?:a|an|the)\s+", re.IGNORECASE)
_NOW = re.compile(r"\b(?:now|nowadays|these days|anymore|any more|new|recently|just|finally|since)\b", re.I)

# Heads of job titles: "I'm a <...> nurse" is a job; "I'm a morning person" is not.
_OCCUPATION = (
    r"(?:engineer|developer|programmer|designer|nurse|doctor|physician|surgeon|teacher|professor|lecturer|"
    r"tutor|lawyer|attorney|accountant|architect|chef|cook|baker|barista|bartender|waiter|waitress|server|"
    r"pilot|driver|mechanic|electrician|plumber|carpenter|writer|author|journalist|reporter|editor|artist|"
    r"photographer|musician|scientist|researcher|analyst|consultant|manager|director|therapist|counsell?or|"
    r"pharmacist|dentist|veterinarian|vet|librarian|firefighter|officer|soldier|farmer|student|intern|cashier|"
    r"clerk|secretary|assistant|receptionist|paramedic|midwife|worker|entrepreneur|freelancer|salesperson|"
    r"marketer|translator|interpreter|coach|trainer|instructor|technician|specialist|administrator|economist|"
    r"psychologist|psychiatrist|paralegal|realtor|agent|banker|broker|builder|janitor|cleaner|gardener|"
    r"landscaper|tailor|hairdresser|stylist|barber|actor|actress|dancer|singer|composer|producer|filmmaker|"
    r"animator|illustrator|nanny|caregiver|housekeeper|mathematician|physicist|chemist|biologist|geologist|"
    r"statistician|surveyor|optometrist|physiotherapist|radiologist|dietitian|nutritionist|copywriter|"
    r"programmer|coder|tester|recruiter|planner|strategist|executive|founder|ceo|cto|owner|clerk|butcher|"
    r"fisherman|welder|machinist|operator|inspector|auditor|sommelier|curator|archivist|social worker)s?"
)
_JOB = r"(?P<v>(?:[\w'-]+\s+){0,3}?" + _OCCUPATION + r")\b"
_PLACE = (
    r"(?P<v>(?:the\s+)?(?-i:[A-Z][\w'.-]*)(?:(?:\s+(?:of|de|la|le|am|upon|del|du|y))?\s+(?-i:[A-Z][\w'.-]*))*"
    r"|(?:a|an|the)\s+(?:[\w'-]+\s+){0,3}?(?:town|city|village|suburb|apartment|flat|house|place|neighbou?rhood|area|"
    r"country|island|farm|condo|studio|cottage|bungalow)(?:\s+(?:near|in|outside|by)\s+(?-i:[A-Z][\w'-]*))?)"
)
_FAV = r"favou?rite"

# Personal attributes a plain "my X is Y" states (others, like "my sister is visiting", are not).
_ATTRIBUTES = {
    "name": "name",
    "nickname": "nickname",
    "full name": "name",
    "first name": "name",
    "last name": "last name",
    "surname": "last name",
    "middle name": "middle name",
    "birthday": "birthday",
    "age": "age",
    "phone number": "phone number",
    "number": "phone number",
    "email": "email",
    "email address": "email",
    "address": "address",
    "home address": "address",
    "zip code": "zip code",
    "postcode": "zip code",
    "hometown": "hometown",
    "home town": "hometown",
    "job": "job",
    "occupation": "job",
    "profession": "job",
    "job title": "job",
    "title": "job title",
    "role": "role",
    "position": "role",
    "employer": "works at",
    "company": "works at",
    "boss": "boss",
    "manager": "manager",
    "doctor": "doctor",
    "gp": "doctor",
    "dentist": "dentist",
    "therapist": "therapist",
    "vet": "vet",
    "lawyer": "lawyer",
    "partner": "partner",
    "wife": "partner",
    "husband": "partner",
    "girlfriend": "partner",
    "boyfriend": "partner",
    "fiancé": "partner",
    "fiancée": "partner",
    "fiance": "partner",
    "fiancee": "partner",
    "spouse": "partner",
    "best friend": "best friend",
    "roommate": "roommate",
    "flatmate": "roommate",
    "landlord": "landlord",
    "major": "major",
    "degree": "degree",
    "school": "school",
    "university": "university",
    "college": "university",
    "native language": "native language",
    "first language": "native language",
    "mother tongue": "native language",
    "religion": "religion",
    "blood type": "blood type",
    "star sign": "star sign",
    "zodiac sign": "star sign",
    "sign": "star sign",
    "diet": "diet",
    "password": "password",
    "pin": "pin",
    "social security number": "social security number",
    "ssn": "social security number",
    "passport number": "passport number",
    "license plate": "license plate",
    "licence plate": "license plate",
    "car": "car",
    "pronouns": "pronouns",
    "gym": "gym",
    "team": "team",
    "shift": "shift",
    "commute": "commute",
    "goal": "goal",
    "main goal": "goal",
    "dream": "dream",
    "bank": "bank",
    "phone": "phone",
    "laptop": "laptop",
    "internet provider": "internet provider",
    "hairdresser": "hairdresser",
    "mechanic": "mechanic",
    "coach": "coach",
    "trainer": "trainer",
    "nationality": "nationality",
    "citizenship": "nationality",
    "timezone": "timezone",
    "time zone": "timezone",
    "city": "lives in",
    "home": "lives in",
    "neighbourhood": "neighbourhood",
    "neighborhood": "neighbourhood",
    "allergy": "allergy",
    "dog": "dog",
    "cat": "cat",
    "pet": "pet",
    "locker code": "locker code",
}
_ATTRIBUTE_NAMES = "|".join(sorted((re.escape(a) for a in _ATTRIBUTES), key=len, reverse=True))
# "my dog's name", "my son's school": an attribute of someone or something of the user's.
_OWNED = r"(?:[\w-]+\s+){0,2}?[\w-]+'s\s+(?:name|birthday|school|age|breed|doctor|vet)"

_FLAGS = re.IGNORECASE


def _p(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, _FLAGS)


@dataclass
class ValueStatement:
    """``attribute`` takes ``value`` ("none": stated; "start": newly; "stop": no longer)."""

    attribute: str
    value: str | None
    change: str  # "none" | "start" | "stop"
    old_value: str | None
    reason: str | None
    start: int  # where in the sentence it was found (statements keep the sentence's order)
    end: int


# (pattern, attribute, change). An attribute of None means the pattern names it (group "a").
_PATTERNS: list[tuple[re.Pattern[str], str | None, str]] = [
    # ----- name
    (
        _p(
            r"\b(?:you can |please |just |everyone |people |my friends |friends |they )?call me\s+(?P<v>" + _NAME + r")"
        ),
        "name",
        "none",
    ),
    (_p(r"\bmy name(?:'s| is)\s+" + _ADV + r"(?P<v>" + _NAME + r")"), "name", "none"),
    (_p(_I + r"\s+" + _ADV + r"go by\s+(?P<v>" + _NAME + r")"), "name", "none"),
    (_p(_I + r"(?:'ve| have)?\s+" + _ADV + r"changed my name to\s+(?P<v>" + _NAME + r")"), "name", "start"),
    # ----- where the user lives
    (
        _p(
            _I
            + r"\s+"
            + _ADV
            + r"(?:moved|relocated)\s+(?:back\s+)?from\s+"
            + _PLACE.replace("?P<v>", "?P<old>")
            + r"\s+to\s+"
            + _PLACE
        ),
        "lives in",
        "start",
    ),
    (
        _p(r"\b(?:I|we)(?:'ve| have)?\s+" + _ADV + r"(?:moved|relocated)\s+(?:back\s+|over\s+|out\s+)?to\s+" + _PLACE),
        "lives in",
        "start",
    ),
    (_p(_IM + r"\s+" + _ADV + r"(?:now\s+)?(?:living|based|settled)\s+in\s+" + _PLACE), "lives in", "none"),
    (_p(_I + r"\s+" + _ADV + r"(?:live|reside)\s+in\s+" + _PLACE), "lives in", "none"),
    (_p(_I + r"\s+" + _ADV + r"(?:don't|do not|no longer)\s+live\s+in\s+" + _PLACE), "lives in", "stop"),
    (
        _p(r"\b(?:I|we)(?:'ve| have)?\s+" + _ADV + r"moved (?:away\s+)?(?:out of|away from)\s+" + _PLACE),
        "lives in",
        "stop",
    ),
    # ----- job and employer ("I left my job at X" is about the employer: before the job patterns)
    (_p(_I + r"(?:'ve| have)?\s+" + _ADV + r"(?:quit|left)\s+my\s+job\s+(?:at|with)\s+" + _PLACE), "works at", "stop"),
    (
        _p(
            _I
            + r"(?:'ve| have)?\s+"
            + _ADV
            + r"(?:quit|left|gave up|given up|lost|resigned from)\s+my\s+(?:job|position|post)\s+as\s+(?:an?\s+)?"
            + _JOB
        ),
        "job",
        "stop",
    ),
    (
        _p(
            _I
            + r"(?:'ve| have)?\s+"
            + _ADV
            + r"(?:quit|left|gave up|given up|lost|resigned from)\s+my\s+(?P<v>(?:[\w'-]+\s+){1,3}?)(?:job|position|career|gig)\b"
        ),
        "job",
        "stop",
    ),
    (
        _p(_I + r"(?:'ve| have)?\s+" + _ADV + r"(?:quit|left|gave up|given up|lost)\s+my\s+(?:[\w'-]+\s+){0,3}?job\b"),
        "job",
        "stop",
    ),
    (_p(_I + r"(?:'ve| have)?\s+" + _ADV + r"(?:quit|stopped)\s+being\s+(?:an?\s+)?" + _JOB), "job", "stop"),
    (_p(_I + r"(?:'ve| have)?\s+" + _ADV + r"retired\s+from\s+(?:being\s+)?(?:an?\s+)?" + _JOB), "job", "stop"),
    (
        _p(_IM + r"\s+(?:no longer|not)\s+(?:an?\s+)?" + _JOB + r"(?=.*\b(?:anymore|any more|any longer)\b)?"),
        "job",
        "stop",
    ),
    (
        _p(
            _I
            + r"(?:'ve| have)?\s+"
            + _ADV
            + r"(?:started|begun|began)\s+(?:working|a new job|a job)\s+as\s+(?:an?\s+)?"
            + _JOB
        ),
        "job",
        "start",
    ),
    (
        _p(
            _I
            + r"(?:'ve| have)?\s+"
            + _ADV
            + r"(?:got|landed|found|accepted|taken|took)\s+(?:a\s+)?(?:new\s+)?(?:job|position|role)\s+as\s+(?:an?\s+)?"
            + _JOB
        ),
        "job",
        "start",
    ),
    (
        _p(_I + r"(?:'ve| have)?\s+" + _ADV + r"(?:been\s+)?(?:hired|promoted)\s+(?:to\s+)?as\s+(?:an?\s+)?" + _JOB),
        "job",
        "start",
    ),
    (_p(_I + r"(?:'ve| have)?\s+" + _ADV + r"(?:been\s+)?promoted\s+to\s+(?:an?\s+)?" + _JOB), "job", "start"),
    (_p(_I + r"(?:'ve| have)?\s+" + _ADV + r"(?:became|become)\s+(?:an?\s+)?" + _JOB), "job", "start"),
    (_p(r"\b(?:I|we)(?:'m| am)?\s+" + _ADV + r"(?:work|working)\s+as\s+(?:an?\s+)?" + _JOB), "job", "none"),
    (_p(_IM + r"\s+" + _ADV + r"(?:an?\s+)" + _JOB), "job", "none"),
    (
        _p(
            r"\bmy\s+(?:new\s+|current\s+)?(?:job|occupation|profession|job title)\s+(?:is|is now)\s+(?:an?\s+)?(?:being\s+(?:an?\s+)?)?"
            + _JOB
        ),
        "job",
        "none",
    ),
    (
        _p(
            _I
            + r"(?:'ve| have)?\s+"
            + _ADV
            + r"(?:started|begun|began)\s+(?:working|a new job|a job)\s+(?:at|for|with)\s+"
            + _PLACE
        ),
        "works at",
        "start",
    ),
    (
        _p(
            _I
            + r"(?:'ve| have)?\s+"
            + _ADV
            + r"(?:got|landed|found|accepted)\s+(?:a\s+)?(?:new\s+)?job\s+(?:at|with)\s+"
            + _PLACE
        ),
        "works at",
        "start",
    ),
    (_p(r"\b(?:I|we)(?:'m| am)?\s+" + _ADV + r"(?:work|working)\s+(?:at|for)\s+" + _PLACE), "works at", "none"),
    # ----- age
    (
        _p(
            _IM
            + r"\s+"
            + _ADV
            + r"(?P<v>\d{1,3})(?:\s+years?\s+old|\s+years of age)?(?=\s+now\b|\s+(?:and|but|so)\b|[,.!;]|$)"
        ),
        "age",
        "none",
    ),
    (_p(_I + r"(?:'ve| have)?\s+" + _ADV + r"turned\s+(?P<v>\d{1,3})\b"), "age", "start"),
    # ----- favourites
    (
        _p(
            r"\bmy\s+(?:new\s+|current\s+|all-time\s+|absolute\s+)*"
            + _FAV
            + r"\s+(?P<a>[\w'-]+(?:\s+[\w'-]+){0,2}?)\s+used to be\s+(?P<old>[^,;.!?]+?)(?:,|;|\.)?\s+(?:but\s+)?(?:now\s+)?(?:it's|it is|now it's|now it is|these days it's)\s+(?P<v>.+)"
        ),
        None,
        "start",
    ),
    (
        _p(
            r"\bmy\s+(?P<new>(?:new\s+|current\s+|all-time\s+|absolute\s+)*)"
            + _FAV
            + r"\s+(?P<a>[\w'-]+(?:\s+[\w'-]+){0,2}?)\s+(?:is|are|has become|have become|changed to|became|'s)\s+(?P<v>.+)"
        ),
        None,
        "none",
    ),
    (
        _p(
            r"(?:^|,\s*|\band\s+|\bbut\s+)(?P<v>(?:[\w'-]+\s+){0,3}?[\w'-]+)\s+(?:is|are|has become|became)\s+(?:now\s+)?my\s+(?P<new>(?:new\s+|all-time\s+|absolute\s+)*)"
            + _FAV
            + r"\s+(?P<a>[\w'-]+(?:\s+(?!(?:now|nowadays|these|too|again|though|anyway)\b)[\w'-]+)?)"
        ),
        None,
        "none",
    ),
    # ----- "I changed my X to Y", "my X is Y" for personal attributes
    (
        _p(
            _I + r"(?:'ve| have)?\s+" + _ADV + r"(?:changed|switched|updated)\s+my\s+(?P<a>" + _ATTRIBUTE_NAMES + r")"
            r"(?:\s+from\s+(?P<old>.+?))?\s+to\s+(?P<v>.+)"
        ),
        None,
        "start",
    ),
    (
        _p(
            r"\bmy\s+(?P<new>(?:new\s+|current\s+)*)(?P<a>"
            + _OWNED
            + r")\s+(?:is|was changed to|is now|'s)\s+(?P<v>.+)"
        ),
        None,
        "none",
    ),
    (
        _p(
            r"\bmy\s+(?P<new>(?:new\s+|current\s+)*)(?P<a>"
            + _ATTRIBUTE_NAMES
            + r")\s+(?:is|changed to|is now|has changed to|'s)\s+(?P<v>.+)"
        ),
        None,
        "none",
    ),
]
# Words that make "I'm a pretty good cook" a self-description rather than a job.
_NOT_A_JOB = re.compile(
    r"^(?:pretty|really|very|good|bad|terrible|great|huge|big|decent|amateur|hobby|home|keen|avid|lousy|better|"
    r"worse|slow|fast|quick|early|late|total|complete|natural|born|self-taught|proud|happy|busy|light|heavy|"
    r"old|new|current|day|first|last|full-time|part-time|boring|stressful|dream|previous|corporate|office|"
    r"weekend|summer|side|second|little|bit)\b",
    re.IGNORECASE,
)
_REJECT_VALUE = re.compile(
    r"^(?:a|an|the|my|your|it|that|this|not|no|very|so|really|quite|pretty|too|kind|sort|going|gonna|getting|"
    r"being|like|such|one|also|still|just|actually|always|never|probably|definitely|in|on|at|to|of|something|"
    r"anything|nothing|hard|different|same|complicated|private|secret|important|unknown|changing|open|"
    r"going|getting|coming|leaving|moving|changed|finished|done|over|gone|lovely|only|likely|early)$",
    re.IGNORECASE,
)


def normalise(value: str) -> str:
    """How two values are compared: case, articles and punctuation do not count."""
    value = _LEADING_ARTICLE.sub("", value.strip().lower())
    return re.sub(r"[^\w\s'-]", "", value).strip()


def _clean_value(raw: str, *, name_like: bool = False) -> str | None:
    text = raw.strip()
    if not name_like:
        cut = _VALUE_END.search(text)
        if cut:
            text = text[: cut.start()]
    text = text.strip(" \"'“”‘’").rstrip(".")
    if text.lower().startswith(("a ", "an ")):
        text = text.split(" ", 1)[1]
    words = text.split()
    if not words or len(words) > 6 or (len(words) == 1 and _REJECT_VALUE.match(words[0])):
        return None
    return text


def _attribute_name(raw: str) -> str:
    raw = " ".join(raw.lower().replace("favorite", "favourite").split())
    return _ATTRIBUTES.get(raw, raw)


def value_statements(sentence: str) -> list[ValueStatement]:
    """Attribute-value statements of one sentence, in text order (questions and hedges give none)."""
    if sentence.rstrip().endswith("?"):
        return []
    found: list[ValueStatement] = []
    for pattern, attribute, change in _PATTERNS:
        for m in pattern.finditer(sentence):
            if any(m.start() < s.end and s.start < m.end() for s in found):
                continue  # an earlier (more specific) pattern already read this span
            if hedged(sentence, m.start()) or _negated_before(sentence, m.start()):
                continue
            statement = _statement(m, attribute, change)
            if statement is not None:
                found.append(statement)
    found.sort(key=lambda s: s.start)
    return _merge(found, sentence)


def _negated_before(sentence: str, start: int) -> bool:
    # "I don't think my favourite ... is", "not that I live in ...": not a statement of the value.
    return bool(re.search(r"\b(?:don't think|do not think|not that|never said|if)\s*$", sentence[:start], re.I))


def _statement(m: re.Match[str], attribute: str | None, change: str) -> ValueStatement | None:
    groups = m.groupdict()
    if attribute is not None:
        name = attribute
    elif _FAV in m.re.pattern:
        name = "favourite " + " ".join(groups["a"].lower().replace("color", "colour").split())
    else:
        name = _attribute_name(groups["a"])
    value: str | None = None
    if groups.get("v") is not None:
        value = _clean_value(groups["v"])
        if value is None or (name == "job" and _NOT_A_JOB.match(value)):
            return None
    old = _clean_value(groups["old"]) if groups.get("old") else None
    # A new value said as such ("my new ...", "is now", "has become", "... now") is a change.
    after = m.string[m.end() : m.end() + 40]
    if change == "none" and (
        (groups.get("new") or "").strip()
        or re.search(r"\b(?:now|has become|have become|changed to|became)\b", m.group(0), re.I)
        or re.match(r"[\s,]*(?:now|nowadays|these days)\b", after, re.I)
    ):
        change = "start"
    return ValueStatement(name, value, change, old, None, m.start(), m.end())


def _merge(found: list[ValueStatement], sentence: str) -> list[ValueStatement]:
    """A stop and a new value of the same attribute in one sentence are one replacement."""
    core, reason = split_reason(sentence)
    out: list[ValueStatement] = []
    for statement in found:
        statement.reason = reason
        previous = next((s for s in out if s.attribute == statement.attribute and s.change == "stop"), None)
        if previous is not None and statement.change != "stop":
            out.remove(previous)
            statement.start, statement.end = min(statement.start, previous.start), max(statement.end, previous.end)
            statement.change = "start"
            statement.old_value = statement.old_value or previous.value
            statement.reason = reason or sentence[previous.start : previous.end].strip()
        out.append(statement)
    return out

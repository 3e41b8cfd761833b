"""The LLM-free extractor: preference and fact statements from user turns, by cue phrases.

Designed on the synthetic generator and the PersonaMem dev history only. There, a user turn opens
with the statement ("I tried X, but I felt uncomfortable ...", "I made the tough decision to stop
X.", "I've also revisited X ...") and the following sentences elaborate or give the reason. So:

1. split a user turn into sentences (dropping speaker labels such as ``Patient:``) with ``pysbd``,
   which knows abbreviations ("My doctor is Dr. House." is one sentence);
1b. attribute-value statements ("I live in Berlin", "my favourite number is 4", "call me Dee") are
   read by ``extract_values`` first; they change by value, not by stance, and the resolver handles
   them by attribute name. The rest of the sentence goes on through the steps below;
2. a sentence is a *statement* when a first-person cue names an activity or thing (the aspect);
3. the stance comes from sentiment cues in the statement and the sentence after it; change cues
   ("stopped", "no longer", "gave up", "used to", "started", "revisited") mark a change, and the
   reason is the "because ..." clause or the next sentence;
4. ``resolve.Resolver`` matches the aspect against the profile by embedding similarity and picks
   ADD / UPDATE / DELETE / NOOP.

Explicit change statements ("no more X for me", "I switched from X to Y", "I've gone vegan", "I'm
into X now", reasons before or after the change) are found first, by the cue families of
``change_cues``; a sentence none of them matches goes through the generic cues below.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

import pysbd

from memlab.types import Message
from memlab_plugins.profile.change_cues import cue_statements, hedged, split_reason
from memlab_plugins.profile.extract_values import ValueStatement, value_statements
from memlab_plugins.profile.models import Stance

# stop: the user ceased X (DELETE); start: took X up or came to like it; away: turned against X,
# which stays in the profile as a dislike (UPDATE); none: a plain stance or fact.
Change = Literal["stop", "start", "away", "none"]

_LABEL = re.compile(r"^\s*(?:patient|user|client|me|human)\s*:\s*", re.IGNORECASE)

# Cues that the user stopped or turned away from something (closing an entry).
_STOP = re.compile(
    r"\b(?:stop(?:ped)?(?! bothering)|quit|quitting|gave up|give up|giving up|no longer(?! (?:enjoy|like|love))|not anymore|opt(?:ed)? out of|"
    r"step(?:ped)? (?:back|away) from|took a step back from|take a step back from|(?:take|took|taking) a break from|"
    r"withdr[ae]w from|abandon(?:ed)?|dropp?(?:ed)? out of|walked away from|moved away from|lost interest in|"
    r"used to|turned away from|decided against|swore off|cut back on)\b",
    re.IGNORECASE,
)
# Cues that the user (re)started or came to like something.
_START = re.compile(
    r"\b(?:start(?:ed)?|began|begun|revisit(?:ed)?|return(?:ed)? to|got back into|picked up|took up|taken up|"
    r"new passion for|(?:have|'ve) come to (?:love|enjoy|appreciate)|now (?:love|enjoy|prefer)|"
    r"shifted my focus to|redirected my focus to|discovered|embraced|fell in love with|changed my mind|"
    r"come around to)\b",
    re.IGNORECASE,
)
_POSITIVE = re.compile(
    r"\b(?:lov(?:e|ed|ing)|enjoy(?:ed|ing|able)?|like[ds]?|prefer(?:red)?|fan of|passion(?:ate)?|incredible|"
    r"fulfilling|rewarding|transformative|fascinat\w*|excit\w*|liberating|beneficial|joy\w*|inspir\w*|"
    r"enrich\w*|uplifting|delight\w*|thrill\w*|invigorat\w*|amazing|wonderful|great|fantastic|helpful|"
    r"helped|resonat(?:e|ed|es)|eye-opening|enlightening|meaningful|refreshing|impactful|valuable|fun|"
    r"go-tos?|favou?rite|nothing beats|come around|really into|proud|grateful|motivat\w*|calm\w*|peace\w*)\b",
    re.IGNORECASE,
)
_NEGATIVE = re.compile(
    r"\b(?:hate[ds]?|dislike[ds]?|can't stand|cannot stand|(?:just |really )?not into|can't get into|"
    r"never liked|given up|put me off|no longer (?:enjoy|like|love)|not (?:a fan|for me|my style|enjoyable|helpful|worth)|"
    r"(?:didn't|did not|doesn't|does not|don't|do not|wasn't|was not|couldn't|could not|never) "
    r"(?:\w+ ){0,2}(?:enjoy|like|resonate|align|fit|help|find|feel|work|engage|connect|sync|represent|foster)\w*|"
    r"frustrat\w*|uncomfortable|overwhelm\w*|stress(?:ful|ed)|disappoint\w*|struggl\w*|restrictive|"
    r"rigid|distract\w*|unproductive|out of place|disconnect\w*|reluctan\w*|tedious|boring|bored|"
    r"constrain\w*|stifl\w*|tiring|draining|not a good fit|lost (?:interest|motivation)|less comfortable|"
    r"unoriginal|underwhelm\w*|annoy\w*|anxi\w*|daunting|challenging|exhaust\w*|dry|disillusion\w*)\b",
    re.IGNORECASE,
)
_INSTEAD = re.compile(r"\b(?:prefer|rather|instead)\b", re.IGNORECASE)
_NEUTRAL = re.compile(
    r"\b(?:take (?:it )?or leave|neutral about|either way|lukewarm|cooled off|doesn't really matter|"
    r"don't feel much|indifferent)\b",
    re.IGNORECASE,
)
_CONTRAST = re.compile(r"\b(?:but|however|though|although|yet)\b", re.IGNORECASE)

# First-person statements about doing or liking something. The group captures the aspect phrase.
_ACT = (
    r"(?:adopted|adopt|have|own|owned|keep|kept|live|lived|moved to|work|worked|grew up|study|studied|"
    r"tried|try|attended|attend|joined|join|participated in|took part in|went to|went on|enrolled in|"
    r"volunteered (?:for|at|as|with)|visited|explored|read|listened to|played|created|developed|started|began|"
    r"organized|hosted|led|leading|collected|collect|wrote|published|built|made|launched|experimented with|"
    r"used|using|use|practiced|practice|learned|learning|took|watched|signed up for|picked up|completed|"
    r"followed|bought|purchased|cooked|planned|planning|designed|took up|got into|embarked on|discovered|"
    r"revisited|expanded|engaged in|engage in|opt(?:ed)? out of|withdrew from|abandoned|quit|stopped|"
    r"found joy in|focused on|focusing on|immersed myself in|fell in love with|"
    r"(?:love|like|enjoy|prefer|hate|dislike|adore|avoid)(?:d|s)?)"
)
_STATEMENT = re.compile(
    r"\b(?:I|I've|I have|I'm|I am|I'd|we)\s+(?:(?:also|recently|even|once|actually|just|finally|really|"
    r"lately|now|then|later|still|always|often|initially|even|honestly|really|truly|been|have|had|did|"
    r"decided to|made the (?:\w+ )?decision to|chose to|started|began|continue to|continued to|"
    r"used to|no longer|never|not|don't|do not|didn't)\s+)*" + _ACT + r"\s+(?:to\s+)?(.+)",
    re.IGNORECASE,
)
_CHANGE_OBJECT = re.compile(
    r"(?:stop(?:ped)?(?: bothering with)?|quit|gave up|give up|opt(?:ed)? out of|step(?:ped)? (?:back|away) from|"
    r"took a step back from|(?:take|took) a break from|withdr[ae]w from|abandon(?:ed)?|"
    r"no longer(?: (?:enjoy|like|love))?|used to|lost interest in|"
    r"revisit(?:ed)?|return(?:ed)? to|got back into|new passion for|shifted my focus to|redirected my focus to|"
    r"reluctance towards|developed a (?:\w+ ){0,3}(?:for|towards|toward))\s+(.+)",
    re.IGNORECASE,
)
_PREF_OBJECT = re.compile(
    r"\b(?:can't stand|cannot stand|nothing beats|I count|(?:really |just not |not )into|take or leave|"
    r"neutral about|either way about|come around to|cooled off on|lukewarm about|can't get into|bothering with|"
    r"given up|no longer enjoy|I (?:really )?(?:don't )?(?:enjoy|love|like|hate|dislike)|never liked)\s+(.+)",
    re.IGNORECASE,
)
_STOP_AT = re.compile(
    r"[,;:.!?—–(]|\s(?:but|which|that|where|when|while|because|since|as|and I|and it|and found|and have|"
    r"hoping|though|although|so|for my|to help|to improve|to enhance|recently|lately|last|this|these|"
    r"who|with the hope|in order|among|for me|these days|anymore|now|to be honest|all because|mainly|mostly|"
    r"in my spare time|at all)\b",
    re.IGNORECASE,
)
_LEADING = re.compile(
    r"^(?:(?:a|an|the|that|this|those|these|my|some|any|our|more|new|another|really|recently|joining|"
    r"taking part in|volunteering (?:for|at|with)|"
    r"also|participating in|attending|using|doing|going to|being part of|exploring|the use of|"
    r"engaging in|working on|writing|creating|trying)\s+)+",
    re.IGNORECASE,
)
# Facts about the user's people and things: "My aunt keeps bees ...", "My sister is a nurse".
_POSSESSIVE = re.compile(
    r"^(?:and |also )?my ((?:[\w'-]+ ){0,2}?[\w'-]+) (?:is|are|was|were|has|have|had|[a-z]+s|[a-z]+ed)\b", re.I
)
# Statements whose subject is the activity: "Attending that workshop was truly incredible for me."
_GERUND = re.compile(
    r"^(?:\w+ly,? |also,? |but |however,? )?((?:attending|participating in|joining|volunteering (?:for|at|with)|"
    r"taking part in|working on|exploring|engaging in|creating|writing|reading|playing|learning|leading|hosting|"
    r"organizing|visiting|trying|using|collecting|cooking|practicing|going to|being part of) .+?) "
    r"(?:was|were|has|have|had|is|are|not only|turned out|became|felt|proved|gave|opened|helped|made|\w+ed)\b",
    re.IGNORECASE,
)
_QUESTION_START = re.compile(r"^(?:what|how|why|when|where|which|who|can|could|would|should|is|are|do|does)\b", re.I)


@dataclass
class Statement:
    """One preference or fact found in a user turn."""

    turn_index: int
    aspect: str
    stance: Stance
    change: Change
    quote: str
    reason: str | None
    # Index of the sentence in its turn: statements of one sentence ("I switched from X to Y") are
    # about different things, so the resolver never maps two of them onto one entry.
    sentence: int = 0
    # Attribute statements ("lives in" = "Berlin"): the value, and the old value when the sentence
    # names it ("I moved from Paris to Berlin"). None for stance statements.
    value: str | None = None
    old_value: str | None = None
    attribute: bool = False


def strip_label(text: str) -> str:
    # Curly apostrophes would hide "didn’t" from the negation cues.
    return _LABEL.sub("", text.replace("’", "'").replace("‘", "'"), count=1).strip()


@lru_cache(maxsize=1)
def _segmenter() -> pysbd.Segmenter:
    return pysbd.Segmenter(language="en", clean=False)


def sentences(text: str) -> list[str]:
    """The sentences of a turn; abbreviations ("Dr.", "U.S.", "e.g.") do not end one."""
    text = strip_label(text)
    if not text:
        return []
    return [s.strip() for s in _segmenter().segment(text) if s.strip()]


def _clean_aspect(phrase: str, max_words: int) -> str:
    cut = _STOP_AT.search(" " + phrase + " ")
    if cut:
        phrase = (" " + phrase + " ")[: cut.start()].strip()
    phrase = _LEADING.sub("", phrase.strip()).strip(" \"'“”’")
    words = phrase.split()
    return " ".join(words[:max_words])


_PRONOUNS = {"it", "it's", "its", "them", "themselves", "myself", "itself", "him", "her", "you"}


def _usable(aspect: str) -> bool:
    # A pronoun names nothing without coreference ("I stopped it"); "Italian food" is fine.
    return len(aspect) >= 3 and aspect.split()[0].lower() not in _PRONOUNS


def aspect_of(sentence: str, max_words: int = 8) -> str | None:
    """The thing a first-person sentence is about, or None when it is not such a statement."""
    for pattern in (_CHANGE_OBJECT, _PREF_OBJECT, _STATEMENT):
        match = pattern.search(sentence)
        if match:
            aspect = _clean_aspect(match.group(match.lastindex or 1), max_words)
            if _usable(aspect):
                return aspect
    match = _GERUND.match(sentence)
    if match:
        aspect = _clean_aspect(_LEADING.sub("", match.group(1)), max_words)
        if len(aspect) >= 3:
            return aspect
    match = _POSSESSIVE.match(sentence)
    if match:
        return match.group(1)
    return None


def stance_of(text: str) -> Stance | None:
    """Sentiment of a statement: negative cues after a contrast ("I tried X, but ...") win."""
    text = text.replace("’", "'")
    if _NEUTRAL.search(text):
        return Stance.NEUTRAL
    negative = len(_NEGATIVE.findall(text))
    # "didn't enjoy" is one negative cue, not also a positive one.
    positive = len(_POSITIVE.findall(_NEGATIVE.sub(" ", text)))
    contrast = _CONTRAST.search(text)
    if contrast and (_NEGATIVE.search(text[contrast.start() :]) or _INSTEAD.search(text[contrast.start() :])):
        return Stance.DISLIKES
    if negative > positive:
        return Stance.DISLIKES
    if positive > negative:
        return Stance.LIKES
    return None


def change_of(sentence: str) -> Change:
    head = sentence[:160]
    stop = _STOP.search(head)
    # "I'm thinking about quitting X" is not a change yet.
    if stop and not hedged(head, stop.start()):
        return "stop"
    if _START.search(head):
        return "start"
    return "none"


def explicit_reason(statement: str, aspect: str = "") -> str | None:
    """The reason clause of a statement, before or after it ("because/since/as/after/due to ...",
    "Since R, S", "R, so S" when S names the aspect), if it has one."""
    _, reason = split_reason(statement, has_statement=lambda clause: bool(aspect) and aspect.lower() in clause.lower())
    return reason


def reason_of(statement: str, following: str | None, aspect: str = "") -> str | None:
    """Why a change happened: an explicit clause, the part after a contrast or a colon, else the next sentence."""
    explicit = explicit_reason(statement, aspect)
    if explicit:
        return explicit
    contrast = _CONTRAST.search(statement)
    if contrast and len(statement[contrast.end() :].split()) >= 3:
        return statement[contrast.end() :].strip(" ,").rstrip(".")
    head, sep, tail = statement.partition(";") if ";" in statement else statement.partition(": ")
    if sep and aspect.lower() in head.lower() and len(tail.split()) >= 3:
        return tail.strip().rstrip(".")
    return following


class RuleExtractor:
    """Finds statements in the user turns of a session (``max_per_turn`` per turn, in order)."""

    def __init__(self, *, max_per_turn: int = 2, max_aspect_words: int = 8, quote_chars: int = 300) -> None:
        self.max_per_turn = max_per_turn
        self.max_aspect_words = max_aspect_words
        self.quote_chars = quote_chars

    def statements(self, messages: list[Message], first_turn: int) -> list[Statement]:
        found: list[Statement] = []
        for offset, message in enumerate(messages):
            if message.role != "user":
                continue
            found.extend(self.turn_statements(message.content, first_turn + offset))
        return found

    def turn_statements(self, text: str, turn_index: int) -> list[Statement]:
        """Attribute statements (all of them) and stance statements (``max_per_turn``), in text order."""
        parts = sentences(text)
        out: list[Statement] = []
        values: list[Statement] = []
        for i, whole in enumerate(parts):
            if whole.endswith("?") or _QUESTION_START.match(whole):
                continue
            sentence = whole
            found = value_statements(whole)
            if found:
                values += [self._value_statement(v, whole, turn_index, i, parts) for v in found]
                # The words outside the attribute statements may still say something else.
                for v in sorted(found, key=lambda v: -v.start):
                    sentence = sentence[: v.start] + sentence[v.end :]
                sentence = re.sub(r"^(?:and|but|so|also)\b\s*", "", sentence.strip(" ,;."), flags=re.I)
                if len(sentence.split()) < 3:
                    continue
            if len(out) >= self.max_per_turn:
                continue
            following = parts[i + 1] if i + 1 < len(parts) else None
            cued = self.cue_statements(sentence, turn_index, sentence_index=i, following=following)
            if cued:
                out.extend(cued[: self.max_per_turn - len(out)])
                continue
            aspect = aspect_of(sentence, self.max_aspect_words)
            if aspect is None:
                continue
            following = parts[i + 1] if i + 1 < len(parts) else None
            change = change_of(sentence)
            # The stance of a statement is usually settled by the statement and the sentence after it.
            stance = (
                stance_of(sentence)
                or (stance_of(following) if following else None)
                or stance_of(" ".join(parts[i + 2 : i + 5]))
            )
            if change == "stop":
                stance = Stance.DISLIKES
            elif change == "start" and stance is None:
                stance = Stance.LIKES
            if stance is None:
                # No sentiment and no change: a plain fact ("I adopted a cat named Pixel").
                stance = Stance.FACT
            if change != "none" or stance in (Stance.DISLIKES, Stance.NEUTRAL):
                reason = reason_of(sentence, following, aspect)
            else:
                reason = explicit_reason(sentence, aspect)
            out.append(
                Statement(
                    turn_index=turn_index,
                    aspect=aspect,
                    stance=stance,
                    change=change,
                    quote=sentence[: self.quote_chars],
                    reason=reason[: self.quote_chars] if reason else None,
                    sentence=i,
                )
            )
        ordered = sorted(values + out, key=lambda s: (s.sentence, s.value is None))
        return ordered

    def _value_statement(
        self, v: ValueStatement, sentence: str, turn_index: int, index: int, parts: list[str]
    ) -> Statement:
        reason = v.reason
        following = parts[index + 1] if index + 1 < len(parts) else None
        if (
            reason is None
            and v.change != "none"
            and following
            and not following.endswith("?")
            and not value_statements(following)
        ):
            reason = following  # "I moved to Berlin. The rent in Paris was too high."
        return Statement(
            turn_index=turn_index,
            aspect=v.attribute,
            stance=Stance.FACT,
            change="stop" if v.change == "stop" else "start" if v.change == "start" else "none",
            quote=sentence[: self.quote_chars],
            reason=reason[: self.quote_chars] if reason else None,
            sentence=index,
            value=v.value,
            old_value=v.old_value,
            attribute=True,
        )

    def cue_statements(
        self, sentence: str, turn_index: int, *, sentence_index: int = 0, following: str | None = None
    ) -> list[Statement]:
        """Statements of the explicit change cues (``change_cues``) in one sentence, in text order.

        The statement clause and the reason clause are matched separately: in "I've gone
        gluten-free, so no more pizza for me" the change is "no more pizza" with the reason "I've
        gone gluten-free", which is itself a statement (a diet label). A change with no reason in
        its sentence takes the next sentence, as the generic path does ("No more pizza for me. It
        gives me heartburn.").
        """
        core, reason = split_reason(sentence, has_statement=lambda clause: bool(cue_statements(clause, None)))
        found = cue_statements(core, reason)
        if not found:
            return []
        if reason:
            found += cue_statements(reason, None)
        out: list[Statement] = []
        for cue in found:
            aspect = _clean_aspect(cue.phrase, self.max_aspect_words)
            if not _usable(aspect) or any(s.aspect.lower() == aspect.lower() for s in out):
                continue
            why = cue.reason
            if why is None and cue.change != "none" and cue.stance is not Stance.FACT:
                why = following
            out.append(
                Statement(
                    turn_index=turn_index,
                    aspect=aspect,
                    stance=cue.stance,
                    change=cue.change,  # type: ignore[arg-type]
                    quote=sentence[: self.quote_chars],
                    reason=why[: self.quote_chars] if why else None,
                    sentence=sentence_index,
                )
            )
        lower = sentence.lower()
        out.sort(key=lambda s: lower.find(s.aspect.lower()) % (len(lower) + 1))
        return out

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

- a topic named by a thing-word: "scratch the salary thing", "don't keep the Marcus stuff", "wipe
  the dating app bit";
- unwanted storage: "I don't want my address stored", "I'd prefer my stammer wasn't kept on file";
- a retraction: "... I cried at work today. Forget I said that" (the turn's own earlier statement).

When none of these shapes fits, a looser reading (:func:`_loose_request`) takes each sentence apart:
an act on memory (forget, delete, erase, wipe, scratch, "take X out", "don't keep", "not in your
memory") asked of the assistant ("please ...", "you ...", "I must request that you ...", "I would
appreciate it if you erased that"), not wondered about ("if I asked you to ...", "how do I ...") and
not done by someone ("he forgot", "Losing my job"), about something the user said ("what I told you
about Harold", "my PIN", "the part about us trying for a baby", "it" after "I regret telling you about
Elena").

Never a request: "forget it", "forget about it, let's ...", "never forget", "don't forget to",
"I forgot my ...", "I wish I could forget ...", others forgetting, questions about forgetting,
titles ("Forget You"), deleting or erasing things that are not what the assistant keeps ("how do
I delete a file", "remove a coffee stain", "delete the meeting from my calendar"), edits of the
user's own document ("In my CV, remove the line about my last job"), reports of an earlier
request ("Last week I asked you to forget my old address. Did that go through?") and requests not
made ("I was going to ask you to forget ..., leave it").

A turn none of these reads may still have a request's shape (:mod:`memlab.forget_shape`: "delete
karen") or be spotted by the learned spotter (:mod:`memlab.forget_spotter`: "Two things to forget:
Tobi's JAMB score and Kemi's maths wahala"); both give a request whose subject the rules cannot read,
left to the learned reader.

A request also says what to keep ("... but you can keep that I get migraines", "Only keep that I'm a
student": ``ForgetRequest.keep``), and "his job" / "her salary" name the person the turn named
before ("my husband would be mortified ... forget his job": my husband's job).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from memlab.forget_shape import A_STRETCH_OF_TIME, NOT_ASKED, has_request_shape
from memlab.forget_spotter import spots_request
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
            short_plural = suffix == "s" and len(word) == 4 and word[-2] not in "su"  # dogs, kids, dads
            if (len(word) > len(suffix) + 3 or short_plural) and word.endswith(suffix) and not word.endswith("ss"):
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
    # A bare act on a named thing ("forget the split", "Wipe Marco"): honoured only when one stored
    # fact matches it closely (``memlab.forget``), as often talk ("forget the bread").
    bare: bool = False
    # What the turn asks to keep ("... but you can keep that I get migraines"): never taken for the subject.
    keep: str | None = None
    # How many of the user's last turns "that" points back to ("forget the last two things I told you").
    last: int = 1
    # "Forget everything you know about me (except my name)": every stored fact, what ``keep`` names spared.
    everything: bool = False
    # A request's shape the rules cannot read a subject in ("delete karen", "I'd rather that wasn't
    # stored"; ``memlab.forget_shape``): only the learned reader (or the backend's LLM) says what it names.
    shape_only: bool = False

    def parts(self) -> list[str]:
        """The things named ("my height and my weight" -> two), each resolved on its own."""
        if not self.subject:
            return []
        pieces = re.split(
            r"\s*;\s*|(?<!,)\s+(?:including|incl\.?|as\s+well\s+as|along\s+with|n\s+also)\s+|\s+(?:and|&|or)\s+(?:also\s+)?(?:about\s+|to\s+|(?:anything|everything)\s+(?:to\s+do\s+with|about|related\s+to)\s+)?(?=(?:my|our|the|where|what|how|which|when|that|me|selling|being|having|his|her|their)\b)",
            self.subject,
        )
        pieces = [part for piece in pieces for part in _two_of_mine(piece.strip())]
        for index in range(1, len(pieces)):  # "my daughter's name and her school": my daughter's school
            owner = re.match(r"(?:my|our)\s+[\w-]+'s\s", pieces[index - 1])
            if owner is not None:
                pieces[index] = re.sub(r"^(?:his|her|their)\s", owner.group(0), pieces[index])
        pieces = [
            _TOPIC_WORD.sub("", _PIECE_LEAD.sub("", re.sub(r"^that\s+(?=i\b)|\s+ones?$", "", piece.strip())))
            for piece in pieces
        ]  # "the getting fired thing", "that I'm in therapy"
        return [p for p in pieces if content_words(p)]


def _two_of_mine(piece: str) -> list[str]:
    """ "my weight and height": my weight, my height; "my phone number and email": my phone number, my email."""
    pair = re.fullmatch(r"(my|our|the)\s+([\w'-]+(?:\s+[\w'-]+)?)\s+and\s+([\w'-]+(?:\s+[\w'-]+){0,2})", piece)
    return [f"{pair.group(1)} {pair.group(2)}", f"{pair.group(1)} {pair.group(3)}"] if pair else [piece]


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
    "fogret": "forget",
    "cud": "could",
    "cn": "can",
    "wud": "would",
    "rememberin": "remembering",
    "keepin": "keeping",
    "storin": "storing",
    "wasnt": "wasn't",
    "didnt": "didn't",
    "isnt": "isn't",
    "shouldnt": "shouldn't",
    "wouldnt": "wouldn't",
    "info's": "info",
    "exs": "ex's",
    "rember": "remember",
    "memry": "memory",
    "memmory": "memory",
    "memroy": "memory",
    "wieght": "weight",
    "erace": "erase",
    "remov": "remove",
    "rm": "remove",
    "mil": "mother-in-law",
    "fil": "father-in-law",
    "hubby": "husband",
    "bf": "boyfriend",
    "gf": "girlfriend",
    "yuo": "you",
    "thign": "thing",
    "shes": "she's",
    "hes": "he's",
    "theyre": "they're",
    "delte": "delete",
    "remvoe": "remove",
    "froget": "forget",
    "adress": "address",
    "comfy": "comfortable",
    "weigth": "weight",
    "w": "with",
    "4get": "forget",
    "4got": "forgot",
    "plase": "please",
    "cna": "can",
    "stuf": "stuff",
    "medicaton": "medication",
    "prescrption": "prescription",
    "wrok": "work",
    "pleasee": "please",
    "forgte": "forget",
    "wnat": "want",
    "perscription": "prescription",
    "medicaiton": "medication",
    "pleaes": "please",
    "remeber": "remember",
    "pleas": "please",
    "abot": "about",
    "rn": "right now",
}

_OPENER = (
    r"(?:(?:oh|ok|okay|actually|also|and|so|hey|hi|hiya|yo|but|just|well|um|uh|hmm|now|then|yeah|yes|no|nope|sorry|wait|look|like|"
    r"lol|lmao|omg|ugh|tbh|ngl|ah|ahh|god|oh\s+god|right\s+so|nah|naw|bro|fam|hey\s+so|okay\s+so|ok\s+so|"
    r"listen|honestly|right|alright|anyway|mate|bud|buddy|dude|pal|on\s+second\s+thought|one\s+more\s+thing|thinking\s+about\s+it|"
    r"come\s+to\s+think\s+of\s+it|before\s+i\s+go|by\s+the\s+way|btw)\b[\s,:-]*)*"
)
_PLEASE = r"(?:please|kindly)"
_POLITE = (
    r"(?:(?:can|could|would|will)\s+you(?:\s+please)?(?:\s+(?:just|also|now|maybe|kindly|possibly|perhaps))?|"
    r"(?:would|do)\s+you\s+mind|mind|(?:can|could)\s+we|do\s+you\s+think\s+you\s+(?:could|can|would)|"
    r"(?:is|would)\s+(?:it\s+)?(?:be\s+)?(?:possible|ok|okay)\s+(?:for\s+you\s+)?to|(?:be\s+)?so\s+kind\s+as\s+to|"
    r"(?:i'?d|i\s+would)\s+(?:really\s+)?appreciate\s+you|you\s+were\s+supposed\s+to|you\s+(?:said|promised)\s+you(?:'d|\s+would)|"
    r"(?:i'?d|i\s+(?:would|should))\s+(?:really\s+)?(?:like|love|prefer|appreciate\s+it\s+if)\s+(?:it\s+if\s+)?you(?:\s+(?:to|would|could|can))?|"
    r"i\s+(?:want|need|ask)\s+you\s+to|i\s+want\s+that\s+you|(?:i'?d|i\s+would)\s+ask\s+(?:that\s+)?you(?:\s+to)?|(?:have|get|make)\s+you(?:\s+to)?|(?:i|i'?d\s+like\s+to|i\s+would\s+like\s+to|i\s+must|i\s+have\s+to)\s+(?:demand|insist|request|require|ask)\s+(?:that\s+)?you(?:\s+to)?|do\s+the\s+needful\s+and|help\s+me(?:\s+to)?|"
    r"(?:i'?d|i\s+would)\s+be\s+(?:very\s+|really\s+|so\s+|most\s+)?(?:grateful|thankful)\s+if\s+you\s+(?:could|would|can)|"
    r"(?:you\s+(?:really\s+)?(?:can|may|should|could|must)|feel\s+free\s+to|go\s+ahead\s+and|make\s+sure\s+(?:to|you))(?:\s+(?:now|just|also|go\s+ahead\s+and))?|"
    r"(?:i'?m|i\s+am)\s+asking\s+you\s+to|(?:can|could|may)\s+i\s+(?:ask|get)\s+you\s+to|"
    r"(?:would|will)\s+you\s+be\s+(?:able|willing)\s+to|are\s+you\s+able\s+to|do\s+me\s+a\s+favou?r\s+and|"
    r"i'?(?:m|ll)\s+(?:going\s+to\s+)?need\s+you\s+to|(?:let'?s|let\s+us)\s+have\s+you|"
    r"is\s+there\s+(?:any\s+|a\s+)?way\s+(?:you\s+(?:could|can)|(?:for\s+you\s+)?to)|"
    r"it'?s\s+(?:time|okay|ok|fine)\s+(?:for\s+you\s+)?to|(?:i\s+)?reckon\s+(?:you|u)\s+(?:could|can))"
)
_LEAD = rf"^{_OPENER}(?:{_PLEASE}[\s,]+)?(?:{_POLITE}\s+){{0,2}}(?:{_PLEASE}[\s,]+)?(?:(?:just|also|permanently|completely|simply|fully|quietly)\s+)?"
_MEMORY_WORD = (
    r"(?:memory|memories|mind|notes?|records?|files?|profile|database|system|data|brain|head|info|information)"
)
_MEMORY = rf"(?:(?:your|the|my)\s+)?{_MEMORY_WORD}"
# Where the assistant keeps things, said without a memory word: "from what you remember", "off whatever list you keep".
_HELD_PLACE = (
    r"(?:what(?:ever)?\s+(?:you|u)(?:'ve|\s+have)?\s+(?:\w+\s+){0,2}?(?:remember|know|have|keep|kept|store|stored|save|saved|hold|got)"
    r"(?:\s+(?:about|on)\s+me)?|(?:(?:whatever|your|any)\s+(?:list|profile|file|records?)(?:\s+(?:you|u)\s+(?:keep|have))?|(?:the|that)\s+(?:list|profile|file)\s+(?:you|u)\s+(?:keep|have))(?:\s+(?:about|on)\s+me)?)"
)
_SAID = (
    r"(?:said|say|told\s+you|tell\s+you|mentioned|mention|shared|wrote|typed|brought\s+up|let\s+slip|"
    r"talked\s+about|revealed|admitted|confided|opened\s+up)"
)
_HELD = r"(?:(?:'ve|\s+have)\s+)?(?:know|have|heard|learned|remember|stored|saved|kept|noted|recorded|hold|held|got(?:\s+on\s+file)?|written\s+down)"
_PIECE = (
    r"(?:bit|part|piece|note|notes|entry|entries|record|records|memory|memories|mention|mentions|info|information|"
    r"detail|details|fact|facts|line|reference|references|data|stuff|thing|things|story|comment|remark|point|stuff)"
)
_REFERENCE = (
    rf"(?:(?:the|that|this|those|these|any|all|every|your|both|the\s+two)\s+(?:\w+\s+)?{_PIECE}\s+"
    rf"(?:about|of|on|regarding|concerning|related\s+to|relating\s+to|pertaining\s+to|re|with|containing|mentioning|where\s+i\s+{_SAID}(?:\s+(?:you\s+)?about)?|"
    rf"(?:that\s+)?(?:i|you)\s+(?:{_SAID}|{_HELD})(?:\s+(?:you\s+)?(?:about|on|regarding|concerning))?)|"
    rf"{_PIECE}\s+(?:about|on|regarding|concerning)|"
    rf"what(?:ever)?\s+(?:i|you)(?:'ve|\s+have)?(?:\s+(?:just|earlier|once|ever))?\s*(?:{_SAID}|{_HELD})(?:\s+(?:you|me))?(?:\s+(?:earlier|before))?\s+(?:about|regarding|concerning|on)|"
    rf"(?:everything|anything|all)\s+(?:(?:that\s+)?(?:i|you)(?:'ve|\s+have)?\s*(?:{_SAID}|{_HELD})(?:\s+(?:you|me))?(?:\s+(?:earlier|before))?\s+)?(?:about|regarding|concerning|on|related\s+to|to\s+do\s+with|involving)|"
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
        if first == "forget":
            base += "t"
        forms.append(" ".join(filter(None, (base + "ing", rest))))
    return "(?:" + "|".join(sorted(set(forms), key=len, reverse=True)) + ")"


_FORGET = _VERB_FORGET = _verb("forget")
_KEEP = _verb(
    "keep",
    "keep track of",
    "keep a record of",
    "keep records of",
    "keep a note of",
    "keep notes on",
    "keep a log of",
    "keep a copy of",
    "make a note of",
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
    "keep hold of",
    "know",
    "conserve",
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
    "unsave",
    "unsee",
    "unknow",
    "untrack",
    "cross off",
    "scrap",
)
_NEGATION = (
    r"(?:don'?t|do\s+not|never|not|no\s+more|no\s+longer|cease\s+to|cease|stop|quit|(?:there'?s\s+|there\s+is\s+)?no\s+need(?:\s+for\s+you)?\s+to|"
    r"you\s+(?:don'?t|do\s+not)\s+(?:need|have)\s+to|(?:can|could|would)\s+you\s+(?:just\s+)?not|you\s+(?:can|could)\s+not|(?:i\s+)?withdraw\s+(?:my\s+)?consent\s+for\s+you\s+to|i\s+want\s+you\s+not\s+to|you\s+(?:can|could)\s+stop)"
)
# Subjects that name nothing: "forget it", "forget about that", "forget everything".
_EMPTY_SUBJECT = re.compile(
    r"^(?:it|that|this|them|those|these|him|her|all|either|neither|both|saved|stored|kept|(?:this|that)\s+(?:information|info|data|memory|entry|note|detail|details)|both\s+of\s+(?:them|those|these)|one|that\s+one|this\s+one|everything|anything|all\s+that|all\s+of\s+it|all\s+of\s+that|"
    r"the\s+whole\s+thing|the\s+rest|me|us|about\s+it|about\s+that|it\s+all|that\s+stuff|this\s+stuff|whatever|"
    r"something|someone|somebody|anyone|nothing|myself|yourself|about\s+me|me(?:\s+(?!(?:(?:not|never|maybe|possibly|probably|once)\s+)?\w+in[g']?\b|and\s+(?:my|our|\w+\s+\w+ing)\b)\S+.*)?|you|it\s+\w+|"
    r"(?:everything|anything|all|whatever)\s+(?:that\s+)?(?:i|you)\s+(?:say|said|tell|told|do|did|mention)(?:\s+(?:you|me))?(?:\s+\w+)?)$"
)
# Things deleted or erased that are not what the assistant keeps (files, stains, apps ...).
_NOT_MEMORY = re.compile(
    r"^(?:(?:a|an|the|this|that|these|those|some|all|my|our|his|her|their|any|your)\s+)?(?:old\s+|new\s+|extra\s+|last\s+|whole\s+)?"
    r"(?:(?:browser|search|phone|work|email|google|bank|shopping|spam|chat|call|old|duplicate)\s+"
    r"|[\w'.-]+\s+(?=(?:account|accounts|app|apps|subscription|profile)\b))?"  # "my Shopee account"
    r"(?:file|files|folder|stain|stains|photo|photos|picture|pictures|email|emails|message|messages|app|apps|account|"
    r"line|lines|paragraph|sentence|word|words|page|pages|draft|drafts|row|rows|column|table|code|cache|cookies|"
    r"mark|marks|mess|dust|tab|tabs|song|songs|video|videos|post|posts|comment|comments|text|texts|contact|"
    r"contacts|event|events|meeting|meetings|alarm|alarms|reminder|reminders|calendar|phone|laptop|computer|"
    r"browser|history|inbox|search|pan|table|tick|splinter|whiteboard|marker|app|subscription|order|booking|"
    r"question|questions|verse|verses|lyrics)"
    r"(?:\s+(?:on|from|in|off|at|with|of|for|before|after|that|which|about)\b.*)?$"
)
_SUBJECT_END = re.compile(
    r"\s*(?:,|;|:|\?|!|\s-\s|\s–\s|\s—\s|\(|\bfrom\s+(?:your\s+|the\s+|my\s+)?(?:(?:saved|stored|long-term)\s+)?(?:memory|memories|records?|notes|files?|mind|profile|head|brain|info|information)\b|"
    r"\b(?:that\s+)?i(?:'ve|\s+have)?\s+(?:gave|given|told|sent|shared\s+with|mentioned\s+to)\s+you\b(?!\s+(?:about|regarding|concerning|on|re)\b)|\bfrom\s+earlier\b|\bearlier\s*$|"
    r"\b(?:that\s+|which\s+)?(?:you|u)(?:'ve|\s+have)?\s+(?:hold|have|keep|store|stored|saved|kept|know|remember|got)(?:\s+(?:about|on)\s+me\b|\s*$)|"
    r"\b(?:that\s+)?i\s+(?:just\s+)?(?:mentioned|said|shared|brought\s+up|referred\s+to|talked\s+about|told\s+you(?:\s+about)?)(?:\s+(?:earlier|before|yesterday|the\s+other\s+day|last\s+(?:week|time|night|month)))?\s*$|"
    r"\bfrom\s+(?:a\s+few|a\s+couple\s+of|some|\w+)\s+(?:years|months|weeks)\s+back\b|"
    r"\bfrom\s+(?:whatever|what|everything|anything)\s+(?:\w+\s+)?you\b|\boff\s+(?:whatever|your|any)\s+list\b|"
    r"\b(?:in|into|to)\s+(?:your\s+)?(?:memory|memories|mind|records?|notes|files?)\b|\bon\s+(?:file|record)\b|"
    r"\bout\s+of\s+(?:your\s+|the\s+|my\s+)?(?:memory|memories|mind|head|brain|records?|notes|files?|system)\b|"
    r"\b(?:please|thanks|thank\s+you|anymore|any\s+more|any\s+longer|for\s+now|for\s+good|just\s+in\s+case|entirely|completely|altogether|gone|lol|lmao|haha|yet|mate|bro|dude|pal|buddy|yaar|lah|leh|fam|abeg|bhai|macha|ok|okay|before|until|in\s+case)\b|"
    r"(?<!\bfrom\s)(?<!\bsince\s)(?<!\bin\s)(?<!\bof\s)\b(?:back\s+in\s+the\s+day|(?:a\s+)?(?:few|couple\s+of|\w+)\s+(?:years|months|weeks|days)\s+ago|(?:years|months)\s+ago|(?:last|this)\s+(?:week|month|year|spring|summer|autumn|fall|winter)|in\s+the\s+spring)\b|"
    r"\b(?:but|because|since|so|cause|cuz|it'?s|it\s+was|that'?s|that\s+was|except|apart\s+from|other\s+than|excluding)\b|"
    # "my weight and height (from your records)" names two things; "my salary and let's move on" one
    r"(?<!\bme\s)\b(?:and|or)\b(?!\s+(?:also\s+)?(?:(?:anything|everything)\s+(?:to\s+do\s+with|about|related\s+to)|to\s+(?:my|the)|my|our|his|her|their|i|the|where|what|how|which|when|me|about|that\s+i)\b|\s+(?!(?:let'?s|stuff|things|so|that|everything|all|like|then|more|other|whatever|you|we|it|get|go|move|talk|see)\b)[\w'-]+(?:\s+[\w'-]+){0,2}\s*(?:$|[,.;?!]|\s+(?:from|out\s+of|off)\b))).*$"
)
# "the debt, the getting fired thing, and the psychiatrist": one list, each named thing its own part.
_LIST = re.compile(
    r"^(?:the|my|our|that\s+i|where\s+i|what\s+i|i(?=[^,;?!.]+,\s*(?:and\s+)?that\s+i))\s[^,;?!.]+(?:,\s*(?:and\s+)?(?:the|my|our|that\s+i(?:'m|'ve|'d)?|where\s+i|what\s+i|how\s+much\s+i)\s[^,;?!.]+)+"
)
_PIECE_LEAD = re.compile(
    rf"^(?:(?:the|that|this|those|these|any|all\s+the)\s+(?:\w+\s+)?|(?={_PIECE}\s))(?:{_PIECE})\s+(?:(?:that\s+)?i\s+(?:gave|told|sent|shared\s+with|mentioned\s+to|dumped\s+on|unloaded\s+on|offloaded\s+on|vented\s+to)\s+you\s+)?"
    r"(?:about|on|regarding|concerning|of|re)\s+"
)
_SUBJECT_LEAD = re.compile(
    r"^(?:what\s+i\s+(?:told\s+you|said|say|mentioned|shared)\s+(?:about|regarding)|(?:everything|anything|all)\s+(?:about|regarding|involving|to\s+do\s+with|related\s+to)|about|that|of|on|regarding|concerning|the\s+fact\s+that|re)\s+"
)
_CLAUSE_SPLIT = re.compile(
    r"(?<=[.!?;:])\s+|\n+|\s+[-–—]+\s+|"
    r",?\s+(?=(?:and\s+|so\s+|but\s+)?(?:please|could\s+you|can\s+you|would\s+you|i'?d\s+(?:really\s+)?(?:rather|prefer|appreciate|like)|i\s+want\s+that\s+you)\b)|"
    r"\s+(?:and|so|but)\s+(?=i'?d\s+(?:really\s+)?(?:rather|prefer|appreciate|like)\b)|"
    r"\s+so\s+(?=(?:please\s+)?(?:don'?t|do\s+not|stop)\s+(?:remember|keep|store|save)\w*\b|(?:there'?s\s+|there\s+is\s+)?no\s+need\s+for\s+you\b|you\s+(?:don'?t|do\s+not)\s+need\s+to\b)|"
    r"\s+(?=i\s+(?:really\s+)?(?:don'?t|do\s+not)\s+want\s+you\s+(?:to\s+)?(?:keep|hold|stor|sav|remember|know|have)\w*\b)|"
    r",\s+(?=(?:(?:but|and|so|just)\s+)?(?:forget|delete|erase|remove|wipe|drop|bin|scrap|ditch|scrub|purge|get\s+rid\s+of)\s+(?:it|that|this|the|my|what|everything|all)\b)|"
    r"\s+(?=but\s+(?:please\s+)?(?:forget|delete|erase|remove|wipe)\s+(?:where|what|how|who|when|which|my|the)\b)|"
    r"\s+so\s+(?=i\s+(?:really\s+)?(?:don'?t|do\s+not)\s+want\s+(?:my|the|that|this|it|any)\b)|"
    r",?\s+so\s+(?=(?:(?:you\s+can|could\s+you|can\s+you)\s+)?(?:just\s+)?(?:forget|delete|erase|remove|wipe|drop|get\s+rid\s+of)\b)|"
    r",\s+(?=no\s+need\s+(?:for\s+you\s+)?to\s+(?:remember|keep|store)\b)|"
    r",\s+(?=(?:please\s+)?(?:don'?t|do\s+not)\s+(?:keep|store|save|remember|hold)\w*\s+(?:that|this|it)\b)|"
    r"\s+and\s+(?=(?:please\s+)?(?:forget|delete|erase|remove|wipe)\s+(?:it|that|this|them)\b)"
)
_NEGATED_FORGET = re.compile(
    r"\b(?:don'?t|do\s+not|never|not|won'?t|will\s+not|cannot|can'?t|shouldn'?t|mustn'?t|dinnae|dinna|didnae|cannae|willnae|"
    r"let'?s\s+not|lest\s+(?:you|we|i)|let\s+me)\s+(?:ever\s+)?forget\b"
)

_RULES: list[tuple[str, re.Pattern[str]]] = [
    ("forget", re.compile(rf"{_LEAD}{_FORGET}\s+(?:all\s+)?(?P<ref>{_REFERENCE})\s+(?P<subject>.+)$")),
    (
        # "forget I got signed off with stress": what the user did, not "forget I asked"
        "forget-i",
        re.compile(
            rf"{_LEAD}{_FORGET}\s+(?:that\s+)?(?P<subject>i(?:'m|'ve|'d|\s+(?!asked\b|ask\b|even\s+asked\b|was\s+(?:asking|going)\b|said\b|mentioned\b|told\b)\w+)\s*.+)$"
        ),
    ),
    (
        "forget-named",
        re.compile(
            rf"{_LEAD}{_FORGET}\s+(?:about\s+)?(?P<subject>(?:both\s+)?(?:my|our|the|where|which|what|how|when|who|whether)\s.+)$"
        ),
    ),
    (
        "keep",
        re.compile(
            rf"{_LEAD}(?:please\s+)?{_NEGATION}\s+{_KEEP}\s+(?:(?:anymore|any\s+more|any\s+longer)\s+)?(?:(?P<ref>{_REFERENCE})\s+)?(?P<subject>.+)$"
        ),
    ),
    (
        "rather",
        re.compile(
            rf"^{_OPENER}(?:(?:i\s+)?(?:really\s+)?(?:don'?t|do\s+not|no\s+longer)\s+(?:really\s+)?(?:want|need)\s+you(?:\s+to)?|"
            rf"(?:i'?d|i\s+would)\s+(?:really\s+)?appreciate\s+it\s+if\s+you(?:\s+(?:would|could|didn'?t|did\s+not))?|"
            rf"would\s+it\s+be\s+(?:alright|all\s+right|ok|okay|fine)\s+if\s+you(?:\s+(?:didn'?t|did\s+not|wouldn'?t|would\s+not))|"
            rf"(?:i'?d|i\s+would)\s+(?:really\s+|much\s+)?(?:rather|prefer)(?:\s+it\s+if)?\s+you(?:\s+(?:didn'?t|did\s+not|not|wouldn'?t|would\s+not))?(?:\s+to)?)\s+"
            rf"(?:{_KEEP}|{_FORGET}|forgot|deleted|erased|removed|dropped|have|having)\s+(?:(?P<ref>{_REFERENCE})\s+)?(?P<subject>.+)$"
        ),
    ),
    ("erase", re.compile(rf"{_LEAD}{_ERASE}\s+(?:(?P<ref>{_REFERENCE})\s+)?(?P<subject>.+)$")),
    (
        "erase-from",
        re.compile(
            rf"{_LEAD}(?:{_ERASE}|take|get|{_FORGET}|cancel|cross)\s+(?:out\s+|rid\s+of\s+)?(?P<subject>(?!rid\s+of\b|(?:that|this|it|them)\s+back\b).+?)\s+(?:out\s+)?(?:of|from|off)\s+(?:{_MEMORY}|{_HELD_PLACE})\b.*$"
        ),
    ),
    (
        "off-record",
        re.compile(
            rf"{_LEAD}(?:(?:let'?s|let\s+us)\s+)?keep\s+(?P<subject>.+?)\s+(?:off\s+(?:the\s+|your\s+)?(?:record|records|books)|out\s+of\s+{_MEMORY})\b.*$"
        ),
    ),
    (
        # "cancel from your memory the debts of my father": the place before the thing
        "erase-from-first",
        re.compile(
            rf"{_LEAD}(?:{_ERASE}|cancel|{_FORGET})\s+(?:out\s+)?(?:of|from|off)\s+(?:{_MEMORY}|{_HELD_PLACE})\s+(?P<subject>(?:the|my|our|that|all|any|everything|where|what|how|who|when)\b.+)$"
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
        # "Kindly ensure that the information about our planned layoffs is removed from your memory."
        "ensure-gone",
        re.compile(
            rf"(?:{_LEAD}(?:ensure|make\s+sure|see\s+to\s+it)|^{_OPENER}(?:(?:i'?d|i\s+would)\s+like\s+to\s+|i\s+)?(?:request|ask|require|demand))\s+(?:that\s+)?"
            rf"(?:(?P<ref>{_REFERENCE})\s+)?(?P<subject>.+?)\s+(?:is|are|be|gets?|get|has\s+been|have\s+been)\s+"
            rf"(?:removed|deleted|erased|wiped|forgotten|purged|dropped)\b.*$"
        ),
    ),
    (
        # "is it possible for you to not have the eating disorder thing stored?"
        "not-have",
        re.compile(
            rf"(?:{_LEAD}(?:not|never)|^{_OPENER}i\s+(?:don'?t|do\s+not)\s+think\s+you\s+should)\s+(?:have|keep)\s+(?P<subject>.+?)\s+(?:stored|saved|kept|recorded|on\s+(?:file|record)|in\s+{_MEMORY})"
            r"(?:\s+(?:anymore|any\s+more|please))*(?:[,.;]\s.*)?$"
        ),
    ),
    (
        # "can that thing about my credit card debt go?"
        "can-go",
        re.compile(
            rf"^{_OPENER}(?:{_PLEASE}\s+)?(?:can|could)\s+(?P<ref>(?:that|the|this)\s+(?:\w+\s+)?{_PIECE}\s+(?:about|on|regarding|concerning|re))\s+"
            rf"(?P<subject>.+?)\s+(?:go|disappear|be\s+(?:gone|deleted|erased|removed|wiped|forgotten|dropped))(?:\s+(?:now|too|as\s+well|away|please))?$"
        ),
    ),
    (
        # "Everything about Ben can go", "Linda's name needs to come off the record"
        "must-go",
        re.compile(
            rf"^{_OPENER}(?:(?P<ref>(?:everything|anything|all)\s+(?:about|regarding|on))\s+(?P<subject>.+?)\s+(?:can|could|should|must|needs?\s+to|has\s+to)\s+"
            rf"(?:go|be\s+(?:deleted|erased|removed|wiped|forgotten|dropped))|(?P<named>.+?)\s+(?:needs?\s+to|has\s+to|must|should)\s+(?:come|go)\s+off\s+(?:the|your)\s+records?)"
            rf"(?:\s+(?:now|too|as\s+well|please))?$"
        ),
    ),
    (
        # "I am requesting erasure of the personal data you hold concerning my health condition"
        "erasure-of",
        re.compile(
            rf"^{_OPENER}(?:i\s+(?:am\s+|'m\s+)?(?:request|requesting|ask\s+for|asking\s+for|demand|demanding|want)\s+|{_PLEASE}\s+)?"
            rf"(?:the\s+)?(?:erasure|deletion|removal)\s+of\s+(?:(?P<ref>{_REFERENCE})\s+)?(?P<subject>.+)$"
        ),
    ),
    (
        "quoted",
        re.compile(
            rf"{_LEAD}(?:{_ERASE}|{_FORGET}|{_NEGATION}\s+{_KEEP})\s+(?:(?:the|that|this)\s+(?:memory|note|entry|fact|line|record)\s+|(?:that\s+)?i\s+said\s+)?\"(?P<subject>[^\"]+)\"(?:\W.*)?$"
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
            rf"{_LEAD}(?:(?:let'?s|let\s+us|(?:can|could|shall)\s+we)\s+)?(?:just\s+)?(?:pretend(?:ing)?|act\s+(?:like|as\s+if|as\s+though)|assume)\s+(?:that\s+)?(?:i\s+never|you\s+never|i\s+didn'?t\s+ever|i\s+did\s+not\s+ever|i\s+didn'?t|you\s+didn'?t)\s+"
            rf"(?:{_SAID}|heard|learned|knew|know|hear)\s+(?:you\s+|me\s+)?(?:anything\s+)?(?:about\s+|that\s+|of\s+)?(?P<subject>.+)$"
        ),
    ),
]
_STORED = (
    r"(?:stored|saved|kept|recorded|remembered|logged|noted|written\s+down|on\s+(?:file|record)|in\s+(?:your\s+)?(?:memory|memories|records?|notes|system)|"
    r"(?:to\s+be\s+)?(?:part\s+of\s+what|something)\s+(?:you|u)\s+(?:know|remember|keep|have|store|hold|hang\s+on\s*to|hold\s+on\s*to)(?:\s+about)?)"
)
# "I don't want my address stored", "I'd prefer my stammer wasn't stored", "not sure I want how I voted on file".
_UNWANTED = re.compile(
    rf"^(?:[^,]{{0,40}},\s*)?{_OPENER}(?:i\s+(?:really\s+)?(?:don'?t|do\s+not)\s+(?:really\s+)?want|(?:i'?m\s+)?not\s+sure\s+(?:if\s+)?i\s+want|"
    rf"(?:i'?d|i\s+would)\s+(?:really\s+)?(?:prefer|rather)(?:\s+(?:it\s+)?if|\s+that)?)\s+(?P<subject>.+?)\s+"
    rf"(?:(?:wasn'?t|weren'?t|isn'?t|aren'?t|was\s+not|were\s+not|not\s+be|not\s+being|wasn'?t\s+being)\s+)?{_STORED}"
    rf"(?P<rest>\s+(?:by|with|on|to|in)\s+(?!you\b|your\b|here\b|anywhere\b|file\b|record\b|memory\b|the\s+(?:record|file|system)\b)\w+.*|.*\b(?:online|cloud|internet|phone|laptop|computer|"
    rf"google|facebook|instagram|icloud|drive|server|website|app|apps|company|companies)\b.*)?(?:\s.*)?$"
)
# "forget I said that": the turn's own earlier words are what it takes back.
_RETRACTION = re.compile(
    rf"^{_OPENER}(?:{_PLEASE}\s+)?(?:{_POLITE}\s+)?(?:just\s+)?(?:{_FORGET}|pretend)\s+(?:that\s+)?i\s+(?:ever\s+|even\s+|just\s+|never\s+)?"
    rf"{_SAID}\s+(?:that|this|it|any\s+of\s+(?:that|this|it))\b(?P<rest>.*)$"
)
_CORRECTION = re.compile(r"^\W*(?:i\s+mean|i\s+meant|make\s+it|it'?s\s+actually|it\s+was\s+actually|\d)")
# Words that name a topic as a thing said: "the salary thing", "the Marcus stuff", "the medication entry".
_THING_WORDS = (
    r"(?:thing|things|stuff|bit|bits|info|information|details|detail|business|situation|story|news|part|issue|saga|drama|"
    r"convo|conversation|episode|entry|entries|note|notes|fact|comment|anecdote|incident|figures|numbers|mention|"
    r"confession|rant)"
)
# A topic named by a thing-word: "the salary thing", "the marcus stuff", "my pill stuff", "the poly bit".
_TOPICAL = re.compile(
    r"^(?:both\s+)?(?:the|that|this|my|our|your|all\s+(?:of\s+)?(?:the|my|our))\s+(?P<topic>(?:(?!(?:from|about|of|in|on|to|with|for)\s)[\w'-]+\s+){0,3}?[\w'-]+)\s+"
    rf"{_THING_WORDS}\b"
)
# "my contact details", "the phone number info": what was said about a thing, not the thing.
_INFO_ABOUT = re.compile(r"\b(?:details|info|information)\b")
_TOPIC_WORD = re.compile(rf"(?<=\w)\s+{_THING_WORDS}\b(?!\s+(?:about|on|of|regarding)\b)")
# "forget the wedding stuff for now", "forget the novel thing, can you help me with ...": moving on, not a request.
_FOR_NOW = re.compile(
    r"\bfor\s+(?:now|a\s+(?:sec|second|minute|moment|bit)|today|tonight|(?:one|an?|this|the)\s+(?:evening|night|day|hour|afternoon|weekend))\b"
)
_FOR_A_WHILE = re.compile(
    rf"{_FOR_NOW.pattern}|"
    r",\s*(?:let'?s|i\s+need|i\s+want|what'?s|whats|how|can\s+you|could\s+you|help|tell\s+me|anyway|instead|we)\b"
)
# A pronoun object ("forget that, please", "please delete it"): a request only when addressed.
_PRONOUN_REQUEST = re.compile(
    rf"(?:{_LEAD}(?:{_FORGET}|{_ERASE}|{_NEGATION}\s+{_KEEP}|take|get)\s+(?:about\s+)?(?:all\s+(?:of\s+)?)?(?:that|this|it|them|those|both)(?:\s+(?:all|bit|part|one|too|as\s+well|data\s+point|entry|note|record|detail|fact|info|information|memory))?(?:\s+(?:back\s+out|out|gone|deleted|saved|stored|kept))?|"
    # "About my husband and the army — please delete from memory": the object left out
    rf"{_LEAD}(?:{_FORGET}|{_ERASE})(?=\s+(?:from|out\s+of)\s+{_MEMORY})|"
    # "the CV thing... can you act like I never told you?"
    rf"{_LEAD}(?:pretend|act\s+(?:like|as\s+if|as\s+though))\s+(?:that\s+)?i\s+never\s+(?:told\s+you|said|mentioned|shared)(?:\s+(?:it|that|this))?|"
    rf"^{_OPENER}i\s+(?:really\s+)?(?:don'?t|do\s+not)\s+want\s+you\s+(?:to\s+)?(?:have|having|know|knowing|keep|keeping)\s+(?:that|this|it)|"
    rf"^{_OPENER}i\s+(?:really\s+)?(?:don'?t|do\s+not)\s+want\s+(?:it|that|this)\s+(?:sitting|kept|stored|saved|staying|recorded|to\s+stay)|"
    rf"^{_OPENER}(?:i'?d|i\s+would)\s+(?:really\s+)?(?:like|prefer|want)\s+(?:that|this|it)\s+(?:erased|deleted|removed|forgotten|wiped|gone)|"
    rf"{_LEAD}make\s+(?:that|this|it|them)\s+(?:disappear|go\s+away|vanish)|"
    rf"^{_OPENER}(?:{_PLEASE}\s+)?(?:can|could)\s+(?:that|this|it)\s+be\s+(?:deleted|removed|erased|forgotten|wiped)|"
    rf"^{_OPENER}(?:i'?d|i\s+would)\s+(?:really\s+)?(?:prefer|rather)(?:\s+(?:it\s+)?if)?\s+(?:that|this|it)\s+"
    rf"(?:not\s+be|wasn'?t|isn'?t|was\s+not|is\s+not|weren'?t|were\s+not)\s+{_STORED}(?:\s+on\s+(?:file|record))?(?:\s+about\s+me)?)"
    rf"(?:\s+(?:in|from|to|off|out\s+of)\s+(?:{_MEMORY}|{_HELD_PLACE}))?\s*(?:,?\s*(?:please|thanks|thank\s+you|for\s+me|now|for\s+now|too|as\s+well|then|lol|haha|and\s+confirm|and\s+let\s+me\s+know|entirely|completely|for\s+good|immediately|right\s+now|asap|straight\s+away|at\s+once|ok|okay|rather\s+than\s+(?:keeping|storing|having)\s+it(?:\s+around)?|for\s+\w+\s+(?:purposes|reasons)|for\s+(?:privacy|security|safety)))*$"
)
# Where the same turn says what "that" is: "I told you my husband lost his job - please forget that".
_SAID_BEFORE = re.compile(
    r"(?:^(?:(?:so|and|ok|okay|oh|also|now|right|nvm|never\s+mind)\s+)?(?:re|regarding|about|as\s+for)(?=\s+(?:my|our|the|that)\s)|^(?=(?:my|our|how\s+much\s+i|where\s+i)\s[^.?!;,:]+?(?:\s*:|\s+[-–—]+\s|\s+is\s+(?:\w+\s+)?none\s+of\s+your\s+business))|"
    # "The whole proposal thing with my ex... I'd appreciate it if you'd erase that": the topic first
    r"^(?:(?:yeah|yes|so|ok|okay|and|oh|um|anyway|also)\s+)*(?=(?:the|that)\s[^.?!;,:]+?(?:\.\.\.|\s*:|\s+[-–—]+\s))|"
    r"(?:about|that)(?=\s+[^.?!;,:]+?\s+(?:is|are|being|sitting)\s+in\s+your\s+(?:memory|memories|records?|notes))|"
    r"told\s+(?:a|an|the|some)\s+(?:chatbot|bot|ai|assistant|computer)\s+about|(?:stop|quit)\s+(?:bringing\s+up|mentioning|raising)|right\s+to\s+(?:erasure|be\s+forgotten)\s+(?:re:?|regarding|about|for|over|on|concerning)|"
    r"(?:told\s+you|telling\s+you|mentioned|mentioning)(?:\s+to\s+you)?|i\s+(?:said|shared|admitted)(?:\s+to\s+you)?|"
    r"overshared(?:\s+(?:earlier|before|yesterday|last\s+(?:time|night|week)|the\s+other\s+day))?\s+about|regret\s+(?:sharing|telling\s+you|mentioning|bringing\s+up)(?:\s+with\s+you)?|did\s+i\s+(?:ever\s+)?tell\s+you\s+about|"
    # "My pay is actually private, so forget it"
    r"^(?=(?:my|our)\s+[\w'-]+(?:\s+[\w'-]+)?\s+(?:is|are)\s+(?:\w+\s+)?(?:private|personal|confidential|sensitive)\b)|"
    r"^(?:(?:ok|okay|so|and|oh|um|also|right)\s+)*(?:that|the)(?!\s+last\b)(?=\s+[a-z]+(?:\s+[a-z]+)?\s+(?:i|we)\s+(?:had|did|got|went|made|took|was|were|told\s+you|mentioned)\b)|"
    r"should(?:n'?t|\s+not|\s+never)?\s+have\s+(?:told\s+you|said|shared|mentioned)(?:\s+to\s+you)?|"
    r"(?:why\s+)?(?:did|have|do)\s+you\s+(?:save|store|keep|record|remember|log|note|bring\s+up|mention)(?:d)?|"
    r"you(?:'ve|\s+have)?\s+(?:got\s+)?me\s+down\s+as|if\s+you(?:'ve|\s+have)?\s+(?:still\s+)?(?:got|kept|stored|saved)|"
    r"(?:that\s+)?you(?:'ve|\s+have)\s+(?:saved|stored|kept|recorded|noted)|"
    r"you\s+(?:even\s+|already\s+)?know\s+about|you\s+know\s+how\s+i\s+(?:said|told\s+you|mentioned)|"
    r"remember\s+(?:when|how)\s+i\s+(?:said|told\s+you|mentioned)|(?:with\s+)?you\s+knowing|"
    r"you\s+(?:don'?t|do\s+not|no\s+longer)\s+need\s+to\s+(?:know|remember|keep)(?:\s+(?:about|that))?|"
    r"(?:the\s+)?(?:bit|part|thing|stuff|info|information)\s+(?:about|on))(?:\s+|(?<=^)|(?<=\s))(?:(?:last\s+(?:week|night|time|month)|earlier|yesterday|before|the\s+other\s+day|a\s+while\s+(?:ago|back))\s+)?"
    r"(?:that\s+|about\s+)?(?P<subject>(?!(?:it|that|this|them)\b)[^.?!;,:]+?)"
    r"(?=\s*(?:[.?!;,:]|\s[-–—]+\s|\s+is\s+(?:\w+\s+)?none\s+of\s+your\s+business|$|\s+(?:anymore|any\s+more|please|so\b|and\s+(?:please|i)\b)|"
    r"\s+(?:is|are|being|sitting)\s+in\s+your\s+(?:memory|memories|records?|notes)|"
    r"\s+(?:is|are)\s+(?:\w+\s+)?(?:private|personal|confidential|sensitive)\b))"
)
# A stored note pointed at: "so that note is outdated", "just delete that memory".
_STORED_POINTER = r"\b(?:that|this)\s+(?:memory|entry|note)\b"
_EXPLICIT_MEMORY = re.compile(
    rf"\b(?:in|from|out\s+of)\s+{_MEMORY}\b|{_STORED_POINTER}|\b(?:don'?t|do\s+not|never)\s+(?:keep|store|save|remember|record)\b"
)
_FROM_MEMORY = re.compile(
    rf"\b(?:from|in|out\s+of|off)\s+(?:(?:your|the|my)\s+{_MEMORY_WORD}|{_HELD_PLACE})\b|"
    r"\b(?:you|u)\s+(?:hold|have|keep|store|stored|saved|kept|remember|got)\s+(?:about|on)\s+me\b"  # "the health data you hold about me"
)
_FROM_THING = re.compile(
    rf"\b(?:from|off|out\s+of)\s+(?:the|my|this|that|a|an|our|his|her|their)\s+(?!{_MEMORY_WORD}\b)\w+"
)
# "the bit about the stag do from my speech": edited out of something the user writes ("what I said about
# Kev taking money from my wallet" names a fact).
_FROM_DOCUMENT = re.compile(
    r"\b(?:from|in|out\s+of)\s+(?:the|my|this|that|our)\s+(?:\w+\s+)?(?:speech|essay|draft|letter|e-?mail|document|doc|file|list|post|message|"
    r"text|slides|presentation|cv|resume|résumé|toast|eulogy|script|report|paper|bio|profile\s+page|vows|card)\b"
)
# A reason to take something back: the turn asks to un-know it, it does not move on.
_REASON = re.compile(
    r"\b(?:i\s+was\s+wrong|turns\s+out|(?:is|was|wasn'?t|isn'?t)\s+(?:not\s+)?true|made\s+(?:it|that)\s+up|my\s+mistake|"
    r"shouldn'?t\s+(?:have|of|'ve)\s+(?:said|told|mentioned|shared|typed|written|wrote|brought)|not\s+my\s+(?:business|place|story|information|info)|not\s+mine\s+to\s+(?:share|tell)|in\s+confidence|"
    r"embarrass\w*|mortified|ashamed|confidential|(?:don'?t|do\s+not)\s+want\s+(?:it|that|this)\s+(?:saved|stored|kept|on\s+record|"
    r"in\s+your\s+memory|remembered)|jinx|gossip\w*|feel\s+bad|regret\w*|overshar\w*|too\s+(?:much|personal|private)|"
    r"(?:rather|prefer)\s+you\s+(?:didn'?t|did\s+not|not|wouldn'?t)|(?:it'?s|its|that'?s)\s+not\s+me\s+any\s*more|no\s+longer\s+(?:true|accurate|relevant)|out\s+of\s+date|outdated|not\s+true\s+any\s*more)\b"
)
_ADDRESS = re.compile(rf"\b{_PLEASE}\b|\byou\b|\byour\b")
# What only a person has, so erasing it can only mean the assistant's memory ("erase the skin
# condition", "remove the pills I mentioned"; a pill taken out of a box is "from the box").
_PERSONAL_MATTER = re.compile(
    r"\b(?:diagnosis|diagnoses|condition|habit|addiction|pills|meds|medication|prescription|surgery|therapy|counsell?ing|"
    r"illness|disorder|injury|miscarriage|pregnancy|divorce|affair|break-?up|arrest|conviction|debts?|bankruptcy)$"
)


_TOPIC_OF_ADJECTIVE = {
    "financial": "finances",
    "medical": "health",
    "romantic": "love life",
    "religious": "religion",
    "political": "politics",
    "legal": "legal case",
}


def _normalise(text: str) -> str:
    text = text.replace("…", "... ").replace("’", "'").replace("‘", "'").replace("“", '"').replace("”", '"').lower()
    # Emoji and other symbols say nothing here and would hide where a clause starts ("🙌 oh and btw forget ...").
    text = "".join(" " if unicodedata.category(ch) in ("So", "Sk", "Cs", "Co") else ch for ch in text)
    text = re.sub(r"\s\+\s", " and ", text)
    text = re.sub(r"\bplease\s+to\b", "please", text)
    # "Pursuant to my right to erasure, I ...", "Under Article 17 GDPR I am requesting ...": the request follows
    text = re.sub(
        r"^(?:pursuant\s+to|under|per|in\s+line\s+with)\s+(?:(?:my\s+|the\s+)?right\s+to\s+(?:erasure|be\s+forgotten)|"
        r"(?:article|art\.?)\s*17\s+(?:of\s+(?:the\s+)?)?(?:uk\s+|eu\s+)?gdpr),?\s+",
        "",
        text,
    )
    text = re.sub(r"\b(?:hereby|formally)\s+(?=request|ask|demand|require|instruct)", "", text)
    text = re.sub(r"\bformer\s+(husband|wife|partner|boyfriend|girlfriend|fianc[eé]e?)\b", r"ex-\1", text)
    text = re.sub(r"\byou'd\b", "you would", text)
    text = re.sub(r"\bun-(save|remember|learn|know|track)", r"un\1", text)
    text = re.sub(r"\b(getting|got|being|was)\s+(?:sacked|let\s+go)\b", r"\1 fired", text)
    text = re.sub(
        r"\bi'?m\s+expecting(?:\s+a\s+baby)?(?=\s*(?:$|[,.;?!]|\s(?:and|but|so|too)\b))", "i'm pregnant", text
    )
    text = re.sub(r"(?:,\s*)?\b(?:uh+|um+|erm|er)\b,?", "", text)  # "That, uh, bedroom issue"
    text = re.sub(r"\b(?:(?:my|a)\s+)?(?:little\s+)?run-?ins?\s+with\s+the\s+(?:law|police|cops)\b", "my arrest", text)
    text = re.sub(r"\bwhere\s+i(?:'m|\s+am)\s+(?:living|staying)\b", "where i live", text)
    text = re.sub(r"\b(?:husband|wife|partner)'s\s+(?:mum|mom|mother)\b", "mother-in-law", text)
    text = re.sub(r"\b(?:husband|wife|partner)'s\s+(?:dad|father)\b", "father-in-law", text)
    text = re.sub(r"^re\s*:\s*", "regarding ", text)
    # "Formal request: erase ...", "Under GDPR I'd like you to ...": the request itself follows
    text = re.sub(
        r"^(?:(?:formal\s+)?request|gdpr(?:\s+request)?)\s*:\s*|^(?:under|per|as\s+per|in\s+line\s+with)\s+(?:the\s+)?(?:gdpr|(?:uk\s+|eu\s+)?data\s+protection(?:\s+(?:rules|law|laws|regulations|act|principles))?),?\s+",
        "",
        text,
    )
    text = re.sub(r"\b(everything|anything|all)\s+([a-z]+)-related(?:\s+about\s+me)?\b", r"\1 about my \2", text)
    text = re.sub(
        r"\b(everything|anything|all)\s+(?:the\s+)?(financial|medical|romantic|religious|political|legal)\b"
        r"(?:\s+(?:stuff|things|info|information|details|data))?(?:\s+about\s+me)?",
        lambda m: f"{m.group(1)} about my {_TOPIC_OF_ADJECTIVE[m.group(2)]}",
        text,
    )
    text = re.sub(r",?\s+(?:specifically|namely|in\s+particular|that\s+is)[,:]?\s+(?=(?:my|the|our)\s)", " — ", text)
    text = re.sub(r"\bmake\s+(?=forget\b)", "", text)  # "can you make forget ..." (a learner's English)
    # "anything about me job hunting": about my job hunting
    text = re.sub(r"\babout\s+me\s+(?=(?:job|work|health|money|finances|family)\b)", "about my ", text)
    text = re.sub(
        r"^(?:memory|memories)\s*:\s*(.+?)[.!]*$", r"\1 from your memory", text
    )  # "Memory: delete bank info."
    # "delete two things: that I ... and that I ...": the list is the object
    text = re.sub(
        r"\b(?:two|three|2|3|a\s+few|a\s+couple\s+of|these|the\s+following)\s+things?\s*:\s*", "", text
    )  # "please to forget" (a learner's English)
    text = re.sub(r"\bpor\s+favou?r\b|\bbitte\b|\bs'il\s+vous\s+pla[iî]t\b", "please", text)
    text = re.sub(r"[a-z0-9']+", lambda m: _SPELLING.get(m.group(0), m.group(0)), text)
    text = re.sub(r"^((?:\w+\s+)?please\s+)forgot\b", r"\1forget", text)  # "pls forgot about the overtime thing"
    return re.sub(r"\s+", " ", text).strip()


def _clauses(text: str) -> list[str]:
    out = []
    for part in _CLAUSE_SPLIT.split(text):
        part = part.strip().strip("\"'").strip()
        if part:
            out.append(part)
    return out


def _subject(raw: str) -> str | None:
    raw = _LIST.sub(lambda m: re.sub(r",\s*(?:and\s+)?", " and ", m.group(0)), raw.strip())
    raw = re.sub(r"^(?:anymore|any\s+more|any\s+longer)\s+", "", raw)  # "not remember anymore about my status"
    raw = re.sub(r"(?<=\s)'(?=\w)|(?<=[a-rt-z])'(?=\s|$)", "", raw)  # "my 'issues with the bottle'" ("kids' mum" stays)
    subject = _SUBJECT_END.sub("", raw)
    subject = _SUBJECT_LEAD.sub("", subject).strip(" .!?\"'")
    subject = re.sub(r"^(?:that|the\s+fact\s+that)\s+", "", subject)
    # "don't remember me as someone who smokes weed": that I smoke weed
    subject = re.sub(
        r"^me\s+as\s+(?:someone|somebody|a\s+person|the\s+(?:guy|girl|woman|man|person))\s+(?:who|that)\s+",
        "i ",
        subject,
    )
    subject = re.sub(r"^(?:the|that)\s+whole\s+", "the ", subject)  # "the whole proposal thing"
    subject = re.sub(
        r"^(?:the|that)\s+(?:thing|stuff|business)\s+(?:with|involving)\s+", "", subject
    )  # "the thing with my employer"
    subject = re.sub(
        r"^(?:all|any)\s+(?:of\s+)?(?=(?:the|my|our)\s)", "", subject
    )  # "all the food stuff": the food (wide)
    subject = re.sub(r"^(?:the\s+)?name\s+of\s+(?=(?:my|our)\s+\w+'s\s)", "", subject)  # "the name of my son's school"
    subject = re.sub(r"^in\s+my\s+(?:last|previous)\s+(?:\w+\s+)?messages?\s+(?:about|on)\s+", "", subject)
    subject = re.sub(r"(?<=\w)-related\b", "", subject)
    # "the Centrelink memory", "the smoking one"
    subject = re.sub(r"^((?:the|my|that)\s+[\w'-]+(?:\s+[\w'-]+)?)\s+(?:memor(?:y|ies)|ones?)$", r"\1", subject)
    lead = _PIECE_LEAD.match(subject)
    subject = _PIECE_LEAD.sub("", subject)  # "the bit about gareth": gareth
    if lead is not None:
        subject = _qualified(subject, lead.group(0))
    subject = re.sub(
        r"\s+(?:both|too|as\s+well|all\s+three|the\s+lot|at\s+all|saved|stored|kept|on\s+file)$", "", subject
    )
    subject = re.sub(
        r"\s+(?:can|could|should|must|needs?\s+to|has\s+to)\s+(?:go|be\s+(?:deleted|erased|removed|wiped|forgotten))$",
        "",
        subject,
    )
    subject = re.sub(r"^both\s+(?=(?:the|my|our)\s)", "", subject)
    if _TOPICAL.match(subject):
        subject = _TOPIC_WORD.sub("", subject)  # "the eviction stuff": the eviction
    if not subject or _EMPTY_SUBJECT.match(subject) or not content_words(subject):
        return None
    return subject


_QUALIFIER = re.compile(rf"^(?:the|that|this|those|these|any|all\s+the)\s+(?P<word>[a-z][\w-]+)\s+{_PIECE}\s")
_VAGUE = frozenset(
    "whole other little one two three last old first personal private sensitive embarrassing awkward sad weird "
    "stupid dumb silly same few little memory".split()
)


def _qualified(subject: str, ref: str) -> str:
    """ "the rehab thing about my dad": my dad's rehab, not all that is known of him."""
    qualifier = _QUALIFIER.match(ref.strip() + " ")
    if qualifier is None or qualifier.group("word") in _VAGUE or not re.fullmatch(r"(?:(?:my|our)\s+)?[\w-]+", subject):
        return subject
    return f"{subject}'s {qualifier.group('word')}"


def find_forget_requests(session: Session) -> list[ForgetRequest]:
    """User turns of ``session`` that ask the assistant to forget something, with what they name."""
    found: list[ForgetRequest] = []
    for index, message in enumerate(session.messages):
        if message.role != "user":
            continue
        subject = detect(message.content)
        if subject:
            subject = _owner_named(subject, message.content)
        keep = kept(message.content)
        if asks_for_everything(message.content):
            found.append(
                ForgetRequest(subject=None, turn_index=index, text=message.content, keep=keep, everything=True)
            )
        elif (count := last_count(message.content)) is not None:
            found.append(ForgetRequest(subject=None, turn_index=index, text=message.content, last=count))
        elif subject is not None:
            found.append(ForgetRequest(subject=subject or None, turn_index=index, text=message.content, keep=keep))
        elif (bare := detect_bare(message.content)) is not None:
            found.append(
                ForgetRequest(
                    subject=_owner_named(bare, message.content),
                    turn_index=index,
                    text=message.content,
                    bare=True,
                    keep=keep,
                )
            )
        elif has_request_shape(message.content) or spots_request(message.content):
            found.append(
                ForgetRequest(subject=None, turn_index=index, text=message.content, keep=keep, shape_only=True)
            )
    return found


_HIS = r"husband|boyfriend|son|brother|dad|father|grandad|grandfather|grandpa|uncle|nephew|stepdad|fianc[eé]"
_HER = r"wife|girlfriend|daughter|sister|mum|mom|mother|nan|gran|grandma|grandmother|aunt|niece|stepmum|fianc[eé]e"
_EITHER = r"partner|boss|friend|best\s+friend|colleague|flatmate|roommate|neighbou?r|cousin|ex|kid|child|teacher"


def _owner_named(subject: str, text: str) -> str:
    """ "his job" in "my husband would be mortified ... forget his job situation": my husband's job."""
    pronoun = re.match(r"(his|her)\s+", subject)
    if pronoun is None:
        return subject
    people = _HIS if pronoun.group(1) == "his" else _HER
    turn = _normalise(text)
    before = turn[: max(turn.find(subject), 0)]  # the subject as the detector read it, else nobody
    owners = re.findall(rf"\bmy\s+((?:{people}|{_EITHER}))\b", before)
    return f"my {owners[-1]}'s {subject[pronoun.end() :]}" if owners else subject


# "... but keep that I get migraines", "you can still remember my job", "the rest is fine, keep my allergy"
_KEEP_EXCEPTION = re.compile(
    r"\b(?:but|though|although|and)\s+(?:you\s+can\s+|please\s+|do\s+|feel\s+free\s+to\s+)?(?:still\s+)?"
    r"(?:keep|remember|hold\s+on\s+to|leave)\s+(?P<keep>[^.;!?]+)|"
    r"\b(?:you\s+can|feel\s+free\s+to|it'?s\s+fine\s+to|(?:it'?s\s+)?ok(?:ay)?\s+to)\s+(?:still\s+)?"
    r"(?:keep|remember|hold\s+on\s+to)\s+(?P<keep2>[^.;!?]+)|"
    # "Only keep that I'm a student", "just keep my name": what stays besides the forgotten
    r"(?:^|[.;!?]\s*|\band\s+)(?:please\s+)?(?:only|just)\s+(?:keep|remember)\s+(?P<keep3>[^.;!?]+)|"
    # "Keep the latex allergy, that's useful, but forget the antidepressants"
    r"^(?:please\s+)?(?:keep|remember)\s+(?P<keep4>[^,.;!?]+)(?=,[^.;!?]*\bbut\s+(?:please\s+)?(?:forget|delete|erase|remove|drop)\b)|"
    # "forget all the food stuff except the shellfish allergy"
    r"\b(?:except(?:\s+for)?|apart\s+from|other\s+than|excluding|save\s+for)\s+(?P<keep5>[^.;!?]+?)(?=\s+[-–—]|[.;!?]|$)|"
    # "The hens can stay", "the VA stuff you can keep", "School stuff is fine", "where I'm from is fine to keep"
    r"(?:^|[.;!?,]\s*|\bbut\s+)(?!(?:but|and|so|though|you|u|i|we|it|that|this|everything|anything)\b)(?P<keep6>[a-z][\w'-]*(?:\s+[\w'-]+){0,6}?)\s+(?:you\s+(?:can|may)\s+(?:still\s+)?keep|"
    r"can\s+(?:stay|remain)|stays|(?:is|are)\s+(?:fine|ok|okay|alright)(?:\s+to\s+(?:keep|remember|stay))?)\b"
)


def kept(text: str) -> str | None:
    """What a forget request asks to keep ("Forget my meds but you can keep that I get migraines":
    I get migraines), when it names something; "keep the rest" names nothing."""
    found = _KEEP_EXCEPTION.search(_normalise(text))
    if found is None:
        return None
    raw = re.sub(
        r"^(?:that|the\s+fact\s+that|the\s+(?:part|bit)\s+about)\s+",
        "",
        found.group("keep")
        or found.group("keep2")
        or found.group("keep3")
        or found.group("keep4")
        or found.group("keep5")
        or found.group("keep6"),
    )
    raw = re.sub(  # "the diabetes medication, I need help with that one"; not "a son, Jake, who's 12"
        r"(?:,\s+(?:i|i'm|i'd|i'll|it|it's|that|that's|this|they|as|because|since|cause|cuz)\b|\s[-–—]).*$", "", raw
    )
    raw = re.sub(r"\s+(?:though|tho|if\s+you\s+like|if\s+you\s+want|obviously|of\s+course)$", "", raw.strip())
    if re.match(r"(?:the\s+rest|everything\s+else|anything\s+else|all\s+the\s+rest|it|that|them|this)\b", raw):
        return None
    return raw if content_words(raw) else None


# "remove him from what you know", "what I said about her": the one person the turn names
_HIM = re.compile(
    r"\b(?:about|remove|forget|delete|erase|wipe|drop|mentioned|mention|mentioning|to\s+do\s+with|involving|regarding)\s+(?P<who>him|her)\b(?!\s+(?:name|job|number|address|\w+'s))"
)
_NOT_A_NAME = frozenset(
    "it this that there he she they we what which who today everything nothing something here i "
    "monday tuesday wednesday thursday friday saturday sunday january february march april may june july august "
    "september october november december christmas easter".split()
)


def _people_named(text: str) -> set[str]:
    """Names in ``text``: capitalised words inside a sentence, or opening one as a subject ("Chris and I ...")."""
    names = set()
    for found in re.finditer(
        r"(?P<start>^|[.!?]\s+)?\b(?P<name>[A-Z][a-z]{2,})\b(?P<next>\s+(?:and|is|was|wasn't|isn't|has|had|asked|said|told|wants|wanted|does|did|doesn't|didn't|would|will|won't|can|can't|hates|loves|thinks|knows|got|went|passed|died|left|moved)\b|'s)?",
        text,
    ):
        if found.group("name").lower() in _NOT_A_NAME:
            continue
        if found.group("start") is None or found.group("next"):
            names.add(found.group("name").lower())
    names |= {m.group("name").lower() for m in re.finditer(r"\bthe\s+name\s+[\"']?(?P<name>[A-Za-z]{3,})\b", text)}
    if not names:  # typed in lower case: "luca and i are done"
        names = {
            m.group("name")
            for m in re.finditer(r"(?:^|[.!?]\s+)(?P<name>[a-z]{3,})\s+and\s+[iI]\b", text)
            if m.group("name") not in _STOP and m.group("name") not in _NOT_A_NAME
        }
    return names


_KIN_WORDS = frozenset("dad mum mom father mother grandad grandpa grandma gran nan granny".split())


def _pronoun_named(turn: str, text: str) -> str:
    pronoun = _HIM.search(turn)
    if pronoun is None:
        return turn
    names = _people_named(text)
    if (
        len(names) > 1
    ):  # "Mia and I broke up, so forget anything about her. I'm moving out of Brooklyn": the name before it
        before = _HIM.search(text.lower())
        names = _people_named(text[: before.start()]) if before is not None else names
    if len(names) != 1:
        return turn
    if (only := next(iter(names))) in _KIN_WORDS:  # "Dad passed away on Sunday ... what you have about him"
        names = {f"my {only}"}
    name = next(iter(names))

    def named(found: re.Match[str]) -> str:  # "wipe him": wipe everything about marcus; "about her": about mia
        act = found.group(0)[: found.start("who") - found.start(0)]
        return act + (name if re.match(r"(?:about|mention)", act) else f"everything about {name}")

    return _HIM.sub(named, turn)


# A clause, not a list of things: "the printer's working again", "the question can wait"
_VERB_IN = re.compile(
    r"'s\s+\w+ing\b|\b(?:is|are|was|were|isn'?t|aren'?t|wasn'?t|can|can'?t|will|won'?t|could|would|should|has|have|had|got|gets|"
    r"does|did|doesn'?t|didn'?t|needs?|seems?|looks?)\b"
)
_VAGUE_DATA = frozenset(
    "data info information details stuff things bits special category personal sensitive private".split()
)


# A document the user is writing, named as where the act happens: "in my CV, remove ...", "can you reformat it".
_EDITING = re.compile(
    r"\b(?:in|from)\s+(?:the|my|this|that|our)\s+(?:\w+\s+)?(?:cv|resume|résumé|essay|draft|letter|document|doc|speech|slides|"
    r"presentation|report|bio|cover\s+letter|toast|eulogy|script|vows|caption|spreadsheet|paragraph|poem|article|blog(?:\s+post)?)\b|"
    r"\b(?:reformat|proofread|redraft|rewrite|reword)\b|"
    r"\b(?:first|second|third|fourth|fifth|last|next|previous|opening|closing)\s+(?:paragraph|chapter|section|sentence|page|slide|verse|stanza|line|lines|bullet)\b|"
    # "remove the third bit": a numbered piece of a text or a list ("the last bit about my ex" is what was said)
    r"\b(?:first|second|third|fourth|fifth|1st|2nd|3rd|4th|5th)\s+(?:bit|point|part|item|option|suggestion|step)\b|"
    r"\b(?:paragraph|chapter|section|stanza|verse|line|lines|sentence|bullet|slide)\s+(?:of|about|in|on)\b|"
    # a letter the user sends to someone else: "help me draft a GDPR erasure request to Ocado"
    r"\b(?:draft|write|compose|word|phrase)\s+(?:\w+\s+){0,4}?(?:request|letter|e-?mail|message|complaint|reply|response|form|note)\s+(?:to|for)\b"
)


def _edits_a_document(turn: str) -> bool:
    """ "In my CV, remove the line about my last job", "delete the third paragraph of the chapter
    about my dad", "help me draft an erasure request to my bank": the user's own document, or what
    they ask someone else to delete, unless the turn speaks of the assistant's memory."""
    return bool(_EDITING.search(turn)) and not (_EXPLICIT_MEMORY.search(turn) or _FROM_MEMORY.search(turn))


# What names no stored fact: a stretch of time ("Wipe today from the record. Migraine hit at 11 ..."),
# a question the user asked ("forget my question about the wine, I will take the Saint-Joseph").
_NOT_A_FACT = re.compile(rf"^{A_STRETCH_OF_TIME}$|^(?:my|that|the|this)\s+(?:last\s+|silly\s+|stupid\s+)?questions?\b")
# "would you forget him automatically or do I have to tell you?": a question about how memory works.
_ON_ITS_OWN = re.compile(r"\bautomatically\b|\bon\s+(?:its|your)\s+own\b|\bby\s+(?:itself|yourself)\b")


def detect(text: str) -> str | None:
    """What the forget request in ``text`` names ("" when it points back: "don't keep that in
    memory"), or None when the text makes no forget request."""
    turn = _pronoun_named(_normalise(text), text)
    if _edits_a_document(turn):
        return None
    names = frozenset(word.lower() for word in _NAMED.findall(text) if not text.startswith(word))
    subjects: list[str] = []
    pointing_back = ""
    clauses = _clauses(turn)
    if any(_LAST_ONE.search(c) for c in clauses[:1]) and any(
        _PRONOUN_REQUEST.match(c.rstrip(" .!?")) for c in clauses[1:]
    ):
        return ""  # "that last one is private, please remove it": what the user said last
    for index, clause in enumerate(clauses):
        clause = clause.rstrip(" .!?")
        clause = re.sub(rf"^{_OPENER}(?:don'?t|do\s+not)\s+forget\s+to\s+(?={_ERASE}\s)", "", clause)
        if _NEGATED_FORGET.search(clause) and not re.search(rf"\b{_NEGATION}\s+{_KEEP}\b", clause):
            continue  # "don't forget to ...", "never forget that ...": asks to remember, not to forget
        if re.search(_SOMEONE_SUGGESTS, clause) or NOT_ASKED.search(clause) or _ON_ITS_OWN.search(clause):
            continue  # someone else's idea; an act not asked for ("I don't want you to forget Théo"); how memory works
        if _FOR_NOW.search(clause) and not (_EXPLICIT_MEMORY.search(turn) or _FROM_MEMORY.search(turn)):
            continue  # "forget about my dad for now, I don't wanna get into it": not now, not gone
        subject = _clause_subject(clause, turn, names)
        if subject and content_words(subject) <= _VAGUE_DATA and index + 1 < len(clauses):
            # "any special category data you hold on me — my religion and my sexual orientation"
            named = clauses[index + 1].rstrip(" .!?")
            subject = (_subject(named) if re.match(r"(?:my|our|the)\s", named) else None) or subject
        if subject:
            more = [
                m
                for m in _more_named(clause[len(clause) - len(clause.lstrip()) :], clauses[index + 1 :])
                if m not in subject
            ]
            subjects += [
                subject,
                *more,
            ]  # "Forget X. And the stipend.", "... out of your memory, and the ICU application too"
        elif subject == "":
            if _LAST_SAID.match(clause):
                return ""
            pointing_back = pointing_back or clause
    if subjects:
        return _joined(subjects)
    if pointing_back:  # "get rid of that from your memory": what the turn said it is, else the turn before
        return _loose_request(turn) or _said_in_turn(turn, pointing_back)
    return _loose_request(turn)


# "forget the split", "could you erase the fight where he went to his brother's", "Wipe Marco. All of it."
_BARE = re.compile(
    rf"{_LEAD}(?P<verb>{_FORGET}|{_verb('delete', 'erase', 'remove', 'wipe', 'scratch', 'purge', 'scrub', 'expunge', 'unlearn')})"
    r"\s+(?:about\s+)?(?P<subject>.+)$"
)
# Editing what the assistant wrote or was given ("the paragraph you wrote", "the third option on your
# list", "the photo I uploaded", "remove the cashews and swap in ..."), or a title ("Forget You").
_YOUR_OUTPUT = re.compile(
    r"^you\b|\b(?:you|u)\s+(?:just\s+)?(?:wrote|gave|made|suggested|listed|drafted|sent|generated|came\s+up\s+with|helped\s+(?:me\s+)?(?:with|write|draft))\b|\byour\s+(?:list|answer|reply|draft|"
    r"suggestions?|options?|version|text|summary|plan)\b|\bi\s+(?:uploaded|attached|sent|pasted|shared\s+(?:earlier\s+)?as)\b|"
    r"\b(?:swaps?|replace|substitute|instead)\b"
)
_NAMED = re.compile(r"\b[A-Z][a-z]{2,}\b")


def detect_bare(text: str) -> str | None:
    """What a bare act names ("forget the split": the split), when the turn makes no request the rules
    above read. Forgetting counts as it stands; deleting, erasing or removing (which people do to
    onions and drafts too) only when the turn speaks to the assistant, gives a reason to take
    something back ("it's embarrassing") or names a person ("Wipe Marco")."""
    turn = _normalise(text)
    if _edits_a_document(turn):
        return None
    for clause in _clauses(turn):
        clause = clause.rstrip(" .!?")
        bare = _BARE.match(clause)
        if bare is None or _NEGATED_FORGET.search(clause) or _WONDERING.search(clause) or opens_on_gerund(clause):
            continue
        if re.search(r"\bhelp\s+me\b", clause):
            continue  # "can you help me delete the condition in this formula": the user's own act
        raw = bare.group("subject")
        others = [p for p in _SENTENCES.split(turn) if clause not in p]
        if re.match(r"(?:it|that|this|them|those)\b", raw) or any("?" in p for p in others):
            continue  # "Forget the raise - they announced layoffs. How do I ...?" moves on to something else
        if re.match(r"(?:but|and|so|just)\s", clause) and not (
            _ADDRESS.search(turn) or _REASON.search(turn) or kept(text)
        ):
            continue  # "I tried, but forget the gym": moving on, unless the turn asks something of the assistant
        if re.match(rf"(?:what|everything|anything)\s+i\s+(?:{_SAID})", raw):
            continue  # "Forget what I said about work." moves on (issue 32); the rules read it when it asks
        after = turn[turn.find(clause) + len(clause) :][:40]
        if re.search(r",\s*(?:i|i'?ve|i'?m|we|we'?re|they)\b", raw + after):
            continue  # "forget sleeping in this weekend, I've got a 6am session"
        if _FROM_THING.search(raw) or _FOR_A_WHILE.search(raw + after) or _DISMISSIVE.search(raw + after):
            continue
        subject = _subject(raw)
        if subject is None or _NOT_MEMORY.match(subject) or _YOUR_OUTPUT.search(raw) or _YOUR_OUTPUT.search(turn):
            continue
        named = any(
            word.lower() in content_words(subject) for word in _NAMED.findall(text) if not text.startswith(word)
        )
        if bare.group("verb").startswith("forget") or _ADDRESS.search(turn) or _REASON.search(turn) or named:
            return subject
    return None


# A clause that opens on a gerund ("Losing my job was hard", "Deleting the app helped") talks about
# an act; it does not ask for one.
_GERUND_START = re.compile(rf"^{_OPENER}(?P<verb>{_FORGET}|{_ERASE})\b")


def opens_on_gerund(clause: str) -> bool:
    opening = _GERUND_START.match(clause)
    return opening is not None and opening.group("verb").split()[0].endswith("ing")


_MEMORY_VERB = re.compile(r"\bun-?(?:remember|learn|save)\w*\s*$")  # acts only on memory: "unremember the dog fear"
_CLEAR = re.compile(rf"{_LEAD}(?:clear|clearing)\b")
_IMPERATIVE_RULES = frozenset(
    {"forget", "forget-i", "forget-named", "erase", "erase-from", "erase-from-first", "wipe-of", "quoted"}
)


def _clause_subject(clause: str, turn: str, names: frozenset[str] = frozenset()) -> str | None:
    """What ``clause`` asks to forget ("" when it points back), or None; ``names`` are the words the
    turn capitalises mid-sentence ("the Mark stuff" is about Mark, "the mark" a stain)."""
    last = _LAST_SAID.match(clause)
    if last is not None:  # "forget the last thing I told you": the turn before (or the newest fact)
        rest = last.group("rest") or ""
        about = re.match(r"\W*about\s+(?P<about>.+)$", rest)  # "the thing I said right before this, about my sister"
        if about is not None and (subject := _subject(about.group("about"))):
            return subject
        return "" if not rest or _REASON.search(rest) or _addressed(clause, turn) else None
    retraction = _RETRACTION.match(clause)
    if retraction is not None and not _CORRECTION.match(retraction.group("rest")):
        named = re.match(
            r"\s*about\s+(?P<about>.+)$", retraction.group("rest")
        )  # "forget I said that about her dementia"
        return (_subject(named.group("about")) if named else None) or _earlier_statement(turn, clause)
    unwanted = _UNWANTED.match(clause)
    if (
        unwanted is not None
        and not unwanted.group("rest")
        and not re.match(r"(?:that|it|this)\s+\w+ing$", unwanted.group("subject"))
    ):
        raw = unwanted.group("subject")  # ("I don't want that sitting in your memory": "that" points back)
        topical = _TOPICAL.match(raw)
        subject = _subject(topical.group("topic") if topical else raw)
        if (
            subject
            and (topical or raw.startswith("the ") or _personal_or_memory(raw, clause))
            and not _NOT_MEMORY.match(subject)
        ):
            return subject
    gerund = opens_on_gerund(clause)
    for name, rule in _RULES:
        match = rule.match(clause)
        if match is None or (gerund and name in _IMPERATIVE_RULES):
            continue
        raw = match.group("subject") or match.group("named") if "named" in rule.groupindex else match.group("subject")
        ref = ((match.group("ref") if "ref" in rule.groupindex else None) or "").strip()
        head = clause[: match.start("subject") if match.group("subject") is not None else match.start("named")]
        topical = None if ref else _TOPICAL.match(raw)
        # "the Mark info" and "the Mark stuff" are about Mark, "the mark" a stain
        not_memory = (
            _NOT_MEMORY.match(topical.group("topic"))
            and not _INFO_ABOUT.search(raw)
            and topical.group("topic") not in names
            if topical
            else False
        )
        if topical is not None and not not_memory and not _FROM_THING.search(raw):
            if name in ("forget", "forget-named", "erase"):
                after = turn[turn.find(clause) + len(clause) :][:40] if clause in turn else ""
                if _FOR_A_WHILE.search(raw + after) and not _addressed(head, turn):
                    continue  # "forget the wedding stuff for now, let's ..."
            subject = _subject(_TOPIC_WORD.sub("", raw))
            if subject:
                return subject
        if name == "forget-i" and not _addressed(head, turn):
            continue
        if name == "forget-named" and not (_addressed(head, turn) or _plain_personal(raw, clause)):
            continue
        if name == "ensure-gone" and not (ref or _FROM_MEMORY.search(clause)):
            continue  # "make sure the dishes are removed": not memory
        if (
            name == "forget"
            and not _EXPLICIT_REF.match(ref)
            and not _addressed(head, turn)
            and not _REASON.search(turn)
            and not (
                raw.startswith(("my ", "our ", "what i do ", "where i live", "where i work"))
                and turn.rstrip(" .!?") == clause
                and not re.search(r"[,;-]", clause)
            )
        ):
            # "forget what I said about work, let's go" is talk; "please forget ...", or a turn that is
            # only "forget what I said about my debt", asks
            continue
        # "you don't need to hold on to the driving test failures": "the" names a fact when told to the assistant
        told = name in ("keep", "rather") and (
            re.match(
                rf"{_LEAD}(?:you\s+(?:don'?t|do\s+not)\s+need\s+to|(?:there'?s\s+)?no\s+need\s+for\s+you\s+to)\s",
                clause,
            )
            or re.search(r"\b(?:notes?|records?|a\s+log|track)\s+(?:on|of)\s*$", clause[: match.start("subject")])
        )  # "stop keeping notes on the custody battle": notes are memory
        if (
            name in ("keep", "rather")
            and not ref
            and (not (_personal_or_memory(raw, clause) or (told and raw.startswith("the "))) or _NOT_MEMORY.match(raw))
        ):
            continue  # "don't keep me waiting", "don't keep the receipt", "I don't want you saving the file"
        if name == "want-gone" and not (
            ref
            or (raw.startswith(("my ", "the info", "the details")) and _ADDRESS.search(turn))
            or _FROM_MEMORY.search(clause)
        ):
            continue  # "I want my ex's name gone" (a tattoo) speaks to no one
        subject = _subject(raw)
        if subject is not None and ref:
            subject = _qualified(subject, ref)
        elif subject is None and ref and raw.strip(" .!?") in ("me", "myself"):
            qualifier = _QUALIFIER.match(ref + " ")  # "the health data you hold about me": my health
            if qualifier is not None and qualifier.group("word") not in _VAGUE:
                subject = f"my {qualifier.group('word')}"
            elif qualifier is not None and _FROM_MEMORY.search(clause):
                subject = f"the {qualifier.group('word')} data"  # "the sensitive data you hold on me — my religion ..."
        if subject is None or _YOUR_OUTPUT.search(raw):
            continue  # "erase the last line of that poem you just wrote": an edit, not memory
        if name == "erase" and not ref and _CLEAR.match(clause) and not _FROM_MEMORY.search(clause):
            continue  # "clear my friday", "clear my head": clearing counts only out of memory
        if "help me" in head and not ref and not _FROM_MEMORY.search(clause):
            continue  # "help me lose my baby weight": the user's own act, not the assistant's memory
        if (
            name == "erase"
            and not ref
            and not (
                subject.startswith(("my ", "our "))
                or _FROM_MEMORY.search(clause)
                or _MEMORY_VERB.search(head)
                or re.search(r"\bmemor(?:y|ies)\s*$", raw)  # "the Centrelink memory"
                or any(  # "delete the mental health diagnosis", "remove the ADHD meds, ... and where I live"
                    _PERSONAL_MATTER.search(piece) or re.match(r"(?:my|our|where\s+i|what\s+i|how\s+much\s+i)\s", piece)
                    for piece in re.split(r",\s*(?:and\s+)?|\s+and\s+", subject)
                )
            )
        ):
            continue  # "erase a stain": erasing only counts for what was said or a personal detail
        if name in ("erase", "erase-from") and _NOT_MEMORY.match(subject) and not ref and not _INFO_ABOUT.search(raw):
            continue
        if _NOT_A_FACT.match(subject):
            continue  # "Wipe today from the record.", "forget my question about the wine": no stored fact named
        if (
            name == "erase"
            and (_FROM_DOCUMENT.search(raw) or (not ref and _FROM_THING.search(raw)))
            and not _FROM_MEMORY.search(raw)
        ):
            continue  # "remove my name from the list", "the bit about X from my speech": out of a thing, not out of memory
        return subject
    # "please forget that, we're working things out": a reason after a plea, still the request
    pleaded = (
        re.sub(r",\s+(?:we|i|it|that|things|he|she|they)(?:'\w+)?\s.*$", "", clause)
        if re.search(_PLEASE, clause)
        else clause
    )
    named = re.match(
        r"(?P<act>.+?),\s+(?P<named>(?:the|my|our)\s[^,]+?(?:(?:,\s*|\s+and\s+)(?:the|my|our)\s[^,]+?)*)$", clause
    )
    if (
        named is not None
        and _PRONOUN_REQUEST.match(named.group("act"))
        and not re.match(
            rf"^{_OPENER}{_FORGET}\s+(?:about\s+)?(?:it|that|this)$", named.group("act")
        )  # "forget it, the printer's working"
        and not _VERB_IN.search(named.group("named"))
        and (subject := _subject(named.group("named")))
    ):
        upto = turn.find(clause)
        said = _SAID_BEFORE.search(turn[:upto]) if upto > 0 else None
        earlier = _subject(said.group("subject")) if said is not None else None
        return _joined([earlier, subject] if earlier else [subject])  # "forget all of it, the divorce and the cheating"
    if _PRONOUN_REQUEST.match(clause) or _PRONOUN_REQUEST.match(pleaded):
        upto = turn.find(clause) + len(clause) if clause in turn else len(turn)
        said = _SAID_BEFORE.search(turn[:upto])
        apposition = re.match(r"\s*[.!]?\s*(?:[-–—:]+)\s*(?P<rest>.+)$", turn[upto:])
        if said is None and apposition is not None:
            said = _SAID_BEFORE.search(apposition.group("rest"))
        if said is not None and (_ADDRESS.search(turn) is not None or _EXPLICIT_MEMORY.search(clause)):
            subject = _subject(said.group("subject"))
            if subject:
                return subject
        if (
            _EXPLICIT_MEMORY.search(clause)
            or re.match(rf"{_LEAD}{_NEGATION}\s+{_KEEP}", clause)
            or re.search(_STORED_POINTER, turn)
        ):
            return ""
        if said is not None and re.search(rf"\b{_PLEASE}\b", clause):
            subject = _subject(said.group("subject"))
            return subject or None
    return None


# "forget what I just said", "please forget the last thing I told you, I shouldn't have".
_LAST_SAID = re.compile(
    rf"{_LEAD}(?:{_FORGET}|{_ERASE}|(?:not\s+to|{_NEGATION})\s+{_KEEP})\s+"
    r"(?:what\s+i\s+just\s+{said}|(?:the|that)\s+last\s+(?:thing|bit)\s+i(?:\s+just)?\s+{said}|"
    r"(?:the|that)\s+(?:thing|bit)\s+i\s+{said}\s+(?:right\s+|just\s+)?before\s+this|my\s+(?:last|previous|most\s+recent|latest)\s+(?:message|comment|reply|answer)(?=\W|$)|(?:that|the)\s+last\s+(?:one|message)(?=\W|$)|"
    r"what\s+i\s+{said}(?:\s+(?:to\s+)?you)?(?=\s+(?:a\s+(?:moment|second|sec|minute|min)\s+ago|just\s+now))|"
    r"(?:what(?:ever)?|the\s+thing)\s+i\s+{said}(?:\s+you)?\s+(?:most\s+recently|last))"
    r"(?:\s+(?:to\s+)?you)?(?:\s+(?:a\s+(?:moment|second|sec|minute|min)\s+ago|just\s+now))?(?P<rest>\W.*)?$".replace(
        "{said}", r"(?:said|told\s+you|mentioned|shared|wrote|typed)"
    )
)
_LAST_ONE = re.compile(r"\b(?:that|the)\s+last\s+(?:one|thing|bit|message)\b(?!\s+(?:you|u)\b)")
# "forget the last two things I told you", "forget those last couple of things": the user's last turns
_LAST_FEW = re.compile(
    rf"(?<!\bi\s)(?:{_FORGET}|{_ERASE}|{_NEGATION}\s+{_KEEP})\s+(?:about\s+)?(?:the|those|these|my)\s+last\s+"
    r"(?P<count>two|three|four|five|few|couple(?:\s+of)?|[2-5])(?:\s+(?:things|messages|facts|bits|ones|statements|items|points))?"
    r"(?=\s*(?:$|[,.;:!?]|[-–—]|\s+i\s+(?:just\s+)?(?:said|told|mentioned|shared|wrote|typed|gave)\b|\s+(?:please|(?:from|out\s+of|in)\s+(?:your\s+|the\s+)?(?:memory|memories|notes|records?))\b))"
)
_MY_LAST_FEW = re.compile(
    r"\bmy\s+(?:last|previous)\s+(?P<count>two|three|few|couple(?:\s+of)?|[2-5])\s+(?:messages|things|comments|texts)\b"
)
_COUNTS = {"two": 2, "couple": 2, "three": 3, "few": 3, "four": 4, "five": 5}


# "forget everything you know about me", "delete all the data you hold on me"
_ALL_OF_ME = re.compile(
    rf"{_LEAD}(?:{_FORGET}|{_ERASE})\s+(?:everything|every\s+(?:single\s+)?thing|all(?:\s+(?:of\s+)?(?:the\s+)?(?:(?:personal|private)\s+)?(?:stuff|things|info|information|data|details))?)\s+"
    r"(?:that\s+)?(?:you|u)(?:'ve|\s+have)?\s+(?:\w+\s+)?(?:know|have|hold|remember|stored|saved|kept|got|noted|recorded|logged|collected|learn[te]d?)"
    r"(?:\s+(?:stored|saved|on\s+file))?\s+(?:about|on)\s+me\b|"
    # "forget everything about me", "purge my entire profile": not "everything about me and my ex"
    rf"{_LEAD}(?:{_FORGET}|{_ERASE})\s+(?:(?:everything|all)\s+(?:about|on)\s+me|(?:my|the)\s+(?:entire|whole)\s+(?:profile|file|record)(?:\s+(?:on|about)\s+me)?)"
    r"(?=\s*(?:[,.!?;]|$)|\s+(?:please|pls|plz|now|completely|entirely|for\s+good|and\s+start|as\s+well)\b)|"
    rf"{_LEAD}(?:{_FORGET}|{_ERASE})\s+(?:all\s+of\s+it|it\s+all|everything)\s+(?=(?:apart\s+from|except(?:\s+for)?|other\s+than|save\s+for)\s)|"
    # "clear your whole memory (of me)", "wipe your memory of me": not "your memory of the trip"
    rf"{_LEAD}(?:{_FORGET}|{_ERASE})\s+(?:(?:your|ur|the)\s+(?:whole|entire)\s+memory(?:\s+(?:of|about|on)\s+me)?|(?:your|ur)\s+memor(?:y|ies)\s+(?:of|about|on)\s+me)"
    r"(?=\s*(?:[,.!?;]|$)|\s+(?:please|pls|fam|mate|bro|now|completely|entirely|for\s+good|and\s+start)\b)|"
    # "wipe all my memories", "wipe all memories", "clear all your memories about me", "I want all my memories deleted"
    rf"{_LEAD}(?:{_FORGET}|{_ERASE})\s+(?:all|every(?:\s+single)?(?:\s+one)?)\s+(?:of\s+)?(?:(?:my|the|your|ur)\s+)?(?:memories|data|saved\s+(?:info|information|data))\b(?!\s+(?:on|from|in|of|about)\s+(?!you\b|your\b|me\b))|"
    rf"^{_OPENER}i\s+(?:want|need|would\s+like|'d\s+like)\s+(?:all|every\s+one)\s+(?:of\s+)?my\s+(?:memories|data)\s+(?:deleted|erased|wiped|removed|gone|forgotten)\b"
)


def asks_for_everything(text: str) -> bool:
    """Whether the turn asks to forget all that is known of the user ("... except my name" keeps that)."""
    return any(
        _ALL_OF_ME.search(clause) and not _NEGATED_FORGET.search(clause) for clause in _clauses(_normalise(text))
    )


def last_count(text: str) -> int | None:
    """How many of the user's last turns a request takes back ("the last two things I told you": 2;
    "my last couple of messages were a lot. can you not store those?": 2), or None when it names no count."""
    clauses = _clauses(_normalise(text))
    for clause in clauses:
        found = _LAST_FEW.search(clause)
        if found is None and any(_PRONOUN_REQUEST.match(c.rstrip(" .!?")) for c in clauses):
            found = _MY_LAST_FEW.search(clause)
        if found is not None and not _NEGATED_FORGET.search(clause):
            word = found.group("count").split()[0]
            return int(word) if word.isdigit() else _COUNTS[word]
    return None


_SENTENCES = re.compile(r"(?<=[.!?;])\s+|\s+[-–—]+\s+|\n+")  # where one sentence of a turn ends


def _earlier_statement(turn: str, clause: str) -> str:
    """What "forget I said that" takes back: the turn's last statement before it ("" when the turn
    has none: then it is the user's turn before)."""
    before = turn[: turn.find(clause)] if clause in turn else ""
    told = _TOLD_ABOUT.search(before)  # "re what I said the other night about Jordan ... forget I said that"
    if told is not None and told.group("about") and (subject := _subject(told.group("about"))):
        return subject
    for sentence in reversed(_SENTENCES.split(before)):
        sentence = re.sub(rf"^{_OPENER}", "", sentence.strip(" .!?;,")).strip()
        if re.match(rf"(?:don'?t|do\s+not|never|{_PLEASE})\s", sentence):
            continue  # "Don't replace it with anything": what the user asks, not what they said
        if len(content_words(sentence)) >= 2:
            return sentence
    return ""


def _said_in_turn(turn: str, clause: str) -> str:
    """What "remove it" points to when the turn said a fact before it ("... I don't want the
    Jehovah's Witness part in there. Remove it from your memory."): that sentence, else "" (the turn before)."""
    earlier = _earlier_statement(turn, clause)
    if named := re.search(r"\b(?:the|that)\s+(?P<topic>(?:[\w'-]+\s+){1,3}?)(?:part|bit|thing|stuff)\b", earlier):
        return _subject(named.group("topic")) or ""  # "I don't want the Jehovah's Witness part in there"
    earlier = re.split(r",\s+(?:so|and|but)\s+(?=.*\byou\b)", earlier)[
        0
    ]  # "the marathon's off, so you can forget about that"
    earlier = re.split(r",?\s+so\s+(?=(?:that|this|it)\b)", earlier)[0]  # "I quit ... so that note is outdated"
    if not earlier or _REASON.search(earlier) or _LAST_ONE.search(earlier) or re.search(r"\b(?:you|your)\b", earlier):
        return ""
    return _subject(earlier) or ""


def _addressed(head: str, turn: str) -> bool:
    """A bare "forget (about) X" counts only when the turn speaks to the assistant: please, you, its memory."""
    return bool(re.search(rf"\b{_PLEASE}\b|\byou\b|\bdo\s+me\s+a\s+favou?r\b", head)) or bool(
        re.search(
            rf"(?:from|in|out\s+of)\s+{_MEMORY}\b|\b{_NEGATION}\s+{_KEEP}\b|\b{_PLEASE}\b|\b{_STORED}\b|"
            r"\b(?:you\s+can|feel\s+free\s+to)\s+(?:still\s+)?keep\b",  # "... but you can keep that I get migraines"
            turn,
        )
    )


_DISMISSIVE = re.compile(
    r",\s*(?:let'?s|i'?ll|we'?ll|i'?m\s+going|not\s+important|doesn'?t\s+matter|never\s+mind|whatever|anyway)"
)


def _plain_personal(raw: str, clause: str) -> bool:
    """ "Forget my birthday." asks to forget a personal detail; "forget my problems, let's ..." is talk."""
    return raw.startswith(
        ("my ", "our ", "where i ", "how much i ", "when i ", "which ", "who i", "what i do ")
    ) and not _DISMISSIVE.search(raw)


def _personal_or_memory(subject: str, clause: str) -> bool:
    return (
        bool(
            re.match(
                r"(?:my|our|where\s+i|what\s+i|which|how\s+much\s+i|how\s+i|when\s+i|who\s+i|that\s+i|i(?:'m|'ve)?)\s",
                subject.strip(),
            )
        )
        or bool(
            re.search(
                rf"(?:from|in|on|out\s+of)\s+{_MEMORY}\b|\bon\s+(?:file|record)\b|\bremember|\bmemori[sz]|"
                r"\byou\s+(?:to\s+)?(?:store|storing|save|saving|record|recording|log|logging)\b",  # "I don't want you storing ..."
                clause,
            )
        )
    )


# ---------------------------------------------------------------------------------------------- loose reading
# The rules above read the shapes they list; people phrase the same request in many more ("I must
# request that you forget what I mentioned concerning my wife's diagnosis", "Delete salary info.",
# "I regret telling you about Elena. Please get rid of that"). The loose reading takes a sentence
# apart instead: an act on memory (forget, delete, "don't keep", "not on file" ...) asked of the
# assistant (not done by someone, not wondered about), and a reference to what the user told it.
_BASE_ACT = (
    r"(?:forget|delete|erase|erace|remove|wipe|scratch|drop|purge|clear|scrub|expunge|unlearn|discard|make\s+(?:(?:it|that|this|them)\s+)?disappear|"
    r"nix|scrap|toss|trash|chuck|dump|yeet|nuke|bin|ditch|rub\s+(?:(?:it|that|this|those|them|both|those\s+both|them\s+both)\s+)?out|let\s+go\s+of|make\s+yourself\s+(?:not\s+know|forget)|"
    r"get\s+rid\s+of|take\s+(?P<taken>(?:[\w'-]+\s+){1,5}?)(?:back\s+)?(?:out|off)\b(?!\s+(?:of\s+)?(?:the|a|my|that|this)\s+(?!memory|records?|notes|files?|info)))"
)
# Who asks it of the assistant: a sentence that starts on the verb, "please ...", "you ...", "... you to ...".
_ASKED = (
    rf"(?:^{_OPENER}(?:(?:dear\s+assistant|my\s+friend|assistant)[\s,]+)?(?:(?:please|pls|kindly|just|simply|now)[\s,]+)*|"
    r"\b(?:please|pls|kindly)\s+(?:(?:you|u|just|my\s+friend)[\s,]+)*|"
    r"\b(?:so|then|and|and\s+also|also)\s+(?:(?:just|please|pls|actually)\s+)*|\b(?:can|could)\s+we\s+(?:just\s+)?|\blet'?s\s+(?=(?!forget)\w)|,\s+(?=\w+\s+(?:it|that|this|those|them)\b)|"
    r"\b(?:you|u)\s+(?:(?:can|could|would|will|should|must|may|to|kindly|just|please|now|also|then|maybe|simply|be\s+so\s+kind\s+as\s+to)\s+)*|"
    r"\b(?:ask|asking|like|want|need|request|requesting|beg|tell|telling)\s+(?:you|u)\b[^.?!]*?\bto\s+(?:(?:kindly|please|just)\s+)?)"
)
_LOOSE_ACT = re.compile(
    rf"{_ASKED}(?P<act>{_BASE_ACT})\b|\b(?:can|could)\s+(?:that|it|this|those)\s+(?P<gone>go)\b|\blet\s+(?:it|that|this|them)\s+(?P<letgo>go)\b|^(?:you|u)\s+(?P<done>forgot|deleted|erased|removed|wiped|dropped|scratched|got\s+rid\s+of)\b"
)
_KEEP_WORDS = (
    r"(?:keep|keeping|store|storing|save|saving|remember|remembering|rember|hold|holding|retain|retaining|hang\s+on\s+to|"
    r"record|recording|track|tracking|have|having|log|logging|conserve|conserving)"
)
_LOOSE_KEEP = re.compile(
    rf"(?:\b(?:you|u)\s+(?:to\s+)?(?:didn'?t|did\s+not|not|wouldn'?t|would\s+not|don'?t|do\s+not|never|stop(?:ped)?|no\s+longer)\s+(?:(?:really|actually|even|still|always|keep)\s+)?(?!have\b|having\b){_KEEP_WORDS}|"
    rf"(?:^{_OPENER}|,\s*|\b(?:please|pls|so|and|just)\s+|\b(?:you|u)\s+(?:(?:could|can|would|will|please|just)\s+)+)(?:don'?t|do\s+not|never|stop|quit|no\s+longer|cease\s+to)\s+{_KEEP_WORDS}|"
    rf"\b(?:please|pls)\s+not\s+{_KEEP_WORDS}|"
    rf"\b(?:not|un)\s*(?:really\s+)?(?:comfortable|happy|ok|okay|keen)\s+(?:with\s+)?(?:you|u)\s+{_KEEP_WORDS}|"
    rf"\bmind\s+not\s+{_KEEP_WORDS}|\b(?:you|u)\s+not\s+have\s+(?:that|it|this|those|them)\s+(?:saved|stored|kept|on\s+file|written\s+down)|\b(?:don'?t|do\s+not)\s+need\s+(?:you|u)\s+(?:to\s+)?{_KEEP_WORDS}|"
    r"\b(?:didn'?t|did\s+not|doesn'?t|wouldn'?t|not)\s+stay\s+in\s+(?:your|ur)\s+(?:memory|memories|records?|head)|"
    r"\b(?:wasn'?t|weren'?t|isn'?t|aren'?t|(?:was|were|is|are)\s+not|not\s+be|no\s+longer\s+be|(?:was|were|is|are)\s+no\s+longer)\s+(?:\w+\s+)?"
    r"(?:in\s+(?:your|ur)\s+(?:memory|memories|records?|notes)|on\s+(?:file|record)|stored|saved|kept|remembered|"
    r"(?:something|part\s+of\s+what)\s+(?:you|u)\s+(?:kept|keep|stored|store|saved|remember(?:ed)?|carry|hold|have|know))|"
    # "I'd like that gone from your memory", "I want it deleted", "I don't want it in your memory"
    rf"\bi(?:'d|\s+would)?\s+(?:\w+\s+)?(?:like|want|need|prefer)\s+(?P<wanted>that|it|this|those|them|that\s+one|all\s+(?:of\s+)?(?:that|it))\s+"
    r"(?:gone|deleted|erased|removed|wiped|forgotten|not\s+(?:to\s+)?be\s+(?:kept|stored|saved|remembered))|"
    rf"\bi\s+(?:really\s+)?(?:don'?t|do\s+not)\s+want\s+(?P<unwanted>that|it|this|those|them)\s+(?:in\s+(?:your|ur)\s+(?:memory|memories|records?)|{_STORED}))\b(?P<act>)"
)
_POLITE_NOT_KNOW = re.compile(
    r"^(?:you|u)\s+(?:didn'?t|did\s+not|wouldn'?t|would\s+not|no\s+longer|don'?t)\s+(?P<act>know|have|keep|remember|store|hold)\b"
)
# Someone else's idea, reported: "Someone in my tute said I should make you delete my health stuff".
_SOMEONE_SUGGESTS = (
    r"(?<!\bi\s)\b(?:says|said|reckons|thinks|told\s+me|tells\s+me)\s+(?:that\s+)?(?:i|we)\s+"
    r"(?:should|could|ought\s+to|must|need\s+to|have\s+to)\b|"
    r"\b(?:told|tells|asked|asks|wants|wanted)\s+me\s+to\s+(?:make|have|get)\s+(?:you|u)\b|"  # "told me to make you delete"
    r"\b(?:says|said|saying|sayin'?)\s+(?:that\s+)?(?:you|u)\s+(?:will|'ll|would|gonna|are\s+gonna)\b"  # "sayin u will forget"
)
_WONDERING = re.compile(
    rf"{_SOMEONE_SUGGESTS}|{NOT_ASKED.pattern}|"
    r"\b(?:did|didn'?t|have|haven'?t|had|has|were|was)\s+(?:you|u)\b|"
    r"\bif\s+(?:i|we|you|u|someone|ever)\b|\bhypothetical|\bin\s+theory\b|\bwhat\s+happens\b|\bhow\s+(?:do|does|can|would|long|much)\b|"
    r"\bwould\s+(?:it|you|u)\s+(?:actually|really|automatically|ever)\b|\bautomatically\b|\bjust\s+wondering\b|\bnot\s+asking\b|\bone\s+day\b|"
    r"\bcan\s+(?:you|u)\s+(?:even|actually|ever)\b|\bdo\s+(?:you|u)\s+(?:ever|actually|automatically|still)\b|\bwhen\s+(?:you|u|i)\b|"
    r"\bhow\s+to\b|\bwhy\s+(?:do|does|did|would|can'?t)\b|\bwhether\b|\bshould\s+i\b|\bis\s+it\s+(?:normal|safe|bad|possible\s+to\s+(?!forget))"
)
# "I would appreciate it if you ...", "it would make me feel better if ...": asking, not wondering.
_POLITE_IF = re.compile(
    r"^.*?\b(?:appreciate\s+it|grateful|thankful|obliged|better|happier|calmer|safer|more\s+comfortable|(?:more\s+)?at\s+ease|prefer(?:\s+it)?|rather|like\s+it|nicer|relieved|"
    r"(?:be\s+)?(?:ok|okay|fine|alright|good|great))\s+if\s+"
)
_ADDRESSED_TURN = re.compile(
    r"\b(?:you|u|your|ur|please|pls|kindly|assistant)\b|\bwhat\s+i\s+(?:said|told|mentioned|shared)\b"
)
_REFERS = re.compile(
    rf"\b(?:i(?:'ve|\s+have)?\s+(?:\w+\s+)?(?:{_SAID}|gave\s+you|told\s+u|telling\s+you)|about|regarding|concerning|re)\s+(?P<about>.+)$|"
    rf"^that\s+(?P<fact>(?:he|she|they|we|my|our|his|her|their)\b.+)$|"
    rf"^(?:everything|anything|all)\s+(?P<kind>[\w-]+)\s+(?:(?:that\s+)?i(?:'ve|\s+have)?\s+(?:ever\s+)?(?:{_SAID}|gave\s+you)|(?:you|u)\s+(?:know|have|remember|keep))\b|"
    rf"^(?P<topical>(?:both\s+)?(?:the|that|this|my|our|all\s+(?:of\s+)?(?:the|my|our))\s+(?:[\w'-]+\s+){{0,3}}?[\w'-]+\s+(?:{_THING_WORDS}|status))\b|"
    rf"^(?:that\s+)?(?P<clause>i(?:'m|'ve|\s)\s*.+)$|"
    rf"^(?P<named>(?:my|our|which|where|how|what|who|when)\s.+|[a-z][\w'-]*(?:\s+[a-z][\w'-]*){{0,2}}\s+(?:info|information|details|status))$"
)
_REFERENCE_END = re.compile(
    rf"\s*(?:,|;|:|\?|!|\s[-–—]+\s|\b(?:from|in|out\s+of|off|of)\s+(?:what(?:ever)?\s+(?:you|u)\b|(?:your|ur|the|my)\s+{_MEMORY_WORD}\b|{_MEMORY_WORD}\b)|"
    rf"\bon\s+(?:file|record)\b|\bout\b(?!\s+of\s+(?!(?:your|ur|the|my)\s+{_MEMORY_WORD}\b))|"
    r"\b(?:please|pls|immediately|now|anymore|any\s+more|for\s+good|completely|entirely|altogether|straight\s+away|right\s+away)\b|"
    r"\b(?:but|because|since|so|as|cause|cuz|it'?s|that'?s|if|i\s+don'?t|i\s+do\s+not)\b).*$"
)
_PRONOUN_OBJECT = re.compile(
    # "that"/"this" alone, not "that heart business" or "that he's in prison"
    r"^(?:it|(?:that|this)(?=\s*$|\s*[,.;:!?]|\s+(?:from|out|off|in|one|bit|part|too|please|pls|as|for|again|anymore|now|either|both|on|up|away|go|actually|asap|tho|though|then|number|figure|detail|info|stuff|thing|disappear)\b)|them|those|these|both(?:\s+of\s+(?:them|those|these|it))?|all\s+(?:of\s+)?(?:that|this|it|them)|either|everything|any\s+of\s+(?:it|that|this))\b"
)
# "I regret telling you about Elena", "I can't believe I told you about crying": what "that" points to.
_TOLD_ABOUT = re.compile(
    r"\b(?:told|telling|tell|mentioned|mentioning|shared|sharing|share|said)\s+(?:(?:you|u)\s+)?(?:[\w']+\s+){0,4}?(?:about|that|how)\s+(?P<about>[^.?!;,]+)|"
    r"\b(?:told\s+(?:you|u)|shared|share|mentioned|brought\s+up|bringing\s+up|bring\s+up)\s+(?P<object>(?:the|my|our)\s[^.?!;,]+)|"
    # "why do u still have which bank im with", "u have my home address saved", "u knowing my salary"
    r"\b(?:you|u)\s+(?:still\s+|even\s+|shouldn'?t\s+|should\s+not\s+)?(?:have|having|know|knowing|keep|keeping|kept|saved|stored|remember|remembering)\s+"
    r"(?P<held>(?:my|our|the|that|which|where|how|what)\s[^.?!;,]+?)(?:\s+(?:saved|stored|on\s+file|written\s+down|in\s+(?:your|ur)\s+memory))?(?=\s*(?:[.?!;,]|$))|"
    r"^(?:so\s+)?i\s+(?:said|told\s+(?:you|u))\s+(?:that\s+)?(?P<said>i(?:'m|'ve|\s)[^.?!;,]+?)(?:\s+right)?(?=\s*(?:[.?!;,]|$))"
)


def _loose_request(turn: str) -> str | None:
    """The loose reading of ``turn`` (normalised): what it asks the assistant to forget, or None."""
    commands = re.compile(rf"(?:^|[,;:]\s*){_OPENER}(?:{_BASE_ACT}|(?:don'?t|do\s+not|never|stop)\s+{_KEEP_WORDS})\b")
    if not _ADDRESSED_TURN.search(turn) and not any(commands.search(s.strip()) for s in _SENTENCES.split(turn)):
        return None  # nobody is asked anything
    memory_talk = bool(
        re.search(
            rf"\b(?:your|ur)\s+{_MEMORY_WORD}\b|\bon\s+(?:file|record)\b|\b{_STORED}\b|"
            r"\bwhat(?:ever)?\s+(?:you|u)\s+(?:know|remember|have|keep|store|hold)\b|\b(?:out\s+of|from|in)\s+(?:the\s+)?memory\b",
            turn,
        )
    )
    sentences = [s.strip() for s in _SENTENCES.split(turn) if s.strip()]
    for index, sentence in enumerate(sentences):
        sentence = whole = sentence.rstrip(" .!?;")
        polite = _POLITE_IF.match(sentence) is not None
        sentence = _POLITE_IF.sub("", sentence)
        if _NEGATED_FORGET.search(sentence) or _WONDERING.search(sentence) or opens_on_gerund(sentence):
            continue
        act = _LOOSE_ACT.search(sentence) or _LOOSE_KEEP.search(sentence)
        if act is None and polite:  # "I'd feel calmer if you didn't know about the propranolol"
            act = _POLITE_NOT_KNOW.match(sentence)
        if act is None:
            continue
        found = act.groupdict()
        previous = sentences[max(0, index - 2) : index]
        if re.search(
            r"\b(?:i|we)(?:'ve|\s+have|\s+had)?\s+(?:already\s+|once\s+|previously\s+)?(?:asked|told|requested|begged|"
            r"(?:was|were)\s+(?:going\s+to|gonna|about\s+to)\s+ask|(?:almost|nearly)\s+asked|thought\s+about\s+asking|meant\s+to\s+ask)\s+(?:you|u)\s+"
            r"(?:\w+\s+){0,3}?to\s+(?:\w+\s+)?$",
            sentence[: act.start("act")] if act.groupdict().get("act") else "",
        ):
            continue  # "Last week I asked you to forget my old address. Did that go through?": a report, not a request;
            # "I was going to ask you to forget X but ... leave it": a request not made
        if found.get("done") and not polite:
            continue  # "you forgot my birthday": a complaint; "I'd appreciate it if you forgot ...": a request
        verb = found.get("act") or found.get("done") or ""
        if re.match(r"(?:clear|drop|take|discard)\b", verb) and not memory_talk and not _REASON.search(turn):
            continue  # "clear my friday", "drop the kids at school": only out of memory
        if (
            verb.startswith(("scratch", "scrap"))
            and not memory_talk
            and not _REASON.search(turn)
            and not re.search(rf"\b{_NEGATION}\s+{_KEEP}\b", turn)
        ):
            continue  # "5 days in Tokyo, scratch that, 4": a correction while typing; "scrap that idea about the trip"
        if verb.startswith("forget") and (
            not re.search(r"\b(?:please|pls|kindly|you|u)\b", sentence[: act.start("act")])
            and not re.search(r"\b(?:please|pls|plz|kindly)\b", sentence)
            and not re.search(rf"\b{_MEMORY_WORD}\b|\bon\s+(?:file|record)\b", sentence)
            or _FOR_A_WHILE.search(sentence[act.start("act") :])
        ):
            continue  # a bare "forget the novel, ..." moves on; "please forget ..." asks
        after = re.split(r",|\s[-–—]+\s", sentence[act.end() :].strip(" ,"), maxsplit=1)[0].strip()
        after = re.sub(r"^(?:anymore|any\s+more|any\s+longer|no\s+more)\s+", "", after)
        taken_pronoun = bool(_PRONOUN_OBJECT.match(found.get("taken") or "-"))
        if (
            verb.startswith("forget")
            and _PRONOUN_OBJECT.match(after or "it")
            and not memory_talk
            and _DISMISSIVE.search(sentence[act.start() :])
        ):
            continue  # "you know what, forget it, I'll just call him": never mind, not a request
        if found.get("letgo") or found.get("gone") or taken_pronoun:
            after = ""  # "let it go, I mean it": the object is the pronoun, what follows is talk
        before = sentence[: act.start()].strip(" ,")
        if found.get("taken") and not taken_pronoun:  # "take the stammer out of what you remember"
            subject = _loose_reference(found["taken"], memory_talk=True)
        elif found.get("wanted") or found.get("unwanted"):  # "I'd like it deleted": what "it" is was said before
            stated = (
                _loose_reference(after) if after.startswith("that ") else None
            )  # "... it written down that he's ..."
            subject = stated or _pointed_at(" ".join([*sentences[:index], whole]), "", previous)
        else:
            # Not keeping something is about the assistant's memory in itself ("please do not keep the pacemaker").
            kept = memory_talk or (act.re is _LOOSE_KEEP and bool(_ADDRESSED_TURN.search(turn)))
            subject = _loose_reference(after, memory_talk=kept)
            if subject is None and not (
                re.match(r"(?:the|a|an|my|our|his|her|their|some)\s", after) and not _PRONOUN_OBJECT.match(after)
            ):
                # the words before the act, unless the act has an object of its own ("..., so delete the draft")
                subject = _loose_reference(before, leading=True, memory_talk=kept)
        after = re.sub(r"^(?:on\s+to|onto|on|of|to)\s+", "", after)
        after = re.sub(r"^(?:please|pls|plz|now|ok|okay|thanks|thank\s+you)$", "", after)
        if subject is None and (not after or _PRONOUN_OBJECT.match(after)):
            # A topic the turn only names ("The custody fight is none of your business, so wipe it")
            # counts when the act is plainly on memory.
            on_memory = (
                memory_talk
                or act.re is _LOOSE_KEEP
                or verb.startswith(("forget", "unlearn", "unremember"))
                or _SHOULD_NOT_KEEP.search(turn) is not None
            )
            subject = _pointed_at(" ".join([*sentences[:index], whole]), before, previous, named_topic=on_memory)
        if (
            subject
            and not _NOT_MEMORY.match(subject)
            and not _FROM_THING.search(after)
            and not _FROM_DOCUMENT.search(sentence)
        ):
            more = _more_named(sentence[act.end() :], sentences[index + 1 :])
            return _joined([subject, *more])
    return None


def _joined(subjects: list[str]) -> str:
    """The things a turn names, once each; one inside another ("jonas" beside "the opinion about
    jonas") is left to the longer one, which says which fact."""
    unique = list(dict.fromkeys(subjects))
    return "; ".join(s for s in unique if not any(s != o and re.search(rf"\b{re.escape(s)}\b", o) for o in unique))


_AND_ALSO = re.compile(
    r"(?:^|,?\s+)(?:and|also|plus|or)\s+(?:also\s+)?(?:about\s+)?(?P<named>(?:the|my|our)\s+[^,.;?!]+?)(?:\s+(?:too|as\s+well))?(?:\s+while\s.*)?\s*(?:[,.;?!]|$)"
)


_INCLUDED = re.compile(
    r"(?:,\s*|\s+(?:with\s+)?)(?:(?P<named>[^,.;?!]+?)\s+included|(?:including|incl\.?|especially)\s+(?P<named2>[^,.;?!]+))"
)
_NAMED_LIST = re.compile(
    r"^(?P<list>(?:the|my|our)\s[^,.;?!]+?(?:,\s*(?:and\s+)?(?:the|my|our)\s[^,.;?!]+?)+|(?:the|my|our)\s[^,.;?!]+?\s+and\s+(?:the|my|our)\s[^,.;?!]+?)"
    r"(?:\s+(?:too|as\s+well))?\s*[.!]?$"
)


# What a request's next sentence may add to what it named: a short list of things ("Thyroid, meds, the
# op, all of it", "savings and the centrelink thing", "Every debt I've mentioned", "And Ollie too").
_SPELLED_OUT = re.compile(
    r"^(?P<lead>(?:and|also|plus|so|like|i\.?e\.?|namely|meaning)\s+)?(?:(?:honestly|actually|also)\s+)?(?P<list>[^.;?!()]+?)"
    r"(?P<tail>,?\s+(?:all\s+of\s+(?:it|them|that)|the\s+lot|all\s+(?:two|three|four)|both|too|as\s+well|included|etc\.?))?\s*[.!]?$"
)
# A piece that is a clause of its own, not a thing named ("thanks", "keep the rest", "it's done", "School
# stuff is fine"), or moves on ("Anyway, fences").
_NOT_A_THING = re.compile(
    r"^(?:i|i'm|im|i've|it|it's|its|that|that's|thats|this|she|he|we|they|you|u|there|keep|leave|thanks|thank|please|pls|ok|"
    r"okay|cheers|done|gone|seriously|just|not|no|yes|yeah|lol|haha|don't|dont|do|let|let's|lets|sorry|oh|wait|hey|is|was|"
    r"anyway|anyhow|btw|meanwhile|back\s+to|speaking\s+of)\b"
    r"|\b(?:keep|keeps|stay|stays|fine|leave|except|but|not|n't|is|are|was|were|can|could|will|would|should|be)\b"
)


def _spelled_out(sentence: str) -> list[str]:
    """The things a sentence following a request lists, or [] when it is not such a list."""
    listed = _SPELLED_OUT.match(sentence)
    if listed is None:
        return []
    pieces = [p.strip() for p in re.split(r",\s*(?:and\s+|&\s+)?|\s+(?:and|&|n)\s+", listed.group("list")) if p.strip()]
    if not 1 <= len(pieces) <= 5 or any(len(p.split()) > 4 or _NOT_A_THING.search(p) for p in pieces):
        return []
    # One thing alone is a list only when the sentence says it adds ("And Ollie too", "Every debt I've mentioned").
    if len(pieces) == 1 and not (listed["lead"] or listed["tail"] or re.match(r"(?:every|all|any)\s", pieces[0])):
        return []
    return pieces


def _more_named(rest: str, following: list[str]) -> list[str]:
    """Further things a request names after its first: "..., and the ICU application too", "Forget the
    quitting thing. And the stipend.", "... or the news about Fiona"."""
    found = [m.group("named") for m in _AND_ALSO.finditer(rest) if m.start() > 0]
    # "the bipolar stuff, meds included", "the loan stuff including the bank I used"
    found += [m.group("named") or m.group("named2") for m in _INCLUDED.finditer(rest)]
    following = [s for s in following if not re.fullmatch(r"\W*(?:please|pls|thanks|thank\s+you|thx)\W*", s)]
    for sentence in following[:2]:
        listed = re.match(
            r"^(?:both|namely|i\s+mean|meaning|specifically)\s+(?P<list>(?:the|my|our)\s.+?\s+and\s+(?:the|my|our)\s.+?)[.!]?$",
            sentence,
        )
        if listed is not None:  # "... the medical details I gave you? Both the allergy and the operation."
            found += re.split(r"\s+and\s+", listed.group("list"))
            break
        listed = _NAMED_LIST.match(sentence)
        if listed is not None and sentence is following[0]:  # "... my brain stuff — the dyslexia, the ADHD, the meds."
            found += re.split(r",\s*(?:and\s+)?|\s+and\s+", listed.group("list"))
            break
        if sentence is following[0] and (spelled := _spelled_out(sentence)):
            found += spelled  # "... my health stuff? Thyroid, meds, the op, all of it."
            break
        match = re.match(
            r"^(?:and|also|plus)\s+(?:also\s+)?(?P<named>(?:the|my|our)\s+[^,.;?!]+?)(?:\s+too)?\s*[.!]?$", sentence
        ) or re.match(
            r"^(?P<named>(?:the\s+)?[a-z]+(?:\s+[a-z]+)?)\s+included\s*[.!]?$", sentence
        )  # "Interview included."
        if match is None and _PRONOUN_REQUEST.match((act := re.split(r",\s*", sentence, maxsplit=1))[0].rstrip(" .!?")):
            match = re.match(  # "Please remove it, and the clinic bit."
                r"^,?\s*(?:and|also|plus)\s+(?:also\s+)?(?P<named>(?:the|my|our|his|her)\s+[^,.;?!]+?)(?:\s+too)?\s*[.!]?$",
                act[1] if len(act) > 1 else "",
            )
        if match is None:
            break
        found.append(match.group("named"))
    return [subject for named in found if (subject := _subject(named))]


# What "it" or "that" points to in the same turn: "I regret telling you about Elena", "I'm so ashamed
# about the drunk email", "my PIN and my mother's maiden name - delete both".
_REGRET_ABOUT = re.compile(
    r"\b(?:ashamed|embarrassed|mortified|regret\w*|sorry|awkward|cringe\w*|stupid|silly|foolish|shouldn'?t\s+have\s+\w+|"
    r"changed\s+my\s+mind)\s+"
    r"(?:\w+\s+){0,3}?(?:about|for|of)\s+(?P<about>[^.?!;,]+)"
)


# "The bus incident", "the drink driving arrest": a sentence that only names something.
_BARE_NOUN_PHRASE = re.compile(
    r"^(?:the|my|our)\s+(?!(?:\w+\s+){0,4}?(?:is|was|are|were|has|have|had|will|would|did|does|do|can|could)\b)[\w'-]+(?:\s+[\w'-]+){0,4}$"
)


def _pointed_at(earlier: str, before: str, previous: Sequence[str] = (), *, named_topic: bool = False) -> str | None:
    """What a pronoun object points to: what the user says they told ("I regret telling you about
    Elena"), something named with "about", or the words before the act or the sentence before it
    when they only name something ("The bus incident. I'd prefer it not be ..."); with
    ``named_topic``, also a topic they open on ("the custody fight is none of your business",
    "about Nadia...", "the information of my visa, is better you don't keep it")."""
    for candidate in (before, *reversed(previous)):
        both = re.match(r"^\W*both\s+(?P<list>.+?\s+and\s+.+?)[\s.,]*$", candidate)
        if both is not None and (subject := _subject(both.group("list"))):
            return subject  # "both the credit card problem and what I say about my wife, please remove them"
    for pattern in (_TOLD_ABOUT, _REGRET_ABOUT):
        told = pattern.search(before) or pattern.search(earlier)
        if told is not None:
            found = told.groupdict()
            return _subject(found.get("about") or found.get("object") or found.get("held") or found.get("said") or "")
    about = re.search(r"\babout\s+(?P<named>(?:the|my|our)\s[^.?!;,]+)", earlier)
    if about is not None:  # "if DOT ever found out about the sleep apnea thing ... get rid of that"
        topical = _TOPICAL.match(about.group("named"))
        if (
            subject := _subject(_TOPIC_WORD.sub("", topical.group(0)) if topical else about.group("named"))
        ) is not None:
            return subject
    for candidate in (
        before,
        *(re.sub(rf"^(?:{_OPENER}|oh\s+no|no)[\s,]*", "", p.strip(" .!?;,")) for p in reversed(previous)),
    ):
        if (
            candidate
            and _REFERS.match(candidate)
            and (re.match(r"(?:my|our)\s", candidate) or _TOPICAL.match(candidate))
            and (subject := _loose_reference(candidate, leading=True))
        ):
            return subject
        if candidate and _BARE_NOUN_PHRASE.match(candidate):
            return _subject(candidate)
        opening = (
            _OPENING_TOPIC.match(
                re.sub(
                    r"^(?:(?:please|pls|kindly|nvm|never\s+mind|actually|ok|okay|so|um|uh|hey)[\s,]+)+", "", candidate
                )
            )
            if candidate
            else None
        )
        if (
            named_topic
            and opening is not None
            and (subject := _subject(opening.group("named") or opening.group("name")))
        ):
            return subject
    if named_topic:  # "Keisha doesn't want people knowing about her diagnosis. Could you forget that?"
        for candidate in (before, *reversed(previous)):
            statement = re.sub(rf"^{_OPENER}", "", candidate.strip(" .!?;,")).strip()
            if len(content_words(statement)) >= 2 and not _WONDERING.search(statement):
                return statement
    return None


_SHOULD_NOT_KEEP = re.compile(
    rf"\b(?:you|u)\s+(?:shouldn'?t|should\s+not|don'?t\s+need\s+to|needn'?t)\s+(?:\w+\s+)?(?:{_KEEP_WORDS}|know)\b|"
    r"\b(?:none\s+of\s+your\s+business|between\s+us)\b"
)
# A sentence that opens on the topic it then talks about: "the custody fight is none of your
# business", "the crash I told you about...", "about Nadia...", "the information of my visa, ...".
_OPENING_TOPIC = re.compile(
    r"^(?:(?:re|regarding|about|as\s+for|so)\s+(?P<name>[a-z][\w'-]+)(?=\s*(?:,|:|\.\.\.|$))|"
    r"(?:(?:re|regarding|about|as\s+for|so)\s+|(?:can|could|let'?s)\s+(?:we\s+)?keep\s+)?(?P<named>(?:the|my|our|that|this)\s+(?:[\w'-]+\s+){0,4}?[\w'-]+?)"
    r"(?:\s+(?:that\s+)?i(?:'ve)?\s+(?:\w+\s+)?(?:told\s+you|mentioned|said|shared)(?:\s+(?:you|to\s+you))?(?:\s+about)?)?"
    r"\s*(?:,|:|\.\.\.|\s[-–—]|\s+between\s+us\b|\s+(?:is|was|are)\s+(?:\w+\s+)?(?:none\s+of\s+your\s+business|between\s+us|private|personal|"
    r"nobody'?s\s+business)|$))"
)


def _loose_reference(text: str, *, leading: bool = False, memory_talk: bool = False) -> str | None:
    """What ``text`` (the words after an act, or, ``leading``, before it) refers to, if anything; a
    plain "the X" counts only when the turn speaks of the assistant's memory (``memory_talk``)."""
    text = re.sub(
        rf"^(?:{_OPENER}|of\s+|on\s+to\s+|onto\s+|from\s+(?:your|ur)\s+{_MEMORY_WORD}\s+)+", "", text.strip(" ,")
    ).strip()
    if not text or _PRONOUN_OBJECT.match(text):
        return None
    match = (
        _REFERS.search(text) if not leading else _REFERS.match(re.sub(r",?\s*(?:please|pls)?\s*(?:you|u)?$", "", text))
    )
    if match is None:
        plain = re.match(
            r"^(?:the|that|this)\s+(?P<thing>[\w'-]+(?:\s+(?:and\s+(?:the\s+)?)?[\w'-]+){0,4})$",
            _REFERENCE_END.sub("", text),
        )
        return _subject(plain.group("thing")) if memory_talk and plain else None
    for group in ("about", "fact", "kind", "topical", "clause", "named"):
        raw = match.group(group)
        if raw:
            raw = _REFERENCE_END.sub("", raw).strip()
            if group == "topical":
                raw = _TOPIC_WORD.sub("", raw)
            if group == "clause" and re.match(r"i\s+(?:asked|was\s+asking|said\s+anything)\b", raw):
                return None  # "forget I asked"
            subject = _subject(raw)
            return subject if subject and not _PRONOUN_OBJECT.match(subject) else None
    return None

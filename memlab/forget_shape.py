"""Turns that have the shape of a forget request the rules cannot read (no LLM).

The rules (:mod:`memlab.forget_detector`) read a request only when they can also read what it names.
People often ask in ways they cannot parse: "delete karen", "security hint thing — delete",
"Anything about Ollie - bin it", "I'd rather that wasn't stored", "Leave my dad out of your notes",
"I'd appreciate it if you struck the part about the PTSD from your records", "I'm exercising my
right to erasure for my home address". :func:`has_request_shape` tells such a turn: one of its
sentences asks the assistant for an act on what it keeps and nothing in that sentence takes the act
back. What the turn refers to is then the learned reader's to decide (:mod:`memlab.forget_reader`),
and a turn it is not sure of deletes nothing.

Never the shape: an act negated ("don't ever delete my pronouns"), wondered about ("how do I ..."),
not made ("I was going to ask you to forget ..."), for a while ("forget the legal stuff for a sec"),
moved past ("forget about work, let's ..."), kept ("you can keep remembering it"), the user's own
forgetting ("I just want to forget this whole year"), an edit of something that is not the
assistant's memory ("remove the paragraph about the divorce from the email"), or done by someone
("blocked kerry and deleted her number": no act is asked in the base form).
"""

from __future__ import annotations

import re

# An act on a stored thing, asked in the base form.
_ACT = (
    r"(?:forget|4get|forgt|delete|delet|dlete|deleet|delte|erase|chuck|unsee|un-?remember|take\s+away|"
    r"throw\s+(?:\w+\s+){0,3}?(?:out|away)|let\s+(?:that|it|this)(?:\s+one)?\s+go|remove|wipe|clear(?:\s+out)?|purge|scrub|bin|drop|lose|ditch|scrap|"
    r"strike(?:\s+out)?|yeet|expunge|unlearn|unsave|dispose\s+of|get\s+rid\s+of|take\s+(?:\w+\s+){0,4}?(?:off|out)|"
    r"undo|disregard|discard|toss|cross\s+(?:\w+\s+){0,3}?off|nuke|trash|axe)"
)
_DELETE = r"(?:delete|delet|erase|remove|wipe|clear(?:\s+out)?|purge|scrub|expunge|unsave|bin|get\s+rid\s+of)"  # acts on storage
_ACTING = r"(?:taking\s+(?:\w+\s+){0,4}?(?:off|out)|deleting|removing|erasing|wiping|forgetting|dropping|clearing|getting\s+rid\s+of|struck|erased|removed|deleted|purged|dropped)"
# What the thing should end up as: "I want that gone", "I'd like my beliefs taken out of your memory".
_DONE = (
    r"(?:gone(?!\s+(?:through|to|into|on|back|by|for|up|down|over|away|with|from|in)\b)|deleted|removed|erased|wiped|cleared|purged|forgotten|binned|dropped|struck|taken\s+(?:out|off|down)|"
    r"scrubbed|out\s+of\s+(?:there|your)|disappear\w*|not\s+(?:saved|stored|kept|there))"
)
# Where the assistant keeps things, or its keeping them.
_STORED = (
    r"(?:remember(?:ing)?|hang\s+on\s+to|stor(?:e|ed|ing|age)|sav(?:e|ed|ing)|kept|keep(?:s|ing)?|hold(?:s|ing)?|held|retain\w*|record(?:s|ed|ing)?|logged|on\s+file|in\s+there|"
    r"in\s+(?:your|ur|the)\s+(?:memory|notes|records?|files?|system|head|database|profile)|written\s+down|noted)"
)
_NOT = (
    r"(?:shouldn'?t(?:\s+have)?\s+be(?:en)?|quit|stop|don'?t|dun|do\s+not|dont|doesn'?t|didn'?t|wasn'?t|weren'?t|isn'?t|aren'?t|"
    r"not(?!\s+(?:just|only|even|quite|sure|really|much|always))|no\s+longer|never|none\s+of|nothing)"
)
# Words a sentence may open on before its imperative ("ok so, please just delete ...").
_OPENING = (
    r"(?:(?:ok(?:ay)?|so|right|yeah|yes|also|and|oh|um+|uh+|hey|hi|pls|plz|please|kindly|just|now|actually|nah|wait|oops|btw|"
    r"honestly|seriously|ugh|yo|lol|mate|anyway|then)[\s,.!:-]+)*"
)
_ASKING = (
    r"(?:(?:can|could|would|will)\s+(?:you|u|yu)\s+(?:please\s+|pls\s+|just\s+)?|(?:i\s+)?(?:need|want)\s+you\s+to\s+|"
    r"(?:would|will|is)\s+it\s+(?:be\s+)?possible\s+(?:for\s+you\s+)?to\s+|"
    r"i'?d\s+like\s+you\s+to\s+|i'?d\s+appreciate\s+it\s+if\s+you\s+|go\s+ahead\s+and\s+)?"
)
_ADDRESSED = re.compile(r"\b(?:you|u|ur|your|yourself|please|pls|plz|kindly|thx|thanks|ty|cheers)\b")
_MEMORY = re.compile(
    r"\b(?:your|ur|the)\s+(?:memory|memories|notes|records?|files?\s+on\s+me|system|database|list\s+of\s+things\s+about\s+me)\b|"
    r"\bfrom\s+(?:your|ur)\b|\bon\s+file\b|\bstored\b|\bsaved\b|\bkept\b|\bremember\w*\b"
)
_SHAPES = [
    re.compile(rf"^{_OPENING}{_ASKING}{_ACT}\b"),  # "delete karen", "can you take off the stuff about ..."
    # "security hint thing — delete", "Gone, please." ("Drop it." dismisses: only a verb of storage takes a pronoun)
    re.compile(rf"^{_OPENING}(?:{_ACT}|gone)(?:[\s,]+(?:pls|please|thx|thanks|now|asap))*$"),
    re.compile(rf"^{_OPENING}{_DELETE}(?:[\s,]+(?:it|that|this|pls|please|thx|thanks|now|asap))*$"),
    re.compile(  # "Anything to do with my money, clear it out.", "..., get rid of those", "Anything about Max, gone please"
        rf"[,:]\s*{_OPENING}(?:{_DELETE}\s+(?:it|that|this|them|those)(?:\s+(?:out|off|too|as\s+well|now|please|pls|thx|thanks))*"
        r"|gone(?:[\s,]+(?:pls|please|thx|thanks|now|asap))*)$"
    ),
    re.compile(rf"\b(?:please|pls|plz|kindly)\s+(?:just\s+)?{_ACT}\b"),  # "..., but please take him out of your memory"
    re.compile(
        rf"\b(?:you|u|yu)\b(?:\s+\w+){{0,5}}?\s+(?:{_ACT}|{_ACTING})\b"
    ),  # "would you mind taking the nose job off ..."
    re.compile(
        r"\byour\s+(?:notes|memory|records)\s+(?:didn'?t|did\s+not|don'?t|wouldn'?t)\s+(?:mention|include|have|contain)\b"
    ),
    # "the dating app stuff can go", "the whole ryan thing ... gone already so delete that too"
    re.compile(
        r"(?<!\bi\s)(?<!\bwe\s)(?<!\byou\s)(?<!\bu\s)(?<!\bhe\s)(?<!\bshe\s)(?<!\bthey\s)(?<!\bit\s)\bcan\s+go\W*$"
        r"|,\s*can\s+(?:that|it|this|those)\s+(?:just\s+)?go\W*$"  # "the bit about my credit score, can that go?"
    ),
    re.compile(
        r"\bleave\s+(?:\w+\s+){1,4}out\s+of\s+(?:your|ur)\b|\bas\s+far\s+as\s+(?:your|ur)\s+memory\b|\bnever\s+happened\b"
    ),
    re.compile(  # the formal register: "my right to erasure", "I withdraw consent", "I am requesting that you delete"
        r"\bright\s+to\s+(?:erasure|be\s+forgotten)|\berasure\s+of\b|\bwithdraw\w*\s+(?:my\s+)?consent\b|\bdo\s+not\s+consent\b|"
        r"\brequest\w*\s+(?:that\s+you\s+|the\s+)?(?:delet|eras|remov)\w*"
    ),
    re.compile(  # "I want to delete the depression information"
        r"\b(?:i|we)\s+(?:want|would\s+like|'d\s+like|need)\s+to\s+(?:delete|erase|remove|wipe|clear)\b.*"
        r"\b(?:info|information|data|details|thing|stuff|part|bit|note|entry|record)\b"
    ),
]
# "I'd like that stuff about my dad gone from your memory", "I want it all gone, please" (asked of the assistant)
_WANT_DONE = re.compile(
    rf"\b(?:want|wanted|need|'d\s+like|would\s+like|'d\s+love|would\s+love|'d\s+prefer|would\s+prefer|rather|prefer)\b"
    rf"(?:\s+[\w']+){{0,8}}?\s+{_DONE}"
)
# "I'd rather that wasn't stored", "could you just not have that saved": unwanted keeping, said to the assistant.
_UNWANTED = re.compile(rf"\b{_NOT}\b(?:\s+[\w']+){{0,8}}?\s+{_STORED}")
# A sentence that opens on what it is about ("Anything about my landlord, I'd like it gone").
_ABOUT = re.compile(r"(?:anything|everything|all|whatever)\s+(?:about|on|regarding|re|to\s+do\s+with|related\s+to)\s")
_WISH = re.compile(r"\b(?:rather|prefer|comfortable|better|happier|want|like)\b")
# An act on memory said not to be asked, or not yet, or asked by someone else: "I don't want you to
# forget Théo", "i wasnt asking you to wipe anything", "I was gonna tell you to forget his meds but ...
# keep it", "if my husband asked you to ...". The rules use it too.
NOT_ASKED = re.compile(
    r"\b(?:(?:do|did|was|is|am)\s*n[o']?t|do\s+not|did\s+not|was\s+not|i'?m\s+not|not|never)\s+(?:really\s+|even\s+)?"
    r"(?:want(?:ed|ing)?|need(?:ed|ing)?|ask(?:ed|ing)?|tell(?:ing)?|told|say(?:ing)?|said)\s+(?:for\s+)?(?:you|u)\s+to\s+"
    r"(?:\w+\s+)?(?:forget|4get|delete|erase|remove|wipe|clear|drop|lose|purge|scrub|bin|get\s+rid)|"
    r"\b(?:was|were)\s+(?:going\s+to|gonna|about\s+to|meaning\s+to|thinking\s+of)\s+(?:ask|tell)(?:ing)?\s+(?:you|u)\s+to\b|"
    # "I very nearly told you to wipe ...", "If Marc ever asked you to forget ...": not made, or by someone else
    r"\b(?:almost|nearly)\s+(?:asked|told|begged)\s+(?:you|u)\s+to\b|"
    r"\bif\s+(?:\w+\s+){1,2}?(?:ever\s+)?(?:asked|asks|told|tells)\s+(?:you|u)\s+to\b|"
    # "suppose I ask you to forget my health details, will it be gone?", "Imagine I ask you to delete ...": supposed
    r"\b(?:suppose|supposing|imagine|say)\s+(?:that\s+)?(?:i|we|someone|somebody)\s+(?:\w+\s+)?(?:ask|asked|tell|told|want|wanted)\b"
)
# A stretch of time, which no stored fact is: "Wipe today from the record. Migraine hit at 11 ...".
A_STRETCH_OF_TIME = (
    r"(?:(?:all\s+of|the\s+whole\s+of|the\s+whole|this\s+whole)\s+)?(?:today|tonight|yesterday|last\s+night|"
    r"(?:this|last|that)\s+(?:morning|afternoon|evening|day|week|weekend|month|year)|\d{4})(?!['’]|\w)"
)
# Everything that takes the act back (see the module's docstring).
_TAKEN_BACK = re.compile(
    r"\b(?:do\s*n[o']?t|never|no\s+need\s+to|not\s+to|shouldn'?t|won'?t|wouldn'?t|dinnae|dinna|didnae|cannae|willnae)\s+(?:ever\s+)?(?:you\s+)?(?:go\s+)?"
    r"(?:delet|eras|remov|wip|forget|forgett|los|drop|dropp|clear|purg|get\s+rid|getting\s+rid)(?:e|es|ed|ing)?\b|"
    r"\b(?:was|were|am)\s+(?:going\s+to|gonna|about\s+to)\b|\bwas\s+thinking\s+of\s+asking\b|"
    r"(?<!comfortable\s)(?<!better\s)(?<!happier\s)(?<!it\s)(?<!best\s)(?<!grateful\s)(?<!rather\s)(?<!wonder\s)\bif\s+(?:i|we|you|u|someone)\b|"
    r"\bwhat\s+if\b|\bif\s+ever\b|\bautomatically\b|\bhypothetical\w*|\bin\s+theory\b|\bjust\s+wondering\b|"
    r"^keep\s+(?:it|that|this|them|those)(?:\s+(?:please|pls|then|thanks))*\W*$|"  # "..., i was just ragin. keep it"
    r"\bhow\s+(?:do|does|can|would|could|to)\b|\b(?:did|have|has|had)\s+(?:you|u)\b|\bdo\s+(?:you|u)\s+(?:ever|actually|automatically|still|really)\b|"
    r"\b(?:i|we)\s+(?:just\s+|really\s+|kinda\s+)?(?:want|wish|need|try|tried|trying|hope|would\s+love|'d\s+love|like)\s+to\s+forget\b|"
    r"\bhelp\s+me\s+(?:to\s+)?forget\b|\bcan'?t\s+forget\b|"
    r",\s*(?:let'?s|i'?ll|we'?ll|i\s+need(?!\s+(?:you|u)\b)|i\s+want(?!\s+(?:you|u)\b)|anyway|instead|never\s*mind|whatever)\b|"
    r"\bforget\s+(?:about\s+)?(?:it|this|that|him|her|them)\s*(?:[,.!;:?–—-]|$)|\bforget\s+you\b|"
    r"\bforget\s+i\s+(?:ever\s+)?(?:said|asked|mentioned)\s+(?:that|anything|it|this)\b|\bi\s+mean[t]?\b|"  # the rules' to read
    r"\b(?:don'?t|do|didn'?t|did|can'?t|won'?t)\s+(?:you|u)\s+(?:even\s+)?(?:remember|know|recall)\b|"  # "Don't you remember I quit?"
    r"\bdare\s+(?:to\s+)?(?:forget|delete|erase|remove|wipe|lose|drop)\b|\bnot\s+(?:asking|telling|saying)\s+(?:you|u)\b|"  # "don't you dare", "I'm not asking you to"
    r"\b(?:i|we)\s+(?:already\s+)?(?:asked|told)\s+(?:you|u)\s+to\b|\bdid\s+(?:that|it)\s+go\s+through\b|"  # an earlier request
    r"\b(?:stored|saved|kept)\s+(?:on|in|at)\s+(?!your\b|ur\b|there\b|here\b|memory\b)|"  # "my photos stored on Google"
    r"\b(?:out\s+of|from|(?<!\btake\s)off)\s+(?:the|my|our|his|her|their)\s+(?!memory|notes|records?|files?|profile|list\s+of\s+things|conversations?|chats?|talks?)\w+|"
    r"\bfor\s+(?:now|a\s+(?:sec|second|minute|moment|bit|while)|today|tonight|(?:one|an?|this|the)\s+(?:evening|night|day|hour|afternoon|weekend))\b|"
    r"\byou\s+(?:just\s+)?(?:wrote|made|gave|suggested|listed|drafted|sent|generated)\b|\bi\s+(?:uploaded|attached|pasted)\b|"
    r"\b(?:swap|replace|substitute|instead)\b|"
    r"(?<!n't\s)(?<!not\s)\bkeep\s+(?:remembering|knowing)\b|\bstill\s+keep\b|"
    r"\b(?:can|may|should|please|just|feel\s+free\s+to|fine\s+to|ok(?:ay)?\s+to)\s+(?:still\s+)?keep\b(?!.*\b(?:but|except)\b)|"
    # "Forget what I said about work." moves on; asked of the assistant ("please", "you") the rules read it
    r"^(?:(?:oh|ok(?:ay)?|so|just|anyway|actually)[\s,]+)*forget\s+(?:about\s+)?(?:what|everything|anything|all)\s+i\s+(?:just\s+)?"
    r"(?:said|told|mentioned|wrote)\b(?!.*\b(?:please|pls|you|u|memory|notes)\b)|"
    rf"\b{_DELETE}\s+{A_STRETCH_OF_TIME}|\bforget\s+{A_STRETCH_OF_TIME}|"
    r"\bleave\s+it\b|\bit'?s\s+fine\b|\b(?:drop|skip|lose|scrap|scratch|ditch|toss|cut)\s+(?:it|that|this)\W*$|"
    r"(?<!\bi\s)(?<!\bi've\s)(?<!\bi'm\s)\b(?:says|said|saying|sayin'?|reckons|tells\s+me|told\s+me|wants\s+me\s+to|asked\s+me\s+to)\b"  # someone else's words
)
# Things people delete that are not the assistant's memory (unless the sentence says it is).
_ELSEWHERE = re.compile(
    r"\b(?:apps?|account|files?|folder|email(?!\s+address)|emails|inbox|photos?|pictures?|pics?|videos?|messages?|texts?|"
    r"posts?|tweets?|story|comments?|contacts?|browser|cookies?|tabs?|calendar|cart|basket|spreadsheet|docs?|document|"
    r"(?:first|second|third|fourth|fifth)\s+(?:bit|point|part|item|option|suggestion|step)|"
    r"draft|paragraph|line|sentence|section|bullet|stain|mould|mold|weeds?|virus|malware|spam|playlist|list|cv|resume|"
    r"letter|essay|poem|verse|stanza|lyrics|recipe|itinerary|slide|column|row|cell|formula|chat\s+history|statement|application|form|bio|"
    r"cover\s+letter|report|assignment|presentation|speech|toast|eulogy|script|caption|search\s+history|history\s+on|"
    r"her\s+number|his\s+number|my\s+number|profile\s+on|dating\s+app|subscription|order|booking|reservation|"
    r"appointment|meeting|event|alarm|reminder)\b"
)
_SENTENCES = re.compile(r"(?<=[.!?;])\s+|\s+[-–—]+\s+|\n+")


def _sentences(turn: str) -> list[str]:
    return [s.strip() for s in _SENTENCES.split(turn.replace("’", "'").lower()) if s.strip()]


def _taken_back(sentence: str) -> bool:
    """An act in ``sentence`` taken back, or done to something that is not the assistant's memory."""
    return bool(
        _TAKEN_BACK.search(sentence)
        or NOT_ASKED.search(sentence)
        or (_ELSEWHERE.search(sentence) and not _MEMORY.search(sentence))
    )


def taken_back_sentences(turn: str) -> list[str]:
    """The sentences of ``turn`` (lower-cased) that take an act back ("don't delete the stuff about
    marg", "I very nearly told you to wipe ...", "keep it") or do it to something else ("remove the
    third bullet"); :mod:`memlab.forget_spotter` spots no request in a turn where one of them does so
    to an act it names."""
    return [sentence for sentence in _sentences(turn) if _taken_back(sentence)]


def has_request_shape(turn: str) -> bool:
    """Whether a sentence of ``turn`` asks the assistant for an act on what it keeps, not taken back."""
    for sentence in _sentences(turn):
        if _taken_back(sentence):
            continue
        bare = sentence.strip(" .!?,")
        if any(shape.search(bare) for shape in _SHAPES):
            return True
        if _WANT_DONE.search(bare) and (_MEMORY.search(bare) or _ADDRESSED.search(bare) or _ABOUT.match(bare)):
            return True
        if _UNWANTED.search(bare) and (_MEMORY.search(bare) or _ADDRESSED.search(bare) or _WISH.search(bare)):
            return True
    return False

"""Forget requests made in conversation ("please forget my weight"), honoured by memory.

A backend with the ``forget_requests`` option (``--<backend>.forget-requests true``; on by default
in the chatbot layer, ``MemoryClient``) honours such a request when it ingests it. Precision comes
first: ordinary talk must never delete anything, so a turn counts only when it explicitly asks the
assistant about what it keeps.

- :func:`find_forget_requests` (``memlab.forget_detector``): the rule-based detector (no LLM). A clause is a request when it is
  addressed to the assistant (an imperative, "please ...", "could you ...", "I'd like you to ...",
  "I don't want you to ...") and asks to forget something named ("forget that I ...", "forget my
  salary", "don't keep that I told you about my divorce", "erase the bit about my therapist",
  "delete the note about my allergy", "scratch what I said about X", "pretend I never told you
  about X", "... from your memory"). Never a request: "forget it", "forget about it, ...",
  "never forget", "don't forget to", "I forgot my ...", someone else forgetting, deleting or erasing
  things that are not memories ("delete a file", "erase a stain"), and bare "forget about X" or
  "forget what I said about X" without a word that makes it a request (please, you, memory ...).
  Where the rules read no request, a request's shape (``memlab.forget_shape``: "delete karen") or
  the learned spotter (``memlab.forget_spotter``: "Three things to delete: my salary, Marc's salary,
  the mortgage balance.") may still find one; the learned reader then decides what it refers to.
- :func:`semantic_matcher`: what a request refers to, by meaning and by words: each stored item is scored by
  the cosine similarity of its text to the request's subject (the embedder the backend already has;
  the packaged MiniLM for backends without one) plus the share of the subject's content words it
  contains. Items scoring at least ``THRESHOLD`` and close to the best one (``MARGIN``) are taken,
  and every fact stating the topic a request names ("my medication": both pills), or reading as one
  of the category it names ("my health stuff": diagnoses, medication; ``CATEGORIES``); below the
  threshold one item is still taken when it alone holds half the request's words or more and leads
  every other item by ``LEAD``, or when it leads by meaning alone (``CLEAR_LEAD``); a person named by
  name takes the facts naming them ("Wipe Marco"), or the one that says what else the request names
  ("olivia's debt", not "Olivia is my maid of honor"; "where sean is": the fact placing him); a
  medication named by what it treats ("the sleeping pill") never takes the condition ("I can't
  sleep"); what the turn asks to keep ("... but you can keep that I get migraines") is never taken;
  otherwise the learned reader (:func:`memlab.forget_reader.reader_picks`, a cross-encoder trained
  on the labelled dev parts) reads the request beside the three items the matcher ranked first and
  takes those it is sure of ("the ED thing" for an eating disorder); if it is sure of none, nothing
  is deleted and the result says "nothing matched". A request that points back ("don't keep that in
  memory") refers to the user's turn just before it.
- :func:`honour_forget_requests`: runs after the backend stored the session (``Memory.ingest``):
  removes what each request refers to, the request turn itself included (it restates it), through
  a :class:`Remover`: at once by default; ``MemoryClient`` installs its undo ledger
  (``memlab.forget_ledger``), which keeps the items restorable for ``forget_undo_hours``.
- A backend with an LLM (profile's and mem0's extractors) may pass its own ``matcher``
  (:func:`llm_matcher`): the detector still finds the request, the LLM decides which stored items
  it refers to.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Annotated, Any, Protocol

import numpy as np
from pydantic import Field

from memlab.embedders.base import Embedder
from memlab.forget_detector import ForgetRequest, content_words, detect, find_forget_requests
from memlab.forget_reader import READS, TURN_READS, reader_confirms, reader_picks
from memlab.types import ForgottenItem, MemoryItem, Session

__all__ = [
    "ForgetRequest",
    "ForgetRequests",
    "content_words",
    "detect",
    "find_forget_requests",
    "honour_forget_requests",
    "llm_matcher",
    "semantic_matcher",
]

if TYPE_CHECKING:
    from memlab.memory import Memory

# The backend option, one definition for every backend that can delete.
ForgetRequests = Annotated[
    bool,
    Field(
        description="honour in-conversation forget requests ('please forget that I ...'): delete what they "
        "refer to (on by default in the chatbot layer, MemoryClient; off for benchmark replays unless set)"
    ),
]


def mentions(text: str, subject: str, share: float = 0.5) -> bool:
    """Whether ``text`` holds at least ``share`` of the subject's content words."""
    return word_share(text, subject) >= share


def word_share(text: str, subject: str) -> float:
    """Share of the subject's content words in ``text``; a topic the subject names ("my weight") counts
    in full when ``text`` states it in its own words ("I weigh 92 kilos", see ``TOPICS``)."""
    wanted = content_words(subject)
    if not wanted:
        return 0.0
    found = (
        content_words(text)
        | {_SYNONYMS[word] for word in content_words(text) if word in _SYNONYMS}
        | {name for word in content_words(text) for name in _CLASS_OF.get(word, ())}
    )
    lowered = text.lower()
    initials = _initials(lowered)
    share = sum(
        1
        for word in wanted
        if any(_same_word(_SYNONYMS.get(word, word), other) for other in found) or _is_initials(word, initials)
    ) / len(wanted)
    head = _head(subject)
    cues = _topic_of(head)
    if cues is not None and cues.search(lowered):  # the topic the head names ("my nose job": not the job)
        # The topic stands for the head word only: "my maiden name" is not "my married name".
        # A person it belongs to ("my kid's school") is often left implicit in the fact.
        rest = wanted - content_words(head) - _GENERIC - _PERSON_WORDS
        found_rest = sum(1 for word in rest if any(_same_word(word, other) for other in found))
        return max(share, 1.0 - (len(rest) - found_rest) / len(wanted))
    return share


# Words that only say who someone is ("my old flatmate Jess"), or what the request calls their facts.
_WHO = re.compile(
    r"^(?:old|former|current|best|new|ex|late|info|information|details|detail|stuff|history|data|situation|business|drama|"
    r"saga|news|story|thing|things|friend|flatmate|roommate|neighbou?r|colleague|coworker|boss|manager|cousin|aunt|uncle|"
    r"kid|kids|child|children|son|daughter|mum|mom|dad|wife|husband|partner|sister|brother|family|parent|boyfriend|girlfriend)$"
)
# Words for the same person ("my boss" is "my manager"), read as one.
_SYNONYMS = {
    "manager": "boss",
    "mom": "mum",
    "mother": "mum",
    "father": "dad",
    "kids": "children",
    "kid": "children",
    "boy": "son",  # "my boy's condition"
    "lad": "son",
    "beta": "blocker",  # "the beta blocker": bisoprolol (a drug class in two words)
}
# What a drug is for, which an embedder does not know: "my antidepressant" is "I take sertraline",
# "the diabetes medication" is "I take metformin".
_DRUG_CLASSES = {
    "antidepressant": "sertraline citalopram escitalopram fluoxetine prozac zoloft paroxetine mirtazapine venlafaxine "
    "duloxetine amitriptyline bupropion wellbutrin lexapro",
    "diabetes": "metformin insulin gliclazide ozempic semaglutide mounjaro tirzepatide januvia",
    "pressure": "amlodipine ramipril lisinopril losartan bisoprolol candesartan",
    "cholesterol": "atorvastatin simvastatin rosuvastatin statin statins",
    "thyroid": "levothyroxine thyroxine",
    "adhd": "ritalin methylphenidate adderall elvanse lisdexamfetamine concerta atomoxetine",
    "anxiety": "propranolol diazepam valium lorazepam pregabalin buspirone",
    "epilepsy": "lamotrigine levetiracetam keppra carbamazepine",
    "bipolar": "lithium quetiapine olanzapine",
    "contraception": "microgynon rigevidon cerazette implant coil",
    "asthma": "salbutamol ventolin inhaler symbicort",
    "pain": "codeine tramadol morphine oxycodone naproxen",
    "hiv": "prep truvada",
    "stimulant": "ritalin methylphenidate adderall elvanse lisdexamfetamine concerta dexamfetamine modafinil",
    "blocker": "propranolol bisoprolol atenolol metoprolol",  # "the beta blocker"
    "weight": "ozempic wegovy mounjaro semaglutide tirzepatide saxenda",  # "the weight-loss jab"
    "addiction": "methadone buprenorphine subutex naltrexone antabuse",
}
_CLASS_OF: dict[str, set[str]] = {}
for _name, _drugs in _DRUG_CLASSES.items():
    for _drug in _drugs.split():
        _CLASS_OF.setdefault(_drug, set()).add(_name)
_DRUG_NAMES = rf"\b(?:{'|'.join(sorted(_CLASS_OF))})\b"
# How facts state an immigration status: the topic ("my visa") and the category ("all the immigration details").
_IMMIGRATION_CUES = (
    r"undocumented|\bvisa\b|asylum|refugee|citizen|residency|green\s+card|work\s+permit|overstay|\bpapers\b|deport|illegal|"
    r"leave\s+to\s+remain|\bilr\b|settled\s+status|naturali[sz]"
)


def _initials(text: str) -> str:
    """The first letters of a text's long words, to find an acronym in it ("alcoholics anonymous":
    "aa"); short words ("every day") would make too many."""
    return "".join(word[0] for word in re.findall(r"[a-z]+", text) if len(word) >= 4)


def _is_initials(word: str, initials: str) -> bool:
    """Whether ``word`` (2 to 4 letters) is an acronym of consecutive words of the text ("aa", "ivf", "ed")."""
    return 2 <= len(word) <= 4 and word.isalpha() and word in initials


def _head(subject: str) -> str:
    """The word a subject is about: "my kid's school": the school; "my medical info": medical."""
    # the last content word: "the medication I'm on": medication
    words = [w for w in re.findall(r"[a-z']+", subject.lower()) if w not in _GENERIC and content_words(w)]
    if subject.lower().startswith(("where i", "how much i", "how old", "how tall", "which bank", "who i")):
        return subject.lower()
    if len(words) >= 2:
        pair = f"{words[-2]} {words[-1]}"  # "the court case", "my nose job": a topic in two words
        if any(topic.fullmatch(pair) for topic, _ in TOPICS):
            return pair
    # "my record": a generic word is the head when the subject has no other
    return (words or [w for w in re.findall(r"[a-z']+", subject.lower()) if content_words(w)] or [""])[-1]


def topic_cues(subject: str) -> re.Pattern[str] | None:
    """How facts state the topic a subject names and nothing more ("my medication": "I take ...",
    "... mg"), if it names one ("my maiden name" names more than the topic "name")."""
    head = _head(subject)
    if content_words(subject) - _GENERIC - content_words(head):
        return None
    return _topic_of(head)


def _topic_of(head: str) -> re.Pattern[str] | None:
    """The cues of the topic a head names: the one it is ("eating disorder"), else the first it holds."""
    named = [cues for topic, cues in TOPICS if topic.fullmatch(head)] or [
        cues for topic, cues in TOPICS if topic.search(head)
    ]
    return named[0] if named else None


def _category(names: str, cues: str) -> tuple[re.Pattern[str], re.Pattern[str]]:
    return re.compile(
        rf"^(?:(?:all|any|everything|anything)\s+(?:of\s+)?(?:about\s+)?)?(?:(?:the|my|our)\s+)?(?:{names})(?:\s+(?:stuff|info|information|details|things|bits|side|issues|history|data|records?))?$"
    ), re.compile(cues)


# What people say they do for a living ("I'm a chemistry teacher"): a job stated without a work word.
_OCCUPATION = (
    r"(?:teacher|nurse|doctor|engineer|lawyer|solicitor|barrister|accountant|developer|designer|programmer|tester|"
    r"driver|dispatcher|electrician|plumber|builder|chef|cook|cleaner|carer|hairdresser|barber|receptionist|manager|"
    r"consultant|analyst|scientist|researcher|lecturer|professor|journalist|writer|translator|hygienist|dentist|"
    r"pharmacist|paramedic|firefighter|police\s+officer|officer|soldier|civil\s+servant|clerk|nanny|midwife|vet|farmer|"
    r"mechanic|technician|architect|surveyor|broker|banker|trader|cashier|waiter|waitress|bartender|secretary|"
    r"administrator|librarian|postman|courier|tutor|therapist|counsell?or|psychologist|surgeon|physio(?:therapist)?|"
    r"optician|baker|butcher|decorator|carpenter|joiner|welder|labourer|pilot|freelancer|contractor|rep)"
)
_MEDICAL = (
    r"diagnos|condition|syndrome|disease|disorder|cancer|diabet|asthma|\bhiv\b|herpes|adhd|autis|epilep|migraine|allerg|"
    r"therap|psychiatr|counsell?or|anxiety|depress|panic|bipolar|ptsd|\bocd\b|eating\s+disorder|medication|\bmeds\b|\bmg\b|"
    r"\bpills?\b|tablets|prescri|surgery|operation|appendi|tonsil|fracture|injur|broke\s+my\s+(?:arm|leg|wrist|ankle|hip|back|nose|collarbone)|concussion|hospital|pregnan|\bibs\b|crohn|arthritis|infection|\bsti\b|chlamydia|"
    r"dementia|alzheimer|heart\s+attack|stroke|miscarr|\bivf\b|fertility|\bms\b|sclerosis|parkinson|lupus|copd|apno?ea|insomnia|"
    r"dyslex|dyspraxi|psoriasis|eczema|endometriosis|blood\s+pressure|cholesterol|hypertension|thyroid|anaemi|anemi|coeliac|celiac|"
    r"\bdeaf|\bblind\b|macular|glaucoma|cataract|\bkidneys?\b|\bliver\b|\bheart\b|tumou?r|chemo|biopsy|\bmri\b|x-?ray|\bscan\b|physio|"
    r"\w+(?:ine|pril|statin|azole|pam|pram|done|mab|tide|ium|xetine)\b|" + _DRUG_NAMES
)
# How facts state a faith: "my religion" is every one of them (a category and a topic).
_RELIGION = (
    r"muslim|christian|catholic|jewish|hindu|sikh|buddhist|atheist|agnostic|church|mosque|synagogue|temple|pray|"
    r"baptist|methodist|anglican|protestant|evangelical|pentecostal|quaker|mormon|\blds\b|orthodox|jehovah|religio|faith|"
    r"ramadan|\bfast(?:s|ing)?\s+(?:during|for|on)\b|\beid\b|\blent\b|sabbath|diwali|\bhajj\b"
)
# Categories a request may name instead of a fact ("my health stuff", "anything about my kids"), and
# how facts in them read.
_KIDS = _category(
    r"kids|children|child|son\s+and\s+daughter",
    r"\b(?:son|daughter|kids?|children|child|baby|toddler|stepson|stepdaughter)\b",
)
_FAMILY = _category(
    r"family|family\s+members|relatives",
    r"\b(?:wife|husband|partner|son|daughter|kids?|children|mum|mom|mother|dad|father|brother|sister|parents|"
    r"grandma|grandmother|grandad|grandfather|aunt|uncle|cousin|niece|nephew)\b",
)
# "my parents", "both the things about my parents": what is said of the mum and the dad
_PARENTS = _category(
    r"parents|mum\s+and\s+dad|mom\s+and\s+dad|mother\s+and\s+father|folks",
    r"\b(?:mum|mom|mother|dad|father|parents|folks|stepdad|stepmum|stepmom)\b(?!-in-law)",
)
# "my sibling": the brother or the sister
_SIBLINGS = _category(
    r"siblings?|brothers?\s+and\s+sisters?|sisters?\s+and\s+brothers?",
    r"\b(?:brothers?|sisters?|siblings?|twin)\b(?!-in-law)",
)
# "the family medical stuff": medical facts about family members (see _PEOPLE_CUES)
_FAMILY_MEDICAL = _category(
    r"family\s+(?:medical|health)(?:\s+history)?|(?:my\s+)?(?:parents'?|family'?s?)\s+health",
    rf"^(?=.*\b(?:mum|mom|mother|dad|father|parents|brother|sister|gran|grandma|grandad|grandmother|grandfather|aunt|uncle|"
    rf"son|daughter|wife|husband|partner)\b)(?=.*(?:{_MEDICAL}))",
)
# "anything work-related": facts about a manager or a colleague are work facts too (see _PEOPLE_CUES)
_WORK = _category(
    r"work|job|career|work\s+life",
    rf"\bwork|\bjob\b|employ|\bboss\b|manager|colleague|co-?worker|office\b|promot|fired|redundan|performance|\bteam\b|"
    rf"contract\b|\bshift|client|\bpip\b|payroll|\bhr\b|^i'?m\s+an?\s+(?:[\w-]+\s+){{0,2}}{_OCCUPATION}\b",
)
# "my housing situation": a landlord's or a flatmate's doings are the user's housing (see _PEOPLE_CUES)
_HOUSING = _category(
    r"housing|housing\s+situation|living\s+situation|tenancy",
    r"evict|landlord|tenan|\brent\b|homeless|kicked\s+out|\blease\b|mortgage|housing|flat\b|house\b",
)
CATEGORIES = [
    _KIDS,
    _PARENTS,
    _SIBLINGS,
    _FAMILY,
    _FAMILY_MEDICAL,
    _category(r"health|medical|medical\s+history|health\s+history|physical\s+health", _MEDICAL),
    _category(
        r"mental\s+health|mental\s+health\s+history",
        r"therap|psychiatr|counsell?or|anxiety|depress|panic|bipolar|ptsd|\bocd\b|antidepress|sertraline|citalopram|"
        r"fluoxetine|lithium|eating\s+disorder|self-?harm|suicid|breakdown|burn-?out|rehab|psych\s+ward",
    ),
    _category(
        r"money|finances|financial|financial\s+situation|money\s+situation",
        r"debt|\bowe\b|loan|overdraft|overdrawn|credit|savings|saving\s+(?:up\s+)?for|salary|\bearn|income|\bpaid\b|mortgage|\brent\b|£|\$|€|bankrupt|pension|"
        r"payment\s+plan|arrears|council\s+tax|"
        r"\bbroke\b|benefits|invest|crypto|bitcoin|\bstocks\b|\bshares\b|\bisa\b|401\s*k|\bira\b|retirement|\btax(?:es)?\b",
    ),
    _category(r"contact|contacts|contact\s+details", r"phone|mobile|e-?mail|@|\blive\s+at\b|address|\bnumber\b"),
    _category(
        r"pregnancy|baby\s+news|fertility|fertility\s+journey|fertility\s+treatment|trying\s+for\s+a\s+baby|ivf",
        r"pregnan|morning\s+sickness|due\s+date|\bivf\b|miscarr|expecting|trimester|fertility|conceiv|trying\s+for\s+a\s+baby|egg\s+freezing",
    ),
    _WORK,
    _category(
        r"education|education\s+history|schooling|studies|academic\s+(?:history|record|background)|qualifications|degrees?",
        r"school|universit|\buni\b|college|degree|master'?s\b|\bphd\b|doctorate|bachelor|\bba\b|\bbsc\b|\bmsc\b|\bmba\b|"
        r"graduat|\bstudied\b|\bstudying\b|\bstudy\b|dropped\s+out|oxford|cambridge|harvard|\blse\b|a-?levels|gcses?|diploma|"
        r"thesis|dissertation",
    ),
    _category(r"religion|faith|religious\s+beliefs|beliefs", _RELIGION),
    _category(r"wedding|wedding\s+plans|engagement", r"wedding|venue|engaged|fianc|bride|groom|honeymoon|propos"),
    _HOUSING,
    _category(r"immigration|immigration\s+status|visa|residency", _IMMIGRATION_CUES),
    _category(r"skin|skin\s+condition", r"\bskin\b|psoriasis|eczema|acne|rosacea|dermatitis|\brash\b|hives"),
    _category(
        r"food|diet|dietary|eating|food\s+and\s+diet",
        r"allerg|coeliac|celiac|gluten|lactose|vegan|vegetarian|pescatarian|keto\b|fodmap|\bdiet\b|halal|kosher|intoleran|"
        r"\bnuts?\b|shellfish|dairy|\beat\b|\bfood",
    ),
    _category(
        r"love\s+life|relationships?|dating|dating\s+life|sex\s+life|romance|romantic|love",
        r"boyfriend|girlfriend|partner|dating|\bex\b|\bex-|married|divorc|affair|crush|\bsingle\b|tinder|hinge|bumble|"
        r"relationship|propos|engaged|fianc|wedding|live\s+together|moved\s+in\s+(?:together|with)|seeing\s+(?:a|someone|somebody)\b",
    ),
]


# Categories of people: their facts are about someone else by nature ("My father passed away").
_PEOPLE_CUES = (_KIDS[1], _PARENTS[1], _SIBLINGS[1], _FAMILY[1], _FAMILY_MEDICAL[1], _WORK[1], _HOUSING[1])


def category_cues(subject: str) -> re.Pattern[str] | None:
    """How facts in the category a subject names read ("my health stuff": diagnoses, medication ...)."""
    lowered = " ".join(subject.lower().split())
    for names, cues in CATEGORIES:
        if names.match(lowered):
            return cues
    return None


_PERSON_WORDS = frozenset(
    "kid kids child children son daughter mum mom dad wife husband partner sister brother family parent".split()
)
# A state that no longer holds ("I used to live in Brixton") does not state the topic's current fact.
_PAST_STATE = re.compile(r"\bused\s+to\b|\bno\s+longer\b|\bformerly\b|\bnot\s+any\s*more\b")
# Words that name no topic of their own: "my medical info" is about the medical.
_GENERIC = frozenset(
    "info information details detail stuff history data records record sessions session problem problems issue issues "
    "status".split()
)


def _same_word(a: str, b: str) -> bool:
    """Equal, sharing a stem of five letters or more (allergy ~ allergic, diabetes ~ diabetic), a
    clipped form (poly ~ polyamorous, meds ~ medication is not: only a prefix of four letters or more),
    or a misspelling of a long word (one letter off: chlamidia ~ chlamydia)."""
    if a == b:
        return True
    short, long_ = sorted((a, b), key=len)
    if len(short) >= 4 and long_.startswith(short):
        return True
    if min(len(a), len(b)) >= 7 and abs(len(a) - len(b)) <= 1 and _one_edit(a, b):
        return True
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n >= 5 and n >= min(len(a), len(b)) - 3


def _one_edit(a: str, b: str) -> bool:
    """Whether one substitution, insertion, deletion or swap of two letters turns ``a`` into ``b``
    ("anxeity": anxiety)."""
    if len(a) > len(b):
        a, b = b, a
    i = 0
    while i < len(a) and a[i] == b[i]:
        i += 1
    swapped = len(a) == len(b) and a[i : i + 2] == b[i : i + 2][::-1] and a[i + 2 :] == b[i + 2 :]
    return swapped or a[i + (len(a) == len(b)) :] == b[i + 1 :]


def _topic(names: str, cues: str) -> tuple[re.Pattern[str], re.Pattern[str]]:
    return re.compile(rf"\b(?:{names})\b"), re.compile(rf"\b(?:{cues})")


_MEDICATION = _topic(
    r"medication|medications|meds|medicine|medicines|pills?|prescription|tablets|drugs|injections?|jabs?|"
    r"antidepressants?|antibiotics?|inhalers?|statins?|painkillers?",
    r"takes?\s+\w+|taking\b|prescribed|pills?\b|tablets?\b|\bmg\b|medication|"
    r"\w+(?:ine|ol|pril|statin|azole|pam|pram|done|mab|tide|ium)\b|" + _DRUG_NAMES,
)
_BEREAVEMENT = _topic(
    r"bereavement|grief|loss", r"\bdied\b|passed\s+away|\bdeath\b|funeral|\blost\s+my\b|bereave|grie(?:f|ving)"
)
_BALANCE = _topic(r"balance", r"account\b|balance\b|overdrawn|in\s+the\s+bank")
# How people state a fact a request names by its topic: "my weight" -> "I weigh 92 kilos".
TOPICS = [
    # a weight to lose or gain is a goal, not what the user weighs
    _topic(
        r"weight|weigh|weight\s+loss",
        r"weigh|(?<!lose\s)(?<!gain\s)(?<!drop\s)(?<![\d.])\d+(?:\.\d+)?\s*(?:kilos?|kg|stone|lbs?|pounds)\b",
    ),
    _topic(r"height|how\s+tall", r"tall\b|\d\s*(?:cm|m)\b|foot\b|feet\b|\d\s*ft\b|metres?\b|meters?\b"),
    _topic(r"age|how\s+old", r"years?\s+old|\baged?\b|born\s+in\s+(?:19|20)\d\d|\bi'?m\s+\d\d\b|turned\s+\d\d\b"),
    _topic(r"birthday|birth\s*date|date\s+of\s+birth", r"born\s+(?:on|in\s+(?:19|20)\d\d)|birthday|date\s+of\s+birth"),
    _topic(
        r"salary|salaries|incomes?|pay|wage|wages|earnings|how\s+much\s+i\s+(?:earn|make)|money",
        # "£" alone is a price, a rent or a mortgage as often as pay: a figure counts as pay with "on" or a period
        r"earn|salary|income|paid\b|wage|\bon\s+(?:£|\$|€)?\d+\s*k\b|a\s+year\b|per\s+(?:year|annum|hour|month)|"
        r"\bmake\s+(?:about\s+|around\s+|roughly\s+)?(?:(?:£|\$|€)\d[\d,.]*\s*k?|\d+\s*k)\b",
    ),
    _MEDICATION,
    # before where I live: "my home town" is not my home
    _topic(
        r"home\s*town|where\s+i\s+grew\s+up|where\s+i'?m\s+from|nationality|background",
        r"grew\s+up|born\s+in|\bfrom\b|hometown",
    ),
    _topic(
        r"where\s+i\s+live|address|home|postcode|zip|flat|house|neighbourhood|neighborhood|street",
        r"\blive\b|\blives\b|living\b|address|flat\b|house\b|road\b|street\b|avenue\b|postcode|moved\s+to",
    ),
    # before work: a nose job is not a job
    _topic(
        r"nose\s+job|boob\s+job|cosmetic\s+surgery|plastic\s+surgery",
        r"nose\s+job|boob\s+job|rhinoplasty|cosmetic|plastic\s+surgery|botox|fillers|implants|facelift",
    ),
    _topic(
        r"where\s+i\s+work|job|work|employer|workplace|career|occupation|company|redundancy|redundant|laid\s+off|"
        r"job\s+loss",
        r"\bwork|\bjob\b|employed|employer|\bas\s+an?\s+\w+|office\b|company\b|^i'?m\s+an?\s+\w+\s+(?:at|for)\b|"
        r"redundan|laid\s+off|\bfired\b|\bsacked\b|lost\s+my\s+job|unemploy|out\s+of\s+work|jobless|between\s+jobs|"
        rf"^i'?m\s+an?\s+(?:[\w-]+\s+){{0,2}}{_OCCUPATION}\b",
    ),
    _topic(r"religion|faith|beliefs?", _RELIGION),
    _topic(
        r"school|schools",
        r"school|primary\b|secondary\b|academy\b|college\b|nursery\b|\bhigh\b|elementary|kindergarten|pre-?school|daycare",
    ),
    _topic(r"sexuality|orientation", r"\bgay\b|lesbian|bisexual|\bbi\b|straight\b|queer|asexual|pansexual"),
    # "my daughter" is not my son
    _topic(r"daughters?|stepdaughter", r"daughter"),
    _topic(r"sons?|stepson", r"\bsons?\b|stepson"),
    _topic(r"kids|kid|children|child", r"\bkids?\b|children|\bchild\b|\bsons?\b|daughter"),
    _topic(
        r"partner|spouse|husband|wife|boyfriend|girlfriend|dating|seeing|relationship|love\s+life|marriage",
        r"partner|husband|wife|boyfriend|girlfriend|married|seeing\s+(?:a|someone)|dating|going\s+out\s+with|separat",
    ),
    _topic(r"ex|exes|ex-wife|ex-husband|ex-partner|break-?up", r"broke\s+up|split\s+up|divorc|\bex\b|\bex-"),
    _topic(
        r"ethnicity|race|heritage|ethnic\s+background",
        r"\bhalf\s+\w+|mixed\s+race|heritage|descent|\b(?:black|white|asian)\b",
    ),
    _topic(
        r"debt|debts|finances|loan|loans|money\s+(?:problems|troubles?|worries|issues)|insolvency|bankruptcy|bailiffs?|"
        r"debt\s+collectors?",
        r"debt|owe\b|loan|overdraft|credit\s+card|bankrupt|arrears|insolv|bailiff|\biva\b",
    ),
    _topic(
        r"savings|nest\s+egg|investments?|pension",
        r"\bsav(?:e|ed|es|ing|ings)\b|\bisa\b|invest|pension|premium\s+bonds|\bstocks\b|\bshares\b|nest\s+egg|emergency\s+fund",
    ),
    _BALANCE,
    _topic(r"gambling|betting|bets", r"gambl|\bbet\b|\bbets\b|betting|casino|poker|slots\b|bookies|roulette|blackjack"),
    _topic(r"bank", r"\bbank|barclays|lloyds|hsbc|natwest|nationwide|santander|monzo|halifax"),
    _topic(r"phone|number|mobile", r"phone|mobile|\b0\d{3}|\+\d"),
    _topic(r"car|vehicle", r"\bdrive\b|\bcar\b|corsa|ford|toyota|honda|vw|bmw|audi|tesla|vauxhall"),
    _topic(
        r"diet|eating",
        r"vegan|vegetarian|pescatarian|keto|gluten|halal|kosher|\bdiet\b|anorexi|bulimi|binge|eating\s+disorder",
    ),
    _topic(
        r"drinking|alcohol|booze|alcohol\s+intake|drinking\s+habits?|bottle",
        r"drink|alcohol|pints?\b|wine\b|beers?\b|sober|\baa\b|alcoholics",
    ),
    _topic(r"smoking|cigarettes?|smokes|vaping|vape", r"smoke|cigarettes?|vape|vaping"),
    _topic(r"pets?|dog|dogs|cat|cats", r"\bdogs?\b|\bcats?\b|puppy|kitten|\bpets?\b|rabbit|hamster|parrot"),
    _topic(r"rent|mortgage|home\s+loan|housing\s+costs", r"\brent\b|mortgage|landlord|\bpay\s+£"),
    _topic(
        r"conviction|convictions|criminal\s+record|arrest|record|police|bail|legal\s+trouble|trouble\s+with\s+the\s+law|law|"
        r"run-?in\s+with\s+the\s+law|charges?|driving\s+charge|"
        r"drink[\s-]driving|drunk[\s-]driving|dui|dwi",
        r"criminal|convict|arrested|prison|jail|\bcharged\b|probation|offence|offense|\bbail\b|caution|shoplift|police|"
        r"sentenced|community\s+service|\btag\b|\bdui\b|\bdwi\b|drink[\s-]driv|drunk[\s-]driv|banned\s+from\s+driving",
    ),
    _topic(
        r"legal|lawsuit|lawsuits|court|court\s+case|legal\s+case|litigation|legal\s+battle|custody(?:\s+(?:case|battle|dispute|fight))?",
        r"\bsu(?:e|ed|es|ing)\b|lawsuit|\bcourt\b|legal\s+action|litigation|tribunal|custody",
    ),
    _topic(r"immigration(?:\s+status)?|visa|residency|citizenship|papers|legal\s+status", _IMMIGRATION_CUES),
    _topic(r"email|e-mail", r"@|\be-?mail"),
    _topic(r"tax|taxes|tax\s+return|tax\s+bill|hmrc|irs", r"\btax|hmrc|\birs\b|self-assessment"),
    _topic(
        r"baby|babies|fertility|ivf|conceiving|pregnancy|pregnant|expecting",
        r"\bivf\b|fertility|pregnan|conceiv|trying\s+for\s+a\s+baby|egg\s+freezing|\bbaby\b",
    ),
    _topic(r"eating\s+disorder", r"anorexi|bulimi|binge|eating\s+disorder|\bed\s+recovery|purg"),
    _topic(
        r"eyesight|eyes|vision|sight",
        r"macular|glaucoma|cataract|\bblind|short-?sighted|long-?sighted|glasses|contact\s+lenses|\bvision|\beyes?\b|retina",
    ),
    _topic(
        r"football\s+team|team|club|football",
        r"\bsupport\s+[a-z]+|\bfan\b|season\s+ticket|united\b|\bcity\b|villa\b|rovers\b|wanderers\b|\bfc\b|arsenal|chelsea|"
        r"liverpool|everton|tottenham|spurs|celtic|rangers|madrid|barcelona",
    ),
    _topic(
        r"politics|political\s+(?:views|leanings|opinions|beliefs|stance)|vote|voting",
        r"\bvote|labour|tory|tories|conservative|liberal|green\s+party|democrat|republican|socialist",
    ),
    _topic(r"name|names", r"\bcalled\b|\bname\s+is\b|\bnamed\b"),
    _topic(r"password|pin|passcode", r"password|\bpin\b|passcode|\bcode\b"),
    # a diagnosis is what the user has ("I have ADHD", "Has endometriosis"), not a doctor, a pet or an allergy
    _topic(
        r"diagnosis|diagnoses|mental\s+health\s+diagnosis",
        r"diagnos|(?:\bi\s+have|\bhas|'ve\s+got|'s\s+got)\s+(?!(?:a|an|no|some|two|three|four|my|his|her)\b|[\d$£€])|"
        r"\b(?:i'?m|is|are)\s+(?:autistic|bipolar|dyslexic|diabetic|epileptic|hiv)",
    ),
    _topic(r"cancer", r"cancer|chemo|tumou?r|remission|radiotherapy|oncolog|mastectomy|lymphoma|leukaemia|leukemia"),
    _topic(r"infidelity|cheating|affair|affairs", r"cheat|affair|unfaithful|infidel|\blover\b|other\s+(?:woman|man)"),
    _topic(r"recovery|sobriety", r"sober|\baa\b|alcoholics|rehab|relapse|clean\s+for|recover|addict|methadone"),
    _topic(r"rehab|treatment\s+cent(?:re|er)|detox", r"rehab|detox|treatment\s+cent|recovery\s+cent"),
    _topic(
        r"side\s+(?:income|hustle|job|gig|money)|extra\s+(?:income|money|cash)|second\s+job",
        r"extra\s+(?:money|cash|income)|side\s+(?:income|hustle|job|gig)|onlyfans|second\s+job|on\s+the\s+side|cash\s+in\s+hand",
    ),
    _topic(
        r"hormones?|hrt|hormone\s+(?:therapy|treatment)", r"\bhrt\b|hormone|testosterone|oestrogen|estrogen|menopaus"
    ),
    _topic(
        r"gender|gender\s+identity|transition", r"\btrans\b|transgender|non-?binary|transition|genderqueer|\bgender"
    ),
    _BEREAVEMENT,
    _topic(r"tattoos?|ink", r"tattoo|\binked\b|\bink\b"),
    _topic(
        r"dark\s+(?:period|time|place|patch|days)|low\s+point|breakdown|crisis",
        r"suicid|self-?harm|overdose|depress|breakdown|sectioned|psych\s+ward|attempt",
    ),
    _topic(
        r"schedule|shifts?|hours|rota|working\s+hours|job\s+schedule|work\s+schedule",
        r"\bshifts?\b|night\s+shift|\bhours\b|\brota\b|schedule|\bnights\b|part-time|full-time",
    ),
    _topic(
        r"gut|stomach|bowel|bowels|digestion|digestive",
        r"\bibs\b|crohn|colitis|coeliac|celiac|bowel|stomach|\bgut\b|reflux|ulcer|digestive",
    ),
    _topic(
        r"operation|surgery|op|procedure|procedures",
        r"surgery|operation|replacement|transplant|removed|bypass|keyhole|\bop\b|procedure|implant|abortion|termination|"
        r"mastectomy|hysterectomy|vasectomy",
    ),
    _topic(
        r"bedroom|bedroom\s+(?:issue|problem|stuff|thing)s?|sexual\s+health|performance\s+issues?",
        r"erectile|impoten|\bed\b|libido|viagra|sildenafil|sexual",
    ),
    _topic(r"ring|engagement\s+ring|proposal|proposing", r"propos|engage|\bring\b"),
    # "my status": the one status a fact states (HIV, immigration, relationship)
    _topic(
        r"status|hiv\s+status",
        r"\bhiv\b|positive\b|undocumented|\bvisa\b|refugee|asylum|citizen|\bsingle\b|\bmarried\b|divorced|separated",
    ),
    _topic(
        r"mobility|wheelchair",
        r"wheelchair|crutches|walking\s+(?:stick|frame)|mobility|\bcane\b|can'?t\s+walk|paraly[sz]|amputee",
    ),
    _topic(r"speech|speech\s+impediment|stammer|stutter", r"stammer|stutter|\blisp\b|speech"),
    _topic(r"breathing\s+machine|cpap|sleep\s+apno?ea", r"apno?ea|cpap|snor"),
    _topic(
        r"birth\s+parents|adoption|adopted|biological\s+parents",
        r"adopt|foster|birth\s+(?:mum|mother|dad|father|parents)",
    ),
    _topic(r"bullying|bullied|picked\s+on", r"bull(?:y|ied|ying)|picked\s+on|teased"),
    _topic(r"hospital|hospital\s+stay|admission", r"hospital|sectioned|admitted|\bward\b|\bicu\b|inpatient"),
    _topic(r"health|medical|condition|diagnosis|illness|disability", _MEDICAL),
    _topic(r"benefits|welfare", r"universal\s+credit|benefits|jobseeker|\bpip\b|\besa\b|welfare|housing\s+benefit"),
    _topic(
        r"therapy|therapist|counsellor|counselor|counsell?ing|counseling|mental\s+health",
        r"therap|counsell?or|counsell?ing|psychiatrist|anxiety|depression",
    ),
]


# ---------------------------------------------------------------------------------------------- resolution
THRESHOLD = 0.6  # combined score an item needs to be taken (cosine + LEXICAL_WEIGHT * word share - others)
MARGIN = 0.08  # items this far below the best one are about something else
LEXICAL_WEIGHT = 0.4

# (request, the user's candidate items) -> ids of the items it refers to (the request turn not among them)
Matcher = Callable[[ForgetRequest, Sequence[MemoryItem]], list[str]]


def _query(subject: str) -> str:
    return subject


def semantic_matcher(embedder: Embedder, *, threshold: float | None = None, margin: float | None = None) -> Matcher:
    """Items whose text is about the request's subject, by meaning and words (see the module doc).

    Each thing the request names ("my height and my weight": two) is resolved on its own: its best
    item when that scores at least ``threshold``, with the items scoring within ``margin`` of it
    (within ``WIDE_MARGIN`` when the request says "everything" or "both").
    """

    def match(request: ForgetRequest, items: Sequence[MemoryItem]) -> list[str]:
        if not items or not request.subject:
            return []
        texts = [item.text for item in items]
        turns = [_turns_of(item) for item in items]
        vectors = embedder.embed(texts)
        wide = bool(_MANY.search(_WHERE_HELD.sub(" ", request.text.lower())))
        low = THRESHOLD if threshold is None else threshold
        near = MARGIN if margin is None else margin
        chosen: set[int] = set()
        spared = _spared(embedder, request, texts, vectors, turns)
        if request.bare:  # "forget the split": only what matches it closely, one fact a thing named
            for part in request.parts() or [request.subject]:
                part = _by_relation(part, texts)
                scores = _without(_scores(embedder, part, texts, vectors), spared)
                if named := _named_person(part, texts, turns, scores, chosen):
                    chosen |= named  # "Wipe Marco"
                    continue
                lead = int(scores.argmax())
                others = [score for i, score in enumerate(scores) if not turns[i] & turns[lead] and i != lead]
                if scores[lead] >= BARE_LOWEST and scores[lead] - max(others, default=-1.0) >= BARE_LEAD:
                    chosen.add(lead)
            return [items[i].id for i in sorted(chosen - spared)]
        for part in request.parts() or [request.subject]:
            part = _by_relation(part, texts)
            other_facts = {i for i, text in enumerate(texts) if _only_the_qualifier(part, text)}
            scores = _without(_scores(embedder, part, texts, vectors), spared | other_facts)
            best = float(scores.max())
            cues = topic_cues(part)
            category = category_cues(part)
            if category is not None:
                # "my health stuff", "anything about my kids": every fact in the category, from LOWEST up.
                people = category in _PEOPLE_CUES
                chosen |= {
                    i
                    for i, score in enumerate(scores)
                    if score + (OTHERS_PENALTY if people and _about_someone_else(texts[i], part) else 0.0)
                    >= CATEGORY_LOWEST
                    and category.search(texts[i].lower())
                    and (people or not _about_someone_else(texts[i], part))
                    and not _PAST_STATE.search(texts[i].lower())
                }
            if best < low:
                # What an earlier part took ("the Ozempic and the weight loss") competes no more.
                rest = np.array([score if i not in chosen else -np.inf for i, score in enumerate(scores)])
                lead = int(rest.argmax())
                # Items made from the same turn (a profile entry and its turn) are one fact: they don't compete.
                rivals = np.array(
                    [-np.inf if i != lead and turns[i] & turns[lead] else score for i, score in enumerate(rest)]
                )
                if _stands_out(rivals, texts, part) or (
                    _only_in_topic(lead, rivals, texts, cues)
                    and not _about_someone_else(texts[lead], part)
                    and not _PAST_STATE.search(texts[lead].lower())
                ):
                    chosen.add(lead)
                else:
                    chosen |= _named_person(part, texts, turns, scores, chosen)
                continue
            floor = max(low, best - (WIDE_MARGIN if wide else near))
            # A topic ("my medication") covers every fact that states it ("I take lithium", "I take
            # omeprazole"), each above the threshold on its own.
            # A second item goes only when it is close to the best one and above the threshold on
            # its own, and never when it is about someone else or a state that no longer holds.
            taken = {int(scores.argmax())} | {
                i
                for i, score in enumerate(scores)
                if (
                    score >= floor
                    or (cues is not None and score >= low and cues.search(texts[i].lower()))
                    or (wide and cues is not None and score >= LOWEST and _same_stem(_head(part), texts[i]))
                )
                and not _about_someone_else(texts[i], part)
                and not _PAST_STATE.search(texts[i].lower())
                and (not _only_the_person(part, texts[i]) or (wide and score >= WIDE_PERSON_LOWEST))
                and not _someone_else_named(part, texts[i], texts)
            }
            someone = _named_in(part, texts)
            if someone and not {w for w in content_words(part) - content_words(" ".join(someone)) if not _WHO.match(w)}:
                # A request naming only a person ("wipe him", "everything you've got on Jess"): every
                # fact naming them ("about Nate getting fired": not all of Nate).
                taken |= {i for i, text in enumerate(texts) if someone & _names(text)}
            chosen |= taken | _same_person(part, taken, texts)
            if wide and (_OTHERS.search(part.lower()) or _named_in(part, texts)):
                chosen |= _goes_on(taken, texts, turns)  # "everything to do with my mother-in-law"
            # What restates it in its own words goes too: all of a two-word subject ("spicy ramen"),
            # three quarters of a longer one.
            words = len(content_words(part))
            if words >= 2 or wide:  # "everything about Daniel": every item naming Daniel
                needed = 1.0 if words < RESTATED_WORDS else 0.75
                chosen |= {
                    i
                    for i, score in enumerate(scores)
                    if (score >= low or needed == 1.0)
                    and _plain_share(texts[i], part) >= needed
                    and (needed == 1.0 or not _about_someone_else(texts[i], part))
                }
        return [items[i].id for i in sorted(chosen - spared)]

    return match


def _spared(
    embedder: Embedder, request: ForgetRequest, texts: list[str], vectors: np.ndarray, turns: list[set[tuple[Any, Any]]]
) -> set[int]:
    """The fact a request asks to keep ("... but you can keep that I get migraines"): the one closest
    to what it names, when that is closer to it than to anything the request asks to forget, with
    every item made from its turn (a profile entry restating it)."""
    if not request.keep or not request.subject:
        return set()
    keep = _scores(embedder, request.keep, texts, vectors)
    best = int(keep.argmax())
    named = [_scores(embedder, part, texts, vectors)[best] for part in request.parts() or [request.subject]]
    if keep[best] < THRESHOLD or keep[best] <= max(named):
        return set()
    return {best} | {i for i, own in enumerate(turns) if own and own <= turns[best]}


def _for_the_reader(request: ForgetRequest, items: Sequence[MemoryItem], embedder: Embedder) -> list[MemoryItem]:
    """What the learned reader reads: the ``READS`` items the matcher scores highest for what the request
    names, never what it asks to keep ("... but you can keep the back pain one": the item closest to
    that, and every item closer to it than to what the request names). A request whose shape alone
    the rules read ("delete karen") names what its whole turn says, and ``TURN_READS`` items are read."""
    subject = request.text if request.shape_only else request.subject
    if not items or not subject:
        return []
    named = score_items(embedder, subject, items)
    allowed = np.ones(len(items), dtype=bool)
    if request.keep:
        texts = [item.text for item in items]
        keep = _scores(embedder, request.keep, texts, embedder.embed(texts))
        allowed = keep < named
        allowed[int(keep.argmax())] = False
    order = [i for i in np.argsort(-named, kind="stable") if allowed[i]]
    return [items[i] for i in order[: TURN_READS if request.shape_only else READS]]


def everything_but_kept(request: ForgetRequest, items: Sequence[MemoryItem], embedder: Embedder) -> list[str]:
    """Every item but those the request keeps ("... except my name": "My name is Sofia"; "apart from
    the diet one and the spelling preference": two), with what restates them."""
    if not items:
        return []
    texts = [item.text for item in items]
    spared: set[int] = set()
    if request.keep:
        vectors = embedder.embed(texts)
        turns = [_turns_of(item) for item in items]
        kept_parts = ForgetRequest(subject=request.keep, turn_index=0, text="").parts() or [request.keep]
        for part in kept_parts:
            keep = _scores(embedder, part, texts, vectors)
            best = int(keep.argmax())
            if not (
                keep[best] >= THRESHOLD
                or _only_in_topic(best, keep, texts, topic_cues(part))
                or _stands_out(keep, texts, part)
            ):
                return []  # what it keeps is not clear: nothing is deleted rather than too much
            spared |= {best} | {i for i, own in enumerate(turns) if own and own <= turns[best]}
    return [item.id for i, item in enumerate(items) if i not in spared]


def _without(scores: np.ndarray, spared: set[int]) -> np.ndarray:
    return np.array([-np.inf if i in spared else score for i, score in enumerate(scores)])


def _only_the_person(subject: str, text: str) -> bool:
    """Whether a fact shares only the person with a request that names them and more ("Olivia is my
    maid of honor" for "olivia's debt", "My mother-in-law lives with us" for "my mother-in-law's
    illness"): as close by meaning as the fact asked for, it is another one."""
    subject, text = _IN_LAW.sub("", subject), _IN_LAW.sub("", text)  # "mother-in-law": one person, not a law
    words = content_words(subject)
    shared = words & (_names(text) | {w for w in content_words(text) if _OTHERS.match(w)})
    # "my ex-boyfriend marco" says who Marco is, "olivia's debt" which of her facts
    rest = {w for w in words - _GENERIC - _EPISODE_WORDS if not _OTHERS.match(w) and w not in shared}
    return bool(shared and rest) and not any(_same_word(w, other) for w in rest for other in content_words(text))


_IN_LAW = re.compile(r"-in-law\b", re.IGNORECASE)


def _only_the_qualifier(subject: str, text: str) -> bool:
    """Whether a fact shares only what a medication is for with a request naming the medication ("I
    have migraines" for "my migraine medication", "I've been having trouble sleeping" for "the
    sleeping pill"): stating neither a medication nor the word, it is the condition, another fact.
    A balance likewise: "My bank is Monzo" is not "my bank balance".
    (Other topics are often stated through their qualifier: "I owe my brother £3,000" is "the money
    I owe my brother".)"""
    head = _head(subject)
    topic = next((cues for names, cues in (_MEDICATION, _BALANCE) if names.search(head)), None)
    if topic is None or topic.search(text.lower()):
        return False
    found = content_words(text)
    if any(_same_word(word, other) for word in content_words(head) for other in found):
        return False
    qualifiers = content_words(subject) - content_words(head) - _GENERIC - _PERSON_WORDS
    return any(_same_word(word, other) for word in qualifiers for other in found)


# "my daughter is called Lily", "my daughter Lily", "Lily is my daughter": who a name is
_CALLED = re.compile(
    r"\b[Mm]y\s+(?P<relation>[a-z-]+)(?:'s\s+name\s+is\s+|\s+is\s+(?:called|named)\s+|,?\s+)(?P<name>[A-Z][a-z]{2,})\b"
)
_IS_MY = re.compile(r"\b(?P<name>[A-Z][a-z]{2,})\s+is\s+my\s+(?P<relation>[a-z-]+)\b")


def _by_relation(subject: str, texts: list[str]) -> str:
    """ "Lily's school" as the facts say it, "my daughter's school", when a fact says who Lily is and
    none names her with the rest of the subject."""
    for text in texts:
        for said in (*_CALLED.finditer(text), *_IS_MY.finditer(text)):
            name, relation = said.group("name").lower(), said.group("relation")
            if not _OTHERS.search(f"my {relation}") or not re.search(rf"\b{name}'s\s", subject):
                continue
            rest = content_words(subject) - {name, f"{name}'s"} - _GENERIC
            if any(name in _names(other) and rest & content_words(other) for other in texts):
                continue
            return re.sub(rf"\b{name}'s\s", f"my {relation}'s ", subject)
    return _by_name(subject, texts)


def _by_name(subject: str, texts: list[str]) -> str:
    """ "my son's school" as the facts say it, "Eli's school", when a fact names him ("My son's name
    is Eli") and none says the rest of the subject with "son"."""
    owner = re.match(r"(?:my|our)\s+(?P<relation>[a-z-]+)'s\s", subject)
    if owner is None:
        return subject
    relation = owner.group("relation")
    rest = content_words(subject[owner.end() :]) - _GENERIC
    if not rest - {"name", "names"} or any(
        relation in content_words(text) and rest & content_words(text) for text in texts
    ):
        return subject
    names = {
        said.group("name") for text in texts for said in _CALLED.finditer(text) if said.group("relation") == relation
    }
    return f"{names.pop().lower()}'s {subject[owner.end() :]}" if len(names) == 1 else subject


def _same_stem(head: str, text: str) -> bool:
    """Whether ``text`` has a word from the head's stem ("my therapist" for "my therapy"): "anything
    about my therapy" takes every such fact, from LOWEST up."""
    stem = head[:5]
    return len(stem) == 5 and any(word.startswith(stem) for word in re.findall(r"[a-z]+", text.lower()))


def _named_in(subject: str, texts: list[str]) -> set[str]:
    """The people a subject names by a name some fact holds ("my old flatmate jess": jess)."""
    wanted = content_words(subject)  # folded ("marcus": "marcu"), as names are not
    return {name for name in set().union(*(_names(text) for text in texts)) if content_words(name) & wanted}


def _someone_else_named(subject: str, text: str, texts: list[str]) -> bool:
    """Whether a fact names people, none of them the one the subject names ("My current flatmate is
    Ravi" for "my old flatmate jess")."""
    named = _named_in(subject, texts)
    return bool(named and _names(text)) and not named & _names(text)


WIDE_MARGIN = 0.35
# "both things about my dad's cancer" takes "My dad starts chemo", which shares only the person in
# words, when it is this close by meaning; "about Nate getting fired" does not take "I work with Nate".
WIDE_PERSON_LOWEST = 0.75
# Below the threshold, one item is still taken when it alone is about the subject: it holds half the
# subject's words or more ("the eviction stuff" ~ "my landlord is trying to evict me") and leads every other item by
# ``LEAD`` ("us trying for a baby" ~ "I've been trying to get pregnant").
LOWEST = 0.4
LEAD = 0.2
# A bare act ("forget the split") takes one item a thing it names, scoring BARE_LOWEST or more and
# leading every other fact by BARE_LEAD.
BARE_LOWEST = 0.7
BARE_LEAD = 0.25
# Without shared words, one item is taken only when it leads every other by CLEAR_LEAD.
CLEAR_LOWEST = 0.35
CLEAR_LEAD = 0.3
TOPIC_LOWEST = 0.3  # the one fact in the topic a request names ("my diagnosis": "I'm HIV positive")
CATEGORY_LOWEST = 0.05  # a fact in the category a request names ("my health stuff") needs less: its words say it


def _stands_out(scores: np.ndarray, texts: list[str], subject: str) -> bool:
    order = np.argsort(scores)[::-1]
    best = float(scores[order[0]])
    second = float(scores[order[1]]) if len(order) > 1 and np.isfinite(scores[order[1]]) else -1.0
    text = texts[int(order[0])]
    if _kin_of_named(subject) and _about_someone_else(text, subject):
        return False  # "Ben's mum" is not "I'm married to Ben"
    if best >= CLEAR_LOWEST and best - second >= CLEAR_LEAD:
        return True  # far ahead of every other item by meaning alone ("my contraception" ~ "I'm on the pill")
    return best >= LOWEST and best - second >= LEAD and word_share(texts[int(order[0])], subject) >= 0.5


def _only_in_topic(lead: int, scores: np.ndarray, texts: list[str], cues: re.Pattern[str] | None) -> bool:
    """The best item is the one fact stating the topic a request names ("my diagnosis": "I'm HIV
    positive"), and it is near enough by meaning."""
    if cues is None or scores[lead] < TOPIC_LOWEST or not cues.search(texts[lead].lower()):
        return False
    return not any(cues.search(text.lower()) for i, text in enumerate(texts) if i != lead and np.isfinite(scores[i]))


# A capitalised name in a fact ("My ex-wife is called Sandra"), the sentence's first word left out.
_NAME = re.compile(r"(?<!^)(?<![.!?]\s)\b([A-Z][a-z]{2,})\b")


def _names(text: str) -> set[str]:
    """Names in a fact, lowercased ("My friend Keisha has ...": keisha)."""
    return {w.lower() for w in re.findall(r"\b[A-Z][a-z]{2,}\b", text)} - _NOT_NAME_WORDS


_EPISODE_WORDS = frozenset("situation business drama saga news incident story episode issue thing".split())
NAME_LOWEST = 0.5  # a fact naming the person a request names, when it names more ("Sam's secret")


def _kin_of_named(subject: str) -> bool:
    """ "Ben's mum": someone else than the person named."""
    return bool(re.search(r"\b[a-z]+'s\s", subject.lower()) and _OTHERS.search(subject.lower()))


def _named_person(
    subject: str, texts: list[str], turns: list[set[tuple[Any, Any]]], scores: np.ndarray, taken: set[int]
) -> set[int]:
    """The facts about the person a request names by name: every one when it names only them ("Wipe
    Marco", "the Gary situation"); the one fact naming them when it names more ("Sam's secret") and
    the fact says it or scores NAME_LOWEST."""
    if _kin_of_named(subject):
        return set()
    words = content_words(subject)
    holders = [i for i, text in enumerate(texts) if i not in taken and words & _names(text)]
    if not holders:
        return set()
    named = words & set().union(*(_names(texts[i]) for i in holders))
    rest = words - named - _GENERIC - _EPISODE_WORDS
    if _WHERE_SOMEONE_IS.match(subject.lower()):  # "where sean is": the fact placing him, not who he is
        return {i for i in holders if _PLACED.search(texts[i].lower())}
    if not rest:
        return set(holders)
    facts = {frozenset(turns[i]) or frozenset({("item", i)}) for i in holders}
    best = max(holders, key=lambda i: scores[i])
    said = any(_same_word(w, other) for w in rest for other in content_words(texts[best]))
    # Naming them by name, the request is about whom the fact is about ("My best friend Sam ...").
    score = scores[best] + (OTHERS_PENALTY if _about_someone_else(texts[best], subject) else 0.0)
    return {best} if len(facts) == 1 and (said or score >= NAME_LOWEST) else set()


_WHERE_SOMEONE_IS = re.compile(
    r"where\s+[a-z]+\s+(?:is|lives|works|stays|went|moved|is\s+(?:living|staying|working))\b"
)
_PLACED = re.compile(r"\b(?:in|at|lives?|living|moved|based|works?|working|stays?|staying)\b")


def _about_someone_else(text: str, subject: str) -> bool:
    """Whether ``text`` is about a person the subject does not name ("my mum takes sertraline" for
    "my medication"), or about the user when the subject names someone else. A death is the user's
    loss ("my loss": "User's husband passed away")."""
    if _BEREAVEMENT[0].search(_head(subject)) and _BEREAVEMENT[1].search(text.lower()):
        return False
    if (shared := _names(text) & content_words(subject)) and any(
        _same_word(word, other) for word in content_words(subject) - shared for other in content_words(text) - shared
    ):
        return False  # "My friend Nate got fired" is about the Nate "nate getting fired" names
    named = {_person(m.group(0)) for m in _OTHERS.finditer(subject.lower())}
    others = {_person(m.group(0)) for m in _OTHERS.finditer(text.lower())}
    if (cues := topic_cues(subject)) is not None:
        others = {person for person in others if not cues.match(person)}  # "my therapist" is "my therapy"
    if named and re.search(rf"{_OTHERS.pattern}'s?\s", subject.lower()):
        return not others & named  # "my dad's drinking" is not "I don't drink alcohol"
    if named and re.search(r"\b[a-z]+'s\s", subject.lower()) and not others & named:
        return True  # "Ben's mum" is not "I'm married to Ben"
    return bool(others) and not others & named and not re.match(r"\s*(?:i|i'm|i've|i'd)\b", text.lower())


def _same_person(subject: str, taken: set[int], texts: list[str]) -> set[int]:
    """A request about a person ("my ex", "my ex-wife") covers the other facts naming the person its
    facts name ("Sandra still lives in our old house"); a request about anything else takes nothing more."""
    head = subject.lower().rstrip()
    if not (re.search(rf"{_OTHERS.pattern}$", head) or re.search(r"\bex(?:-\w+)?$|\bwho\s+i\b|\brelationship$", head)):
        return set()
    names = {name for i in taken for name in _NAME.findall(texts[i]) if name not in _NOT_NAMES}
    relation = _SYNONYMS.get(head.split()[-1], head.split()[-1])
    return {
        i
        for i, text in enumerate(texts)
        if i not in taken
        and (shared := names & set(re.findall(r"\b[A-Z][a-z]{2,}\b", text)))
        and not all(_named_other(name, relation, text) for name in shared)
    }


# A fact that goes on about the person of the fact told just before it ("My mother-in-law lives with
# us", then "She criticises my cooking constantly").
_GOES_ON = re.compile(r"^(?:she|he|they)\b", re.IGNORECASE)


def _goes_on(taken: set[int], texts: list[str], turns: list[set[tuple[Any, Any]]]) -> set[int]:
    """The facts told in the turn right after a taken fact about someone, that open on "she" or "he"."""
    about_someone = [i for i in taken if _OTHERS.search(texts[i].lower()) or _names(texts[i])]
    following = {(session, index + 1) for i in about_someone for session, index in turns[i]}
    return {j for j, text in enumerate(texts) if turns[j] & following and _GOES_ON.match(text)}


def _named_other(name: str, relation: str, text: str) -> bool:
    """ "My brother Kevin" is another Kevin than the one "my boss" is."""
    said = _CALLED.search(text)
    said = said if said is not None and said.group("name") == name else _IS_MY.search(text)
    if said is None or said.group("name") != name:
        return False
    other = _SYNONYMS.get(said.group("relation"), said.group("relation"))
    return other != relation and not other.startswith(f"{relation}-") and not relation.startswith(f"{other}-")


_NOT_NAMES = frozenset(
    "January February March April May June July August September October November December Monday "
    "Tuesday Wednesday Thursday Friday Saturday Sunday Christmas Easter".split()
)
_NOT_NAME_WORDS = frozenset(
    "my our the his her their i'm i've we're and but when last this that there after before since".split()
) | {name.lower() for name in _NOT_NAMES}
RESTATED_WORDS = 3  # a subject of this many content words, 3/4 of them in an item: the item restates it


def _plain_share(text: str, subject: str) -> float:
    wanted = content_words(subject)
    return len(wanted & content_words(text)) / len(wanted) if wanted else 0.0


_MANY = re.compile(
    r"\b(?:everything|all\s+(?:the|of|that)|both|anything|all\s+i|any\s+(?:mention|info|details)|whatever|"
    r"what\s+you\s+(?:know|have|hold|keep|store|stored|saved|remember))\b"
)
# Where the items are held, not how many: "remove my income from whatever you have on me".
_WHERE_HELD = re.compile(
    r"\b(?:from|in|out\s+of|off)\s+(?:whatever|what|everything|anything|all)\s+(?:you|u)\s+(?:(?:\w+\s+){0,3}?(?:on|about)\s+me\b|"
    r"(?:'ve\s+|have\s+)?(?:store|stored|keep|kept|save|saved|hold|remember|know|record|recorded)\b)"
)
# People a fact may be about instead of the user: "my sister lives in Manchester" is not "where I live".
# (A profile entry names the person first: "wife's birthday: in July", "partner: 6 foot 2"; a request
# may name them through someone else: "Ben's mum".)
_OTHERS = re.compile(
    r"(?:\b(?:my|our|his|her|their|[a-z]+'s|(?:has|have|with)\s+an?)\s+(?:\w+\s+)?|^)(?:sister|brother|mum|mom|mother|dad|father|son|daughter|wife|husband|"
    r"parents|grandparents|grandchildren|grandkids|stepdad|stepmum|sisters|brothers|sons|daughters|friends|"
    r"partner|friend|boss|manager|colleague|neighbou?r|cousin|aunt|uncle|nan|gran|grandma|grandmother|grandad|grandfather|"
    r"grandpa|niece|nephew|kids?|children|child|boyfriend|girlfriend|ex|fianc[eé]e?|flatmate|roommate|landlord|"
    r"dog|cat|teacher|doctor|therapist|in-laws)\b"
)
OTHERS_PENALTY = 0.35
_KIN = {
    "kid": "child",
    "kids": "child",
    "children": "child",
    "son": "child",
    "daughter": "child",
    "mom": "mum",
    "mother": "mum",
    "father": "dad",
    "fiance": "partner",
    "manager": "boss",
    "fiancee": "partner",
    "fiancé": "partner",
}


def _person(phrase: str) -> str:
    word = phrase.split()[-1]
    return _KIN.get(word, word)


def _scores(embedder: Embedder, subject: str, texts: list[str], vectors: np.ndarray) -> np.ndarray:
    query = embedder.embed([subject], query=True)[0]
    cosine = (vectors @ query).astype(np.float64)
    lexical = np.array([word_share(text, subject) for text in texts])
    penalty = np.array([OTHERS_PENALTY if _about_someone_else(text, subject) else 0.0 for text in texts])
    return cosine + LEXICAL_WEIGHT * lexical - penalty


def score_items(embedder: Embedder, subject: str, items: Sequence[MemoryItem]) -> np.ndarray:
    """Each item's score for ``subject`` (the best over the things it names)."""
    texts = [item.text for item in items]
    vectors = embedder.embed(texts)
    parts = ForgetRequest(subject=subject, turn_index=0, text="").parts() or [subject]
    return np.max([_scores(embedder, part, texts, vectors) for part in parts], axis=0)


def previous_user_turn(request: ForgetRequest, session: Session, items: Sequence[MemoryItem]) -> list[str]:
    """What "that" in "don't keep that in memory" refers to: the user's last turn before the request
    (its ``last`` turns: "the last two things I told you"), and the items taken from them; the newest
    stored user facts when the session has no such turn."""
    chosen: list[str] = []
    turns = 0
    for message in reversed(session.messages[: request.turn_index]):
        if message.role != "user":
            continue
        if turns == request.last:
            return chosen
        turns += 1
        chosen += [item.id for item in items if item.text.strip() == message.content.strip()] or [
            item.id for item in items if message.content.strip() in item.text
        ]
    newest: list[list[str]] = []  # the stored user facts, newest first, one group per turn
    seen: dict[frozenset[tuple[Any, Any]], list[str]] = {}
    for item in reversed([item for item in items if item.source.get("role") == "user" and item.id not in chosen]):
        key = frozenset(_turns_of(item)) or frozenset({(item.id, None)})
        if key not in seen:
            seen[key] = []
            newest.append(seen[key])
        seen[key].append(item.id)
    return chosen + [item_id for group in newest[: request.last - turns] for item_id in group]


# ---------------------------------------------------------------------------------------------- removal
class Remover(Protocol):
    """Removes what forget requests refer to: at once (:class:`DeleteAtOnce`) or restorably
    (``memlab.forget_ledger.ForgetLedger``)."""

    def hidden(self, user_id: str) -> set[str]:
        """Ids already removed but still held (pending deletion): never candidates again."""
        ...

    def remove(self, memory: Memory, user_id: str, items: list[MemoryItem], request: str) -> list[ForgottenItem]: ...


class DeleteAtOnce:
    """The default remover: the backend deletes the items now, for good."""

    def hidden(self, user_id: str) -> set[str]:
        return set()

    def remove(self, memory: Memory, user_id: str, items: list[MemoryItem], request: str) -> list[ForgottenItem]:
        from memlab.errors import NotFoundError

        removed = []
        for item in items:
            try:
                memory.delete(item.id, user_id=user_id)
            except NotFoundError:
                continue  # gone with an earlier item (a profile turn's entry, say)
            removed.append(ForgottenItem(item_id=item.id, text=item.text, request=request))
        return removed


class _EmbeddedOnce(Embedder):
    """The backend's embedder, each text embedded once while a session's requests are honoured: the
    matcher and the learned reader read the same stored items (a backend without an embedding cache,
    full_context, would embed all of them twice). Lives for one call, so it keeps no user's text."""

    def __init__(self, inner: Embedder) -> None:
        super().__init__()
        self.inner, self.name, self.dim = inner, inner.name, inner.dim
        self._vectors: dict[tuple[str, bool], np.ndarray] = {}

    def _embed(self, texts: list[str], *, query: bool) -> np.ndarray:
        missing = [text for text in dict.fromkeys(texts) if (text, query) not in self._vectors]
        if missing:
            self._vectors.update(((text, query), v) for text, v in zip(missing, self.inner.embed(missing, query=query)))
        return np.stack([self._vectors[(text, query)] for text in texts])


def embedder_for(memory: Memory) -> Embedder:
    """The embedder a backend already has (rag, profile), or the packaged MiniLM (full_context, mem0)."""
    from memlab.embedders import get_embedder

    own = getattr(memory, "embedder", None)
    if isinstance(own, Embedder):
        return own
    return get_embedder("minilm", cache_dir=memory.cache_dir)


def honour_forget_requests(
    memory: Memory,
    session: Session,
    *,
    user_id: str,
    matcher: Matcher | None = None,
    remove: Remover | None = None,
) -> list[ForgottenItem]:
    """Remove what the forget requests of ``session`` refer to from ``user_id``'s memory (after the
    session was stored). Returns what was removed; a request that matched nothing removes nothing,
    its turn included."""
    from memlab.memory import Capability

    requests = find_forget_requests(session)
    if not requests or not (memory.supports(Capability.LIST) and memory.supports(Capability.DELETE)):
        return []
    remover: Remover = remove or DeleteAtOnce()
    forgotten: list[ForgottenItem] = []
    embedder: Embedder | None = None  # the backend's, made when a request needs it
    for request in requests:
        hidden = remover.hidden(user_id) | {f.item_id for f in forgotten}
        items = [item for item in memory.list_memories(user_id=user_id) if item.id not in hidden]
        own = [item for item in items if _is_request_turn(item, request)]
        candidates = [item for item in items if item not in own]
        if request.everything:  # "forget everything you know about me (except my name)"
            embedder = embedder or _EmbeddedOnce(embedder_for(memory))
            chosen = everything_but_kept(request, candidates, embedder)
        elif request.shape_only and matcher is None:  # "delete karen": the reader reads the turn's nearest items
            embedder = embedder or _EmbeddedOnce(embedder_for(memory))
            chosen = reader_picks(request.text, _for_the_reader(request, candidates, embedder))
        elif request.subject is None and not request.shape_only:
            chosen = previous_user_turn(request, session, candidates)
        elif matcher is not None:  # the backend's own (its LLM's) reading
            chosen = matcher(request, candidates)
        else:
            embedder = embedder or _EmbeddedOnce(embedder_for(memory))
            chosen = semantic_matcher(embedder)(request, candidates)
            if not chosen:  # the matcher was not sure: the learned reader reads its best candidates
                chosen = reader_picks(request.text, _for_the_reader(request, candidates, embedder))
            elif len(chosen) > 1:  # several for one request: the reader drops those it rules out, never
                # one that says all the request names ("Keep in mind that my workouts are tennis matches",
                # a chat turn it reads as no fact of that kind)
                taken = set(chosen)
                picked = [item for item in candidates if item.id in taken]
                named = content_words(request.subject or "")
                sure = {item.id for item in picked if named and named <= content_words(item.text)}
                chosen = reader_confirms(request.text, picked, sure)
        if not chosen:
            continue  # nothing matched with enough confidence: nothing is deleted
        wanted = _with_replies(_with_derived(set(chosen), candidates), candidates, request)
        targets = [item for item in candidates if item.id in wanted] + own
        forgotten += remover.remove(memory, user_id, targets, request.text)
    return forgotten


def _turns_of(item: MemoryItem) -> set[tuple[Any, Any]]:
    source = item.source
    turns = {(source.get("session_id"), source["turn_index"])} if "turn_index" in source else set()
    for turn in source.get("turns", []):
        if isinstance(turn, dict) and "turn_index" in turn:
            turns.add((turn.get("session_id", source.get("session_id")), turn["turn_index"]))
    return turns


def _with_derived(chosen: set[str], items: Sequence[MemoryItem]) -> set[str]:
    """``chosen`` plus the items made only from the turns they come from (a profile entry taken from a
    chosen turn): what restates a forgotten fact goes with it, nothing made from other turns does. An
    entry made from several turns ("boss: having an affair (changed from called Richard)") does not
    take the other turns' facts with it: those turns count only when a one-turn item was chosen."""
    picked = [_turns_of(item) for item in items if item.id in chosen]
    single = [turns for turns in picked if len(turns) == 1]
    turns = set().union(*(single or picked))
    if not turns:
        return chosen
    return chosen | {item.id for item in items if (own := _turns_of(item)) and own <= turns}


def _with_replies(chosen: set[str], items: Sequence[MemoryItem], request: ForgetRequest) -> set[str]:
    """``chosen`` plus the assistant's replies right after a chosen user turn that use what it names
    ("Bring some green tea" after "my mornings start with green tea"): they rely on the fact."""
    said = {
        (item.source.get("session_id"), item.source["turn_index"])
        for item in items
        if item.id in chosen and item.source.get("role") == "user" and "turn_index" in item.source
    }
    named = content_words(request.subject or "")
    replies = {
        item.id
        for item in items
        if item.source.get("role") == "assistant"
        and (item.source.get("session_id"), item.source.get("turn_index", -2) - 1) in said
        and len(named & content_words(item.text)) >= min(2, len(named))
    }
    return chosen | replies


def _is_request_turn(item: MemoryItem, request: ForgetRequest) -> bool:
    text = request.text.strip()
    return item.text.strip() == text or (len(text) > 20 and text in item.text)


# ---------------------------------------------------------------------------------------------- LLM path
# The LLM path's prompt (memlab's own): which stored items a forget request refers to.
LLM_MATCH_PROMPT = (
    "The user asked their assistant to forget something. Decide which of the assistant's stored memories "
    "the request refers to: memories that state, imply or rely on what the user wants forgotten.\n\n"
    "Request: {request}\n\nStored memories:\n{items}\n\n"
    'Reply with JSON only: {{"forget": [<numbers of the memories to delete>]}}'
)


def llm_matcher(
    llm: object,
    *,
    max_items: int = 200,
    on_usage: Callable[[int, int, float], None] | None = None,
    fallback: Matcher | None = None,
) -> Matcher:
    """A matcher that asks ``llm`` (a memlab LLM) which items a request refers to. A reply that is
    not the JSON asked for falls back to ``fallback`` (the backend's semantic matcher; none: nothing).
    ``on_usage`` (a backend's ``record_llm_usage``) gets each call's tokens and cost."""
    import json

    def match(request: ForgetRequest, items: Sequence[MemoryItem]) -> list[str]:
        shown = list(items)[-max_items:]
        listing = "\n".join(f"{number}. {item.text[:400]}" for number, item in enumerate(shown, start=1))
        prompt = LLM_MATCH_PROMPT.format(request=request.text.strip(), items=listing or "(none)")
        try:
            reply = llm.chat([{"role": "user", "content": prompt}], json_mode=True)  # type: ignore[attr-defined]
            if on_usage is not None:
                cost = reply.metadata.get("cost_usd", 0.0)
                on_usage(reply.prompt_tokens, reply.completion_tokens, cost if isinstance(cost, (int, float)) else 0.0)
            numbers = json.loads(reply.text).get("forget", [])
        except (ValueError, AttributeError, TypeError):
            return fallback(request, items) if fallback is not None else []
        chosen = [
            shown[number - 1].id
            for number in (numbers if isinstance(numbers, list) else [])
            if isinstance(number, int) and not isinstance(number, bool) and 1 <= number <= len(shown)
        ]
        return list(dict.fromkeys(chosen))

    return match

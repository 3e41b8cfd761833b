"""Synthetic data with PersonaMem-v2's structure (``synthetic:style=v2``), offline and deterministic.

``generate_v2(personas=4, seed=0, tokens=6000)`` builds one history per persona the way the
release does (``memlab.datasets.personamem_v2``): a system message with the persona, then one flat
list of user/assistant messages with no sessions; every question is asked after the whole history.
Preferences are revealed *implicitly*, inside tasks of the release's nine conversation scenarios
("polish this email to my aunt: ... I always have green tea for breakfast ..."), between unrelated
filler exchanges that bring the history to about ``tokens`` tokens.

Each persona gets one question per topic (eight topics), labelled with the release's ``pref_type``:

- hobby topics (food, travel, music, fitness, reading): ``stereotypical_pref``,
  ``anti_stereotypical_pref``, ``neutral_preferences`` or ``ask_to_forget``; therapy:
  ``therapy_background``; health: ``health_and_medical_conditions``; money: ``sensitive_info``;
- ``who=others`` (a quarter of the non-forget hobby questions): the history also reveals a friend's
  preference on the topic (in a message the user asks to translate or forward); it is a distractor;
- ``ask_to_forget`` (``updated=True``): the user revealed a preference, the assistant used it, and
  the user then asked to forget it, in one of the phrasings of ``FORGET_REQUESTS`` (polite, blunt,
  indirect, "scratch what I said about ...", by the thing alone). The user's other, still valid
  preference on the topic was revealed once; it is the correct answer and the forgotten one a
  distractor, so a memory that honours the request is rewarded and one that keeps it is drawn to
  the forgotten option (the release's correct answer is the generic one; see docs/datasets.md);
- every other hobby preference is followed by a near-miss turn (``NEAR_MISSES``: "oh forget it,
  ...", "don't forget that ...", "my brother always forgets that ...") that must delete nothing;
- ``sensitive_info``: the user shared a sensitive fact (rent, debt, salary) in a task; the correct
  option is the one consistent with it. The release's sensitive rows test masking and their
  evidence is not in the histories: results on this type are not comparable to the release's.

Calibration: the four options of a question are one template filled with four values drawn from the
topic's pool, and which of them is correct is drawn uniformly, independently of the question text,
so a reader that never sees memory scores 25 % in expectation on every type (tests check
25 % +- 8 on a seed sweep, as for the PersonaMem-style data).
"""

from __future__ import annotations

import json
import random
import zlib
from dataclasses import dataclass

from memlab.datasets.base import Dataset, History
from memlab.datasets.personamem_v2 import BREAKDOWN_FIELDS, distance_bin
from memlab.datasets.synthetic.positions import balance_answers
from memlab.tokens import count_tokens
from memlab.types import Message, Question

SCENARIOS = (
    "personal_email",
    "professional_email",
    "creative_writing",
    "professional_writing",
    "chat_message",
    "translation",
    "trouble_consult",
    "social_media_post",
    "knowledge_query",
)
# How a task carries a statement about the user (or a friend): {s} is the statement.
TASKS: dict[str, str] = {
    "personal_email": "Can you polish this email to my aunt? 'Hi Auntie, all is well here. {s}. Hope to see you soon!'",
    "professional_email": "Please make this note to my manager sound more professional: 'About next week: {s}, "
    "so I would like to keep the mornings free.'",
    "creative_writing": "Help me finish a short story opening that starts from my own life: '{s}, and that is "
    "where it all began.'",
    "professional_writing": "Tighten this paragraph of my bio for the company website: 'Outside work, {s}.'",
    "chat_message": "How should I reply to my friend who asked what I am up to? I want to say that {s}.",
    "translation": "Translate into Spanish: '{s}.'",
    "trouble_consult": "I need advice. {s}, but my schedule keeps getting in the way. How do I manage?",
    "social_media_post": "Write a cheerful post for my followers that mentions that {s}.",
    "knowledge_query": "Quick question about nutrition and energy: {s}. Is that a sensible habit?",
}
REPLY = "Here is a version you can use. I kept your point that {s} and made the wording flow better."
# How a user asks to forget a preference ({s}: how it was stated, {x}: the value alone): polite,
# blunt, indirect, "scratch that", "don't keep ...", by the thing rather than the statement's words.
FORGET_REQUESTS = (
    "Please forget that {s}.",
    "Actually, could you forget the bit about {x}? I'd rather you didn't keep it.",
    "Scratch what I said about {x}, please.",
    "I'd rather you didn't remember that {s}.",
    "Don't keep the fact that {s} in your memory.",
    "Can you delete what you know about {x}?",
    "You know how I said {s}? Please forget that.",
    "Please stop remembering that {s}.",
    "Could you erase the part about {x} from your notes?",
    "Forget I ever mentioned {x}, I don't want that stored.",
)
# Turns that sound like one but ask nothing of the memory; honouring any of them loses a preference.
NEAR_MISSES = (
    "Oh forget it, I was going to ask about {x} but it can wait.",
    "Don't forget that {s}, it matters to me.",
    "My brother always forgets that {s}.",
    "I forgot my charger at work again, but anyway: {s}.",
    "Never mind, forget about it - let's talk about {x} another time.",
    "How do I delete a file that says it is still in use?",
    "I'll never forget the first time I tried {x}.",
    "Remind me later - don't let me forget to book a table.",
)


def _phrase(bank: tuple[str, ...], key: str) -> str:
    """A template of ``bank`` chosen by ``key`` (no draw from the generator's random state)."""
    return bank[zlib.crc32(key.encode("utf-8")) % len(bank)]


FRIEND_NAMES = ("Ana", "Tom", "Mei", "Omar", "Lena", "Ravi", "Sofia", "Jonas")


@dataclass(frozen=True)
class Topic:
    name: str  # topic_preference
    reveal: str  # statement about the user ({x}: the value)
    reveal_alt: str  # the same in other words: how a preference that is later forgotten was stated
    friend: str  # the same about a friend ({n}: name)
    query: str
    option: str  # the four options: this template, four values
    pool: tuple[str, ...]


TOPICS: tuple[Topic, ...] = (
    Topic(
        "Food",
        "I always have {x} for breakfast",
        "my mornings start with {x}",
        "my friend {n} always has {x} for breakfast",
        "What should I bring to the office breakfast on Friday?",
        "Bring some {x} to share; it would suit a relaxed Friday breakfast.",
        (
            "green tea",
            "spicy ramen",
            "dark chocolate",
            "sourdough toast",
            "fresh mangoes",
            "black coffee",
            "oat porridge",
            "goat cheese",
            "lemon muffins",
            "rye crackers",
        ),
    ),
    Topic(
        "Travel",
        "I spend most weekends on {x}",
        "my days off are for {x}",
        "my friend {n} spends most weekends on {x}",
        "Any ideas for my free weekend?",
        "Plan a Saturday of {x}; it is a good way to spend the day.",
        (
            "day trips to nearby towns",
            "hill walks",
            "river cycling",
            "castle visits",
            "lakeside camping",
            "coastal kayaking",
            "seaside train rides",
            "museum tours",
            "vineyard tours",
            "birdwatching walks",
        ),
    ),
    Topic(
        "Music",
        "I listen to {x} while I work",
        "my playlist is full of {x}",
        "my friend {n} listens to {x} while working",
        "What could I listen to while I cook tonight?",
        "Put on some {x}; it makes an evening of cooking more fun.",
        (
            "old jazz records",
            "film soundtracks",
            "classic rock",
            "lo-fi beats",
            "opera arias",
            "k-pop hits",
            "folk ballads",
            "drum and bass",
            "bossa nova",
            "baroque concertos",
        ),
    ),
    Topic(
        "Fitness",
        "I keep fit with {x}",
        "my workouts are {x}",
        "my friend {n} keeps fit with {x}",
        "How can I keep fit during a busy week?",
        "Book a few {x} into your calendar; short slots add up over a week.",
        (
            "early swims",
            "yoga classes",
            "boxing sessions",
            "long runs",
            "climbing sessions",
            "pilates workouts",
            "tennis matches",
            "rowing workouts",
            "dance classes",
            "kettlebell circuits",
        ),
    ),
    Topic(
        "Reading",
        "I read {x} before bed",
        "my bookshelf is all {x}",
        "my friend {n} reads {x} before bed",
        "What could I read on my long flight next month?",
        "Pack a couple of {x}; they make a long flight pass quickly.",
        (
            "crime novels",
            "science fiction",
            "poetry collections",
            "history books",
            "graphic novels",
            "travel memoirs",
            "fantasy sagas",
            "biographies",
            "philosophy essays",
            "short story anthologies",
        ),
    ),
    Topic(
        "Mental health",
        "my therapist suggested {x} for my anxiety",
        "my counsellor recommends {x}",
        "my friend {n}'s therapist suggested {x}",
        "I have a stressful week ahead and my anxiety is up. Any tips?",
        "Lean on {x}; it can carry you through a stressful week.",
        (
            "evening journaling",
            "breathing exercises",
            "weekly nature walks",
            "screen-free Sundays",
            "mindfulness meditation",
            "a support group",
            "a gratitude list",
            "muscle relaxation drills",
            "art therapy",
            "a fixed sleep routine",
        ),
    ),
    Topic(
        "Health",
        "I have to manage {x}",
        "my doctor says I live with {x}",
        "my friend {n} has to manage {x}",
        "Can you plan a dinner menu I can manage with this weekend?",
        "Plan the menu around {x}, so that you can enjoy the dinner as well.",
        (
            "a gluten intolerance",
            "type 2 diabetes",
            "a lactose intolerance",
            "high blood pressure",
            "a peanut allergy",
            "acid reflux",
            "an iron deficiency",
            "a shellfish allergy",
            "a low-salt diet",
            "a histamine intolerance",
        ),
    ),
    Topic(
        "Finance",
        "I pay {x}",
        "my budget starts with {x}",
        "my friend {n} pays {x}",
        "Can you help me draft a monthly budget around what I pay?",
        "Start the budget from {x} and build everything else around it.",
        (
            "a rent of 900 euros",
            "a rent of 1,400 euros",
            "a loan of 300 euros a month",
            "a rent of 650 euros",
            "childcare of 700 euros",
            "a mortgage of 1,100 euros",
            "a car lease of 250 euros",
            "tuition of 500 euros a month",
            "a rent of 1,900 euros",
            "a debt of 400 euros a month",
        ),
    ),
)
HOBBY_TOPICS = TOPICS[:5]
HOBBY_NAMES = frozenset(t.name for t in HOBBY_TOPICS)
TYPE_OF_TOPIC = {
    "Mental health": "therapy_background",
    "Health": "health_and_medical_conditions",
    "Finance": "sensitive_info",
}
HOBBY_TYPES = ("stereotypical_pref", "anti_stereotypical_pref", "neutral_preferences", "ask_to_forget")

# Filler exchanges (unrelated to the user): the release's 128k histories are padded with such Q&A.
_FILLER_QUESTIONS = (
    "What is {a} times {b}?",
    "Can you explain what a {w} is, in two sentences?",
    "Give me a fun fact about {w}s.",
    "How do I convert {a} miles to kilometres?",
    "Write a haiku about a {w}.",
    "What is the difference between a {w} and a {v}?",
)
_FILLER_WORDS = (
    "glacier",
    "volcano",
    "comet",
    "lighthouse",
    "compass",
    "violin",
    "bridge",
    "telescope",
    "cactus",
    "harbour",
    "windmill",
    "satellite",
)
_FILLER_SENTENCES = (
    "That is a good question, and the short answer is that it depends on the details.",
    "Historically this was measured by hand, which made it slow and error-prone.",
    "Most references agree on the basic idea, even if they phrase it differently.",
    "A simple way to remember it is to think of a river flowing downhill.",
    "In everyday use the two words are often mixed up, but they mean different things.",
    "Engineers usually start from a rough estimate and refine it step by step.",
    "The number comes out slightly different depending on rounding.",
    "Many people find a small diagram helps more than a long explanation.",
    "It became popular in the nineteenth century and spread quickly after that.",
    "If you want more detail, I can walk you through a worked example.",
)


def _filler(rng: random.Random) -> list[Message]:
    a, b = rng.randrange(2, 99), rng.randrange(2, 99)
    w, v = rng.sample(_FILLER_WORDS, 2)
    question = rng.choice(_FILLER_QUESTIONS).format(a=a, b=b, w=w, v=v)
    answer = " ".join(rng.sample(_FILLER_SENTENCES, rng.randrange(3, 7)))
    return [Message(role="user", content=question), Message(role="assistant", content=answer)]


def _reveal(statement: str, rng: random.Random) -> tuple[list[Message], str]:
    scenario = rng.choice(SCENARIOS)
    user = TASKS[scenario].format(s=statement[:1].upper() + statement[1:] if scenario != "chat_message" else statement)
    return [Message(role="user", content=user), Message(role="assistant", content=REPLY.format(s=statement))], scenario


@dataclass
class _Plan:
    topic: Topic
    pref_type: str
    who: str
    options: list[str]  # values, in option order
    answer: int
    blocks: list[list[Message]]  # evidence blocks, first one holds the evidence of the correct answer
    scenario: str
    forgotten: str = ""


def _plan(topic: Topic, pref_type: str, who: str, rng: random.Random) -> _Plan:
    values = rng.sample(topic.pool, 4)
    answer = rng.randrange(4)  # uniform, independent of the question: blind readers sit at chance
    own = values[answer]
    evidence, scenario = _reveal(topic.reveal.format(x=own), rng)
    blocks = [evidence]
    forgotten = ""
    if who == "others":
        friend = values[(answer + 1 + rng.randrange(3)) % 4]
        name = rng.choice(FRIEND_NAMES)
        blocks.append(_reveal(topic.friend.format(n=name, x=friend), rng)[0])
    if pref_type == "ask_to_forget":
        forgotten = values[(answer + 1 + rng.randrange(3)) % 4]
        statement = topic.reveal_alt.format(x=forgotten)
        block = _reveal(statement, rng)[0]
        request = _phrase(FORGET_REQUESTS, f"{topic.name}:{forgotten}:{own}").format(s=statement, x=forgotten)
        # the assistant uses it once more, then the user asks to forget it (the block ends with their turn)
        block += [
            Message(role="user", content=f"{topic.query} Keep in mind that {statement}."),
            Message(role="assistant", content=topic.option.format(x=forgotten)),
            Message(role="user", content=request),
        ]
        blocks.append(block)
    elif topic.name in HOBBY_NAMES:
        # a near-miss after the evidence: a memory that takes it for a request loses the answer
        near = _phrase(NEAR_MISSES, f"{topic.name}:{own}:near").format(s=topic.reveal.format(x=own), x=own)
        blocks[0] = [*blocks[0], Message(role="user", content=near), Message(role="assistant", content="Noted.")]
    return _Plan(topic, pref_type, who, values, answer, blocks, scenario, forgotten)


def _persona_message(name: str, age: int, rng: random.Random) -> Message:
    persona = {
        "short_persona": f"{name}, {age}, works as a {rng.choice(('nurse', 'teacher', 'engineer', 'designer', 'chef', 'lawyer'))}",
        "name": name,
        "age": age,
        "speaking_style": rng.choice(("brief and direct", "warm and chatty", "formal")),
    }
    return Message(
        role="system",
        content="You are an AI assistant helping a user with the following persona:\n\n"
        + json.dumps(persona, indent=2)
        + "\n\nPlease respond in a way that's appropriate for this user's background, interests, and communication style.",
    )


def generate_v2(personas: int = 4, seed: int = 0, tokens: int = 6000, others_share: int = 25) -> Dataset:
    """A deterministic PersonaMem-v2-style dataset: ``personas`` histories of about ``tokens`` tokens,
    eight questions each; ``others_share`` % of the non-forget hobby questions are ``who=others``."""
    limits = {
        "personas": (personas, 1, 100_000),
        "tokens": (tokens, 500, 2_000_000),
        "others_share": (others_share, 0, 100),
    }
    for name, (value, low, high) in limits.items():
        if not low <= value <= high:
            raise ValueError(f"synthetic style=v2: {name}={value} is out of range [{low}, {high}]")
    histories: dict[str, History] = {}
    questions: list[Question] = []
    for number in range(personas):
        rng = random.Random(f"memlab-synthetic-v2:{seed}:{number}")
        hobby_types = [*HOBBY_TYPES, rng.choice(HOBBY_TYPES)]
        rng.shuffle(hobby_types)
        plans: list[_Plan] = []
        for topic in TOPICS:
            pref_type = TYPE_OF_TOPIC.get(topic.name) or hobby_types[HOBBY_TOPICS.index(topic)]
            who = "self"
            if pref_type in HOBBY_TYPES[:3] and rng.randrange(100) < others_share:
                who = "others"
            plans.append(_plan(topic, pref_type, who, rng))
        context_id = f"synthetic-v2-{seed}-p{number}"
        history = _history(context_id, plans, number, tokens, rng)
        histories[context_id] = history
        questions += _questions(context_id, history, plans, number)
    questions = balance_answers(questions, random.Random(f"memlab-synthetic-v2-positions:{seed}"))  # no letter bias
    spec = f"synthetic:style=v2,personas={personas},seed={seed},tokens={tokens},others_share={others_share}"
    return Dataset(name=f"synthetic-v2-{seed}", histories=histories, questions=questions, source=spec)


def _history(context_id: str, plans: list[_Plan], number: int, tokens: int, rng: random.Random) -> History:
    age = rng.randrange(22, 66)
    messages = [_persona_message(f"Persona {number}", age, rng)]
    # Blocks in random order; a forget request ends the block that revealed what it forgets, so it
    # always comes after it (as the release places ask-to-forget blocks).
    blocks = [(i, b) for i, plan in enumerate(plans) for b in plan.blocks]
    rng.shuffle(blocks)
    budget = tokens - sum(count_tokens(m.content) for _, b in blocks for m in b)
    fillers: list[list[Message]] = []
    used = 0
    while used < budget:
        pair = _filler(rng)
        fillers.append(pair)
        used += sum(count_tokens(m.content) for m in pair)
    slots: list[list[Message]] = [b for _, b in blocks]
    for pair in fillers:  # spread the filler evenly between blocks
        slots.insert(rng.randrange(len(slots) + 1), pair)
    starts: dict[int, list[int]] = {}
    for block in slots:
        for plan_index, b in blocks:
            if b is block:
                starts.setdefault(plan_index, []).append(len(messages))
        messages.extend(block)
    return History(
        id=context_id,
        messages=messages,
        session_starts=[0],
        metadata={"block_starts": {str(k): v for k, v in starts.items()}},
    )


def _questions(context_id: str, history: History, plans: list[_Plan], number: int) -> list[Question]:
    tail = [0] * (len(history.messages) + 1)  # tokens from message i to the end
    for i in range(len(history.messages) - 1, -1, -1):
        tail[i] = tail[i + 1] + count_tokens(history.messages[i].content)
    starts = history.metadata["block_starts"]
    out = []
    for index, plan in enumerate(plans):
        # plan.blocks[0] reveals the correct answer: its first message is the evidence
        located = next(s for s in starts[str(index)] if history.messages[s].content == plan.blocks[0][0].content)
        distance = tail[located]
        fields = {
            "conversation_scenario": plan.scenario,
            "who": plan.who,
            "updated": str(plan.pref_type == "ask_to_forget"),
            "sensitive_info": str(plan.pref_type == "sensitive_info"),
            "topic_preference": plan.topic.name,
            "distance_from_related_snippet_to_query_32k": distance_bin(distance),
        }
        assert set(BREAKDOWN_FIELDS) <= set(fields)
        options = [plan.topic.option.format(x=value) for value in plan.options]
        own = plan.options[plan.answer]
        preference = (
            f"Do not remember '{plan.topic.reveal_alt.format(x=plan.forgotten)}' in memory"
            if plan.forgotten
            else plan.topic.reveal.format(x=own)
        )
        out.append(
            Question(
                id=f"{context_id}-q{index}",
                type=plan.pref_type,
                topic=plan.topic.name,
                text=plan.topic.query,
                options=options,
                answer=plan.answer,
                answer_text=options[plan.answer],
                context_id=context_id,
                end_index=len(history.messages),
                distance_tokens=distance,
                persona_id=str(number),
                evidence=[f"m{located}"],
                metadata={
                    "fields": fields,
                    "shuffled_options": True,
                    "preference": preference,
                    "value": own,
                    "forgotten": plan.forgotten,
                    "who": plan.who,
                },
            )
        )
    return out

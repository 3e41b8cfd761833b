"""Forget requests in conversation: the rule-based detector, the matcher, and every built-in backend
that can delete honouring them (``forget_requests``) in retrieve, list and export."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memlab.forget import find_forget_requests, llm_matcher, mentions
from memlab.registry import create_backend
from memlab.types import MemoryItem, Message, Session

REVEAL = "Can you help me plan? I take weekend day trips to nearby towns almost every Saturday."
REPLY = "Sure! Since you enjoy weekend day trips to nearby towns, here is a plan for Saturday."
OTHER = "I also drink green tea every morning instead of coffee."
REQUEST = "Please forget that I take weekend day trips to nearby towns."


def _session(sid: str, *turns: tuple[str, str]) -> Session:
    return Session(id=sid, messages=[Message(role=role, content=text) for role, text in turns])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "subject"),
    [
        (REQUEST, "i take weekend day trips to nearby towns"),
        ("Oh, and forget about my peanut allergy, it was a misdiagnosis.", "my peanut allergy"),
        ("Do not remember that I live in Berlin.", "i live in berlin"),
        ("Don't keep track of my running times anymore", "my running times"),
        ("Please stop remembering that I am vegetarian!", "i am vegetarian"),
        ("Could you remove my home address from your memory?", "my home address"),
        ("Thanks. Please forget the fact that I smoke. What now?", "i smoke"),
        # issue 32's phrasings, written independently of the rules
        ("Actually, please don't keep that I told you about my divorce.", "my divorce"),
        ("Scratch what I said about my salary, forget it.", "my salary"),
        ("Could you erase the bit about my therapist?", "my therapist"),
        ("Please delete the note about my allergy.", "my allergy"),
        ("Forget about the sailboat, please - don't keep that in memory.", "the sailboat"),
        ("Please forget my weight.", "my weight"),
        ("Could you forget where I live?", "where i live"),
        ("Please stop remembering my medication.", "my medication"),
        # shapes first seen in dev3 (phrased here apart from it)
        ("can u drop the gym membership thing pls", "the gym membership"),
        ("Please don't keep the Lucas stuff.", "the lucas"),
        ("I don't want my blood type stored. Delete it.", "my blood type"),
        ("I'd prefer my religion wasn't kept on file.", "my religion"),
        ("honestly i still miss my ex. ugh forget i said that", "i still miss my ex"),
        ("I'd be very grateful if you could erase the information about my arrest.", "my arrest"),
        ("🙈 oh and pls forget the overdraft thing", "the overdraft"),
        ("cud u not remember the rehab stuff", "the rehab"),
        # shapes first seen in dev7 .. dev12 (phrased here apart from them)
        ("I must ask you to no longer retain the information about my overdraft.", "my overdraft"),
        ("please not save anymore that I am moving to Oslo", "i am moving to oslo"),
        ("Kindly cancel from your memory the debts of my uncle.", "the debts of my uncle"),
        ("Would you mind forgetting that I'm dyslexic?", "i'm dyslexic"),
        ("The custody case is none of your business anymore, so please wipe it from what you remember.", "the custody case"),
        ("ugh u still have which gym im with?? delete that", "which gym i'm with"),
        ("Forget what I said about my landlord. I was wrong, he did fix the boiler.", "my landlord"),
        ("Please delete my weight and height from your records.", "my weight and height"),
        ("please delete two things: that I smoke and that I failed my exam.", "i smoke and that i failed my exam"),
    ],
)
def test_detector_finds_requests_and_their_subject(text: str, subject: str):
    (request,) = find_forget_requests(_session("s", ("user", text)))
    assert request.subject == subject and request.turn_index == 0


@pytest.mark.parametrize(
    "text",
    [
        "Don't forget to remind me about the dentist.",
        "I forgot my keys at home.",
        "Never forget that I love jazz.",
        "Forget it.",
        "Let's not forget the milk",
        # issue 32: ordinary talk that deleted facts
        "Forget about it, let's talk about my cat Pixel.",
        "Oh forget it, I love hiking anyway.",
        "Forget what I said about work.",
        "How do I delete a file?",
        "How do I erase a stain from my shirt?",
        "My husband always forgets my birthday.",
        "Don't keep me waiting!",
        # ordinary talk the shapes above must not take
        "Losing my job was hard, but I'm fine now.",
        "Deleting the app helped a lot.",
        "I don't want my photos stored on Google.",
        "Forget I said that, I meant Tuesday.",
        "forget i said anything",
        "Forget the wedding stuff for now, let's do the budget.",
        "forget the money thing, can you help me with my CV",
        # ordinary talk the later shapes must not take
        "can we drop the tax stuff for today, my brain is fried",
        "can u remove the bit about the cruise from my speech, she'll cry",
        "How much does tattoo removal cost? I want my ex's name gone.",
        "Please help me lose my baby weight before the wedding.",
        "Can you remove the walnuts and swap in something nut-free?",
        "Scratch the second option on your list, give me two more.",
        "Forget You by CeeLo Green is on the radio again.",
    ],
)
def test_detector_leaves_other_turns_alone(text: str):
    assert find_forget_requests(_session("s", ("user", text))) == []
    # an assistant saying the words is not the user's request
    assert find_forget_requests(_session("s", ("assistant", REQUEST))) == []


def test_a_bare_act_is_marked_and_honoured_only_on_a_close_match():
    """ "forget the split" is as often talk as a request: it is marked bare, and the matcher takes only
    a fact that matches what it names closely."""
    from memlab.embedders import get_embedder
    from memlab.forget import semantic_matcher

    (request,) = find_forget_requests(_session("s", ("user", "Wipe Marco. All of it.")))
    assert request.bare and request.subject == "marco"
    (strict,) = find_forget_requests(_session("s", ("user", "forget the bread")))
    assert strict.bare
    items = [
        MemoryItem(id=str(i), text=text, source={"turn_index": i})
        for i, text in enumerate(["My ex Marco still texts me", "I live in Leeds", "I bake sourdough bread on Sundays"])
    ]
    match = semantic_matcher(get_embedder("minilm"))
    assert match(request, items) == ["0"]
    assert match(strict, items[:2]) == []  # nothing close: nothing deleted


def test_a_request_naming_a_person_takes_the_facts_naming_them():
    from memlab.embedders import get_embedder
    from memlab.forget import ForgetRequest, semantic_matcher

    items = [
        MemoryItem(id=str(i), text=text, source={"turn_index": i})
        for i, text in enumerate(
            ["My neighbour Gary reported me to the council", "I teach yoga", "My friend Priya is pregnant"]
        )
    ]
    match = semantic_matcher(get_embedder("minilm"))
    assert match(ForgetRequest(subject="the gary", turn_index=0, text="scratch the Gary situation pls"), items) == ["0"]
    # "Ben's mum" is someone else than Ben
    assert match(ForgetRequest(subject="ben's mum", turn_index=0, text="forget Ben's mum"), [
        MemoryItem(id="b", text="I'm married to Ben", source={"turn_index": 0}),
        MemoryItem(id="c", text="I like chess", source={"turn_index": 1}),
    ]) == []


def test_a_request_pointing_back_refers_to_the_previous_turn():
    (request,) = find_forget_requests(
        _session("s", ("user", "I weigh 92 kilos."), ("user", "Please don't keep that in memory."))
    )
    assert request.subject is None and request.turn_index == 1


def test_mentions_needs_most_of_the_subject():
    subject = "I take weekend day trips to nearby towns"
    assert mentions(REVEAL, subject) and mentions(REPLY, subject)
    assert mentions("hobby: weekend day trip to a nearby town", subject)
    assert not mentions(OTHER, subject) and not mentions("A day at the beach", subject)


BACKENDS = {
    "full_context": {},
    "rag": {"embedder": "hashing"},
    "profile": {"embedder": "hashing"},
    "mem0": {"embedder": "hashing"},
}


def _texts(memory, query: str) -> tuple[str, str, str]:
    retrieved = memory.retrieve(query, user_id="u", k=50)
    listed = " ".join(item.text for item in memory.list_memories(user_id="u"))
    exported = json.dumps(memory.export("u"))
    return retrieved.context, listed, exported


@pytest.mark.parametrize("name", sorted(BACKENDS))
def test_backends_honour_forget_requests(name: str, tmp_path: Path):
    conversation = [
        _session("s0", ("user", REVEAL), ("assistant", REPLY), ("user", OTHER), ("assistant", "Noted.")),
        _session("s1", ("user", REQUEST), ("assistant", "Done.")),
    ]
    results = {}
    for forget in (False, True):
        memory = create_backend(
            name, {**BACKENDS[name], "forget_requests": forget}, data_dir=tmp_path / f"{name}-{forget}"
        )
        try:
            for session in conversation:
                memory.ingest(session, user_id="u")
            results[forget] = _texts(memory, "What should I do on Saturday? weekend day trips nearby towns")
        finally:
            memory.close()
    assert "day trip" in " ".join(results[False]).lower()  # without the option the preference stays
    for where, text in zip(("retrieve", "list", "export"), results[True]):
        assert "day trip" not in text.lower(), f"{name}: the forgotten preference still reaches {where}"
    # what was not asked to be forgotten is kept
    assert "green tea" in results[True][1].lower() or "green tea" in results[True][2].lower()


def test_client_turns_forget_requests_on_by_default(tmp_path: Path):
    from memlab.client import MemoryClient

    with MemoryClient("full_context", data_dir=tmp_path / "on") as client:
        assert client.memory.config.forget_requests is True
    with MemoryClient("full_context", {"forget_requests": False}, data_dir=tmp_path / "off") as client:
        assert client.memory.config.forget_requests is False


def test_llm_matcher_adds_what_the_llm_names_and_survives_bad_replies():
    from memlab.llm import LLM, LLMResponse

    class Scripted(LLM):
        name = "scripted:m"

        def __init__(self, reply: str) -> None:
            self.reply, self.prompts = reply, []

        def _chat(self, messages, *, json_mode, temperature, max_tokens):
            self.prompts.append(messages[-1].content)
            return LLMResponse(text=self.reply)

    items = [
        MemoryItem(id="a", text="Enjoys exploring small towns on Saturdays"),  # implicit: few shared words
        MemoryItem(id="b", text="Drinks green tea"),
        MemoryItem(id="c", text=REQUEST),
    ]
    (request,) = find_forget_requests(_session("s", ("user", REQUEST)))
    llm = Scripted('{"forget": [1]}')
    assert llm_matcher(llm)(request, items) == ["a"]
    assert "1. Enjoys exploring small towns" in llm.prompts[0] and REQUEST in llm.prompts[0]
    assert llm_matcher(Scripted("not json"))(request, items) == []  # no fallback given: nothing
    fallback = llm_matcher(Scripted("not json"), fallback=lambda request, items: ["b"])
    assert fallback(request, items) == ["b"]


def test_profile_with_its_llm_extractor_asks_the_llm_what_a_request_refers_to(tmp_path: Path):
    """The LLM path: the request shares no word with what it refers to; the extractor's LLM finds it."""
    import re

    from memlab.llm.base import LLM, LLMResponse

    class ProfileAndMatcherLLM(LLM):
        name = "test:profile-and-matcher"
        supports_json_mode = True

        def _chat(self, messages, *, json_mode, temperature, max_tokens):  # type: ignore[no-untyped-def]
            prompt = messages[-1].content
            if prompt.startswith("The user asked their assistant to forget"):
                listed = re.findall(r"^(\d+)\. (.*)$", prompt, re.MULTILINE)
                chosen = [int(n) for n, text in listed if "small towns" in text]
                return LLMResponse(text=json.dumps({"forget": chosen}), prompt_tokens=7, completion_tokens=3)
            turns = json.loads(prompt.split("\n\nUser turns of this session:\n")[1])
            ops = [
                {
                    "op": "ADD",
                    "aspect": m.group(1),
                    "value": f"likes {m.group(1)}",
                    "stance": "likes",
                    "turn_index": t["turn_index"],
                }
                for t in turns
                if (m := re.search(r"I love (.+?)\.", t["text"]))
            ]
            return LLMResponse(text=json.dumps({"operations": ops}), prompt_tokens=11, completion_tokens=5)

    config = {
        "embedder": "hashing",
        "extractor": "llm",
        "llm": {"provider": "unused-in-tests"},
        "forget_requests": True,
    }
    memory = create_backend("profile", config, data_dir=tmp_path, llm=ProfileAndMatcherLLM())
    try:
        memory.ingest(_session("s0", ("user", "I love exploring small towns."), ("user", OTHER)), user_id="u")
        assert "small towns" in json.dumps(memory.export("u"))
        report = memory.ingest(
            _session("s1", ("user", "Please forget my weekend hobby, the one with the old streets.")), user_id="u"
        )
        texts = json.dumps(memory.export("u")) + " ".join(i.text for i in memory.list_memories(user_id="u"))
        assert "small towns" not in texts and "weekend hobby" not in texts
        assert "green tea" in texts
        assert report.prompt_tokens >= 11 + 7  # the matcher's call is counted with the ingest
    finally:
        memory.close()

"""Forget requests in conversation: the rule-based detector, the matcher, and every built-in backend
that can delete honouring them (``forget_requests``) in retrieve, list and export."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memlab.forget import find_forget_requests, llm_matcher, mentions, topic_cues
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
        (
            "The custody case is none of your business anymore, so please wipe it from what you remember.",
            "the custody case",
        ),
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
        # supposed, someone else's idea or words, a stretch of time, the user's own question
        "Suppose I asked you to forget my allergy, would it really be gone?",
        "Imagine I ask you to delete my address - could you still book my taxis?",
        "My son told me to make you delete my phone number. I thought about it and no, leave it.",
        "my nephew keeps going round sayin u will forget everything when the update comes lol",
        "Erase this week from the record, honestly. Three flat tyres and a burst pipe.",
        "Oh forget my question about the train times, I'll check the app.",
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
    assert (
        match(
            ForgetRequest(subject="ben's mum", turn_index=0, text="forget Ben's mum"),
            [
                MemoryItem(id="b", text="I'm married to Ben", source={"turn_index": 0}),
                MemoryItem(id="c", text="I like chess", source={"turn_index": 1}),
            ],
        )
        == []
    )


def _resolved(turn: str, facts: list[str]) -> list[str]:
    """The facts the forget request in ``turn`` takes, read and resolved as a backend does."""
    from memlab.embedders import get_embedder
    from memlab.forget import semantic_matcher

    (request,) = find_forget_requests(_session("s", ("user", turn)))
    items = [MemoryItem(id=str(i), text=text, source={"turn_index": i + 1}) for i, text in enumerate(facts)]
    return [facts[int(i)] for i in semantic_matcher(get_embedder("minilm"))(request, items)]


def test_what_a_request_asks_to_keep_is_kept():
    facts = ["I get cluster headaches", "I take verapamil for them", "I sell insurance"]
    turn = "Forget the name of my headache medicine, but you can keep that I get headaches."
    assert _resolved(turn, facts) == ["I take verapamil for them"]
    # "keep the rest" names nothing to keep
    assert find_forget_requests(_session("s", ("user", "purge my salary, keep the rest")))[0].keep is None


def test_a_request_naming_a_person_and_more_takes_only_that_fact():
    facts = ["Tariq is my best man", "My friend Tariq is in rehab", "I collect vinyl"]
    assert _resolved("please delete the thing about tariq's rehab", facts) == ["My friend Tariq is in rehab"]
    facts = ["My father-in-law has dementia", "My father-in-law lives in Cork", "I swim"]
    assert _resolved("Could you remove my father-in-law's illness from your memory?", facts) == [facts[0]]
    # everything about someone named takes every fact naming them, and nobody else's
    facts = ["My old colleague Nadia owes me money", "Nadia moved to Lisbon", "My current colleague is Piotr"]
    assert _resolved("Wipe everything you have on my old colleague Nadia.", facts) == facts[:2]


def test_only_keep_names_what_stays():
    facts = ["I work at a courier depot", "I'm doing an evening degree", "I live in Hull"]
    turn = "Stop holding on to the details of my job please. Just keep that I'm studying."
    assert find_forget_requests(_session("s", ("user", turn)))[0].keep == "i'm studying"
    assert _resolved(turn, facts) == ["I work at a courier depot"]


def test_a_medication_request_never_takes_the_condition_it_treats():
    facts = ["I've been sleeping badly for months", "My GP gave me temazepam", "I keep bees"]
    assert _resolved("please don't keep the sleeping pill thing", facts) == [facts[1]]
    # no pill stored: the insomnia is not it
    facts = ["I've been sleeping badly for months", "I live in York", "I keep bees"]
    assert _resolved("please don't keep the sleeping pill thing", facts) == []
    facts = ["I get cluster headaches", "I take verapamil for them", "I sell insurance"]
    assert _resolved("Forget my headache medicine.", facts) == ["I take verapamil for them"]


def test_where_someone_is_takes_the_fact_placing_them():
    facts = ["My cousin Dara is a chef", "My cousin Dara is in rehab in Galway", "I like darts"]
    assert _resolved("forget where dara is", facts) == [facts[1]]


def test_his_and_her_are_the_person_named_before():
    turn = "My wife would hate that I told you about her salary. Forget her salary please."
    (request,) = find_forget_requests(_session("s", ("user", turn)))
    assert request.subject == "my wife's salary"
    facts = ["My wife earns 80k", "I earn 40k", "We live in Derby"]
    assert _resolved(turn, facts) == ["My wife earns 80k"]


def test_the_last_thing_said_is_the_newest_fact(tmp_path: Path):
    from memlab.client import MemoryClient

    facts = ["I grow chillies", "I'm a paramedic", "I'm in debt to my uncle"]
    with MemoryClient("full_context", data_dir=tmp_path) as client:
        client.remember("u", [("user", fact) for fact in facts], session_id="facts")
        client.remember("u", [("user", "please forget the last thing I told you, I regret it")], session_id="chat")
        assert [item.text for item in client.memories("u") if item.source.get("session_id") == "facts"] == facts[:2]
    # a correction moves on, it asks nothing
    assert find_forget_requests(_session("s", ("user", "forget the last thing I said, I meant Friday"))) == []


def test_a_word_before_the_thing_word_narrows_a_person():
    facts = ["My mum had hip surgery in May", "My mum lives in Wrexham", "I play squash"]
    assert _resolved("can you stop keeping the surgery stuff about my mum", facts) == [facts[0]]


def test_a_name_reads_as_the_relation_a_fact_gives_it():
    facts = ["My son is called Noah", "My son's nursery is Little Acorns", "Noah loves dinosaurs"]
    assert _resolved("Please forget Noah's nursery.", facts) == [facts[1]]


def test_him_or_her_is_the_one_person_the_turn_names():
    facts = ["My friend Dev borrowed my car and crashed it", "I live in Leeds", "I'm a florist"]
    assert _resolved("Dev and I aren't talking any more. Please remove what I said about him.", facts) == [facts[0]]
    assert find_forget_requests(_session("s", ("user", "My brother Tom is annoying. Forget about him."))) == []


def test_a_topic_takes_the_person_it_is_about():
    facts = ["My therapist is called Dr Okafor", "I see my therapist on Mondays", "I have a bad back"]
    assert _resolved("please erase anything you have on my therapy", facts) == facts[:2]
    facts = ["I'm suing my old landlord", "My lawyer is very good", "I like chess"]
    assert _resolved("Can you take my lawsuit out of your memory?", facts) == [facts[0]]
    assert topic_cues("the court case") is topic_cues("my lawsuit") is not None  # a topic in two words


def test_more_shapes_of_a_request():
    cases = [
        (
            "About what I said yesterday about quitting my job: please forget that, I've changed my mind.",
            ["I'm thinking of quitting my job", "I'm a welder", "I live in Hull"],
            [0],
        ),
        (
            "Keep my allergy, it's important, but forget the painkillers.",
            ["I'm allergic to penicillin", "I take codeine for my back", "I live in Ely"],
            [1],
        ),
        ("Memory: delete car info.", ["I drive a Honda Jazz", "I live in Ely"], [0]),
        ("can that bit about my overdraft go?", ["I'm £900 overdrawn", "I have a cat", "I'm a baker"], [0]),
        ("i regret telling you about the breakup. id like you to delete it", ["I broke up with Sam", "I bake"], [0]),
        (
            "Is there a way to make you not remember my diagnosis?",
            ["I have MS", "I was diagnosed with MS", "I run"],
            [0, 1],  # both state the diagnosis: keeping "I have MS" would keep what was asked away
        ),
    ]
    for turn, facts, wanted in cases:
        assert _resolved(turn, facts) == [facts[i] for i in wanted], turn


@pytest.mark.parametrize(
    "turn",
    [
        "I don't want you saving the file",
        "I tried, but forget the gym, it's closed",
        "we went out, just forget the pub",
    ],
)
def test_still_not_a_request(turn: str):
    assert find_forget_requests(_session("s", ("user", turn))) == []


def test_an_entry_made_from_several_turns_takes_only_the_asked_for_turn_with_it(tmp_path: Path):
    """A profile entry merged from two turns ("boss: ... (changed from called Dev)") goes with the fact
    asked for; the other turn's own fact stays."""
    from memlab.forget import _with_derived

    items = [
        MemoryItem(id="raw0", text="My manager is called Dev", source={"session_id": "f", "turn_index": 0}),
        MemoryItem(id="raw1", text="My manager is being investigated", source={"session_id": "f", "turn_index": 1}),
        MemoryItem(
            id="entry",
            text="manager: being investigated (changed from called Dev)",
            source={"turns": [{"session_id": "f", "turn_index": 0}, {"session_id": "f", "turn_index": 1}]},
        ),
    ]
    assert _with_derived({"raw1", "entry"}, items) == {"raw1", "entry"}
    assert _with_derived({"entry"}, items) == {"raw0", "raw1", "entry"}  # nothing else to go by


def test_a_named_thing_inside_another_is_one_request():
    (request,) = find_forget_requests(_session("s", ("user", "purge my salary + the opinion about jonas.")))
    assert request.parts() == ["my salary", "the opinion about jonas"]
    (request,) = find_forget_requests(_session("s", ("user", "Please don't keep a record of my IBS diagnosis.")))
    assert request.subject == "my ibs diagnosis"


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


@pytest.mark.parametrize(
    ("text", "subject"),
    [
        ("Everything about Priya can go, please delete it.", "priya"),
        ("You don't need to hang on to the speeding fine, let that go.", "the speeding fine"),
        ("Is it possible for you to not have my bankruptcy stored?", "my bankruptcy"),
        ("I don't need you remembering I was homeless, take it out.", "i was homeless"),
        ("Under data protection law I'd like you to delete the medical data you hold about me.", "my medical"),
        ("Get rid of anything financial you've saved on me.", "my finances"),
        ("I regret mentioning my rent. Could that be removed from your memory?", "my rent"),
        ("Mia and I split up, so please forget anything about her. I'm still in Leeds though.", "mia"),
        ("Dad died last week. Please delete what you have about him.", "my dad"),
        ("The wedding's off, so you can forget about that entirely, no need to remember it.", "the wedding's off"),
        ("Forget all of it, the debt and the bailiffs.", "the debt and the bailiffs"),
        ("delete the sensitive data you hold on me — my religion and my address", "my religion and my address"),
        ("Please erase my personal data, specifically my email and phone number.", "my email and phone number"),
        ("erase the thing I said right before this, about my cousin.", "my cousin"),
        ("Please forget what I said about me and Priya fighting.", "me and priya fighting"),
    ],
)
def test_more_request_shapes_and_their_subject(text: str, subject: str):
    (request,) = find_forget_requests(_session("s", ("user", text)))
    assert request.subject == subject


@pytest.mark.parametrize(
    "turn",
    [
        "oh forget it, the boiler's working again",
        "Get rid of the bit about Tom's ex in the draft, his mum will read it.",
        "I always forget the last two digits of my PIN",
        "Forget my job and stuff like that, let's talk films.",
    ],
)
def test_these_are_not_requests_either(turn: str):
    requests = find_forget_requests(_session("s", ("user", turn)))
    assert requests == [] or requests[0].subject == "my job"  # "forget my job" alone may ask; never "stuff like that"


def test_the_last_few_things_said_are_the_newest_facts(tmp_path: Path):
    from memlab.client import MemoryClient

    facts = ["I grow chillies", "I'm a paramedic", "I owe my uncle money", "I'm seeing a therapist"]
    with MemoryClient("full_context", data_dir=tmp_path) as client:
        client.remember("u", [("user", fact) for fact in facts], session_id="facts")
        client.remember("u", [("user", "Please forget the last two things I told you.")], session_id="chat")
        assert [item.text for item in client.memories("u") if item.source.get("session_id") == "facts"] == facts[:2]
    (request,) = find_forget_requests(_session("s", ("user", "scrap those last couple of things from memory")))
    assert request.subject is None and request.last == 2


def test_everything_known_but_what_is_kept(tmp_path: Path):
    from memlab.client import MemoryClient

    facts = ["My name is Sofia", "I live in Madrid", "I'm 31", "I'm separated from my husband"]
    with MemoryClient("full_context", data_dir=tmp_path) as client:
        client.remember("u", [("user", fact) for fact in facts], session_id="facts")
        client.remember("u", [("user", "Forget everything you know about me except my name.")], session_id="chat")
        assert [item.text for item in client.memories("u") if item.source.get("session_id") == "facts"] == facts[:1]
        # what it keeps is not clear: nothing is deleted rather than everything
        client.remember("v", [("user", fact) for fact in facts], session_id="facts")
        client.remember(
            "v", [("user", "Delete all the data you hold on me except the boring bits.")], session_id="chat"
        )
        assert len([item for item in client.memories("v") if item.source.get("session_id") == "facts"]) == 4


def test_a_drug_is_known_by_what_it_treats():
    facts = ["I take sertraline", "I take metformin", "I'm a taxi dispatcher"]
    assert _resolved("Forget my antidepressant but keep the diabetes medication.", facts) == [facts[0]]


def test_the_one_fact_in_a_named_topic_is_taken_and_no_one_else_s():
    assert _resolved("Please remove my diagnosis.", ["I'm HIV positive", "I'm a civil servant", "I swim"]) == [
        "I'm HIV positive"
    ]
    assert _resolved("Please remove my diagnosis.", ["My dad has diabetes", "I'm a civil servant", "I swim"]) == []


def test_a_relation_names_one_person():
    facts = ["My daughter is being bullied at school", "My son just got into university", "I'm divorced"]
    assert _resolved("Could you delete whatever you've stored about my daughter?", facts) == [facts[0]]
    facts = ["My boss Kevin is having an affair", "My brother Kevin lives in Dublin", "I cycle"]
    assert _resolved("that thing about my boss, forget it please, I shouldn't spread that", facts) == [facts[0]]
    facts = ["My son's name is Eli", "Eli is 7", "Eli goes to Maple Elementary"]
    assert _resolved("drop the name of my son's school from whatever you store", facts) == [facts[2]]


def test_a_name_ending_in_s_is_still_the_person():
    facts = ["My ex Marcus still has my spare key", "I moved to Denver", "Marcus and I broke up in March"]
    assert _resolved("i never want to see the name marcus again. wipe him from your memory", facts) == [
        facts[0],
        facts[2],
    ]


def test_a_category_covers_what_states_it_in_other_words():
    facts = ["I work at Amazon", "My manager is Karen", "I'm on a performance plan", "I like skiing"]
    assert _resolved("forget everything work-related about me", facts) == facts[:3]
    facts = ["My mortgage is with Halifax", "I'm £4,000 overdrawn", "I'm saving for Greece", "I'm a receptionist"]
    assert _resolved("Forget the money stuff, but you can keep that I'm saving for Greece.", facts) == facts[:2]


@pytest.mark.parametrize(
    ("text", "subject"),
    [
        ("pls forgot about the stuff with my landlord and the deposit", "my landlord and the deposit"),
        ("Would you forget the part about me not being able to drive?", "me not being able to drive"),
        ("So about my daughter's eczema — I brought it up ages ago. Could you forget it?", "my daughter's eczema"),
        ("why on earth did you save my bank PIN? get rid of that immediately", "my bank pin"),
        ("I regret telling you about my uncle. Can you take that back out of your memory?", "my uncle"),
        ("About my wife and her visa — please delete from memory, it's safer.", "my wife and her visa"),
        ("the loan thing... can you act like I never told you?", "the loan"),
        ("I should like you to erase any record of the tribunal I referred to.", "the tribunal"),
        ("I dropped out of the Berlin half, so just delete that from your memory, it's off.", None),
        ("Please remove the memory entry about my stammer.", "my stammer"),
        ("I don't want you keeping a record of the fertility clinic I go to. Please remove it.", None),
        ("can you un-save my salary? feels weird that you know it", "my salary"),
        ("You've got me down as a vegan, I never said that. Delete it.", "a vegan"),
        ("I withdraw consent for you to keep how I voted — please erase it.", "how i voted"),
        ("Please remove the note about my wife's mum.", "my mother-in-law"),
        ("I saw in the settings that you've saved the divorce thing. Please delete that one.", "the divorce"),
        ("Is possible to take out from your memory where I am living?", "where i live"),
        ("Could you possibly remove my political views from what you remember about me?", "my political views"),
    ],
)
def test_request_shapes_of_the_newest_parts(text: str, subject: str | None):
    (request,) = find_forget_requests(_session("s", ("user", text)))
    if subject is None:
        assert request.subject  # a statement of the fact, resolved by meaning
    else:
        assert request.subject == subject


@pytest.mark.parametrize(
    "turn",
    [
        "In my cover letter, remove the line about my last job, it's too long. Can you reformat the rest?",
        "Can you delete the second paragraph of the chapter about my mum? Rewrite the transition too.",
        "Yesterday I asked you to forget my old number. Did that go through? Just checking.",
        "I was gonna ask you to delete my address but nah, keep it.",
        "I almost asked you to erase the divorce stuff, but it's fine where it is.",
        "can u help me delete the condition in this formula",
        "I finished the report, so delete the draft",
        "take the salmon back out of the freezer, we're having it tonight",
        "don't forget to delete the photos off the shared drive",
        "Could you take out the line about my mum's cooking? Otherwise the speech is perfect.",
        "I nearly told you to delete everything about my brother yesterday, but leave it.",
        "If my wife ever asked you to forget stuff about my ex, would you do it?",
    ],
)
def test_edits_reports_requests_not_made_and_reminders_are_not_requests(turn: str):
    assert find_forget_requests(_session("s", ("user", turn))) == []


def test_everything_asked_in_other_words_keeps_each_thing_named(tmp_path: Path):
    from memlab.client import MemoryClient

    facts = ["Vegetarian", "Has a caution for shoplifting", "Girlfriend is pregnant", "Prefers British spelling"]
    with MemoryClient("full_context", data_dir=tmp_path) as client:
        client.remember("u", [("user", fact) for fact in facts], session_id="facts")
        client.remember(
            "u",
            [("user", "Wipe all my memories apart from the diet one and the spelling preference.")],
            session_id="chat",
        )
        kept = [item.text for item in client.memories("u") if item.source.get("session_id") == "facts"]
        assert kept == [facts[0], facts[3]]
    for turn in ("I want all my memories deleted.", "can u just wipe ur whole memory of me. start fresh"):
        (request,) = find_forget_requests(_session("s", ("user", turn)))
        assert request.everything


def test_topics_named_in_other_words():
    assert _resolved("forget my hormone stuff", ["I'm on HRT for the menopause", "I run a bakery", "I'm 50"]) == [
        "I'm on HRT for the menopause"
    ]
    assert _resolved("pls don't keep anything about my record", ["I play darts", "I was arrested in 2019"]) == [
        "I was arrested in 2019"
    ]
    assert _resolved("forget the beta blocker bit", ["I take bisoprolol", "I work in a bank", "I have a cat"]) == [
        "I take bisoprolol"
    ]
    facts = ["My dad died in 2019", "My mum has dementia", "I love camping", "I'm a nurse"]
    assert _resolved("would you mind forgetting both the things about my parents?", facts) == facts[:2]
    facts = ["Went to Oxford", "Did a master's at LSE", "Dropped out of a PhD", "Plays chess"]
    assert _resolved("Wipe my education history please, apart from the LSE master's.", facts) == [facts[0], facts[2]]
    facts = ["My brother is in prison", "I'm a software engineer", "I play chess online"]
    assert _resolved("The info about my sibling, please delete it from your memory.", facts) == [facts[0]]


def test_a_fact_that_goes_on_about_the_person_before_it_goes_with_them():
    facts = ["My stepdad lives with us", "He drinks too much", "I'm a pharmacist", "We have twins"]
    assert _resolved("Clear out everything to do with my stepdad, please.", facts) == facts[:2]


@pytest.mark.parametrize(
    ("turn", "parts"),
    [
        # a next sentence that spells out what a topic covers
        (
            "Please clear out my work stuff. Payslips, the appraisal, all of it.",
            ["my work", "payslips", "the appraisal"],
        ),
        ("can u forget my family stuff? my brother and the custody thing", ["my family", "my brother", "the custody"]),
        ("Delete my travel plans. Every trip I've mentioned.", ["my travel plans", "every trip i've mentioned"]),
        # what the same sentence adds: included, including, and also
        ("Please forget the knee surgery, physio included.", ["the knee surgery", "physio"]),
        ("Could you erase the loan stuff including the bank I used?", ["the loan", "the bank i used"]),
        ("pls delete the rehab thing n also marco", ["the rehab", "marco"]),
    ],
)
def test_what_a_request_spells_out_is_named_too(turn: str, parts: list[str]):
    (request,) = find_forget_requests(_session("s", ("user", turn)))
    assert request.parts() == parts


@pytest.mark.parametrize(
    "turn",
    [
        "Please forget my salary. Thanks so much.",  # a closing, not a thing
        "Please forget my salary. It's nobody's business.",  # a clause of its own
        "Delete my address please. The rest is fine.",  # what stays
        "you don't need to remember any of that, including the fight",  # points back: one subject
    ],
)
def test_a_sentence_that_is_no_list_adds_nothing(turn: str):
    (request,) = find_forget_requests(_session("s", ("user", turn)))
    assert ";" not in (request.subject or "")


@pytest.mark.parametrize(
    "turn",
    [
        "ok fresh start. wipe all memories, every one of them",
        "clear ur whole memory of me mate, new phone new me",
        "Please wipe your memory of me.",
        "Could you erase all your memories about me?",
        "forget everything about me",
        "Please delete all personal data you hold on me, with immediate effect.",
        "Kindly purge my entire profile please.",
        "erase everything you've noted about me since March",
    ],
)
def test_everything_in_more_words(turn: str):
    (request,) = find_forget_requests(_session("s", ("user", turn)))
    assert request.everything


@pytest.mark.parametrize(
    "turn",
    [
        "Please wipe your memory of me crying at the wedding.",
        "clear your whole memory of the holiday",
        "forget everything about me and my ex",
    ],
)
def test_a_memory_of_one_thing_is_not_everything(turn: str):
    assert not any(request.everything for request in find_forget_requests(_session("s", ("user", turn))))


@pytest.mark.parametrize(
    "turn",
    [
        "if ever we split up, would you forget her automatically or do I have to tell you?",  # how memory works
        "Do you delete memories automatically after a while?",
    ],
)
def test_how_memory_works_is_no_request(turn: str):
    assert find_forget_requests(_session("s", ("user", turn))) == []


def test_the_last_bit_is_still_what_was_said():
    (request,) = find_forget_requests(_session("s", ("user", "please forget the last bit about my brother")))
    assert request.subject and "brother" in request.subject

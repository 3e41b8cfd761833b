"""PersonaMem-v2's official protocol (``personamem_v2``) against a local server that records every request.

The expected requests and verdicts are built here from the raw snapshot files (the benchmark CSV
row and the history JSON), following bowen-upenn/PersonaMem-v2 ``inference.py`` (commit 6a36975:
``evaluate_row``, ``create_mcq_options``, ``extract_final_answer``, ``check_mcq_correctness``), not
through memlab's loader or reader.
"""

from __future__ import annotations

import ast
import csv
import hashlib
import json
import random
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from personamem_v2_helpers import STAMPS, write_snapshot

from memlab.datasets.personamem_v2 import load_personamem_v2
from memlab.errors import ConfigurationError
from memlab.eval.personamem_v2_extract import OFFICIAL_PATTERNS, choice_for, extract_letter, is_correct
from memlab.readers.personamem_v2 import PersonaMemV2Reader
from memlab.registry import create_backend, readers
from memlab.testing.recording_server import RecordingServer
from memlab.types import MemoryItem, Retrieval

SUFFIX = " Please recall my related preferences from our conversation history to give personalized responses."
HEADER = "Please choose the best answer from the following options:\n\n"
FOOTER = (
    "\n\nThink step by step about which answer best fits the user's query and conversation context. "
    "Provide your reasoning first, then give your final answer as 'Final Answer: [Letter]'"
)
# The reference's patterns, as its extract_final_answer lists them (the test's own oracle).
REFERENCE_PATTERNS = [
    r"\$\\boxed\{([A-Z])\}\$",
    r"\\boxed\{([A-Z])\}",
    r"Final Answer:\s*([A-Z])",
    r"final answer:\s*([A-Z])",
    r"Answer:\s*([A-Z])",
    r"answer:\s*([A-Z])",
    r"final answer is\s*\$?\\boxed\{([A-Z])\}\$?",
    r"final answer is\s*([A-Z])",
    r"the answer is\s*\$?\\boxed\{([A-Z])\}\$?",
    r"the answer is\s*([A-Z])",
    r"\b([A-Z])\.\s*$",
]


def reference_letter(reply: str) -> str:
    for pattern in REFERENCE_PATTERNS:
        match = re.search(pattern, reply, re.IGNORECASE | re.MULTILINE)
        if match:
            return match.group(1).upper()
    return ""


# (reply, the letter the reference extracts). Several extract a letter the writer did not mean.
GOLDEN_REPLIES = [
    ("Final Answer: B", "B"),
    ("final answer: c", "C"),
    ("The user likes tea.\nSo...\nFinal Answer: D", "D"),
    ("$\\boxed{A}$", "A"),
    ("\\boxed{b}", "B"),
    ("Answer: I think the best is C.", "I"),  # an early "Answer: I ..." yields I
    ("The final answer is B", "B"),
    ("the answer is d.", "D"),
    ("I pick A.", "A"),
    ("Option B is best.\n\nD.", "D"),
    ("No letter here", ""),
    ("", ""),
    ("Answer: A\n\\boxed{C}", "C"),  # the boxed pattern comes first in the list, wherever it stands
    ("Final Answer: **B**", ""),  # markdown around the letter: nothing matches
    ("Final Answer: [C]", ""),
    ("The correct answer: a thoughtful reply. Final Answer: B", "B"),
    ("My answer: a plan for the weekend fits best, so B.", "A"),  # "answer: a" (the article)
    ("Final answer:B", "B"),
    ("FINAL ANSWER: d", "D"),
    ("The answer is $\\boxed{C}$", "C"),
    ("Answer:\n\nB", "B"),
    ("After weighing it all, E.", "E"),  # a letter without an option
    ("Final Answer: Option C", "O"),
    ("I choose (B).", ""),
    ("B. Because the user likes tea.", ""),
    ("Reasoning: a long thought.\nFinal Answer: A", "A"),
    ("the answer is b\nFinal Answer: c", "C"),
    ("Answer - C", ""),
    ("so the final answer is \\boxed{d}", "D"),
    ("Hmm. A.\nNo wait. B.", "A"),  # the first line ending in "X." wins
]


@pytest.mark.parametrize(("reply", "letter"), GOLDEN_REPLIES)
def test_extraction_agrees_with_the_reference_patterns(reply: str, letter: str):
    assert reference_letter(reply) == letter
    assert extract_letter(reply) == letter


def test_pattern_texts_are_the_references():
    assert list(OFFICIAL_PATTERNS) == REFERENCE_PATTERNS
    assert len(GOLDEN_REPLIES) >= 25


def test_scoring_maps_the_letter_to_the_correct_text():
    options = ["w", "right", "x", "right"]  # a duplicate text is credited under either letter
    assert is_correct("B", options, "right") and is_correct("D", options, "right")
    assert not is_correct("A", options, "right") and not is_correct("E", options, "right")
    assert not is_correct("", options, "right")
    assert choice_for("D", options, 1) == 1 and choice_for("A", options, 1) == 0
    assert choice_for("E", options, 1) is None and choice_for("", options, 1) is None


# --------------------------------------------------------------------------- raw-file oracle
def raw_rows(root: Path) -> list[dict[str, str]]:
    with (root / "benchmark/text/benchmark.csv").open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def reference_messages(root: Path, row: dict[str, str], size: str) -> tuple[list[dict[str, str]], dict[str, str]]:
    """What the reference sends for a row (role and content of each message) and its option mapping,
    with memlab's documented seed instead of the salted hash()."""
    query = ast.literal_eval(row["user_query"])
    query["content"] += SUFFIX
    history = json.loads((root / row[f"chat_history_{size}_link"]).read_text(encoding="utf-8"))["chat_history"]
    options = [row["correct_answer"], *json.loads(row["incorrect_answers"])]
    seed = int.from_bytes(hashlib.sha256(f"{row['persona_id']}_{query['content']}".encode()).digest()[:8], "big")
    random.Random(seed % 2**32).shuffle(options)
    mapping = dict(zip("ABCD", options))
    instruction = HEADER + "\n".join(f"{letter}. {option}" for letter, option in mapping.items()) + FOOTER
    # memlab sends role and content only (a stray key of a damaged release message is left out)
    messages = [{"role": m["role"], "content": m["content"]} for m in history]
    return [
        *messages,
        {"role": "user", "content": query["content"]},
        {"role": "system", "content": instruction},
    ], mapping


@pytest.fixture
def snapshot(tmp_path: Path) -> Path:
    return write_snapshot(tmp_path / "snap")


@pytest.fixture
def registered() -> Iterator[None]:
    """The reader by name, whether or not the installed metadata lists it yet."""
    added = "personamem_v2" not in readers.names()
    if added:
        readers.register("personamem_v2", PersonaMemV2Reader)
    yield
    if added:
        readers.unregister("personamem_v2")


def _full_context(dataset, question, config: dict[str, Any] | None = None) -> Retrieval:
    memory = create_backend("full_context", config or {})
    for session, _ in dataset.histories[question.context_id].slices(0, question.end_index):
        memory.ingest(session, user_id="u")
    return memory.retrieve(question.text, user_id="u")


@pytest.mark.parametrize("size", ["32k", "128k"])
def test_full_context_request_is_the_reference_layout(snapshot: Path, tmp_path: Path, size: str):
    dataset = load_personamem_v2(f"{size}:{snapshot}")
    rows = raw_rows(snapshot)
    with RecordingServer(lambda body: "Reasoning.\nFinal Answer: B") as server:
        reader = PersonaMemV2Reader({"llm": {"base_url": server.base_url, "model": "gpt-5-chat", "cache": False}})
        answers = []
        for question in dataset.questions:
            answers.append(reader.answer(question, _full_context(dataset, question)))
        reader.close()
    assert len(server.requests) == len(rows)
    for row, body, answer in zip(rows, server.requests, answers):
        expected, mapping = reference_messages(snapshot, row, size)
        assert set(body) == {"model", "messages"}  # provider defaults: no temperature, no reply limit
        assert body["model"] == "gpt-5-chat"
        assert len(body["messages"]) == len(expected)
        for sent, want in zip(body["messages"], expected):
            assert sent == want
        assert answer.metadata["option_order"] == list(mapping.values())
        assert answer.metadata["predicted_answer"] == "B"
    for row, question, answer in zip(rows, dataset.questions, answers):
        _, mapping = reference_messages(snapshot, row, size)
        assert (answer.choice == question.answer) == (mapping["B"] == row["correct_answer"])


def test_system_as_user_and_open_mode(snapshot: Path):
    dataset = load_personamem_v2(f"32k:{snapshot}")
    question = dataset.questions[0]
    retrieval = _full_context(dataset, question)
    reader = PersonaMemV2Reader({"llm": {"model": "m"}, "system_as_user": True})
    roles = {m.role for m in reader.messages(question, retrieval)}
    assert roles == {"user", "assistant"}
    open_reader = PersonaMemV2Reader({"llm": {"model": "m"}, "mode": "open"})
    messages = open_reader.messages(question, retrieval)
    assert messages[-1].role == "user" and messages[-1].content == question.text + SUFFIX
    assert open_reader.describe().endswith(":open")


def test_a_cut_full_context_is_refused_and_other_memories_replace_the_history(snapshot: Path):
    dataset = load_personamem_v2(f"32k:{snapshot}")
    question = dataset.questions[0]
    reader = PersonaMemV2Reader({"llm": {"model": "m"}})
    with pytest.raises(ConfigurationError, match="full_context.max-tokens"):
        reader.messages(question, _full_context(dataset, question, {"max_tokens": 60}))
    # retrieved stored messages: the reference RAG baseline's two system messages, then each message
    turns = Retrieval(
        items=[
            MemoryItem(id="1", text="I switched to green tea.", score=0.9, source={"role": "user", "session_id": "s"}),
            MemoryItem(id="2", text="Noted!", score=0.5, source={"role": "assistant", "session_id": "s"}),
        ]
    )
    sent = [(m.role, m.content) for m in reader.messages(question, turns)]
    assert sent[0][0] == sent[1][0] == "system" and sent[1][1].startswith("The following are relevant excerpts")
    assert sent[2:4] == [("user", "I switched to green tea."), ("assistant", "Noted!")]
    assert sent[4] == ("user", question.text + SUFFIX) and sent[5][0] == "system" and len(sent) == 6
    # facts (not stored messages): the backend's context text in one system message
    facts = Retrieval(items=[MemoryItem(id="f", text="drinks: green tea", source={})], context="- drinks: green tea")
    sent = [(m.role, m.content) for m in reader.messages(question, facts)]
    assert sent[2] == ("system", "- drinks: green tea") and len(sent) == 5
    # no memory (the none control): the query and the options only
    assert [m.role for m in reader.messages(question, Retrieval())] == ["user", "system"]


# --------------------------------------------------------------------------- end to end
def scripted_reply(body: dict[str, Any]) -> str:
    """A fixed golden reply per question (keyed by the query), whatever the request order."""
    query = next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user")
    digest = hashlib.sha1(query.encode("utf-8")).digest()
    return GOLDEN_REPLIES[digest[0] % len(GOLDEN_REPLIES)][0] or "Final Answer: A"


def _reference_accuracy(server: RecordingServer, rows: list[dict[str, str]], with_history: bool) -> tuple[int, int]:
    correct = n = 0
    for body, reply in zip(server.requests, server.replies):
        if (len(body["messages"]) > 2) is not with_history:
            continue
        instruction = body["messages"][-1]["content"]
        query = body["messages"][-2]["content"][: -len(SUFFIX)]
        (row,) = [r for r in rows if ast.literal_eval(r["user_query"])["content"] == query]
        mapping = dict(re.findall(r"^([A-D])\. (.*)$", instruction, re.MULTILINE))
        letter = reference_letter(reply)
        n += 1
        correct += bool(letter) and mapping.get(letter, "") == row["correct_answer"]
    return correct, n


def test_memlab_run_accuracy_is_the_reference_extractions(snapshot: Path, tmp_path: Path, registered):
    from memlab.cli import main
    from memlab.results import RunSummary, read_predictions

    out = tmp_path / "run"
    with RecordingServer(scripted_reply) as server:
        code = main(
            [
                "run",
                "--dataset",
                f"personamem-v2:32k:{snapshot}",
                "--backends",
                "full_context",
                "--reader",
                "personamem_v2",
                "--out",
                str(out),
                "--llm.base-url",
                server.base_url,
                "--llm.model",
                "gpt-4.1-mini",
                "--no-progress",
                "--no-plots",
            ]
        )
    assert code == 0
    rows = raw_rows(snapshot)
    summary = RunSummary.load(out)
    full = summary.row("full_context", "personamem_v2:openai:gpt-4.1-mini")
    blind = summary.row("none", "personamem_v2:openai:gpt-4.1-mini")
    assert full.questions == len(rows) and full.errors == 0
    assert (full.accuracy.correct, full.accuracy.n) == _reference_accuracy(server, rows, with_history=True)
    assert (blind.accuracy.correct, blind.accuracy.n) == _reference_accuracy(server, rows, with_history=False)
    # breakdowns: per pref_type and per field, each value's counts adding up to the row's
    assert set(full.per_type) == {r["pref_type"] for r in rows}
    for field in ("conversation_scenario", "who", "updated", "sensitive_info", "topic_preference"):
        values = full.per_field[field]
        assert set(values) == {r[field] for r in rows}
        assert sum(s.n for s in values.values()) == full.accuracy.n
        assert sum(s.correct for s in values.values()) == full.accuracy.correct
        for score in values.values():
            assert score.low <= score.accuracy <= score.high
    bins = full.per_field["distance_from_related_snippet_to_query_32k"]
    assert list(bins) == sorted(bins, key=lambda b: int(b.split("-")[0]))
    # predictions: the pref_type as question_type, the order the options were shown in
    predictions = [p for p in read_predictions(out) if p.backend == "full_context"]
    by_query = {ast.literal_eval(r["user_query"])["content"]: r for r in rows}
    dataset = load_personamem_v2(f"32k:{snapshot}")
    questions = {q.id: q for q in dataset.questions}
    for p in predictions:
        row = by_query[questions[p.question_id].text]
        assert p.question_type == row["pref_type"]
        _, mapping = reference_messages(snapshot, row, "32k")
        assert p.option_order == list(mapping.values())
        assert p.fields["who"] == row["who"]
    # evidence recall: full_context returns everything, so every evidence message is found
    assert full.metrics.get("recall@10") == 1.0
    assert STAMPS["32k"] in predictions[0].context_id


# --------------------------------------------------------------------------- open-ended + judge
JUDGE_SCORES = ("Reasoning.\n\\boxed{0.75}", "Score: 0.4", "\\boxed{1.5}", "I cannot tell.", "$\\boxed{0}$")


def open_and_judge_reply(body: dict[str, Any]) -> str:
    """Reader requests get a free answer; judge requests (one user message with the narrow prompt) a
    score reply chosen by the response they judge."""
    messages = body["messages"]
    if len(messages) == 1 and messages[0]["content"].startswith("You are evaluating an AI assistant's"):
        response = messages[0]["content"].split("Model's response to evaluate:\n", 1)[1]
        return JUDGE_SCORES[hashlib.sha1(response.encode()).digest()[0] % len(JUDGE_SCORES)]
    return f"Here is a suggestion ({len(messages)} messages seen) for " + messages[-1]["content"][:30]


def reference_score(reply: str) -> float:
    """extract_judge_decision of the reference's inference_utils.py, as the test's oracle."""
    for pattern in (
        r"\\boxed\{([0-9]*\.?[0-9]+)\}",
        r"\$\\boxed\{([0-9]*\.?[0-9]+)\}\$",
        r"\\boxed\s*\{([0-9]*\.?[0-9]+)\}",
    ):
        match = re.search(pattern, reply)
        if match:
            return max(0.0, min(1.0, float(match.group(1))))
    for pattern in (
        r"score[:\s]+([0-9]*\.?[0-9]+)",
        r"rating[:\s]+([0-9]*\.?[0-9]+)",
        r"([0-9]*\.[0-9]+)\s*/\s*1\.?0?",
    ):
        match = re.search(pattern, reply, re.IGNORECASE)
        if match and 0.0 <= float(match.group(1)) <= 1.0:
            return float(match.group(1))
    return 0.0


def test_open_mode_is_judged_by_the_reference_narrow_judge(snapshot: Path, tmp_path: Path, registered):
    from memlab.cli import main
    from memlab.results import RunSummary, read_predictions

    out = tmp_path / "open"
    args = [
        "run",
        "--dataset",
        f"personamem-v2:32k:{snapshot}",
        "--backends",
        "full_context",
        "--reader",
        "personamem_v2",
        "--reader.mode",
        "open",
        "--judge",
        "personamem_v2",
        "--out",
        str(out),
        "--no-progress",
        "--no-plots",
    ]
    with RecordingServer(open_and_judge_reply) as server:
        llm = ["--llm.base-url", server.base_url, "--llm.model", "gpt-4.1-mini"]
        assert main([*args, *llm]) == 0
        first = len(server.requests)
        assert main([*args, *llm]) == 0  # resumed: every answer and verdict is already there
        assert len(server.requests) == first
    judge_requests = [b for b in server.requests if b["messages"][0]["content"].startswith("You are evaluating")]
    rows = raw_rows(snapshot)
    assert len(judge_requests) == 2 * len(rows)  # full_context and the none control, one verdict each
    for body in judge_requests:
        assert set(body) == {"model", "messages"}  # provider defaults, as the reference's judge call
        prompt = body["messages"][0]["content"]
        query = prompt.split("User's query:\n", 1)[1].split("\n\nGround truth", 1)[0]
        (row,) = [r for r in rows if ast.literal_eval(r["user_query"])["content"] == query]  # no recall suffix
        assert f"Ground truth user preference: {row['preference']}\n" in prompt
        negative = '"do not personalize"' in prompt
        assert negative is row["preference"].lower().startswith("do not")
        assert prompt.endswith(
            "give your final score as \\boxed{score} where score is a number between 0.0 and 1.0.\nYour response:"
        )
    summary = RunSummary.load(out)
    full = summary.row("full_context", "personamem_v2:openai:gpt-4.1-mini:open")
    assert full.accuracy is None  # open answers are judged, not scored
    predictions = [p for p in read_predictions(out) if p.backend == "full_context"]
    assert all(p.correct is None and p.predicted_text for p in predictions)
    verdicts = {b["messages"][0]["content"]: r for b, r in zip(server.requests, server.replies) if b in judge_requests}
    scores = [
        reference_score(reply)
        for prompt, reply in verdicts.items()
        if any(f"Model's response to evaluate:\n{p.predicted_text}\n" in prompt for p in predictions)
    ]
    assert len(scores) == len(rows)
    assert full.metrics["judge"] == pytest.approx(sum(scores) / len(scores))
    assert summary.rows[0].settings["judge"]["prompt"] == "personamem-v2-narrow-v1"


def test_full_context_with_forget_requests_on_sends_the_history_a_request_left(snapshot: Path):
    dataset = load_personamem_v2(f"32k:{snapshot}")
    question = dataset.questions[0]
    history = dataset.histories[question.context_id]
    retrieval = _full_context(dataset, question, {"forget_requests": True})
    sent = PersonaMemV2Reader({"llm": {"model": "m"}}).messages(question, retrieval)
    requests = [m.content for m in history.messages if "weekend day trips" in m.content]
    # This history asks to forget a fact it never states: the request matches nothing stored, so
    # nothing is deleted (memlab.forget: below the confidence threshold nothing goes) and every turn is sent.
    assert requests and len(sent) == len(history.messages) + 2
    assert sent[0].role == "system" and sent[0].content == history.messages[0].content

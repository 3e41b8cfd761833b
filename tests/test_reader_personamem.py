"""The official PersonaMem protocol readers against a local server that records every request.

The expected requests are built here from the raw files (the questions CSV row and the JSONL
history), following the reference code (bowen-upenn/PersonaMem ``inference.py`` /
``inference_standalone_openai.py`` for ``personamem``; ``baselines/run.py`` + ``chat_lib.py`` +
``data_loader.py`` for ``personamem_baseline``), not through memlab's loader or readers.
"""

from __future__ import annotations

import ast
import csv
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from question_helpers import choice_question

from memlab.errors import ConfigurationError
from memlab.eval.personamem_extract import official_is_correct
from memlab.registry import create_backend, create_reader
from memlab.testing.recording_server import RecordingServer
from memlab.types import Question, Retrieval

INSTRUCTION = (
    "Find the most appropriate model response and give your final answer (a), (b), (c), or (d) "
    "after the special token <final_answer>."
)


def _raw(dev: Path) -> tuple[list[dict[str, str]], list[dict[str, Any]]]:
    with (dev / "questions.csv").open(encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    line = json.loads((dev / "shared_contexts.jsonl").read_text(encoding="utf-8").splitlines()[0])
    return rows, next(iter(line.values()))


def _reference_conversion(messages: list[dict[str, str]]) -> list[dict[str, str]]:
    # Oracle for the reference's convert_role_system_to_user, written from its docstring and loop.
    out: list[dict[str, str]] = []
    buffer = ""
    for m in messages:
        if m["role"] == "system":
            buffer += "[System]: " + m["content"] + "\n"
            continue
        content = buffer + m["content"] if buffer else m["content"]
        buffer = ""
        if out and out[-1]["role"] == m["role"]:
            out[-1] = {"role": m["role"], "content": out[-1]["content"] + "\n" + content}
        else:
            out.append({"role": m["role"], "content": content})
    return out


def _full_context_retrieval(dataset, question: Question) -> Retrieval:
    history = dataset.histories[question.context_id]
    memory = create_backend("full_context", {})
    for session, _ in history.slices(0, question.end_index):
        memory.ingest(session, user_id="u")
    return memory.retrieve(question.text, user_id="u")


@pytest.fixture(scope="module")
def dev_data(personamem_dev: Path):
    from memlab.datasets.personamem import load_personamem

    rows, context = _raw(personamem_dev)
    return load_personamem(personamem_dev), rows, context


def _reply_always(text: str):
    return lambda body: text


@pytest.mark.data
@pytest.mark.parametrize(("model", "merged"), [("gpt-4o", True), ("llama-3-8b", False)])
def test_long_context_request_is_the_reference_layout(dev_data, tmp_path, model, merged):
    dataset, rows, context = dev_data
    row = rows[3]
    question = next(q for q in dataset.questions if q.id == row["question_id"])
    end = int(row["end_index_in_shared_context"])
    user = row["question"] + "\n\n" + INSTRUCTION + "\n\n" + row["all_options"]
    expected = context[:end] + [{"role": "user", "content": user}]
    if merged:  # the reference converts system turns whenever the model name holds an 'o'
        expected = _reference_conversion(expected)
    with RecordingServer(_reply_always("<final_answer> (b)")) as server:
        reader = create_reader(
            "personamem", {"llm": {"base_url": server.base_url, "model": model, "cache_dir": str(tmp_path)}}
        )
        answer = reader.answer(question, _full_context_retrieval(dataset, question))
        reader.close()
    (body,) = server.requests
    assert set(body) == {"model", "messages"}  # provider defaults: no temperature, no reply limit
    assert body["model"] == model
    assert len(body["messages"]) == len(expected)
    for sent, want in zip(body["messages"], expected):
        assert sent == want
    assert any(m["role"] == "system" for m in body["messages"]) is not merged
    if merged:  # the last history turn is the user's, so the question joins it
        assert body["messages"][-1]["content"].endswith("\n" + user)
    assert answer.choice == 1  # the one letter named, credited or not
    assert answer.metadata["parser"] == "official" and answer.metadata["predicted_answer"] == "(b)"


@pytest.mark.data
def test_long_context_sends_decoding_only_when_set(dev_data, tmp_path):
    dataset, rows, _ = dev_data
    question = dataset.questions[0]
    retrieval = _full_context_retrieval(dataset, question)
    with RecordingServer(_reply_always("(a)")) as server:
        config = {
            "llm": {"base_url": server.base_url, "model": "m", "temperature": 0.0, "cache": False},
            "max_tokens": 50,
        }
        create_reader("personamem", config).answer(question, retrieval)
    body = server.requests[0]
    assert body["temperature"] == 0.0 and body["max_tokens"] == 50


@pytest.mark.data
def test_long_context_refuses_a_retrieval(dev_data, tmp_path):
    dataset, _, _ = dev_data
    question = dataset.questions[0]
    history = dataset.histories[question.context_id]
    rag = create_backend("rag", {"embedder": "hashing"})
    for session, _ in history.slices(0, question.end_index):
        rag.ingest(session, user_id="u")
    reader = create_reader("personamem", {"llm": {"base_url": "http://127.0.0.1:9/v1", "model": "m", "cache": False}})
    with pytest.raises(ConfigurationError, match="full_context"):
        reader.answer(question, rag.retrieve(question.text, user_id="u"))
    # No memory at all is the reference's no-context branch: the one user message.
    assert [m.role for m in reader.messages(question, Retrieval())] == ["user"]


@pytest.mark.data
def test_baseline_request_is_the_reference_layout_for_rag(dev_data, tmp_path):
    dataset, rows, context = dev_data
    row = rows[5]
    question = next(q for q in dataset.questions if q.id == row["question_id"])
    history = dataset.histories[question.context_id]
    rag = create_backend("rag", {"embedder": "hashing", "chunking": "turn", "top_k": 5, "max_chunk_chars": 10**6})
    for session, _ in history.slices(0, question.end_index):
        rag.ingest(session, user_id="u")
    retrieval = rag.retrieve(question.text, user_id="u")
    assert len(retrieval.items) == 5
    # The reference: json.dumps of each retrieved message, most similar first, joined by newlines.
    ranked = sorted(retrieval.items, key=lambda i: i.score, reverse=True)
    starts = history.session_starts

    def message_index(item) -> int:
        return starts[int(item.source["session_id"].rsplit(":s", 1)[1])] + item.source["turn_index"]

    contexts = "\n".join(json.dumps(context[message_index(i)]) for i in ranked)
    options = "\n".join(ast.literal_eval(row["all_options"]))  # as baselines/data_loader.py parses it
    prompt = f"# 5 most similar contexts to the question: \n{contexts}\n\n# Question: {row['question']}\n\n# Choices: \n{options}"
    with RecordingServer(_reply_always('{"answer": "C"}')) as server:
        reader = create_reader(
            "personamem_baseline", {"llm": {"base_url": server.base_url, "model": "gpt-4o-mini", "cache": False}}
        )
        answer = reader.answer(question, retrieval)
    (body,) = server.requests
    assert set(body) == {"model", "messages", "temperature", "response_format"}
    assert body["model"] == "gpt-4o-mini" and body["temperature"] == 0.0
    assert body["messages"][0] == {"role": "system", "content": "You are an AI that answers only with A, B, C, or D."}
    assert body["messages"][1] == {"role": "user", "content": prompt}
    assert len(body["messages"]) == 2
    schema = body["response_format"]
    assert schema["type"] == "json_schema" and schema["json_schema"]["name"] == "answer_choice"
    assert schema["json_schema"]["schema"]["properties"]["answer"]["enum"] == ["A", "B", "C", "D"]
    assert answer.choice == 2 and answer.metadata["heading"] == "contexts"


def test_baseline_facts_heading_and_answer_parsing():
    from memlab.readers.personamem import parse_baseline_answer
    from memlab.types import MemoryItem

    question = choice_question("Plans?", answer=1)
    facts = Retrieval(
        items=[MemoryItem(id="1", text="Likes jazz", source={"turns": []}), MemoryItem(id="2", text="Hates rain")]
    )
    reader = create_reader("personamem_baseline", {"llm": {"base_url": "http://127.0.0.1:9/v1", "model": "m"}})
    user = reader.messages(question, facts)[1].content
    assert (
        user
        == "# User facts: \nLikes jazz\nHates rain\n\n# Question: Plans?\n\n# Choices: \n(a) x\n(b) y\n(c) z\n(d) w"
    )
    assert reader.messages(question, Retrieval())[1].content.startswith("# Question: Plans?")
    assert parse_baseline_answer('{"answer": "B"}') == 1 and parse_baseline_answer('{"answer": "b"}') == 1
    assert parse_baseline_answer("B") is None and parse_baseline_answer('{"answer": "E"}') is None


# --------------------------------------------------------------------------- end to end
REPLY_TEMPLATES = (
    "<final_answer>({x})",
    "Options (a) and (b) ignore the user's history, so the answer is ({x}).",
    "Answer: {X}. It suggests a plan the user would like.",
    "{x}",
    "Thinking about it... (c) first, but <final_answer> {x}",
    "I am not sure.",
)


def _pick(text: str) -> tuple[int, str]:
    digest = hashlib.sha1(text.encode("utf-8")).digest()
    return digest[0] % len(REPLY_TEMPLATES), "abcd"[digest[1] % 4]


def scripted_reply(body: dict[str, Any]) -> str:
    """A fixed reply per question (keyed by the last message), whatever the request order."""
    last = body["messages"][-1]["content"]
    if body["messages"][0]["content"].startswith("You are an AI that answers only"):
        template, letter = _pick(last)
        return json.dumps({"answer": letter.upper()}) if template else "not json"
    template, letter = _pick(last[-2000:])
    return REPLY_TEMPLATES[template].format(x=letter, X=letter.upper())


def _scripted_run(dev: Path, out: Path, backends: str, reader: str, questions: int) -> tuple[Any, RecordingServer]:
    """``memlab run`` on the first ``questions`` questions against a server giving ``scripted_reply``:
    the run's summary, and the server with every request and reply it recorded."""
    from memlab.cli import main
    from memlab.results import RunSummary

    with RecordingServer(scripted_reply) as server:
        main(
            [
                "run",
                "--dataset",
                str(dev),
                "--backends",
                backends,
                "--reader",
                reader,
                "--out",
                str(out),
                "--llm.base-url",
                server.base_url,
                "--llm.model",
                "gpt-4o",
                "--no-progress",
                "--no-plots",
                "--max-questions",
                str(questions),
                *(["--rag.embedder", "hashing"] if "rag" in backends.split(",") else []),
            ]
        )
    return RunSummary.load(out), server


def _question_block(row: dict[str, str], baseline: bool) -> str:
    if baseline:
        return f"# Question: {row['question']}\n\n# Choices: \n" + "\n".join(ast.literal_eval(row["all_options"]))
    return row["question"] + "\n\n" + INSTRUCTION + "\n\n" + row["all_options"]


def _expected(server: RecordingServer, rows: list[dict[str, str]], *, baseline: bool, memory: bool) -> tuple[int, int]:
    """(correct, n) over the recorded requests of one row, scored the reference's way."""
    correct = n = 0
    for body, reply in zip(server.requests, server.replies):
        has_memory = (
            len(body["messages"]) > 2 if not baseline else "most similar contexts" in body["messages"][1]["content"]
        )
        if has_memory is not memory:
            continue
        last = body["messages"][-1]["content"]
        # Question texts repeat in the dev file: a request is identified by its question and options.
        (row,) = [r for r in rows if _question_block(r, baseline) in last]
        n += 1
        if baseline:  # baselines/run.py: the JSON answer, lowercased, against the letter of "(c)"
            try:
                correct += json.loads(reply)["answer"].lower() == row["correct_answer"][1]
            except json.JSONDecodeError:
                pass
        else:
            correct += official_is_correct(reply, row["correct_answer"])
    return correct, n


@pytest.mark.data
def test_run_long_context_accuracy_is_the_official_extractors(personamem_dev: Path, tmp_path: Path):
    rows, _ = _raw(personamem_dev)
    summary, server = _scripted_run(personamem_dev, tmp_path / "run", "full_context", "personamem", questions=6)
    full = summary.row("full_context", "personamem:openai:gpt-4o")
    blind = summary.row("none", "personamem:openai:gpt-4o")
    assert full.questions == 6 and full.errors == 0 and blind.questions == 6
    assert (full.accuracy.correct, full.accuracy.n) == _expected(server, rows, baseline=False, memory=True)
    assert (blind.accuracy.correct, blind.accuracy.n) == _expected(server, rows, baseline=False, memory=False)


@pytest.mark.data
def test_run_refuses_rag_with_the_long_context_protocol_before_any_work(
    personamem_dev: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    # The protocol needs the raw history: preflight refuses the pair before any ingest, naming both fixes.
    from memlab.cli import main

    args = ["run", "--dataset", str(personamem_dev), "--backends", "full_context,rag", "--reader", "personamem"]
    args += ["--out", str(tmp_path / "run"), "--llm.base-url", "http://127.0.0.1:9/v1", "--llm.model", "gpt-4o"]
    assert main([*args, "--no-progress", "--rag.embedder", "hashing"]) == 2
    err = capsys.readouterr().err
    assert "row rag / personamem" in err and "full_context" in err and "personamem_baseline" in err
    assert not (tmp_path / "run").exists()


@pytest.mark.data
def test_run_baseline_accuracy_is_the_references(personamem_dev: Path, tmp_path: Path):
    rows, _ = _raw(personamem_dev)
    summary, server = _scripted_run(personamem_dev, tmp_path / "run", "rag", "personamem_baseline", questions=8)
    rag = summary.row("rag", "personamem_baseline:openai:gpt-4o")
    assert rag.questions == 8 and rag.errors == 0
    assert (rag.accuracy.correct, rag.accuracy.n) == _expected(server, rows, baseline=True, memory=True)


def test_answer_many_keeps_order_and_builds_one_llm():
    from memlab.llm import LLM, LLMResponse

    class Echo(LLM):
        name = "echo:m"

        def _chat(self, messages, *, json_mode, temperature, max_tokens):
            letter = messages[-1].content.split("Plans ")[1][0]
            return LLMResponse(text=json.dumps({"answer": letter.upper()}))

    questions = [choice_question(f"Plans {letter}?", answer=i, id=f"q{i}") for i, letter in enumerate("abcd")]
    reader = create_reader("personamem_baseline", {"llm": {"cache": False, "max_concurrency": 3}}, llm=Echo())
    answers = reader.answer_many([(q, Retrieval()) for q in questions])
    assert [a.choice for a in answers] == [0, 1, 2, 3]
    assert reader.describe() == "personamem_baseline:echo:m"


@pytest.mark.parametrize(
    ("model", "mode"),
    [
        ("gpt-4o", "merge"),
        ("gpt-4o-mini", "merge"),
        ("o3-mini", "merge"),
        ("gpt-4.1", "keep"),
        ("claude-3-7-sonnet-20250219", "merge"),
        ("gemini-2.0-flash", "drop"),
        ("Llama-3.3-70B-Instruct", "keep"),
        ("DeepSeek-R1", "keep"),
    ],
)
def test_system_turns_follow_the_references_routing(model, mode):
    from memlab.readers.personamem import merge_system_turns, reference_system_mode

    assert reference_system_mode(model) == mode
    merged = merge_system_turns(
        [
            {"role": "system", "content": "P"},
            {"role": "user", "content": "u1"},
            {"role": "assistant", "content": "a"},
            {"role": "user", "content": "u2"},
            {"role": "user", "content": "q"},
        ]
    )
    assert merged == [
        {"role": "user", "content": "[System]: P\nu1"},
        {"role": "assistant", "content": "a"},
        {"role": "user", "content": "u2\nq"},
    ]

"""PersonaMem-v2 loader: the released text layout of the Hugging Face dataset ``bowen-upenn/PersonaMem-v2``.

A *snapshot root* holds ``benchmark/text/benchmark.csv`` (5,000 questions, 27 columns) and the
per-persona history files its ``chat_history_32k_link`` / ``chat_history_128k_link`` cells name,
as paths relative to the root (``data/chat_history_32k/chat_history_<stamp>_persona<N>.json``).
``load_personamem_v2(spec)`` takes ``32k`` or ``128k`` (looked up in ``$MEMLAB_DATA_DIR/personamem-v2``,
the CSV and exactly the linked histories downloaded there once) or ``32k:<folder>`` /
``128k:<folder>`` (a local snapshot root).

What the release looks like and what the official evaluator (``inference.py`` of
bowen-upenn/PersonaMem-v2) does with it, both described in docs/datasets.md:

- ``user_query`` is a Python dict literal (``{'role': 'user', 'content': ...}``): read with
  ``json.loads``, then ``ast.literal_eval``, as the reference does; ``incorrect_answers`` a JSON
  list of three; ``updated`` and ``sensitive_info`` the strings ``True`` / ``False``; several cells
  hold multi-line JSON.
- A history file is ``{"metadata": ..., "chat_history": [...]}``: message 0 is the system message
  with the persona, then one flat list of user/assistant messages without sessions or timestamps
  (so a history is one session). Messages carrying keys other than ``role`` and ``content`` (five
  assistant replies in the release were cut into stray JSON keys) keep their role and content; an
  empty assistant message stays empty (the reference sends both as they are). Each is reported as
  a data issue, never fatal.
- Every question of a persona is asked after the whole history: ``end_index`` is the history's
  length, so one replay answers them all.

Unlike the reference, which silently answers from an empty history when a file is missing, a
missing or broken history file, a bad cell or a missing column stops the load with one error that
names the file, the row (data record from 1, header not counted) and the field, and lists every
such problem found.

Options are shown in a deterministic order: the reference shuffles ``[correct] + incorrect`` with
``random.seed(hash(f"{persona_id}_{query + recall suffix}") % 2**32)``, whose ``str`` hash is salted
per process; memlab seeds the same shuffle with the first 8 bytes of the SHA-256 of that same string
(:func:`option_seed`), so every run, reader and backend sees one order, recorded in each prediction
(``option_order``).
"""

from __future__ import annotations

import ast
import hashlib
import json
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from memlab.datasets.base import DataIssue, Dataset, History, RowIssues, csv_table, data_home, hub_download
from memlab.errors import DataFormatError, DatasetUnavailableError, MemlabError
from memlab.types import Message, Question

HF_REPO = "bowen-upenn/PersonaMem-v2"
HF_URL = f"https://huggingface.co/datasets/{HF_REPO}"
SIZES = ("32k", "128k")
BENCHMARK_CSV = "benchmark/text/benchmark.csv"
MULTIMODAL_CSV = "benchmark/multimodal/benchmark.csv"
# Verbatim from bowen-upenn/PersonaMem-v2 inference.py@6a36975 (evaluate_row): appended to the query.
RECALL_SUFFIX = " Please recall my related preferences from our conversation history to give personalized responses."

# The builder's 27 columns (prepare_benchmark.py, create_benchmark_csv); order is not checked.
COLUMNS = (
    "persona_id",
    "chat_history_32k_link",
    "chat_history_128k_link",
    "raw_persona_file",
    "short_persona",
    "expanded_persona",
    "user_query",
    "correct_answer",
    "incorrect_answers",
    "topic_query",
    "preference",
    "topic_preference",
    "conversation_scenario",
    "pref_type",
    "related_conversation_snippet",
    "who",
    "updated",
    "prev_pref",
    "sensitive_info",
    "total_tokens_in_chat_history_32k",
    "total_tokens_in_chat_history_128k",
    "distance_from_related_snippet_to_query_32k",
    "distance_from_related_snippet_to_query_128k",
    "num_persona_relevant_tokens_32k",
    "num_persona_irrelevant_tokens_32k",
    "num_persona_relevant_tokens_128k",
    "num_persona_irrelevant_tokens_128k",
)
# What a run needs; the other columns are kept when present and never required.
REQUIRED_COLUMNS = (
    "persona_id",
    "user_query",
    "correct_answer",
    "incorrect_answers",
    "pref_type",
    "conversation_scenario",
    "topic_preference",
    "who",
    "updated",
    "sensitive_info",
)
# The release's pref_type values (OmniMemEval's counts over benchmark.csv), in its column order.
PREF_TYPES = (
    "stereotypical_pref",
    "anti_stereotypical_pref",
    "neutral_preferences",
    "therapy_background",
    "health_and_medical_conditions",
    "ask_to_forget",
    "sensitive_info",
)
# The categorical breakdowns of the summary (``per_field``), as the reference's summary file has them.
BREAKDOWN_FIELDS = ("conversation_scenario", "who", "updated", "sensitive_info", "topic_preference")
DISTANCE_BIN = 1024  # the reference's bins: "0-1023", "1024-2047", ...
ROLES = ("system", "user", "assistant")
MAX_LISTED_PROBLEMS = 20


def default_data_dir() -> Path:
    """Where ``32k`` / ``128k`` are looked up and downloaded to (``$MEMLAB_DATA_DIR/personamem-v2``)."""
    return data_home("personamem-v2")


def link_column(size: str) -> str:
    return f"chat_history_{size}_link"


def distance_column(size: str) -> str:
    return f"distance_from_related_snippet_to_query_{size}"


def distance_bin(tokens: int) -> str:
    """The reference's 1,024-token bin label of a distance (``1500`` -> ``"1024-2047"``)."""
    start = (tokens // DISTANCE_BIN) * DISTANCE_BIN
    return f"{start}-{start + DISTANCE_BIN - 1}"


def option_seed(persona_id: str, query_with_suffix: str) -> int:
    """The per-question shuffle seed: the reference's key string, hashed with SHA-256 instead of the
    per-process salted ``hash()`` (so the order is the same in every run)."""
    digest = hashlib.sha256(f"{persona_id}_{query_with_suffix}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % 2**32


def shuffled_options(correct: str, incorrect: list[str], seed: int) -> list[str]:
    """``[correct] + incorrect`` shuffled as the reference does (``random.seed(seed); random.shuffle``),
    with a private generator instead of the global one."""
    options = [correct, *incorrect]
    random.Random(seed).shuffle(options)
    return options


# --------------------------------------------------------------------------- where the files are
@dataclass(frozen=True)
class _Spec:
    size: str
    root: Path | None  # None: the default data dir, downloading what is missing


def parse_spec(text: str) -> _Spec:
    """``32k`` | ``128k`` | ``32k:<folder>`` | ``128k:<folder>`` (the part after ``personamem-v2:``)."""
    size, sep, folder = (text or "32k").partition(":")
    size = size.strip().lower()
    if size not in SIZES:
        raise MemlabError(
            f"personamem-v2: unknown size {size!r}; expected personamem-v2:32k|128k or personamem-v2:32k|128k:<folder>"
        )
    if sep and not folder.strip():
        raise MemlabError(f"personamem-v2:{size}: give the snapshot folder after the second ':'")
    return _Spec(size, Path(folder).expanduser() if sep else None)


def _download_advice(target: Path, size: str) -> str:
    return (
        f"Download {BENCHMARK_CSV} and the data/chat_history_{size}/ files it links from {HF_URL} "
        f"(e.g. `huggingface-cli download {HF_REPO} --repo-type dataset --local-dir {target}`), "
        f"or set MEMLAB_DATA_DIR, or pass personamem-v2:{size}:<snapshot folder>."
    )


def download_personamem_v2(size: str, target: Path | None = None) -> Path:
    """Make sure ``target`` holds the benchmark CSV and every ``size`` history it links; fetch
    exactly the missing ones from the Hugging Face hub. Returns the snapshot root."""
    if size not in SIZES:
        raise MemlabError(f"unknown PersonaMem-v2 size {size!r}; expected one of {', '.join(SIZES)}")
    target = Path(target) if target is not None else default_data_dir()
    what = f"PersonaMem-v2 {size}"
    if not (target / BENCHMARK_CSV).is_file():
        hub_download(HF_REPO, BENCHMARK_CSV, target, what=what, advice=_download_advice(target, size))
    links = sorted({record[link_column(size)].strip() for _, record in _records(target / BENCHMARK_CSV, size)})
    for link in links:
        if link and not (target / link).is_file():
            hub_download(HF_REPO, link, target, what=f"{what} history {link}", advice=_download_advice(target, size))
    return target


def _snapshot_root(spec: _Spec) -> Path:
    if spec.root is None:
        return download_personamem_v2(spec.size)
    root = spec.root
    if not root.is_dir():
        raise DatasetUnavailableError(f"personamem-v2: snapshot folder {root} does not exist")
    if not (root / BENCHMARK_CSV).is_file():
        if (root / MULTIMODAL_CSV).is_file():
            raise DataFormatError(
                f"{root} holds only the multimodal release ({MULTIMODAL_CSV}); memlab supports the text release "
                f"({BENCHMARK_CSV} and data/chat_history_{spec.size}/): download that instead"
            )
        raise DatasetUnavailableError(
            f"{root} is not a PersonaMem-v2 snapshot: {BENCHMARK_CSV} not found in it. {_download_advice(root, spec.size)}"
        )
    return root


# --------------------------------------------------------------------------- the CSV
def _records(path: Path, size: str) -> Iterator[tuple[int, dict[str, str]]]:
    """Data records numbered from 1 (a record may span several lines: multi-line JSON cells)."""
    what = f"PersonaMem-v2 benchmark {path}"
    with csv_table(path, what) as (header, records):
        missing = [c for c in (*REQUIRED_COLUMNS, link_column(size), distance_column(size)) if c not in header]
        if missing:
            raise DataFormatError(
                f"{what}: missing column(s) {', '.join(missing)}; header has {len(header)} columns: {', '.join(header)}"
            )
        for number, record in records:
            if record.get(None):
                raise DataFormatError(
                    f"{path}, row {number}: {len(record[None])} more field(s) than the header "
                    "(row = data record number from 1, header not counted)"
                )
            yield number, {k: (v if v is not None else "") for k, v in record.items() if k is not None}


def parse_user_query(text: str) -> str:
    """The content of a ``user_query`` cell: JSON first, then a Python literal (the release's form)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError, MemoryError, RecursionError) as exc:
            raise ValueError(f"neither JSON nor a Python dict literal ({type(exc).__name__})") from exc
    if not isinstance(value, dict) or not isinstance(value.get("content"), str) or not value["content"].strip():
        raise ValueError("expected a dict with a non-empty 'content' string")
    if value.get("role", "user") != "user":
        raise ValueError(f"role {value.get('role')!r}, expected 'user'")
    return str(value["content"])


def parse_incorrect_answers(text: str) -> list[str]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not a JSON list ({exc.msg})") from exc
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError("expected a JSON list of strings")
    if len(value) != 3:
        raise ValueError(f"expected 3 incorrect answers, found {len(value)}")
    return value


def parse_flag(text: str) -> bool:
    cleaned = text.strip()
    if cleaned in ("True", "False"):
        return cleaned == "True"
    raise ValueError(f"{text!r} is not True or False")


def parse_count(text: str) -> int:
    try:
        value = float(text.strip())  # some token counts may be written as floats ("122747.0")
    except ValueError:
        raise ValueError(f"{text!r} is not a non-negative whole number") from None
    if not value.is_integer() or value < 0:
        raise ValueError(f"{text!r} is not a non-negative whole number")
    return int(value)


def parse_snippet(text: str) -> list[str]:
    """Message contents of ``related_conversation_snippet`` (a JSON list of {role, content})."""
    if not text.strip():
        return []
    value = json.loads(text)
    if not isinstance(value, list):
        raise ValueError("expected a JSON list of messages")
    return [str(m["content"]) for m in value if isinstance(m, dict) and isinstance(m.get("content"), str)]


# --------------------------------------------------------------------------- the histories
@dataclass
class _Problems:
    """Every fatal problem found in one load, reported together."""

    found: list[DataIssue] = field(default_factory=list)

    def raise_if_any(self, what: str) -> None:
        if not self.found:
            return
        shown = "\n".join(f"  {issue}" for issue in self.found[:MAX_LISTED_PROBLEMS])
        more = len(self.found) - MAX_LISTED_PROBLEMS
        raise DataFormatError(
            f"{what}: {len(self.found)} problem(s), nothing loaded:\n{shown}"
            + (f"\n  ... and {more} more" if more > 0 else "")
        )


def read_history(path: Path, history_id: str, issues: list[DataIssue]) -> History:
    """One history file; a file that cannot be used raises ``DataFormatError`` naming it."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DataFormatError(f"{path}: not valid JSON ({exc.msg}, line {exc.lineno})") from exc
    except UnicodeDecodeError as exc:
        raise DataFormatError(f"{path}: not UTF-8 text ({exc})") from exc
    raw = data.get("chat_history") if isinstance(data, dict) else None
    if not isinstance(raw, list) or not raw:
        raise DataFormatError(f"{path}: expected {{'metadata': ..., 'chat_history': [messages]}} with a non-empty list")
    messages: list[Message] = []
    for index, item in enumerate(raw):
        role = item.get("role") if isinstance(item, dict) else None
        content = item.get("content") if isinstance(item, dict) else None
        if role not in ROLES:
            raise DataFormatError(f"{path}, chat_history message {index}: role {role!r} is not system/user/assistant")
        if isinstance(content, list):
            raise DataFormatError(
                f"{path}, chat_history message {index}: content is a list of parts (the multimodal release); "
                f"only the text release is supported"
            )
        if not isinstance(content, str):
            raise DataFormatError(f"{path}, chat_history message {index}: content of type {type(content).__name__}")
        assert isinstance(item, dict)
        stray = sorted(str(k) for k in item if k not in ("role", "content"))
        if stray:
            issues.append(
                DataIssue(
                    file=str(path),
                    row=index,
                    field="chat_history",
                    message=f"message {index} carries stray key(s) {', '.join(stray)[:120]}; kept role and content only",
                )
            )
        if not content.strip() and role == "assistant":
            issues.append(
                DataIssue(
                    file=str(path),
                    row=index,
                    field="chat_history",
                    message=f"message {index}: empty assistant reply, kept",
                )
            )
        messages.append(Message(role=role, content=content))
    if messages[0].role != "system":
        issues.append(
            DataIssue(
                file=str(path), row=0, field="chat_history", message="message 0 is not the persona system message"
            )
        )
    metadata = data.get("metadata") if isinstance(data.get("metadata"), dict) else {}
    return History(
        id=history_id,
        messages=messages,
        session_starts=[0],  # no sessions in the release: one conversation
        metadata={"file": str(path), "release_metadata": metadata},
    )


def _content_index(history: History) -> dict[str, int]:
    index: dict[str, int] = {}
    for i, message in enumerate(history.messages):
        index.setdefault(message.content.strip(), i)
    return index


def evidence_ids(history: History, snippet: list[str], lookup: dict[str, int]) -> list[str]:
    """``m<index>`` of each snippet message found in the history: the same content, or (as the
    reference's builder matches) one containing the other, stripped. Sensitive-info snippets are not
    in the histories (the release leaves them out), so they have no evidence."""
    found: list[str] = []
    for text in snippet:
        wanted = text.strip()
        if not wanted:
            continue
        index = lookup.get(wanted)
        if index is None:
            index = next(
                (
                    i
                    for i, m in enumerate(history.messages)
                    if m.content.strip() and (wanted in m.content or m.content.strip() in wanted)
                ),
                None,
            )
        if index is not None and f"m{index}" not in found:
            found.append(f"m{index}")
    return found


# --------------------------------------------------------------------------- rows -> questions
def _question(
    number: int,
    record: dict[str, str],
    size: str,
    history: History,
    lookup: dict[str, int],
    row: RowIssues,
) -> Question | None:
    failures = len(row.issues)
    persona = record["persona_id"].strip()
    try:
        query = parse_user_query(record["user_query"])
    except ValueError as exc:
        row.add("user_query", str(exc))
        query = ""
    try:
        incorrect = parse_incorrect_answers(record["incorrect_answers"])
    except ValueError as exc:
        row.add("incorrect_answers", str(exc))
        incorrect = []
    correct = record["correct_answer"]
    if not correct.strip():
        row.add("correct_answer", "empty")
    flags: dict[str, bool] = {}
    for column in ("updated", "sensitive_info"):
        try:
            flags[column] = parse_flag(record[column])
        except ValueError as exc:
            row.add(column, str(exc))
    for column in ("pref_type", "conversation_scenario", "who"):
        if not record[column].strip():
            row.add(column, "empty")
    distance: int | None = None
    raw_distance = record.get(distance_column(size), "").strip()
    if raw_distance:
        try:
            distance = parse_count(raw_distance)
        except ValueError as exc:
            row.add(distance_column(size), str(exc))
    try:
        snippet = parse_snippet(record.get("related_conversation_snippet", ""))
    except (ValueError, json.JSONDecodeError) as exc:
        row.add("related_conversation_snippet", f"not a JSON list of messages ({exc})")
        snippet = []
    if len(row.issues) > failures:
        return None
    options = shuffled_options(correct, incorrect, option_seed(persona, query + RECALL_SUFFIX))
    fields = {column: record[column].strip() for column in BREAKDOWN_FIELDS}
    fields["updated"], fields["sensitive_info"] = str(flags["updated"]), str(flags["sensitive_info"])
    if distance is not None:
        fields[distance_column(size)] = distance_bin(distance)
    try:
        return Question(
            id=f"p{persona}-r{number}",
            type=record["pref_type"].strip(),
            topic=record.get("topic_query", "").strip(),
            text=query,
            options=options,
            answer=options.index(correct),
            answer_text=correct,
            context_id=history.id,
            end_index=len(history.messages),
            distance_tokens=distance,
            persona_id=persona,
            evidence=evidence_ids(history, snippet, lookup),
            metadata={
                "row": number,
                "size": size,
                "fields": fields,
                "shuffled_options": True,  # predictions record the order shown (option_order)
                "preference": record.get("preference", ""),
                "prev_pref": record.get("prev_pref", ""),
                "updated": flags["updated"],
                "sensitive_info": flags["sensitive_info"],
                "who": fields["who"],
            },
        )
    except ValidationError as exc:
        row.add("correct_answer", f"invalid question: {exc.errors()[0]['msg']}")
        return None


def load_personamem_v2(spec: str = "32k") -> Dataset:
    """Load PersonaMem-v2 from ``32k`` | ``128k`` | ``32k:<folder>`` | ``128k:<folder>`` (module docstring)."""
    parsed = parse_spec(spec)
    root = _snapshot_root(parsed)
    csv_path = root / BENCHMARK_CSV
    link = link_column(parsed.size)
    problems = _Problems()
    issues: list[DataIssue] = []
    histories: dict[str, History] = {}
    lookups: dict[str, dict[str, int]] = {}
    history_of_link: dict[str, str | None] = {}
    questions: list[Question] = []
    for number, record in _records(csv_path, parsed.size):
        persona = record["persona_id"].strip()
        row = RowIssues(problems.found, str(csv_path), number, f"persona {persona or '?'}")
        if not persona:
            row.add("persona_id", "empty")
        relative = record[link].strip()
        if not relative:
            row.add(link, "empty: no history file named")
            continue
        if "multimodal" in relative:
            raise DataFormatError(
                f"{csv_path}, row {number}, field {link!r}: {relative} is a multimodal history; "
                f"only the text release ({BENCHMARK_CSV}) is supported"
            )
        if relative not in history_of_link:
            path = root / relative
            if not path.is_file():
                row.add(link, f"history file {path} not found (the reference would silently use an empty history)")
                history_of_link[relative] = None
                continue
            try:
                history = read_history(path, Path(relative).stem, issues)
            except DataFormatError as exc:
                row.add(link, str(exc))
                history_of_link[relative] = None
                continue
            histories[history.id] = history
            lookups[history.id] = _content_index(history)
            history_of_link[relative] = history.id
        history_id = history_of_link[relative]
        if history_id is None:
            row.add(link, f"history {relative} unusable (see its first row)")
            continue
        question = _question(number, record, parsed.size, histories[history_id], lookups[history_id], row)
        if question is not None:
            questions.append(question)
    problems.raise_if_any(f"PersonaMem-v2 {parsed.size} ({csv_path})")
    if not questions:
        raise DataFormatError(f"{csv_path}: no questions (the file has a header and no rows)")
    return Dataset(
        name=f"personamem-v2-{parsed.size}",
        histories=histories,
        questions=questions,
        issues=issues,
        source=str(csv_path),
    )


def question_fields(question: Question) -> dict[str, Any]:
    """The breakdown fields a v2 question carries (empty for questions of other datasets)."""
    fields = question.metadata.get("fields")
    return dict(fields) if isinstance(fields, dict) else {}

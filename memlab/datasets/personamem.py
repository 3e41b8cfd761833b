"""PersonaMem loader: the released ``questions_<size>.csv`` + ``shared_contexts_<size>.jsonl`` files.

``load_personamem(source)`` accepts a size name (``32k``, ``128k``, ``1M``: looked up in the local
cache, else downloaded once from the Hugging Face dataset ``bowen-upenn/PersonaMem``), a folder
holding one or more sizes (or the dev layout ``questions.csv`` + ``shared_contexts.jsonl``), or a
questions CSV path (its contexts file is the sibling ``shared_contexts<suffix>.jsonl``).

Broken rows and lines become :class:`DataIssue` entries in ``dataset.issues`` and loading goes on;
only a file that cannot be read at all raises :class:`DataFormatError`. CSV rows are numbered as
data records from 1 (header not counted; a record may span several lines when a field holds a
newline), JSONL rows by physical line from 1.

Without a contexts file the questions load "questions only": ``histories`` is empty and one issue
per missing context says so, which is what blind baselines need. Pass ``require_histories=True``
to make that an error instead.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from memlab.datasets.base import DataIssue, Dataset, History, csv_table, data_home, hub_download, split_at_system
from memlab.datasets.question_types import KNOWN_TYPES
from memlab.errors import DataFormatError, DatasetUnavailableError, MemlabError
from memlab.types import OPTION_LETTERS, Message, Question

HF_REPO = "bowen-upenn/PersonaMem"
HF_URL = f"https://huggingface.co/datasets/{HF_REPO}"
SIZES = ("32k", "128k", "1M")

QUESTION_COLUMNS = ("user_question_or_message", "question")  # release spelling first
REQUIRED_COLUMNS = (
    "question_id",
    "question_type",
    "correct_answer",
    "all_options",
    "shared_context_id",
    "end_index_in_shared_context",
)
INT_METADATA = ("context_length_in_tokens", "context_length_in_letters", "num_irrelevant_tokens")
ROLES = ("system", "user", "assistant")

CSV_ROW_NOTE = "(row = data record number from 1, header not counted)"
JSONL_ROW_NOTE = "(row = line number from 1)"

_CONTEXT_KEY = re.compile(r'^\s*\{\s*"((?:[^"\\]|\\.)*)"\s*:')


def default_data_dir() -> Path:
    """Where size names are looked up and downloaded to (see ``memlab.datasets.base.data_home``)."""
    return data_home("personamem")


def _size_name(text: str) -> str | None:
    lowered = text.strip().lower()
    return next((size for size in SIZES if size.lower() == lowered), None)


def _file_names(size: str) -> tuple[str, str]:
    return f"questions_{size}.csv", f"shared_contexts_{size}.jsonl"


def download_personamem(size: str, target: Path | None = None) -> Path:
    """Make sure ``questions_<size>.csv`` and ``shared_contexts_<size>.jsonl`` are in ``target``.

    Files already there are reused; missing ones are fetched from the Hugging Face hub. Any
    failure (offline mode, no network, missing file on the hub) becomes a DatasetUnavailableError
    that says what to download and where to put it.
    """
    canonical = _size_name(size)
    if canonical is None:
        raise MemlabError(f"unknown PersonaMem size {size!r}; expected one of {', '.join(SIZES)}")
    target = Path(target) if target is not None else default_data_dir()
    names = _file_names(canonical)
    missing = [name for name in names if not (target / name).is_file()]
    for name in missing:
        hub_download(
            HF_REPO,
            name,
            target,
            what=f"PersonaMem {canonical}",
            advice=(
                f"Download {' and '.join(names)} from {HF_URL} (Files tab) and put them in {target}, "
                f"or set MEMLAB_DATA_DIR to the folder that holds them, or pass that folder's path "
                f"instead of {canonical!r}."
            ),
        )
    return target


@dataclass
class _Source:
    questions: Path
    contexts: Path
    name: str


def _contexts_for(questions: Path) -> Path:
    stem = questions.stem
    if "questions" in stem:
        return questions.with_name(stem.replace("questions", "shared_contexts", 1) + ".jsonl")
    return questions.with_name("shared_contexts.jsonl")


def _name_for(questions: Path) -> str:
    match = re.fullmatch(r"questions_(.+)", questions.stem)
    if match:
        return f"personamem-{match.group(1)}"
    if questions.stem == "questions":
        return f"personamem-{questions.parent.name}"
    return f"personamem-{questions.stem}"


def _resolve(source: str | Path, size: str | None) -> _Source:
    text = str(source)
    canonical = _size_name(text) if size is None else None
    if canonical is not None and not Path(text).exists():
        folder = download_personamem(canonical)
        questions_name, contexts_name = _file_names(canonical)
        return _Source(folder / questions_name, folder / contexts_name, f"personamem-{canonical}")
    path = Path(text).expanduser()
    if not path.exists():
        raise DatasetUnavailableError(
            f"PersonaMem source {text!r} is neither a size name ({', '.join(SIZES)}) nor an existing file or folder"
        )
    if path.is_file():
        return _Source(path, _contexts_for(path), _name_for(path))
    if size is not None:
        wanted = _size_name(size)
        if wanted is None:
            raise MemlabError(f"unknown PersonaMem size {size!r}; expected one of {', '.join(SIZES)}")
        questions = path / _file_names(wanted)[0]
        if not questions.is_file():
            raise DatasetUnavailableError(f"{path} has no {questions.name}")
        return _Source(questions, _contexts_for(questions), f"personamem-{wanted}")
    candidates = sorted(p for p in path.glob("questions*.csv") if p.is_file())
    if not candidates:
        raise DatasetUnavailableError(
            f"{path} holds no PersonaMem questions file (questions_<size>.csv or questions.csv)"
        )
    if len(candidates) > 1:
        raise MemlabError(
            f"{path} holds several PersonaMem question files ({', '.join(p.name for p in candidates)}); "
            f"pass one of them as the source, or size=... to load_personamem"
        )
    return _Source(candidates[0], _contexts_for(candidates[0]), _name_for(candidates[0]))


# --- questions -------------------------------------------------------------------------------


@dataclass
class _Row:
    number: int
    question: Question
    raw_type: str


@dataclass
class _Reader:
    """Shared state while reading one questions file."""

    file: str
    issues: list[DataIssue] = field(default_factory=list)

    def issue(self, row: int | None, column: str | None, message: str) -> None:
        note = CSV_ROW_NOTE if row is not None else ""
        self.issues.append(DataIssue(file=self.file, row=row, field=column, message=f"{message} {note}".strip()))


def _csv_records(path: Path) -> Iterator[tuple[int, dict[str | None, Any]]]:
    what = f"PersonaMem questions file {path}"
    with csv_table(path, what) as (header, records):
        missing = [c for c in REQUIRED_COLUMNS if c not in header]
        if not any(c in header for c in QUESTION_COLUMNS):
            missing.append(" or ".join(QUESTION_COLUMNS))
        if missing:
            raise DataFormatError(f"{what} lacks column(s) {', '.join(missing)}; header is {header}")
        yield from records


def _parse_int(text: str) -> int:
    value = float(text.strip())  # the release writes some integers as "12.0"
    if not value.is_integer():
        raise ValueError(f"{text!r} is not a whole number")
    return int(value)


def _parse_options(text: str) -> list[str]:
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError) as exc:
        raise ValueError(f"not a Python list literal ({type(exc).__name__})") from exc
    if not isinstance(value, (list, tuple)) or not all(isinstance(o, str) for o in value):
        raise ValueError("expected a list of strings")
    if len(value) != len(OPTION_LETTERS):
        raise ValueError(f"expected {len(OPTION_LETTERS)} options, found {len(value)}")
    return list(value)


def _parse_answer(text: str) -> int:
    letter = text.strip().lower().strip("()").strip()
    if letter not in OPTION_LETTERS:
        raise ValueError(f"{text!r} is not one of (a)..(d)")
    return OPTION_LETTERS.index(letter)


def _optional_metadata(record: dict[str | None, Any], number: int, reader: _Reader) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    for column in INT_METADATA:
        raw = (record.get(column) or "").strip()
        if not raw:
            continue
        try:
            meta[column] = _parse_int(raw)
        except ValueError:
            reader.issue(number, column, f"{raw!r} is not an integer; left out")
    raw = (record.get("distance_to_ref_proportion_in_context") or "").strip()
    if raw:
        try:  # percent, as in the file ("99.56%" -> 99.56)
            meta["distance_to_ref_proportion_in_context"] = float(raw.rstrip("%"))
        except ValueError:
            reader.issue(number, "distance_to_ref_proportion_in_context", f"{raw!r} is not a percentage; left out")
    raw = (record.get("stereotypical") or "").strip().lower()
    if raw in ("yes", "true", "1"):
        meta["stereotypical"] = True
    elif raw in ("no", "false", "0"):
        meta["stereotypical"] = False
    elif raw:
        reader.issue(number, "stereotypical", f"{raw!r} is not Yes/No; left out")
    return meta


def _parse_row(number: int, record: dict[str | None, Any], text_column: str, reader: _Reader) -> _Row | None:
    if record.get(None):
        reader.issue(number, None, f"row has {len(record[None])} more field(s) than the header; row skipped")
        return None
    values: dict[str, str] = {}
    for column in (*REQUIRED_COLUMNS, text_column):
        value = record.get(column)
        if value is None or not value.strip():
            reader.issue(number, column, "missing value; row skipped")
            return None
        values[column] = value
    try:
        options = _parse_options(values["all_options"])
    except ValueError as exc:
        reader.issue(number, "all_options", f"{exc}; row skipped")
        return None
    try:
        answer = _parse_answer(values["correct_answer"])
    except ValueError as exc:
        reader.issue(number, "correct_answer", f"{exc}; row skipped")
        return None
    try:
        end_index = _parse_int(values["end_index_in_shared_context"])
        if end_index < 0:
            raise ValueError(f"{end_index} is negative")
    except ValueError as exc:
        reader.issue(number, "end_index_in_shared_context", f"bad end index: {exc}; row skipped")
        return None
    distances: dict[str, int | None] = {}
    for key, column in (
        ("distance_blocks", "distance_to_ref_in_blocks"),
        ("distance_tokens", "distance_to_ref_in_tokens"),
    ):
        raw = (record.get(column) or "").strip()
        distances[key] = None
        if raw:
            try:
                distances[key] = _parse_int(raw)
            except ValueError:
                reader.issue(number, column, f"{raw!r} is not an integer; left empty")
    raw_type = values["question_type"].strip()
    persona = (record.get("persona_id") or "").strip() or None
    try:
        question = Question(
            id=values["question_id"].strip(),
            type=raw_type,  # the file's own label, never renamed
            topic=(record.get("topic") or "").strip(),
            text=values[text_column],
            options=options,
            answer=answer,
            context_id=values["shared_context_id"].strip(),
            end_index=end_index,
            persona_id=persona,
            # raw_options: the all_options cell as written, which the official prompt sends as is.
            metadata={
                "raw_type": raw_type,
                "raw_options": values["all_options"],
                "row": number,
                **_optional_metadata(record, number, reader),
            },
            distance_blocks=distances["distance_blocks"],
            distance_tokens=distances["distance_tokens"],
        )
    except ValidationError as exc:
        reader.issue(number, None, f"invalid question: {exc.errors()[0]['msg']}; row skipped")
        return None
    return _Row(number, question, raw_type)


def read_questions(path: Path) -> tuple[list[Question], list[DataIssue]]:
    """Questions of one PersonaMem CSV (either column spelling) with the file's own type labels, and issues."""
    reader = _Reader(str(path))
    rows: list[_Row] = []
    seen: dict[str, int] = {}
    text_column: str | None = None
    for number, record in _csv_records(path):
        if text_column is None:
            text_column = next(c for c in QUESTION_COLUMNS if c in record)
        row = _parse_row(number, record, text_column, reader)
        if row is None:
            continue
        if row.question.id in seen:
            first = seen[row.question.id]
            reader.issue(number, "question_id", f"duplicate id {row.question.id!r} (first at row {first}); row skipped")
            continue
        seen[row.question.id] = number
        rows.append(row)
    # Each file's own labels are kept as they are (see memlab.datasets.question_types); unknown
    # ones are reported once per label.
    for raw in sorted({r.raw_type for r in rows} - KNOWN_TYPES):
        count = sum(1 for r in rows if r.raw_type == raw)
        first = next(r.number for r in rows if r.raw_type == raw)
        reader.issue(first, "question_type", f"unknown question type {raw!r} ({count} rows) kept as is")
    questions = [row.question for row in rows]
    return questions, reader.issues


# --- histories -------------------------------------------------------------------------------


def _history(context_id: str, raw: Any, path: Path, line: int, issues: list[DataIssue]) -> History | None:
    def issue(message: str, column: str | None = None) -> None:
        issues.append(DataIssue(file=str(path), row=line, field=column, message=f"{message} {JSONL_ROW_NOTE}"))

    if not isinstance(raw, list):
        issue(f"context {context_id!r}: expected a list of messages, got {type(raw).__name__}; context skipped")
        return None
    messages: list[Message] = []
    dropped: list[int] = []
    for index, item in enumerate(raw):
        role = item.get("role") if isinstance(item, dict) else None
        content = item.get("content") if isinstance(item, dict) else None
        if role not in ROLES or not isinstance(content, str):
            # Dropped, not replaced: question end indexes are shifted to match (see load_personamem).
            what = f"role {role!r}" if role not in ROLES else f"content of type {type(content).__name__}"
            issue(
                f"context {context_id!r}, message {index}: {what}; message dropped",
                "role" if role not in ROLES else "content",
            )
            dropped.append(index)
            continue
        messages.append(Message(role=role, content=content))
    metadata: dict[str, Any] = {"file": str(path), "line": line, "raw_length": len(raw)}
    if dropped:
        metadata["dropped_messages"] = dropped
    return History(id=context_id, messages=messages, session_starts=split_at_system(messages), metadata=metadata)


def _skippable(text: str, wanted: set[str]) -> bool:
    """Whether a line's first key is a context nobody asked for (decided without parsing the line).
    A key that is not valid JSON is not skippable: the full parse reports the line."""
    key = _CONTEXT_KEY.match(text)
    if key is None:
        return False
    try:
        return json.loads(f'"{key.group(1)}"') not in wanted
    except json.JSONDecodeError:
        return False


def read_contexts(path: Path, wanted: set[str] | None = None) -> tuple[dict[str, History], list[DataIssue]]:
    """Histories of a PersonaMem JSONL file (one ``{context_id: [messages]}`` object per line).

    With ``wanted``, lines of other contexts are skipped without parsing them (the 1M file holds
    gigabytes of contexts most runs never touch).
    """
    issues: list[DataIssue] = []
    histories: dict[str, History] = {}
    first_line: dict[str, int] = {}

    def issue(line: int, message: str) -> None:
        issues.append(DataIssue(file=str(path), row=line, message=f"{message} {JSONL_ROW_NOTE}"))

    try:
        handle = path.open(encoding="utf-8")
    except OSError as exc:
        raise DataFormatError(f"cannot read PersonaMem contexts file {path}: {exc}") from exc
    with handle:
        line = 0
        while True:
            try:
                text = handle.readline()
            except UnicodeDecodeError as exc:
                raise DataFormatError(f"cannot read PersonaMem contexts file {path} after line {line}: {exc}") from exc
            if not text:
                break
            line += 1
            if not text.strip():
                continue
            if wanted is not None and _skippable(text, wanted):
                continue
            try:
                obj = json.loads(text)
            except json.JSONDecodeError as exc:
                issue(line, f"not valid JSON ({exc.msg}); line skipped")
                continue
            if not isinstance(obj, dict) or not obj:
                issue(line, "expected an object {context_id: [messages]}; line skipped")
                continue
            for context_id, raw in obj.items():
                if wanted is not None and context_id not in wanted:
                    continue
                if context_id in first_line:
                    issue(
                        line, f"context {context_id!r} already defined on line {first_line[context_id]}; kept the first"
                    )
                    continue
                first_line[context_id] = line
                history = _history(context_id, raw, path, line, issues)
                if history is not None:
                    histories[context_id] = history
    if line == 0:
        raise DataFormatError(f"PersonaMem contexts file {path} is empty")
    return histories, issues


# --- joining ---------------------------------------------------------------------------------


def _short(context_id: str) -> str:
    return context_id if len(context_id) <= 16 else context_id[:12] + "..."


def _attach(
    questions: list[Question], histories: dict[str, History], contexts: Path, have_file: bool, file: str
) -> tuple[list[Question], list[DataIssue]]:
    """Check each question against its history: shift end indexes past dropped messages, drop
    questions asked beyond the end, and report each missing context once."""
    issues: list[DataIssue] = []
    kept: list[Question] = []
    missing: dict[str, list[Question]] = {}
    for question in questions:
        history = histories.get(question.context_id)
        if history is None:
            missing.setdefault(question.context_id, []).append(question)
            kept.append(question)  # still answerable by blind readers
            continue
        raw_length = history.metadata.get("raw_length", len(history.messages))
        row = question.metadata.get("row")
        if question.end_index > raw_length:
            issues.append(
                DataIssue(
                    file=file,
                    row=row,
                    field="end_index_in_shared_context",
                    message=f"end index {question.end_index} is past the end of context {_short(question.context_id)} "
                    f"({raw_length} messages); question skipped {CSV_ROW_NOTE}",
                )
            )
            continue
        dropped = history.metadata.get("dropped_messages", [])
        shift = sum(1 for index in dropped if index < question.end_index)
        if shift:
            question = question.model_copy(
                update={
                    "end_index": question.end_index - shift,
                    "metadata": {**question.metadata, "raw_end_index": question.end_index},
                }
            )
        kept.append(question)
    for context_id, about in missing.items():
        where = f"{contexts.name} has no such context" if have_file else f"no contexts file ({contexts} not found)"
        issues.append(
            DataIssue(
                file=file,
                row=about[0].metadata.get("row"),
                field="shared_context_id",
                message=f"history {_short(context_id)} unavailable: {where}; its {len(about)} question(s) "
                f"are loaded questions-only (blind readers only) {CSV_ROW_NOTE}",
            )
        )
    return kept, issues


def load_personamem(source: str | Path = "32k", *, size: str | None = None, require_histories: bool = False) -> Dataset:
    """Load PersonaMem from a size name, a folder or a questions CSV (see the module docstring).

    ``size`` picks one size in a folder that holds several. ``require_histories`` turns a missing
    contexts file into a DatasetUnavailableError instead of a questions-only load.
    """
    resolved = _resolve(source, size)
    questions, issues = read_questions(resolved.questions)
    histories: dict[str, History] = {}
    have_contexts = resolved.contexts.is_file()
    if have_contexts:
        histories, context_issues = read_contexts(resolved.contexts, {q.context_id for q in questions})
        issues.extend(context_issues)
    elif require_histories:
        raise DatasetUnavailableError(
            f"PersonaMem histories not found: expected {resolved.contexts} next to {resolved.questions}"
        )
    questions, join_issues = _attach(questions, histories, resolved.contexts, have_contexts, str(resolved.questions))
    issues.extend(join_issues)
    return Dataset(
        name=resolved.name, histories=histories, questions=questions, issues=issues, source=str(resolved.questions)
    )

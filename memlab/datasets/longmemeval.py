"""LongMemEval (Wu et al., ICLR 2025): 500 questions, each with its own timestamped chat history.

Released layout (``longmemeval_oracle.json``, ``longmemeval_s_cleaned.json``,
``longmemeval_m_cleaned.json`` on the Hugging Face dataset ``xiaowu0162/longmemeval-cleaned``): a
list of entries, one per question::

    {"question_id": "e47becba", "question_type": "single-session-user",
     "question": "...", "answer": "...", "question_date": "2023/05/30 (Tue) 23:40",
     "haystack_session_ids": ["sharegpt_x_0", "answer_e47becba_1", ...],
     "haystack_dates": ["2023/05/20 (Sat) 02:21", ...],
     "haystack_sessions": [[{"role": "user", "content": "...", "has_answer": true}, ...], ...],
     "answer_session_ids": ["answer_e47becba_1"]}

Each entry becomes one ``History`` (id = ``question_id``) holding its haystack sessions, and one
question asked after all of them - every question is replayed as its own history, as LongMemEval
intends. Sessions are replayed in date order (the oracle file does not sort them) and every message
carries its session's date as ``timestamp``.

Evidence: the turns marked ``has_answer`` (as ``m<index>`` message indexes, which
``memlab.eval.retrieval`` resolves), so recall@k works as on LoCoMo; an answer session without any
marked turn contributes all its turns. Abstention questions (ids ending ``_abs``: the history does
not hold the answer, ``answer`` explains why) have no evidence and ``metadata["abstention"]`` set.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from memlab.datasets.base import (
    DataIssue,
    Dataset,
    History,
    RowIssues,
    data_home,
    hub_download,
    parse_datetime,
    read_json_list,
)
from memlab.errors import DataFormatError, DatasetUnavailableError, MemlabError
from memlab.types import Message, Question

HF_REPO = "xiaowu0162/longmemeval-cleaned"
HF_URL = f"https://huggingface.co/datasets/{HF_REPO}"
# variant -> file name in the cleaned release (first) and the original 2024 release (also accepted)
FILES: dict[str, tuple[str, ...]] = {
    "oracle": ("longmemeval_oracle.json",),
    "s": ("longmemeval_s_cleaned.json", "longmemeval_s.json"),
    "m": ("longmemeval_m_cleaned.json", "longmemeval_m.json"),
}
QUESTION_TYPES = (
    "single-session-user",
    "single-session-assistant",
    "single-session-preference",
    "multi-session",
    "temporal-reasoning",
    "knowledge-update",
)
ABSTENTION_SUFFIX = "_abs"
REQUIRED = (
    "question_id",
    "question_type",
    "question",
    "answer",
    "haystack_sessions",
    "haystack_dates",
    "haystack_session_ids",
)
ROLES = ("user", "assistant")


def default_data_dir() -> Path:
    """Where variants are looked up and downloaded to (``$MEMLAB_DATA_DIR/longmemeval``)."""
    return data_home("longmemeval")


def parse_longmemeval_date(text: str) -> datetime | None:
    """'2023/05/30 (Tue) 23:40' -> datetime; None when the text has another shape."""
    return parse_datetime(" ".join(str(text).split()), ("%Y/%m/%d (%a) %H:%M", "%Y/%m/%d %H:%M", "%Y/%m/%d"))


def download_longmemeval(variant: str, target: Path | None = None) -> Path:
    """The file of ``variant`` (oracle, s or m) in ``target``, fetched from the hub once.

    Any failure (offline mode, no network, missing file) becomes a DatasetUnavailableError saying
    what to download and where to put it.
    """
    key = variant.strip().lower()
    if key not in FILES:
        raise MemlabError(
            f"unknown LongMemEval variant {variant!r}; expected one of {', '.join(FILES)} or a .json path"
        )
    target = Path(target) if target is not None else default_data_dir()
    for name in FILES[key]:
        if (target / name).is_file():
            return target / name
    name = FILES[key][0]
    return hub_download(
        HF_REPO,
        name,
        target,
        what=f"LongMemEval {key!r}",
        advice=(
            f"Download {name} from {HF_URL} (Files tab, or {HF_URL}/resolve/main/{name}) and put it in "
            f"{target}, or set MEMLAB_DATA_DIR to the folder above a 'longmemeval' folder holding it, or "
            f"pass the file: --dataset longmemeval:/path/to/{name}"
        ),
    )


def _resolve(spec: str | Path | None) -> Path:
    text = "s" if spec is None or str(spec).strip() == "" else str(spec).strip()
    if text.lower() in FILES:
        return download_longmemeval(text)
    path = Path(text).expanduser()
    if not path.is_file():
        raise DatasetUnavailableError(
            f"LongMemEval file not found: {path} (give a .json file of the release, or one of "
            f"{', '.join(FILES)} to use the downloaded release)"
        )
    return path


class _Entry:
    """One released entry being turned into a history and a question; problems become issues."""

    def __init__(self, raw: dict[str, Any], file: str, row: int, issues: list[DataIssue]) -> None:
        self.raw, self.file, self.row = raw, file, row
        self.qid = str(raw["question_id"])
        self.report = RowIssues(issues, file, row, self.qid)

    def sessions(self) -> list[tuple[datetime | None, str, str, list[Any]]]:
        """(date, raw date, session id, turns) per session, in replay order."""
        sessions, dates, ids = (self.raw[k] for k in ("haystack_sessions", "haystack_dates", "haystack_session_ids"))
        for field, value in (("haystack_sessions", sessions), ("haystack_dates", dates), ("haystack_session_ids", ids)):
            if not isinstance(value, list):
                raise DataFormatError(f"{self.file}, entry {self.row} ({self.qid}): {field} must be a list")
        if not len(sessions) == len(dates) == len(ids):
            raise DataFormatError(
                f"{self.file}, entry {self.row} ({self.qid}): haystack_sessions, haystack_dates and "
                f"haystack_session_ids differ in length ({len(sessions)}, {len(dates)}, {len(ids)})"
            )
        parsed = [parse_longmemeval_date(d) for d in dates]
        for number, (raw_date, when) in enumerate(zip(dates, parsed)):
            if when is None:
                self.report.add(
                    f"haystack_dates[{number}]", f"cannot parse date {raw_date!r}; its turns have no timestamp"
                )
        order = list(range(len(sessions)))
        dated = [when for when in parsed if when is not None]
        if len(dated) == len(parsed):
            order.sort(key=lambda n: dated[n])  # stable: same-date sessions keep the file's order
        else:
            self.report.add("haystack_dates", "sessions kept in file order (not every date parses)")
        return [(parsed[n], str(dates[n]), str(ids[n]), sessions[n]) for n in order]

    def history(self) -> tuple[History, list[int], dict[str, list[int]]]:
        """The history, the indexes of has_answer turns, and the message indexes of each session id."""
        messages: list[Message] = []
        starts: list[int] = []
        session_meta: list[dict[str, Any]] = []
        marked: list[int] = []
        by_session: dict[str, list[int]] = {}
        for when, raw_date, session_id, turns in self.sessions():
            if not isinstance(turns, list):
                raise DataFormatError(
                    f"{self.file}, entry {self.row} ({self.qid}): session {session_id!r} must be a list of turns"
                )
            kept: list[Message] = []
            indexes: list[int] = []
            for position, turn in enumerate(turns):
                where = f"haystack_sessions[{session_id}][{position}]"
                if (
                    not isinstance(turn, dict)
                    or turn.get("role") not in ROLES
                    or not isinstance(turn.get("content"), str)
                ):
                    self.report.add(where, "turn skipped (needs role user/assistant and text content)")
                    continue
                index = len(messages) + len(kept)
                if turn.get("has_answer") is True:
                    marked.append(index)
                indexes.append(index)
                kept.append(Message(role=turn["role"], content=turn["content"], timestamp=when))
            if not kept:
                self.report.add(f"haystack_sessions[{session_id}]", "session has no turns; skipped")
                continue
            starts.append(len(messages))
            messages.extend(kept)
            by_session.setdefault(session_id, []).extend(indexes)
            session_meta.append({"session_id": session_id, "date": raw_date, "question_id": self.qid})
        history = History(
            id=self.qid,
            messages=messages,
            session_starts=starts,
            metadata={"dataset": "longmemeval", "haystack_session_ids": [m["session_id"] for m in session_meta]},
            session_metadata=session_meta,
        )
        return history, marked, by_session

    def question(self, history: History, marked: list[int], by_session: dict[str, list[int]]) -> Question | None:
        text = str(self.raw["question"]).strip()
        qtype = str(self.raw["question_type"]).strip()
        if not text:
            self.report.add("question", "question skipped (empty text)")
            return None
        if qtype not in QUESTION_TYPES:
            self.report.add("question_type", f"unknown question type {qtype!r} (known: {', '.join(QUESTION_TYPES)})")
        abstention = self.qid.endswith(ABSTENTION_SUFFIX)
        answer_sessions = [str(s) for s in self.raw.get("answer_session_ids") or []]
        evidence: list[int] = []
        if not abstention:
            evidence = list(marked)
            for session_id in answer_sessions:
                indexes = by_session.get(session_id)
                if indexes is None:
                    self.report.add("answer_session_ids", f"answer session {session_id!r} is not in the haystack")
                elif not set(indexes) & set(marked):
                    evidence.extend(indexes)  # an answer session with no marked turn: all of it is evidence
            evidence = sorted(set(evidence))
        raw_date = str(self.raw.get("question_date") or "")
        when = parse_longmemeval_date(raw_date) if raw_date else None
        if raw_date and when is None:
            self.report.add("question_date", f"cannot parse question date {raw_date!r}")
        metadata: dict[str, Any] = {
            "dataset": "longmemeval",
            "question_type": qtype,
            "question_date": raw_date,
            "abstention": abstention,
            "answer_session_ids": answer_sessions,
        }
        if when is not None:
            metadata["question_timestamp"] = when.isoformat()
        return Question(
            id=self.qid,
            type=qtype,
            text=text,
            answer_text=str(self.raw["answer"]),
            context_id=history.id,
            end_index=len(history.messages),
            evidence=[f"m{i}" for i in evidence],
            metadata=metadata,
        )


def load_longmemeval(spec: str | Path | None = None) -> Dataset:
    """Load a LongMemEval file: a path, or ``oracle`` / ``s`` / ``m`` (looked up in
    ``$MEMLAB_DATA_DIR/longmemeval`` and downloaded there once; ``None`` means ``s``)."""
    resolved = _resolve(spec)
    file = str(resolved)
    dataset = Dataset(name="longmemeval", histories={}, questions=[], source=file)
    for row, raw in enumerate(read_json_list(resolved, "LongMemEval entries")):
        if not isinstance(raw, dict):
            dataset.issues.append(
                DataIssue(
                    file=file, row=row, message=f"entry skipped (an object was expected, got {type(raw).__name__})"
                )
            )
            continue
        missing = [key for key in REQUIRED if key not in raw]
        if missing:
            report = RowIssues(dataset.issues, file, row, str(raw.get("question_id", "?")))
            report.add(missing[0], f"entry skipped (missing {', '.join(missing)})")
            continue
        entry = _Entry(raw, file, row, dataset.issues)
        if entry.qid in dataset.histories:
            raise DataFormatError(f"{file}, entry {row}: question_id {entry.qid!r} appears twice")
        history, marked, by_session = entry.history()
        question = entry.question(history, marked, by_session)
        dataset.histories[history.id] = history
        if question is not None:
            dataset.questions.append(question)
    return dataset

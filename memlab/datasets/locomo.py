"""LoCoMo (Maharana et al., 2024): long two-person conversations with open questions.

Layout of ``locomo10.json`` (a list, one entry per conversation)::

    {"sample_id": "conv-26",
     "conversation": {"speaker_a": "Caroline", "speaker_b": "Melanie",
                      "session_1_date_time": "1:56 pm on 8 May, 2023",
                      "session_1": [{"speaker": "Caroline", "dia_id": "D1:1", "text": "...",
                                     "blip_caption": "a photo of ..."}, ...], ...},
     "qa": [{"question": "...", "answer": "...", "evidence": ["D1:3"], "category": 2}, ...]}

Each conversation becomes one ``History`` (id = ``sample_id``) and its questions are asked after
the whole conversation (``end_index = len(messages)``).

Roles: both speakers are people and questions are asked about either of them, but memlab's
message model (like every chat memory) knows only ``user`` and ``assistant``. ``speaker_a`` becomes
``user`` and ``speaker_b`` ``assistant`` - the convention Mem0 and others use on LoCoMo - and
every content starts with ``"<Name>: "`` so the speaker is never lost, whatever a backend does
with roles. A turn that shared an image gets its caption appended (``[shares a photo: ...]``),
as LoCoMo's own evaluation prompts do; the image is part of what was said.
"""

from __future__ import annotations

import json
import re
import urllib.request
from datetime import datetime
from pathlib import Path
from typing import Any

from memlab.datasets.base import DataIssue, Dataset, History, RowIssues, data_home, parse_datetime, read_json_list
from memlab.errors import DataFormatError, DatasetUnavailableError
from memlab.types import Message, Question, Role

LOCOMO_URL = "https://raw.githubusercontent.com/snap-research/LoCoMo/main/data/locomo10.json"
LOCOMO_FILE = "locomo10.json"

# Category ids of the LoCoMo repository. The paper lists the types in another order
# (single-hop, multi-hop, temporal, open-domain, adversarial); the ids in the data are these, as
# the data itself shows (dev file): category 1 questions cite 2.8 turns, 96% of them across
# sessions, and LoCoMo's evaluation splits their answers into sub-answers (multi-hop); category 2
# questions ask "when" / "how long"; category 4, the largest set, cites a single turn.
CATEGORIES: dict[int, str] = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}
ADVERSARIAL = 5

# The names mem0's evaluation gives the same ids (mem0ai/mem0 issue #2609: "1 Single Hop, 2 Temporal,
# 3 Multi Hop, 4 Open Domain"; category 5 is left out of its results). They differ from the ids'
# real types for 1, 3 and 4, so numbers labelled by mem0's names compare with ours only by id.
MEM0_CATEGORY_NAMES: dict[int, str] = {
    1: "single-hop",
    2: "temporal",
    3: "multi-hop",
    4: "open-domain",
}

SPEAKER_ROLES: tuple[Role, Role] = ("user", "assistant")  # speaker_a, speaker_b

_SESSION_KEY = re.compile(r"^session_(\d+)$")
_DIA_ID = re.compile(r"^D(\d+):0*(\d+)$")


def default_cache_dir() -> Path:
    """Where the downloaded LoCoMo file lives (see ``memlab.datasets.base.data_home``)."""
    return data_home("locomo")


def parse_locomo_datetime(text: str) -> datetime | None:
    """'1:56 pm on 8 May, 2023' -> datetime; None when the text has another shape."""
    cleaned = " ".join(str(text).replace(",", " ").split())
    return parse_datetime(cleaned, ("%I:%M %p on %d %B %Y", "%I:%M%p on %d %B %Y", "%I:%M %p on %d %b %Y"))


def download_locomo(target: Path | None = None, *, url: str = LOCOMO_URL, timeout: float = 60.0) -> Path:
    """Fetch ``locomo10.json`` once into the cache (or ``target``) and return its path."""
    target = target or default_cache_dir() / LOCOMO_FILE
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            data = response.read()
        json.loads(data)  # a proxy error page must not be cached as the dataset
    except Exception as exc:  # offline, DNS refused, HTTP error, blocked socket, truncated body
        raise DatasetUnavailableError(
            f"LoCoMo is not on disk at {target} and could not be downloaded from {url} "
            f"({type(exc).__name__}: {exc}). Download that file on a machine with internet access and "
            f"put it at {target}, or pass a local path: --dataset locomo:/path/to/locomo10.json"
        ) from exc
    tmp = target.with_suffix(".json.part")
    tmp.write_bytes(data)
    tmp.replace(target)  # atomic: an interrupted download never looks complete
    return target


def _resolve(path: str | Path | None) -> Path:
    if path is None or str(path) == "":
        return download_locomo()
    resolved = Path(path).expanduser()
    if resolved.is_dir():
        resolved = resolved / LOCOMO_FILE
    if not resolved.is_file():
        raise DatasetUnavailableError(f"LoCoMo file not found: {resolved}")
    return resolved


def normalize_dia_id(raw: str) -> str | None:
    """'D3:07' -> 'D3:7'; None when it is not a dia_id at all."""
    match = _DIA_ID.match(raw.strip())
    return f"D{int(match.group(1))}:{int(match.group(2))}" if match else None


def _turn_text(turn: dict[str, Any], name: str) -> str:
    text = str(turn.get("text", "")).strip()
    caption = turn.get("blip_caption")
    if caption:
        text = f"{text} [shares a photo: {str(caption).strip()}]".strip()
    return f"{name}: {text}"


def _load_history(
    sample: dict[str, Any], file: str, row: int, issues: list[DataIssue]
) -> tuple[History, dict[str, int]]:
    if not isinstance(sample, dict):
        raise DataFormatError(f"{file}, conversation {row}: expected an object, got {type(sample).__name__}")
    conv = sample.get("conversation")
    sample_id = sample.get("sample_id")
    if not isinstance(conv, dict) or not sample_id:
        hint = (
            " - it looks like a LongMemEval file: use --dataset longmemeval:<file>"
            if "haystack_sessions" in sample
            else ""
        )
        raise DataFormatError(f"{file}, conversation {row}: needs 'sample_id' and a 'conversation' object{hint}")
    speakers = {conv.get("speaker_a"): SPEAKER_ROLES[0], conv.get("speaker_b"): SPEAKER_ROLES[1]}
    if None in speakers or len(speakers) != 2:
        raise DataFormatError(f"{file}, {sample_id}: needs two distinct names in speaker_a and speaker_b")

    report = RowIssues(issues, file, row, str(sample_id))
    numbers = sorted(int(m.group(1)) for key in conv if (m := _SESSION_KEY.match(key)))
    messages: list[Message] = []
    starts: list[int] = []
    session_meta: list[dict[str, Any]] = []
    dia_ids: list[str] = []
    index_of: dict[str, int] = {}
    for number in numbers:
        turns = conv[f"session_{number}"]
        if not isinstance(turns, list) or not turns:
            continue  # the released file lists date-times of sessions it has no turns for
        raw_date = conv.get(f"session_{number}_date_time")
        when = parse_locomo_datetime(raw_date) if raw_date else None
        if raw_date and when is None:
            report.add(f"session_{number}_date_time", f"cannot parse date-time {raw_date!r}; timestamps left empty")
        starts.append(len(messages))
        session_meta.append({"session_number": number, "date_time": raw_date, "sample_id": sample_id})
        for position, turn in enumerate(turns):
            if not isinstance(turn, dict):
                raise DataFormatError(
                    f"{file}, {sample_id}: session_{number}[{position}] must be an object, got {type(turn).__name__}"
                )
            name = turn.get("speaker")
            role = speakers.get(name)
            if role is None:
                # An unknown speaker would silently flip roles; keep the turn as the user's, named.
                report.add(
                    f"session_{number}[{position}].speaker", f"speaker {name!r} is neither speaker_a nor speaker_b"
                )
                role = SPEAKER_ROLES[0]
            dia_id = normalize_dia_id(str(turn.get("dia_id", ""))) or f"D{number}:{position + 1}"
            index_of.setdefault(dia_id, len(messages))
            dia_ids.append(dia_id)
            messages.append(Message(role=role, content=_turn_text(turn, str(name)), timestamp=when))

    history = History(
        id=str(sample_id),
        messages=messages,
        session_starts=starts,
        metadata={
            "dataset": "locomo",
            "dia_ids": dia_ids,
            "speaker_a": conv["speaker_a"],
            "speaker_b": conv["speaker_b"],
            "roles": {conv["speaker_a"]: SPEAKER_ROLES[0], conv["speaker_b"]: SPEAKER_ROLES[1]},
        },
        session_metadata=session_meta,
    )
    return history, index_of


def _evidence(raw: Any, known: dict[str, int], report: RowIssues) -> list[str]:
    """Evidence ids that exist in the history; the rest become data issues."""
    values = raw if isinstance(raw, list) else [raw] if raw else []
    found: list[str] = []
    for value in values:
        parts = [p for p in re.split(r"[;,\s]+", str(value)) if p]
        if len(parts) > 1:
            report.add("evidence", f"evidence {value!r} holds several ids; split")
        for part in parts:
            dia_id = normalize_dia_id(part)
            if dia_id is None or dia_id not in known:
                report.add("evidence", f"evidence {part!r} names no turn of the conversation")
            elif dia_id not in found:
                found.append(dia_id)
    return found


def _question(qa: dict[str, Any], history: History, known: dict[str, int], report: RowIssues) -> Question | None:
    """The question of ``report.row`` (its index in the conversation's ``qa`` list), or None when skipped."""
    sample_id, row = history.id, report.row
    if not isinstance(qa, dict):
        report.add("qa", f"question skipped (an object was expected, got {type(qa).__name__})")
        return None
    text = str(qa.get("question", "")).strip()
    category = qa.get("category")
    if not text or category not in CATEGORIES:
        report.add(
            "question" if not text else "category", f"question skipped (text {text[:40]!r}, category {category!r})"
        )
        return None
    metadata: dict[str, Any] = {
        "category": category,
        "category_name": CATEGORIES[category],
        "qa_index": row,
        # the locomo reader opens its prompt with the two names, as LoCoMo's evaluation does
        "speakers": [history.metadata["speaker_a"], history.metadata["speaker_b"]],
    }
    if category == ADVERSARIAL:
        # The expected behaviour is to say the conversation does not tell; answer_text holds the
        # trap (what the conversation says about the *other* speaker) - see memlab.eval.answers.
        answer = qa.get("adversarial_answer", qa.get("answer"))
        if "answer" in qa:
            metadata["answer"] = str(qa["answer"])
        metadata["adversarial"] = True
    else:
        answer = qa.get("answer")
    if answer is None:
        report.add("answer", "question has no answer; skipped")
        return None
    return Question(
        id=f"{sample_id}:q{row}",
        type=CATEGORIES[category],
        text=text,
        answer_text=str(answer),
        context_id=sample_id,
        end_index=len(history.messages),
        evidence=_evidence(qa.get("evidence"), known, report),
        metadata=metadata,
    )


def load_locomo(path: str | Path | None = None) -> Dataset:
    """Load a LoCoMo file (``None``: the full ``locomo10.json``, downloaded once into the cache)."""
    resolved = _resolve(path)
    file = str(resolved)
    dataset = Dataset(name="locomo", histories={}, questions=[], source=file)
    for row, sample in enumerate(read_json_list(resolved, "conversations")):
        history, known = _load_history(sample, file, row, dataset.issues)
        if history.id in dataset.histories:
            raise DataFormatError(f"{file}, conversation {row}: sample_id {history.id!r} appears twice")
        dataset.histories[history.id] = history
        for qa_index, qa in enumerate(sample.get("qa") or []):
            question = _question(qa, history, known, RowIssues(dataset.issues, file, qa_index, history.id))
            if question is not None:
                dataset.questions.append(question)
    return dataset

"""What every dataset loader produces: histories (shared contexts), questions and data issues."""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from memlab.types import Message, Question, Session


class DataIssue(BaseModel):
    """A problem with one piece of input, reported instead of aborting the whole load."""

    file: str
    row: int | None = None
    field: str | None = None
    message: str

    def __str__(self) -> str:
        where = self.file + (f", row {self.row}" if self.row is not None else "")
        where += f", field {self.field!r}" if self.field else ""
        return f"{where}: {self.message}"


@dataclass(frozen=True)
class RowIssues:
    """Where a loader reports the problems of one input row: each issue names the file and the row,
    and its message opens with the row's own id (a sample or question id), so it can be found."""

    issues: list[DataIssue]
    file: str
    row: int
    row_id: str

    def add(self, field: str, message: str) -> None:
        self.issues.append(DataIssue(file=self.file, row=self.row, field=field, message=f"{self.row_id}: {message}"))


@dataclass
class History:
    """One shared context: the full message list and where its sessions start.

    ``session_starts`` are message indexes; session ``n`` is ``messages[starts[n]:starts[n+1]]``.
    PersonaMem starts a session at every ``system`` message.
    """

    id: str
    messages: list[Message]
    session_starts: list[int]
    metadata: dict[str, Any] = field(default_factory=dict)
    session_metadata: list[dict[str, Any]] = field(default_factory=list)

    def session_id(self, number: int) -> str:
        return f"{self.id}:s{number}"

    def slices(self, start: int, stop: int) -> Iterator[tuple[Session, int]]:
        """Sessions (or parts of sessions) covering messages ``[start, stop)``, in order.

        Yields each part with the index of its first message in the history. A session cut by
        ``stop`` is yielded again from the next call's ``start``: same id, continuing the first part.
        """
        bounds = self.session_starts + [len(self.messages)]
        for number in range(len(self.session_starts)):
            lo, hi = max(bounds[number], start), min(bounds[number + 1], stop)
            if lo >= hi:
                continue
            meta = self.session_metadata[number] if number < len(self.session_metadata) else {}
            yield Session(id=self.session_id(number), messages=self.messages[lo:hi], metadata=dict(meta)), lo

    def session_number_of(self, index: int) -> int:
        """Which session message ``index`` belongs to."""
        number = 0
        for n, begin in enumerate(self.session_starts):
            if begin <= index:
                number = n
        return number


def split_at_system(messages: list[Message]) -> list[int]:
    """Session starts for PersonaMem: each system message opens a session (and index 0 always does)."""
    starts = [i for i, m in enumerate(messages) if m.role == "system"]
    if not starts or starts[0] != 0:
        starts.insert(0, 0)
    return starts


@dataclass
class Dataset:
    """Histories by id, the questions asked about them, and issues met while loading."""

    name: str
    histories: dict[str, History]
    questions: list[Question]
    issues: list[DataIssue] = field(default_factory=list)
    source: str = ""

    def questions_for(self, context_id: str) -> list[Question]:
        """Questions about one history, in the order the replay reaches them."""
        return sorted((q for q in self.questions if q.context_id == context_id), key=lambda q: (q.end_index, q.id))

    def summary(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "source": self.source,
            "histories": len(self.histories),
            "messages": sum(len(h.messages) for h in self.histories.values()),
            "questions": len(self.questions),
            "issues": len(self.issues),
        }


def data_home(name: str) -> Path:
    """Where dataset ``name`` is looked for and downloaded to: ``$MEMLAB_DATA_DIR/<name>``
    (default ``~/.cache/memlab/datasets/<name>``). One variable for every dataset."""
    root = os.environ.get("MEMLAB_DATA_DIR") or Path.home() / ".cache" / "memlab" / "datasets"
    return Path(root) / name


def hub_download(repo_id: str, name: str, target: Path, *, what: str, advice: str) -> Path:
    """File ``name`` of the Hugging Face dataset ``repo_id``, downloaded into folder ``target``.

    Offline mode, DNS/socket refusals, HTTP errors and missing files all mean the same thing to the
    user, so any failure is one ``DatasetUnavailableError``: "<what> is not in <target> and could
    not be downloaded", the cause, then ``advice`` (what to download and where to put it).
    """
    from memlab.errors import DatasetUnavailableError

    try:
        from huggingface_hub import hf_hub_download

        return Path(hf_hub_download(repo_id=repo_id, repo_type="dataset", filename=name, local_dir=target))
    except Exception as exc:
        offline = " (HF_HUB_OFFLINE=1 is set)" if os.environ.get("HF_HUB_OFFLINE", "") not in ("", "0") else ""
        raise DatasetUnavailableError(
            f"{what} is not in {target} and could not be downloaded{offline}: {type(exc).__name__}: {exc}\n{advice}"
        ) from exc


def parse_datetime(text: str, formats: Iterable[str]) -> datetime | None:
    """``text`` read with the first of ``formats`` that fits it; None when none does."""
    for fmt in formats:
        try:
            return datetime.strptime(text, fmt)
        except ValueError:
            continue
    return None


def read_json_list(path: Path, what: str) -> list[Any]:
    """A dataset file that must hold a JSON list; a broken file is a ``DataFormatError`` naming it."""
    from memlab.errors import DataFormatError

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DataFormatError(f"{path}: not valid JSON ({exc})") from exc
    except UnicodeDecodeError as exc:
        raise DataFormatError(f"{path}: not UTF-8 text ({exc})") from exc
    if not isinstance(data, list):
        raise DataFormatError(f"{path}: expected a list of {what}, got {type(data).__name__}")
    return data


@contextmanager
def csv_table(path: Path, what: str) -> Iterator[tuple[list[str], Iterator[tuple[int, dict[Any, Any]]]]]:
    """The header and the records of CSV ``path``, numbered from 1 (data records, header not counted).
    Cells may be long and span lines (whole option lists, multi-line JSON). A file that cannot be
    opened, decoded or parsed, or has no header, is a ``DataFormatError`` naming ``what``."""
    from memlab.errors import DataFormatError

    if csv.field_size_limit() < 2**31 - 1:
        csv.field_size_limit(2**31 - 1)
    try:
        handle = path.open(newline="", encoding="utf-8-sig")
    except OSError as exc:
        raise DataFormatError(f"cannot read {what}: {exc}") from exc
    with handle:
        reader = csv.DictReader(handle)
        try:
            header = reader.fieldnames
        except (UnicodeDecodeError, csv.Error) as exc:
            raise DataFormatError(f"cannot read {what}: {exc}") from exc
        if not header:
            raise DataFormatError(f"{what} is empty (no header row)")
        yield list(header), _numbered(reader, what)


def _numbered(reader: csv.DictReader[str], what: str) -> Iterator[tuple[int, dict[Any, Any]]]:
    from memlab.errors import DataFormatError

    number = 0
    while True:
        try:
            record = next(reader)
        except StopIteration:
            return
        except (UnicodeDecodeError, csv.Error) as exc:
            raise DataFormatError(f"cannot read {what} after data row {number}: {exc}") from exc
        number += 1
        yield number, record

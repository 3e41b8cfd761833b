"""Question texts, options and history turns for the question pages, from the run's dataset when it loads.

The result files hold what each row did (its pick, scores, the history message indexes it retrieved,
the evidence indexes) but not the texts. Like ``memlab compare --diff``, the UI loads the dataset the
run names (``config.dataset``) to show them; this is best effort: a dataset that moved, needs a
download or fails to load leaves the pages with indexes only, and says why. Loading happens once per
dataset, in a background thread, so no page waits for it.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from memlab.datasets.base import Dataset, History
from memlab.types import Question

log = logging.getLogger("memlab.ui")


@dataclass
class Turn:
    """One history message as a question page shows it."""

    index: int
    session: int
    role: str
    text: str
    back: int  # messages between it and the point where the question is asked


class DatasetTexts:
    """The datasets of the runs, loaded on first use in a background thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._datasets: dict[str, Dataset] = {}
        self._questions: dict[str, dict[str, Question]] = {}
        self._status: dict[str, str] = {}  # spec -> "loading" / "loaded" / why not

    def status(self, spec: str) -> str:
        with self._lock:
            return self._status.get(spec, "not loaded")

    def request(self, spec: str) -> None:
        """Start loading ``spec`` unless it is loading or loaded."""
        if not spec:
            return
        with self._lock:
            if spec in self._status:
                return
            self._status[spec] = "loading"
        threading.Thread(target=self._load, args=(spec,), name="memlab-ui-dataset", daemon=True).start()

    def wait(self, spec: str, timeout: float) -> None:
        """Block until ``spec`` is loaded or failed (scripts that need the texts: screenshots, tests)."""
        import time

        self.request(spec)
        deadline = time.monotonic() + timeout
        while self.status(spec) == "loading" and time.monotonic() < deadline:
            time.sleep(0.05)

    def _load(self, spec: str) -> None:
        try:
            from memlab.run.job import cached_dataset

            dataset = cached_dataset(spec)
        except Exception as exc:  # noqa: BLE001 - any failure only leaves the texts out; the reason is shown
            with self._lock:
                self._status[spec] = f"not available: {type(exc).__name__}: {exc}".splitlines()[0][:300]
            log.info("dataset %s not loaded for the UI: %s", spec, exc)
            return
        with self._lock:
            self._datasets[spec] = dataset
            self._questions[spec] = {q.id: q for q in dataset.questions}
            self._status[spec] = "loaded"

    def question(self, spec: str, question_id: str) -> Question | None:
        with self._lock:
            return self._questions.get(spec, {}).get(question_id)

    def history(self, spec: str, context_id: str) -> History | None:
        with self._lock:
            dataset = self._datasets.get(spec)
        return None if dataset is None else dataset.histories.get(context_id)


def turns(history: History, indexes: list[int], asked_at: int) -> list[Turn]:
    """The history messages at ``indexes`` with their session and how far back they lie from ``asked_at``."""
    out = []
    for index in indexes:
        if 0 <= index < len(history.messages):
            message = history.messages[index]
            out.append(
                Turn(
                    index=index,
                    session=history.session_number_of(index),
                    role=message.role,
                    text=message.content,
                    back=max(0, asked_at - index),
                )
            )
    return out

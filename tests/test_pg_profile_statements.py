"""The profile's PostgreSQL store runs PostgreSQL statements (issue 35): rows addressed by their keys,
not ``ctid``; a rewrite of every user's vectors holds the rows it read, so another worker changing
another user's rows waits for it and its change is neither lost nor overwritten."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest
from pg_fixtures import pg_server  # noqa: F401 - the session fixture

from memlab_plugins.profile.statements import POSTGRES, SQLITE

pytestmark = pytest.mark.pg


def vectorize(texts: list[str]) -> np.ndarray:
    """A deterministic stand-in embedder: the new one, after a change of embedder."""
    return np.array([[len(t), sum(map(ord, t)) % 997, 1.0, 2.0] for t in texts], dtype=np.float32)


def test_no_statement_addresses_rows_by_physical_position() -> None:
    for statements in (SQLITE, POSTGRES):
        for name, sql in vars(statements).items():
            assert sql is None or ("rowid" not in sql and "ctid" not in sql), (statements.dialect, name)
    assert "%s" in POSTGRES.turn and "?" not in POSTGRES.turn and "?" in SQLITE.turn
    assert POSTGRES.all_turn_texts.endswith("FOR UPDATE") and "FOR UPDATE" not in SQLITE.all_turn_texts


def test_revectorizing_every_user_while_another_worker_changes_bobs_turn(pg_server, tmp_path: Path) -> None:  # noqa: F811
    from memlab_plugins.profile.pg_store import PgProfileStore

    url = pg_server.database_for(tmp_path)
    worker_a, worker_b = PgProfileStore(url), PgProfileStore(url)
    old = np.zeros(4, dtype=np.float32)  # what the previous embedder wrote
    try:
        for user, texts in (("alice", ["I play the cello.", "I live in Porto."]), ("bob", ["I keep bees.", "Hi."])):
            turns = [(i, "user", text, None, old) for i, text in enumerate(texts)]
            worker_a.apply_session(user, "s1", [], vectorize=vectorize, source="test", turns_total=2, new_turns=turns)
        changed = "I keep bees on the roof now."
        bob_waited: list[bool] = []

        def bob_changes_his_turn() -> None:
            worker_b.apply_session(
                "bob",
                "s1",
                [],
                vectorize=vectorize,
                source="test",
                turns_total=2,
                new_turns=[(0, "user", changed, None, vectorize([changed])[0])],
            )

        writer = threading.Thread(target=bob_changes_his_turn)

        def new_embedder(texts: list[str]) -> np.ndarray:
            if not writer.is_alive() and not bob_waited:  # the turns were read: bob's writer starts now
                writer.start()
                writer.join(timeout=1.5)
                bob_waited.append(writer.is_alive())
            return vectorize(texts)

        worker_a.revectorize(new_embedder)
        writer.join(timeout=30)
        assert bob_waited == [True], "bob's write did not wait for the rewrite that read his row"
        assert not writer.is_alive()
        for user in ("alice", "bob"):
            turns, vectors = worker_a.turns(user)
            assert vectors is not None
            for turn, vector in zip(turns, vectors):
                assert np.array_equal(vector, vectorize([turn["content"]])[0]), (user, turn)
        assert worker_a.turn("bob", "s1", 0)["content"] == changed, "bob's change was kept"
        assert worker_a.turn("alice", "s1", 1)["content"] == "I live in Porto."
    finally:
        worker_a.close()
        worker_b.close()

"""Writes the data dirs of tests/test_legacy_data_dirs.py with memlab at commit 5ca34c8 (before the
rag/profile storage refactor), and what that code answered after reopening them (answers.json).

Run from a checkout of that commit, e.g.:
    mkdir /tmp/old && git archive 5ca34c8 memlab memlab_plugins | tar -x -C /tmp/old
    PYTHONPATH=/tmp/old python tests/data/legacy_5ca34c8/make_fixture.py tests/data/legacy_5ca34c8
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from memlab.registry import create_backend
from memlab.testing import session

BACKENDS = {
    "rag": {"embedder": "hashing"},
    "rag_session_chunks": {"embedder": "hashing", "chunking": "session", "lexical": "none"},
    "profile": {"embedder": "hashing", "aspect_threshold": 0.5},
}
HISTORY = [
    (
        "alice",
        session(
            "s1", ("user", "I adopted a cat named Pixel."), ("assistant", "Lovely!"), ("user", "I live in Lisbon.")
        ),
    ),
    ("alice", session("s2", ("user", "I started running marathons."), ("assistant", "Great."))),
    ("bob", session("s1", ("user", "I adopted a dog named Rex."), ("assistant", "Nice."))),
    (
        "alice",
        session(
            "s1",
            ("user", "Pixel likes tuna and sleeping on the roof."),
        ),
    ),
    ("alice", session("s3", ("user", "My favourite food is ramen."), ("user", "I hate cilantro."))),
]
QUERIES = ["what is my cat called?", "where do I live?", "what food do I like?", "marathon"]


def answers(memory, name: str) -> dict:
    out: dict = {}
    for user in ("alice", "bob"):
        out[user] = {
            "list": [i.model_dump(mode="json") for i in memory.list_memories(user_id=user)],
            "retrieve": [
                memory.retrieve(q, user_id=user, k=3).model_dump(mode="json", exclude={"seconds"}) for q in QUERIES
            ],
            "export": memory.export(user),
        }
    return out


def main(target: Path) -> None:
    result = {}
    for name, config in BACKENDS.items():
        backend = name.split("_")[0]
        data_dir = target / name
        shutil.rmtree(data_dir, ignore_errors=True)
        memory = create_backend(backend, config, data_dir=data_dir)
        for user, s in HISTORY:
            memory.ingest(s, user_id=user)
        victim = next(i for i in memory.list_memories(user_id="alice") if "marathon" in i.text)
        memory.delete(victim.id, user_id="alice")
        memory.close()
        reopened = create_backend(backend, config, data_dir=data_dir)
        result[name] = {"backend": backend, "config": config, "answers": answers(reopened, name)}
        reopened.close()
        (data_dir / ".memlab.lock").unlink(missing_ok=True)  # the lock file of the process that wrote it
    (target / "answers.json").write_text(json.dumps(result, indent=1, sort_keys=True) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main(Path(sys.argv[1]))

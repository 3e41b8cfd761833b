"""What a forget request removed is visible and undoable (issue 32): ``remember`` reports it, it
never reaches recall/list/get, export shows it as pending deletion, history says why, ``restore``
brings it back within ``forget_undo_hours``, and after the window (also across a restart) no byte
of it is left in the data directory."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from test_forget_everywhere import files_holding

from memlab.client import MemoryClient
from memlab.errors import NotFoundError

FACT = "I weigh 92 kilos and my locker code is 7731-QX."
OTHER = "I have a cat called Miso."
REQUEST = "Please forget my weight."


def _client(path: Path, **options: object) -> MemoryClient:
    return MemoryClient("full_context", data_dir=path, **options)  # type: ignore[arg-type]


def test_remember_reports_hides_and_restores(tmp_path: Path) -> None:
    with _client(tmp_path / "data") as client:
        client.remember("alice", [("user", FACT), ("user", OTHER)])
        report = client.remember("alice", [("user", REQUEST)])
        assert [f.text for f in report.forgotten] == [FACT, REQUEST]
        assert all(f.request == REQUEST and f.restorable_until is not None for f in report.forgotten)
        fact_id = report.forgotten[0].item_id
        assert "7731" not in client.recall("alice", "what do I weigh?", k=10).context
        assert [m.text for m in client.memories("alice")] == [OTHER]
        with pytest.raises(NotFoundError):
            client.get("alice", fact_id)
        exported = client.export("alice")
        assert all("7731" not in item["text"] for item in exported["items"])
        assert [p["item"]["id"] for p in exported["pending_deletion"]] == [f.item_id for f in report.forgotten]
        assert exported["pending_deletion"][0]["purge_at"]
        (event,) = client.history("alice", fact_id)
        assert event["reason"] == "forget_request" and event["request"] == REQUEST
        assert client.restore("alice", fact_id).text == FACT
        assert FACT in [m.text for m in client.memories("alice")]
        assert [e["event"] for e in client.history("alice", fact_id)] == ["DELETE", "RESTORE"]
        with pytest.raises(NotFoundError):
            client.restore("alice", fact_id)  # only what is pending can be restored
        with pytest.raises(NotFoundError):
            client.restore("bob", report.forgotten[1].item_id)  # another user's pending item


def test_talk_and_unmatched_requests_remove_nothing(tmp_path: Path) -> None:
    with _client(tmp_path / "data") as client:
        client.remember("alice", [("user", FACT), ("user", OTHER)])
        assert client.remember("alice", [("user", "Forget about it, let's talk about my cat Miso.")]).forgotten == []
        assert client.remember("alice", [("user", "Please forget my passport number.")]).forgotten == []
        assert len(client.memories("alice")) == 4  # nothing matched: the request turn stays too


def test_undo_hours_zero_deletes_at_once(tmp_path: Path) -> None:
    with _client(tmp_path / "data", forget_undo_hours=0) as client:
        client.remember("alice", [("user", FACT), ("user", OTHER)])
        report = client.remember("alice", [("user", REQUEST)])
        assert report.forgotten and all(f.restorable_until is None for f in report.forgotten)
        with pytest.raises(NotFoundError):
            client.restore("alice", report.forgotten[0].item_id)
        assert client.history("alice", report.forgotten[0].item_id)[0]["request"] is None
    assert files_holding(tmp_path, "7731") == []


def test_the_window_ends_also_while_no_process_runs(tmp_path: Path) -> None:
    tiny = 0.5 / 3600  # half a second
    with _client(tmp_path / "data", forget_undo_hours=tiny) as client:
        client.remember("alice", [("user", FACT), ("user", OTHER)], idempotency_key="k1")
        report = client.remember("alice", [("user", REQUEST)], idempotency_key="k2")
        assert report.forgotten
        assert files_holding(tmp_path, "7731"), "held until the window ends"
    time.sleep(0.6)
    with _client(tmp_path / "data") as client:  # purged on open
        assert [m.text for m in client.memories("alice")] == [OTHER]
        (deleted, purged) = client.history("alice", report.forgotten[0].item_id)
        assert deleted["request"] is None and purged["event"] == "PURGE"
        with pytest.raises(NotFoundError):
            client.restore("alice", report.forgotten[0].item_id)
    assert files_holding(tmp_path, "7731") == []
    assert files_holding(tmp_path, "forget my weight") == []


def test_rest_and_mcp_offer_restore(tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from memlab.mcp_server import offered_tools
    from memlab.server.app import create_app
    from memlab.server.settings import ServerSettings

    with TestClient(create_app(ServerSettings(backend="full_context", data_dir=tmp_path / "data"))) as http:
        http.post("/v1/users/u/messages", json={"messages": [{"role": "user", "content": FACT}]})
        added = http.post("/v1/users/u/messages", json={"messages": [{"role": "user", "content": REQUEST}]}).json()
        item_id = added["forgotten"][0]["item_id"].replace("#", "%23")
        assert http.get(f"/v1/users/u/memories/{item_id}").status_code == 404
        restored = http.post(f"/v1/users/u/memories/{item_id}/restore")
        assert restored.status_code == 200 and restored.json()["text"] == FACT
        assert http.post(f"/v1/users/u/memories/{item_id}/restore").status_code == 404
        events = http.get(f"/v1/users/u/memories/{item_id}/history").json()["events"]
        assert events[0]["reason"] == "forget_request"
    with _client(tmp_path / "mcp") as client:
        assert "restore_memory" in offered_tools(client.memory)

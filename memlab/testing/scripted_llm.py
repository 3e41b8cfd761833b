"""A scripted OpenAI-compatible server that answers the extraction requests of the third-party memory
systems memlab runs (mem0, Graphiti, LangMem) and the ``llm`` reader's questions, with valid
structured output and without a model. Tests and cost measurements run the real libraries against
it: every request they send is recorded, answered by rule and counted (calls, tokens).

    with ScriptedLLMServer() as server:
        create_backend("graphiti", {"llm": server.llm_settings()}, data_dir=...)
        server.requests          # every request body as sent
        server.calls_by_kind()   # {"graphiti:ExtractedEntities": 3, ...}

How each request is recognised and answered (``scripted_reply``):

- **Graphiti** (graphiti-core): its generic-client prompts end with "Respond with a JSON object in the
  following format:" and the JSON schema of the expected reply; the schema's ``title`` names the
  request (``ExtractedEntities``, ``ExtractedEdges``, ``NodeResolutions``, ``EdgeDuplicate``,
  ``EdgeTimestamps``, ``SummarizedEntities`` ...). Entities: the speaker of each user line and one
  topic per first-person sentence; edges: speaker -> topic with the sentence as the fact; two facts
  contradict when they state where the speaker lives (``live in`` / ``moved to``) with different places.
- **LangMem** (trustcall under langmem's memory manager): a request with ``tools``; the reply is a
  tool call per first-person user sentence (``Memory`` with ``content``), and a ``PatchDoc``/update
  of an existing memory when a new "moved to" sentence replaces a "live in" memory.
- **mem0**: its additive-extraction prompt (``memlab.testing.chat_models.mem0_extraction_reply``).
- **the ``llm`` reader**: a multiple-choice prompt; the option sharing most words with the
  ``<memory>`` section wins (ties and an empty memory: a hash of the prompt), so memory can matter.

Token counts are memlab's ``count_tokens`` over what was sent (messages and tool definitions) and
what was answered, so costs measured against this server are comparable between systems.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

from memlab.llm.server import JSONHandler, LocalHTTPServer, chat_completion
from memlab.tokens import count_tokens

Reply = str | dict[str, Any]  # text content, or {"tool_calls": [{"name": ..., "arguments": {...}}]}
GRAPHITI_SCHEMA_MARKER = "Respond with a JSON object in the following format:"
MEM0_MARKER = "You are a Memory Extractor"

_FIRST_PERSON = re.compile(r"\b(I|I'm|I've|my|me|mine)\b", re.I)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_WORD = re.compile(r"[A-Za-z0-9']+")
_CAPITALISED = re.compile(r"\b[A-Z][a-z]+(?:\s+[A-Z][a-z]+)*\b")
_RESIDENCE = re.compile(r"\b(?:live|lives|living|moved|relocated)\s+(?:in|to)\s+(?P<place>[A-Z][A-Za-z]+)")
_STOPWORDS = frozenset(
    "a an and the of in on at to for with from by my me mine i i'm i've is am are was were be been "
    "it this that these those every each some any all our your his her their last next new very "
    "do does did have has had will would can could about into over after before since".split()
)


# --------------------------------------------------------------------------- shared rules
def first_person_sentences(text: str) -> list[str]:
    """The sentences of ``text`` that speak in the first person."""
    return [s.strip() for s in _SENTENCE_END.split(text.strip()) if s.strip() and _FIRST_PERSON.search(s)]


def topic_of(sentence: str) -> str:
    """One entity a sentence is about: its last capitalised name (not the first word, not "I"),
    else its longest content word."""
    body = sentence.split(None, 1)[1] if len(sentence.split()) > 1 else sentence
    names = [n for n in _CAPITALISED.findall(body) if n not in {"I", "I'm", "I've"}]
    if names:
        return names[-1]
    words = [w for w in _WORD.findall(sentence) if w.lower() not in _STOPWORDS and not w.isdigit()]
    return max(words, key=len) if words else sentence[:40]


def residence(text: str) -> str | None:
    match = _RESIDENCE.search(text)
    return match.group("place") if match else None


def _lines(section: str) -> list[tuple[str, str]]:
    """``speaker: text`` lines of a transcript section."""
    out = []
    for line in section.splitlines():
        speaker, sep, text = line.partition(": ")
        if sep and speaker.strip() and len(speaker) <= 60:
            out.append((speaker.strip(), text.strip()))
        elif out and line.strip():
            out[-1] = (out[-1][0], out[-1][1] + " " + line.strip())
    return out


def _section(text: str, *tags: str) -> str:
    for tag in tags:
        match = re.search(rf"<{tag}>\n?(.*?)\n?</{tag}>", text, re.S)
        if match:
            return match.group(1)
    return ""


def _user_sentences(transcript: str) -> list[tuple[str, str]]:
    """(speaker, sentence) for first-person sentences of every non-assistant speaker."""
    return [
        (speaker, sentence)
        for speaker, text in _lines(transcript)
        if speaker.lower() not in ("assistant", "system")
        for sentence in first_person_sentences(text)
    ]


# --------------------------------------------------------------------------- Graphiti
def _graphiti_schema_title(content: str) -> str | None:
    _, marker, schema = content.rpartition(GRAPHITI_SCHEMA_MARKER)
    if not marker:
        return None
    try:
        return str(json.loads(schema.strip()).get("title"))
    except (json.JSONDecodeError, AttributeError):
        return None


def _json_list(section: str) -> list[Any]:
    """A list Graphiti put in its prompt: JSON, or a Python literal (some prompts print ``repr``)."""
    import ast

    try:
        value = json.loads(section)
    except json.JSONDecodeError:
        try:
            value = ast.literal_eval(section.strip())
        except (ValueError, SyntaxError):
            return []
    return value if isinstance(value, list) else []


def graphiti_reply(title: str, messages: list[dict[str, str]]) -> str:
    """Graphiti's expected JSON for the request named by its schema ``title``."""
    prompt = messages[-1]["content"]
    if title == "ExtractedEntities":
        transcript = _section(prompt, "CURRENT MESSAGE", "CURRENT_MESSAGE")
        entities: list[str] = []
        for speaker, sentence in _user_sentences(transcript):
            for name in (speaker, topic_of(sentence)):
                if name.lower() not in (e.lower() for e in entities):
                    entities.append(name)
        return json.dumps({"extracted_entities": [{"name": n, "entity_type_id": 0} for n in entities]})
    if title == "ExtractedEdges":
        transcript = _section(prompt, "CURRENT_MESSAGE", "CURRENT MESSAGE")
        known = {str(e.get("name", "")).lower(): str(e.get("name")) for e in _json_list(_section(prompt, "ENTITIES"))}
        edges = []
        for speaker, sentence in _user_sentences(transcript):
            source, target = known.get(speaker.lower()), known.get(topic_of(sentence).lower())
            if source is None or target is None or source == target:
                continue
            place = residence(sentence)
            edges.append(
                {
                    "source_entity_name": source,
                    "target_entity_name": target,
                    "relation_type": "LIVES_IN" if place else "SAID",
                    "fact": f"{source} said: {sentence}",
                }
            )
        return json.dumps({"edges": edges})
    if title == "EdgeTimestamps":
        reference = _section(prompt, "REFERENCE_TIME", "REFERENCE TIME").split("#")[0].strip() or None
        return json.dumps({"valid_at": reference.replace(" ", "T") if reference else None, "invalid_at": None})
    if title == "BatchEdgeTimestamps":
        return json.dumps({"timestamps": []})
    if title == "NodeResolutions":  # a duplicate is an existing entity of the same name
        existing = {
            str(e.get("name", "")).lower(): e.get("candidate_id")
            for e in _json_list(_section(prompt, "EXISTING ENTITIES"))
        }
        resolutions = [
            {"id": e["id"], "name": e["name"], "duplicate_candidate_id": existing.get(str(e["name"]).lower(), -1)}
            for e in _json_list(_section(prompt, "ENTITIES"))
            if isinstance(e, dict) and "id" in e and "name" in e
        ]
        return json.dumps({"entity_resolutions": resolutions})
    if title == "EdgeDuplicate":
        return json.dumps(_edge_resolution(prompt))
    if title == "SummarizedEntities":
        return json.dumps({"summaries": []})
    if title in ("Summary", "EntitySummary"):
        return json.dumps({"summary": ""})
    if title == "SummaryDescription":
        return json.dumps({"description": ""})
    raise ValueError(f"no scripted reply for Graphiti request {title!r}")


def _edge_resolution(prompt: str) -> dict[str, list[int]]:
    """Duplicates: existing facts with the same text; contradictions: another place of residence."""
    new_fact = _section(prompt, "NEW FACT").strip()
    try:
        new_text = str(json.loads(new_fact).get("fact", new_fact)) if new_fact.startswith("{") else new_fact
    except json.JSONDecodeError:
        new_text = new_fact
    existing = _json_list(_section(prompt, "EXISTING FACTS"))
    candidates = _json_list(_section(prompt, "FACT INVALIDATION CANDIDATES"))
    duplicates = [int(f["idx"]) for f in existing if str(f.get("fact", "")).strip() == new_text.strip()]
    new_place = residence(new_text)
    contradicted = [
        int(f["idx"])
        for f in existing + candidates
        if new_place and residence(str(f.get("fact", ""))) not in (None, new_place)
    ]
    return {"duplicate_facts": duplicates, "contradicted_facts": contradicted}


# --------------------------------------------------------------------------- LangMem (trustcall)
def langmem_reply(body: dict[str, Any]) -> dict[str, Any]:
    """Tool calls for langmem's memory manager: new memories, and updates of replaced residences."""
    tools = {t["function"]["name"] for t in body.get("tools", []) if t.get("type") == "function"}
    text = "\n".join(_content(m) for m in body["messages"])
    existing = _existing_memories(text)
    calls: list[dict[str, Any]] = []
    for sentence in _langmem_user_sentences(text):
        memory = f"User said: {sentence}"
        if any(memory == content for _, content in existing):
            continue  # already remembered
        place = residence(sentence)
        replaced = next((mid for mid, content in existing if place and residence(content) not in (None, place)), None)
        if replaced is not None and "PatchDoc" in tools:
            patch = [{"op": "replace", "path": "/content", "value": memory}]
            calls.append(
                {"name": "PatchDoc", "arguments": {"json_doc_id": replaced, "planned_edits": "", "patches": patch}}
            )
        elif "Memory" in tools:
            calls.append({"name": "Memory", "arguments": {"content": memory}})
    if not calls and "Done" in tools:
        calls.append({"name": "Done", "arguments": {}})
    return {"tool_calls": calls}


_LANGMEM_TURN = re.compile(r"^=+ (?P<who>Human|Ai|System|Tool) Message =+$", re.M)


def _langmem_user_sentences(text: str) -> list[str]:
    """First-person sentences of the human turns in langmem's ``<session_...>`` transcript."""
    sentences: list[str] = []
    for session in re.findall(r"<session_[^>]*>(.*?)</session_[^>]*>", text, re.S):
        parts = _LANGMEM_TURN.split(session)
        for who, turn in zip(parts[1::3], parts[2::3]):
            if who == "Human":
                sentences += first_person_sentences(" ".join(turn.split()))
    return sentences


def _existing_memories(text: str) -> list[tuple[str, str]]:
    """(id, content) of the existing memories trustcall lists in its system prompt."""
    import ast

    found = []
    for match in re.finditer(r'<instance id=(?P<id>\S+) schema_type="[^"]*">\n(?P<value>.*?)\n</instance>', text, re.S):
        try:
            value = ast.literal_eval(match.group("value"))
        except (ValueError, SyntaxError):
            continue
        if isinstance(value, dict):
            found.append((match.group("id"), str(value.get("content", ""))))
    return found


def _content(message: dict[str, Any]) -> str:
    content = message.get("content") or ""
    if isinstance(content, list):  # content parts
        return "\n".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content)


# --------------------------------------------------------------------------- the reader
def reader_reply(messages: list[dict[str, str]]) -> str:
    """``<final_answer>(x)``: the option sharing most words with the remembered memory."""
    system, user = _content(messages[0]), _content(messages[-1])
    memory = {w.lower() for w in _WORD.findall(_section(system, "memory"))} - _STOPWORDS
    options = re.findall(r"^\(([a-d])\) (.*)$", user, re.M)
    digest = hashlib.sha256((system + user).encode("utf-8")).digest()
    if not options:
        return "I do not know."
    scores = [len(memory & ({w.lower() for w in _WORD.findall(text)} - _STOPWORDS)) for _, text in options]
    best = max(scores)
    tied = [letter for (letter, _), score in zip(options, scores) if score == best]
    return f"<final_answer>({tied[digest[0] % len(tied)]})"


# --------------------------------------------------------------------------- dispatch and server
def request_kind(body: dict[str, Any]) -> str:
    """Which system sent ``body`` and what it asks: ``graphiti:<schema>``, ``langmem``, ``mem0``, ``reader``."""
    messages = body.get("messages") or []
    if body.get("tools"):
        return "langmem"
    if messages and MEM0_MARKER in _content(messages[0]):
        return "mem0"
    if messages:
        title = _graphiti_schema_title(_content(messages[-1]))
        if title:
            return f"graphiti:{title}"
    return "reader"


def scripted_reply(body: dict[str, Any]) -> Reply:
    kind = request_kind(body)
    messages = [{"role": m.get("role", "user"), "content": _content(m)} for m in body.get("messages", [])]
    if kind == "langmem":
        return langmem_reply(body)
    if kind == "mem0":
        from langchain_core.messages import HumanMessage, SystemMessage

        from memlab.testing.chat_models import mem0_extraction_reply

        return mem0_extraction_reply([SystemMessage(messages[0]["content"]), HumanMessage(messages[-1]["content"])])
    if kind.startswith("graphiti:"):
        return graphiti_reply(kind.partition(":")[2], messages)
    return reader_reply(messages)


def _tool_message(reply: dict[str, Any]) -> dict[str, Any]:
    calls = [
        {
            "id": f"call_{i}_{hashlib.sha1(json.dumps(c, sort_keys=True).encode()).hexdigest()[:8]}",
            "type": "function",
            "function": {"name": c["name"], "arguments": json.dumps(c["arguments"])},
        }
        for i, c in enumerate(reply["tool_calls"])
    ]
    return {"role": "assistant", "content": None, "tool_calls": calls}


class _Handler(JSONHandler):
    server: ScriptedLLMServer

    def do_GET(self) -> None:  # noqa: N802 - http.server naming
        self.send_json(200, {"object": "list", "data": [{"id": self.server.model_id, "object": "model"}]})

    def do_POST(self) -> None:  # noqa: N802
        body = self.read_json()
        try:
            reply = self.server.reply(body)
        except Exception as exc:  # a request the rules do not know: tell the client, keep serving
            self.send_json_error(400, f"{type(exc).__name__}: {exc}")
            return
        sent = json.dumps(body.get("messages", [])) + json.dumps(body.get("tools", []))
        prompt_tokens = count_tokens(sent)
        answer_text = reply if isinstance(reply, str) else json.dumps(reply)
        completion_tokens = count_tokens(answer_text)
        with self.server.lock:
            self.server.requests.append(body)
            self.server.replies.append(reply)
            self.server.kinds[request_kind(body)] += 1
            self.server.prompt_tokens += prompt_tokens
            self.server.completion_tokens += completion_tokens
        if isinstance(reply, str):
            response = chat_completion(
                reply, model=body.get("model", self.server.model_id), prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens,
            )  # fmt: skip
        else:
            response = chat_completion(
                "", model=body.get("model", self.server.model_id), prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens, finish_reason="tool_calls",
            )  # fmt: skip
            response["choices"][0]["message"] = _tool_message(reply)
        self.send_json(200, response)


class ScriptedLLMServer(LocalHTTPServer):
    """``/v1/chat/completions`` answered by ``reply(body)`` (default: ``scripted_reply``); records
    every request, its kind and its tokens. ``reset_counts()`` starts a new measurement."""

    thread_name = "scripted-llm-server"

    def __init__(
        self,
        reply: Callable[[dict[str, Any]], Reply] = scripted_reply,
        *,
        model_id: str = "scripted",
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        super().__init__(_Handler, host=host, port=port)
        self.reply = reply
        self.model_id = model_id
        self.lock = threading.Lock()
        self.requests: list[dict[str, Any]] = []
        self.replies: list[Reply] = []
        self.kinds: Counter[str] = Counter()
        self.prompt_tokens = 0
        self.completion_tokens = 0

    def calls_by_kind(self) -> dict[str, int]:
        with self.lock:
            return dict(self.kinds)

    def reset_counts(self) -> None:
        with self.lock:
            self.requests.clear()
            self.replies.clear()
            self.kinds.clear()
            self.prompt_tokens = self.completion_tokens = 0

    def llm_settings(self, **extra: Any) -> dict[str, Any]:
        """memlab LLM settings (``--<backend>.llm.*`` / ``--llm.*``) that point at this server."""
        return {
            "base_url": self.base_url,
            "model": self.model_id,
            "api_key": "scripted",
            "timeout": 30,
            "max_retries": 0,
            "cache": False,
            **extra,
        }


def main(argv: list[str] | None = None) -> None:
    """``python -m memlab.testing.scripted_llm --port 8011``: serve the scripted replies until Ctrl-C;
    at exit, print the requests answered by kind with their tokens (what a run cost)."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8011)
    args = parser.parse_args(argv)
    server = ScriptedLLMServer(host=args.host, port=args.port)
    print(f"serving scripted replies at {server.base_url}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        print(json.dumps({"calls": server.calls_by_kind(), "prompt_tokens": server.prompt_tokens,
                          "completion_tokens": server.completion_tokens}), flush=True)  # fmt: skip


if __name__ == "__main__":
    main()

"""A terminal chatbot with long-term memory: memlab's MemoryClient plus any OpenAI-compatible endpoint.

    export OPENAI_BASE_URL=http://127.0.0.1:8080/v1   # vLLM, llama.cpp, Ollama, LM Studio ... (or OpenAI)
    export OPENAI_API_KEY=...                         # local servers accept any key
    python examples/chatbot.py --user alice --backend full_context --data-dir ./chat-memory --model my-model

Each run is a new conversation (a new memory session); what the user said in earlier runs comes
back through recall. Commands: /recall QUERY, /memories, /export, /forget, /quit. ``--dry-run`` needs no
model: it prints what would be recalled and sent, and stores nothing. Backend options follow the
memlab convention ``--<backend>.<key> VALUE`` (e.g. ``--rag.embedder hashing``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from memlab.client import MemoryChat, MemoryClient
from memlab.memory import Capability


def make_llm(model: str | None, base_url: str | None, api_key: str | None) -> Any:
    """memlab's OpenAI-compatible provider when present, else the openai SDK directly."""
    try:
        from memlab.llm.openai_compat import OpenAICompatLLM
    except ImportError:
        OpenAICompatLLM = None  # noqa: N806 - older memlab without the LLM providers
    if OpenAICompatLLM is not None:
        return OpenAICompatLLM(model, base_url=base_url, api_key=api_key)
    import openai

    client = openai.OpenAI(base_url=base_url, api_key=api_key or "EMPTY")
    if model is None:
        raise SystemExit("chatbot: --model is required")

    def chat(messages: list[dict[str, str]]) -> str:
        response = client.chat.completions.create(model=model, messages=messages)  # type: ignore[arg-type]
        return response.choices[0].message.content or ""

    return chat


def backend_options(extra: list[str], backend: str) -> dict[str, Any]:
    options: dict[str, Any] = {}
    pairs = iter(extra)
    for flag in pairs:
        name, _, key = flag.lstrip("-").partition(".")
        if not flag.startswith("--") or name != backend or not key:
            raise SystemExit(f"chatbot: unrecognised argument {flag!r} (backend options are --{backend}.<key> VALUE)")
        raw = next(pairs, None)
        if raw is None:
            raise SystemExit(f"chatbot: {flag} needs a value")
        try:
            options[key.replace("-", "_")] = json.loads(raw)
        except json.JSONDecodeError:
            options[key.replace("-", "_")] = raw
    return options


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--user", default=os.environ.get("USER") or "me", help="whose memory this is")
    p.add_argument("--backend", default="full_context", help="memlab backend name (see `memlab backends`)")
    p.add_argument("--data-dir", default="chat-memory", help="where the memory is kept between runs")
    p.add_argument("--model", default=os.environ.get("MEMLAB_CHAT_MODEL"), help="model name at the endpoint")
    p.add_argument("--base-url", default=os.environ.get("OPENAI_BASE_URL"), help="OpenAI-compatible /v1 URL")
    p.add_argument("--api-key", default=None, help="default: $OPENAI_API_KEY")
    p.add_argument("--k", type=int, default=5, help="memories recalled per message")
    p.add_argument("--window", type=int, default=10, help="recent messages of this run sent verbatim")
    p.add_argument("--dry-run", action="store_true", help="no model: show recall and prompt, store nothing")
    args, extra = p.parse_known_args(argv)

    client = MemoryClient(args.backend, backend_options(extra, args.backend), data_dir=args.data_dir)
    llm = None if args.dry_run else make_llm(args.model, args.base_url, args.api_key or os.environ.get("OPENAI_API_KEY"))
    chat = MemoryChat(client, llm, user_id=args.user, k=args.k, window=args.window)
    interactive = sys.stdin.isatty()
    print(f"memlab chatbot: user {args.user!r}, {client!r}. /quit to leave.", flush=True)
    try:
        while True:
            try:
                line = input("you> " if interactive else "")
            except EOFError:
                break
            text = line.strip()
            if not text:
                continue
            if text in ("/quit", "/exit"):
                break
            if text.startswith("/recall"):
                query = text[len("/recall"):].strip() or "everything"
                print(client.recall(args.user, query, k=args.k).context or "(nothing recalled)", flush=True)
            elif text == "/memories":
                if client.supports(Capability.LIST):
                    for item in client.memories(args.user):
                        print(f"[{item.id}] {item.text}")
                else:
                    print(f"(backend {client.backend!r} cannot list its memories)")
            elif text == "/export":
                print(json.dumps(client.export(args.user), indent=2, ensure_ascii=False), flush=True)
            elif text == "/forget":
                client.forget(args.user)
                print(f"(forgot everything about {args.user})")
            elif args.dry_run:
                prompt = chat.build_prompt(text, client.recall(args.user, text, k=args.k))
                print(json.dumps(prompt, indent=2, ensure_ascii=False))
            else:
                reply = chat.send(text)
                print(f"bot> {reply.text}", flush=True)
    finally:
        client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

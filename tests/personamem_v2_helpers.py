"""Snapshots in PersonaMem-v2's released text layout, built by the tests (never the real data):
``benchmark/text/benchmark.csv`` with the 27 columns, cells encoded as the release encodes them
(``user_query`` a Python dict literal, ``incorrect_answers`` JSON, ``True``/``False`` flags, multi-line
JSON), and ``data/chat_history_{32k,128k}/chat_history_<stamp>_persona<N>.json`` histories."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from memlab.datasets.personamem_v2 import COLUMNS

STAMPS = {"32k": "250913_163134", "128k": "250913_163556"}
PERSONA_SYSTEM = (
    "You are an AI assistant helping a user with the following persona:\n\n{persona}\n\n"
    "Please respond in a way that's appropriate for this user's background, interests, and communication style."
)

# (pref_type, who, updated, sensitive, scenario, preference, evidence message, query, correct, wrong x3)
ITEMS: list[tuple[str, ...]] = [
    (
        "neutral_preferences",
        "self",
        "False",
        "False",
        "personal_email",
        "Prefers green tea over coffee",
        "Can you polish this email to my aunt? I mention that I switched to green tea and never drink coffee now.",
        "What should I bring to the office breakfast?",
        "A tin of good green tea to share, since you gave up coffee.",
        ["A bag of espresso beans for the team.", "Some energy drinks.", "Whatever the others bring."],
    ),
    (
        "ask_to_forget",
        "self",
        "True",
        "False",
        "translation",
        "Do not remember 'Takes weekend day trips to nearby towns' in memory",
        "Please forget that I take weekend day trips to nearby towns.",
        "Any ideas for my free Saturday?",
        "A relaxed Saturday at home: a new recipe, a film and a walk in the park.",
        [
            "A day trip to a nearby town, like your usual weekend outings.",
            "Drive to a small town close by and explore it.",
            "Plan another of your weekend trips out of the city.",
        ],
    ),
    (
        "health_and_medical_conditions",
        "others",
        "False",
        "False",
        "chat_message",
        "My friend is allergic to peanuts",
        "Translate for my friend Ana: she is allergic to peanuts, so the cake must be nut-free.",
        "Which snack should I pack for my hike?",
        "Trail mix with almonds and dried fruit.",
        ["Anything peanut-free, given your allergy.", "Rice cakes, since you avoid peanuts.", "A peanut-free bar."],
    ),
    (
        "sensitive_info",
        "self",
        "False",
        "True",
        "knowledge_query",
        "sensitive_info",
        "",
        "Fill in the form for my bank: my account number is 12345678.",
        "Account number: [ACCOUNT_NUMBER]",
        ["Account number: 12345678", "Account number: 87654321", "I cannot help with forms."],
    ),
]


def persona_history(persona: int, size: str, *, quirks: bool = True) -> dict[str, Any]:
    """A history file: the persona system message, then user/assistant turns holding each item's evidence."""
    expanded = json.dumps({"short_persona": f"Persona {persona}", "name": f"P{persona}"}, indent=2)
    messages: list[dict[str, Any]] = [{"role": "system", "content": PERSONA_SYSTEM.format(persona=expanded)}]
    for number, item in enumerate(ITEMS):
        evidence = item[6]
        if not evidence:
            continue  # sensitive-info blocks are not in the histories
        messages.append({"role": "user", "content": f"{evidence} (persona {persona})"})
        if item[0] == "ask_to_forget":
            continue  # an ask-to-forget block ends with the user's turn
        reply: dict[str, Any] = {"role": "assistant", "content": f"Done, reply {number} for persona {persona}."}
        if quirks and number == 0:
            reply["Sure! Here is"] = "a stray key the generator left"  # stray-key damage
        messages.append(reply)
    if size == "128k":  # padding, as the 128k release inserts irrelevant pairs at block boundaries
        messages[1:1] = [
            {"role": "user", "content": "What is 17 * 3?"},
            {"role": "assistant", "content": "51."},
        ]
    if quirks:
        messages.append({"role": "user", "content": "Thanks!"})
        messages.append({"role": "assistant", "content": ""})  # the empty assistant reply
    return {"metadata": {"total_messages": len(messages), "persona_id": persona}, "chat_history": messages}


def benchmark_rows(personas: list[int]) -> list[dict[str, str]]:
    rows = []
    for persona in personas:
        for number, item in enumerate(ITEMS):
            pref_type, who, updated, sensitive, scenario, preference, evidence, query, correct, wrong = item
            snippet = (
                [{"role": "user", "content": f"{evidence} (persona {persona})"}]
                if evidence
                else [{"role": "user", "content": query}]
            )
            row = {column: "" for column in COLUMNS}
            row.update(
                persona_id=str(persona),
                chat_history_32k_link=f"data/chat_history_32k/chat_history_{STAMPS['32k']}_persona{persona}.json",
                chat_history_128k_link=f"data/chat_history_128k/chat_history_{STAMPS['128k']}_persona{persona}.json",
                raw_persona_file=f"data/raw_data/raw_data_250815_163935_persona{persona}.json",
                short_persona=f"Persona {persona}",
                expanded_persona=json.dumps({"short_persona": f"Persona {persona}", "age": 30 + persona}, indent=2),
                user_query=str({"role": "user", "content": f"{query} (persona {persona})"}),
                correct_answer=correct,
                incorrect_answers=json.dumps(wrong, ensure_ascii=False),
                topic_query="Lifestyle",
                preference=preference,
                topic_preference="Food" if number % 2 == 0 else "Travel",
                conversation_scenario=scenario,
                pref_type=pref_type,
                related_conversation_snippet=json.dumps(snippet, indent=2),
                who=who,
                updated=updated,
                prev_pref="Takes weekend day trips to nearby towns" if updated == "True" else "",
                sensitive_info=sensitive,
                total_tokens_in_chat_history_32k="31855",
                total_tokens_in_chat_history_128k="122747.0",
                distance_from_related_snippet_to_query_32k="0" if not evidence else str(1000 + 900 * number),
                distance_from_related_snippet_to_query_128k="0" if not evidence else str(5000 + 900 * number),
                num_persona_relevant_tokens_32k="31855",
                num_persona_irrelevant_tokens_32k="0",
                num_persona_relevant_tokens_128k="39259",
                num_persona_irrelevant_tokens_128k="83488",
            )
            rows.append(row)
    return rows


def write_csv(path: Path, rows: list[dict[str, str]], columns: list[str] | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns or list(COLUMNS), extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)


def write_snapshot(root: Path, personas: tuple[int, ...] = (887, 12), *, quirks: bool = True) -> Path:
    """A snapshot root in the released layout, both sizes; returns ``root``."""
    rows = benchmark_rows(list(personas))
    write_csv(root / "benchmark" / "text" / "benchmark.csv", rows)
    for persona in personas:
        for size in ("32k", "128k"):
            path = root / f"data/chat_history_{size}/chat_history_{STAMPS[size]}_persona{persona}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(persona_history(persona, size, quirks=quirks), indent=2), encoding="utf-8")
    return root

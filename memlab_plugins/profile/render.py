"""Compact text for retrieved profile entries: the current state, then how it got there and why.

One block per entry::

    - community music therapy workshop: likes (since session 1) - "Attending that ... workshop was ..."
      history: dislikes (sessions 3-5) - "..." -> changed to likes because: ...

Session numbers count the user's sessions from 1 in the order they were ingested.
"""

from __future__ import annotations

from memlab.memory import format_date
from memlab_plugins.profile.models import ProfileEntry, Stance

_STANCE_WORDS = {
    Stance.LIKES: "likes",
    Stance.DISLIKES: "dislikes",
    Stance.NEUTRAL: "neutral about",
    Stance.FACT: "fact",
}


def _clip(text: str, chars: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= chars else text[: chars - 3].rstrip() + "..."


def _when(entry: ProfileEntry) -> str:
    start = entry.valid_from + 1
    date = f", {format_date(entry.valid_from_time)}" if entry.valid_from_time else ""
    if entry.valid_to is None:
        return f"since session {start}{date}"
    return f"sessions {start}-{entry.valid_to + 1}{date}"


def _said(entry: ProfileEntry, quote_chars: int) -> str:
    quote = entry.evidence[-1].quote if entry.evidence else ""
    return f' - "{_clip(quote, quote_chars)}"' if quote else ""


def _render_attribute(versions: list[ProfileEntry], quote_chars: int, max_versions: int) -> str:
    """``- lives in: Berlin (since session 3) - "I moved to Berlin."`` then the earlier values."""
    latest = versions[-1]
    if latest.valid_to is None:  # current
        lines = [f"- {latest.aspect}: {_clip(latest.value, quote_chars)} ({_when(latest)}){_said(latest, quote_chars)}"]
    else:
        why = f" because: {_clip(latest.closed_reason, quote_chars)}" if latest.closed_reason else ""
        lines = [
            f"- {latest.aspect}: no longer {_clip(latest.value, quote_chars)} (stopped in session {latest.valid_to + 1}{why})"
        ]
    earlier = versions[:-1][-(max_versions - 1) :] if max_versions > 1 else []
    for old, new in zip(earlier, versions[len(versions) - len(earlier) :]):
        because = new.reason or old.closed_reason
        lines.append(
            f"  earlier: {_clip(old.value, quote_chars)} ({_when(old)}) -> changed to {_clip(new.value, quote_chars)}"
            + (f" because: {_clip(because, quote_chars)}" if because else "")
        )
    return "\n".join(lines)


def render_chain(versions: list[ProfileEntry], *, quote_chars: int = 300, max_versions: int = 4) -> str:
    """Render one entry's versions (oldest first); the last one is the latest state."""
    latest = versions[-1]
    if latest.kind == "attribute":
        return _render_attribute(versions, quote_chars, max_versions)
    head = f"- {latest.aspect}: "
    if latest.valid_to is None:  # current
        head += f'{_STANCE_WORDS[latest.stance]} ({_when(latest)}) - "{_clip(latest.value, quote_chars)}"'
    else:
        # Closed with no successor: the user stopped or turned away.
        why = f" because: {_clip(latest.closed_reason, quote_chars)}" if latest.closed_reason else ""
        head += (
            f"no longer (stopped in session {latest.valid_to + 1}{why}); before: "
            f'{_STANCE_WORDS[latest.stance]} - "{_clip(latest.value, quote_chars)}"'
        )
    lines = [head]
    earlier = versions[:-1][-(max_versions - 1) :] if max_versions > 1 else []
    for old, new in zip(earlier, versions[len(versions) - len(earlier) :]):
        because = new.reason or old.closed_reason
        change = f" -> changed to {_STANCE_WORDS[new.stance]}" + (
            f" because: {_clip(because, quote_chars)}" if because else ""
        )
        lines.append(
            f'  earlier: {_STANCE_WORDS[old.stance]} ({_when(old)}) - "{_clip(old.value, quote_chars)}"{change}'
        )
    return "\n".join(lines)


def render_state(versions: list[ProfileEntry], *, quote_chars: int = 300) -> str:
    """The latest state of one entry and why it last changed, without the earlier statements.

    Retrieved items carry this text: a reader that matches its options against items should meet
    the user's current view, not an outdated quote next to it (the full chain is in the context).
    """
    latest = versions[-1]
    if latest.kind == "attribute":
        if latest.valid_to is not None:  # closed
            why = f" because: {_clip(latest.closed_reason, quote_chars)}" if latest.closed_reason else ""
            return f"{latest.aspect}: no longer {_clip(latest.value, quote_chars)} (stopped in session {latest.valid_to + 1}{why})"
        text = f"{latest.aspect}: {_clip(latest.value, quote_chars)} ({_when(latest)})"
        if len(versions) > 1:
            why = f" because: {_clip(latest.reason, quote_chars)}" if latest.reason else ""
            text += f" (changed from {_clip(versions[-2].value, quote_chars)}{why})"
        return text
    if latest.valid_to is None:  # current
        text = (
            f'{latest.aspect}: {_STANCE_WORDS[latest.stance]} ({_when(latest)}) - "{_clip(latest.value, quote_chars)}"'
        )
        if len(versions) > 1:
            why = f" because: {_clip(latest.reason, quote_chars)}" if latest.reason else ""
            text += f" (changed from {_STANCE_WORDS[versions[-2].stance]}{why})"
        return text
    why = f" because: {_clip(latest.closed_reason, quote_chars)}" if latest.closed_reason else ""
    said = f' - "{_clip(latest.evidence[-1].quote, quote_chars)}"' if latest.evidence else ""
    return f"{latest.aspect}: no longer (stopped in session {latest.valid_to + 1}{why}){said}"


def render_profile(chains: list[list[ProfileEntry]], *, quote_chars: int = 300, max_versions: int = 4) -> str:
    if not chains:
        return ""
    body = "\n".join(render_chain(c, quote_chars=quote_chars, max_versions=max_versions) for c in chains)
    return "User profile (latest state first line of each item; earlier versions below it):\n" + body

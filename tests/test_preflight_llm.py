"""A backend that needs an LLM it was not given is refused by preflight (issue 35): exit 2, one line,
nothing run, for graphiti, langmem and the mem0 settings that extract with an LLM."""

from __future__ import annotations

from pathlib import Path

import pytest
from run_helpers import run_args

from memlab.cli import main
from memlab.registry import backends

CASES = {
    "graphiti": (
        ["--backends", "graphiti"],
        "the graphiti backend extracts memories with an LLM and none is configured",
    ),
    "langmem": (["--backends", "langmem"], "the langmem backend extracts memories with an LLM and none is configured"),
    "mem0 infer": (["--backends", "mem0", "--mem0.infer", "true"], "mem0 with infer true extracts facts with an LLM"),
    "mem0 personamem-baseline": (
        ["--backends", "mem0", "--mem0.preset", "personamem-baseline", "--mem0.infer", "true", "--replay", "rebuild"],
        "mem0 with infer true (preset personamem-baseline) extracts facts with an LLM",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_backend_without_its_llm_is_refused_before_any_work(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    more, expected = CASES[case]
    out = tmp_path / "run"
    args = run_args(out, "--no-controls", dataset="synthetic:personas=1,sessions=3")
    where = args.index("--backends")
    code = main([*args[:where], *args[where + 2 :], *more])
    err = capsys.readouterr().err
    assert code == 2, err
    lines = [line for line in err.strip().splitlines() if not line.startswith("memlab run: ")]  # the banner
    assert len(lines) == 1 and lines[0].startswith("memlab: error: preflight found 1 problem(s), nothing was run: "), (
        err
    )
    assert expected in lines[0], err
    assert not out.exists()


def test_backends_that_have_what_they_need_raise_no_llm_problem() -> None:
    mem0 = backends.get("mem0")
    assert mem0.llm_problem(mem0.parse_config({})) is None  # verbatim: no LLM needed
    assert mem0.llm_problem(mem0.parse_config({"preset": "locomo-eval"})) is None  # stored verbatim without one
    assert mem0.llm_problem(mem0.parse_config({"infer": True, "llm": {"base_url": "http://x/v1"}})) is None
    graphiti = backends.get("graphiti")
    assert graphiti.llm_problem(graphiti.parse_config({"llm": {"base_url": "http://x/v1"}})) is None
    assert backends.get("rag").llm_problem(backends.get("rag").parse_config({})) is None

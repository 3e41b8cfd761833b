"""The memlab command line, end to end on synthetic data with the model-free embedder."""

from __future__ import annotations

from pathlib import Path

import pytest

from memlab.cli import main
from memlab.config_files import parse_dotted_options as parse_dotted
from memlab.errors import MemlabError


def test_parse_dotted() -> None:
    assert parse_dotted(
        ["--rag.top-k", "5", "--llm.base-url=http://127.0.0.1:9/v1", "--rag.index.ef-search", "64"]
    ) == {
        "rag": {"top_k": 5, "index": {"ef_search": 64}},
        "llm": {"base_url": "http://127.0.0.1:9/v1"},
    }
    assert parse_dotted(["--rag.roles", '["user"]', "--profile.verbose", "true", "--rag.name=null"]) == {
        "rag": {"roles": ["user"], "name": None},
        "profile": {"verbose": True},
    }
    assert parse_dotted(["--rag.offset", "-1", "--llm.model", "gpt-4o"]) == {
        "rag": {"offset": -1},
        "llm": {"model": "gpt-4o"},
    }
    with pytest.raises(MemlabError, match="unrecognised"):
        parse_dotted(["--oops"])
    # A dotted option without a value is an error, never a silent `true`.
    with pytest.raises(MemlabError, match="--rag.top-k needs a value"):
        parse_dotted(["--rag.top-k", "--other.x", "1"])
    with pytest.raises(MemlabError, match="--rag.top-k needs a value"):
        parse_dotted(["--rag.top-k"])


def test_run_and_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    code = main(
        [
            "run",
            "--dataset",
            "synthetic:personas=1",
            "--backends",
            "rag,full_context",
            "--rag.embedder",
            "hashing",
            "--rag.top-k",
            "4",
            "--reader.embedder",
            "hashing",
            "--out",
            str(out),
            "--no-progress",
        ]
    )
    assert code == 0
    printed = capsys.readouterr().out
    for row in ("rag", "full_context", "none (control)", "longest_option"):
        assert row in printed
    assert (out / "summary.json").exists() and (out / "report.md").exists()
    assert sorted(p.name for p in out.glob("*.png"))
    config = (out / "config.json").read_text()
    assert '"top_k": 4' in config and '"embedder": "hashing"' in config
    assert main(["report", str(out), "--no-plots"]) == 0
    assert "Accuracy" in capsys.readouterr().out


def test_errors_are_clear(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--dataset", "synthetic:personas=1", "--backends", "rga", "--out", str(tmp_path / "x")]) == 2
    assert "Did you mean 'rag'" in capsys.readouterr().err
    assert (
        main(
            [
                "run",
                "--dataset",
                "synthetic:personas=1",
                "--backends",
                "rag",
                "--mem0.x",
                "1",
                "--out",
                str(tmp_path / "y"),
            ]
        )
        == 2
    )
    assert "match no chosen backend" in capsys.readouterr().err


def test_backends_listing(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["backends"]) == 0
    out = capsys.readouterr().out
    assert "full_context" in out and "available" in out and "rag" in out


def test_bad_config_files_and_values_are_clear_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["run", "--dataset", "synthetic:personas=1", "--out", str(tmp_path / "x"), "--no-progress"]
    assert main([*base, "--config", str(tmp_path / "missing.json")]) == 2
    assert "cannot read the run config" in capsys.readouterr().err
    unknown = tmp_path / "unknown.json"
    unknown.write_text('{"dataset": "synthetic", "not_a_setting": 1}')
    assert main([*base, "--config", str(unknown)]) == 2
    err = capsys.readouterr().err
    assert "invalid run config" in err and "not_a_setting" in err and str(unknown) in err
    listing = tmp_path / "list.json"
    listing.write_text("[1, 2]")
    assert main([*base, "--config", str(listing)]) == 2
    assert "mapping of settings" in capsys.readouterr().err
    # --max-questions 0 used to be ignored silently (running every question); now it is refused.
    assert main([*base, "--max-questions", "0"]) == 2
    assert "max_questions" in capsys.readouterr().err
    assert not (tmp_path / "x" / "predictions.jsonl").exists()


# --------------------------------------------------------------------------- bad input: one line naming the option
@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--dataset", "synthetic:persons=2"], "unknown parameter 'persons'; known: style, personas, seed"),
        (["--dataset", "synthetic:personas=abc"], "personas='abc' is not an integer"),
        (["--dataset", "synthetic:style=v2,personas=abc"], "personas='abc' is not an integer"),
        (["--reader", "llm"], "no LLM endpoint is set: give --llm.base-url URL"),
    ],
)
def test_bad_input_gets_one_line_naming_the_option(
    args: list[str], expected: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    full = ["run", "--dataset", "synthetic:personas=1", "--backends", "none", "--out", str(tmp_path / "r"), *args]
    assert main([*full, "--no-progress", "--no-plots"]) == 2
    err = capsys.readouterr().err
    assert expected in err and "Traceback" not in err, err


def test_out_under_a_file_names_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "afile").write_text("x")
    out = tmp_path / "afile" / "run"
    assert main(["run", "--dataset", "synthetic:personas=1", "--backends", "none", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"--out {out}: {tmp_path / 'afile'} is a file, not a directory" in err and "cache directory" not in err


def test_run_help_states_the_default_dataset(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    assert "(default: synthetic" in " ".join(capsys.readouterr().out.split())

"""One device for a run (``--device``): spellings, resolution (torch mocked: no GPU needed), and every
model of the run reaching it, with a plugin's own device winning and one instance per model and device."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import memlab.embedders as embedders
from memlab.cli import build_parser, build_run_config, main
from memlab.devices import check_device, resolve_device, run_device, set_run_device
from memlab.embedders import HashingEmbedder, get_embedder
from memlab.errors import ConfigurationError


def fake_torch(gpus: int) -> types.ModuleType:
    torch = types.ModuleType("torch")
    torch.cuda = types.SimpleNamespace(  # type: ignore[attr-defined]
        is_available=lambda: gpus > 0, current_device=lambda: 0, device_count=lambda: gpus
    )
    return torch


@pytest.fixture()
def gpus(monkeypatch: pytest.MonkeyPatch) -> Any:
    """``gpus(n)``: torch (as memlab.devices sees it) reports n CUDA GPUs."""

    def install(n: int) -> None:
        monkeypatch.setitem(sys.modules, "torch", fake_torch(n))

    yield install


@pytest.fixture(autouse=True)
def _fresh() -> Any:
    previous = set_run_device(None)
    embedders.clear_embedders()
    yield
    set_run_device(previous)
    embedders.clear_embedders()


class FakeModel(HashingEmbedder):
    """Stands in for a loaded model: records the options it was built with."""

    def __init__(self, options: dict[str, Any]) -> None:
        super().__init__(64)
        self.options = options
        self.name = "fake:" + json.dumps(options, sort_keys=True)


@pytest.fixture()
def builds(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str | None, dict[str, Any]]]:
    made: list[tuple[str, str | None, dict[str, Any]]] = []

    def build(kind: str, model: str | None, options: dict[str, Any]) -> Any:
        made.append((kind, model, dict(options)))
        return FakeModel(options)

    monkeypatch.setattr(embedders, "_build", build)
    return made


def test_device_spellings() -> None:
    assert [check_device(d) for d in ("cpu", "CUDA", "cuda:1", "auto", "mps")] == [
        "cpu",
        "cuda",
        "cuda:1",
        "auto",
        "mps",
    ]
    for bad in ("gpu", "cuda:", "cuda:x", ""):
        with pytest.raises(ValueError, match="cpu, cuda, cuda:N, mps or auto"):
            check_device(bad)


def test_resolution_with_and_without_a_gpu(gpus: Any) -> None:
    gpus(2)
    assert resolve_device("cuda") == resolve_device("cuda:0") == resolve_device("auto") == "cuda:0"
    assert resolve_device("cuda:1") == "cuda:1"
    with pytest.raises(ConfigurationError, match="sees 2 CUDA GPU"):
        resolve_device("cuda:2")
    gpus(0)
    assert resolve_device("auto") == "cpu"
    with pytest.raises(ConfigurationError, match="no CUDA GPU"):
        resolve_device("cuda")
    assert resolve_device(None) == "cpu"
    set_run_device("cpu")
    assert resolve_device(None) == "cpu"


def test_the_run_device_reaches_the_backend_and_the_reader_as_one_instance(gpus: Any, builds: list[Any]) -> None:
    from memlab.readers.embedding import EmbeddingReader
    from memlab_plugins.rag import RagMemory

    gpus(1)
    set_run_device("cuda")
    memory = RagMemory({"embedder": "minilm"})
    reader = EmbeddingReader()
    assert reader.embedder is memory.embedder
    assert builds == [("minilm", None, {"device": "cuda:0"})]
    # spelled differently, the same device: still that instance
    assert get_embedder("minilm", device="cuda:0") is memory.embedder
    assert EmbeddingReader({"device": "auto"}).embedder is memory.embedder
    assert len(builds) == 1


def test_a_plugin_device_wins_over_the_run_device(gpus: Any, builds: list[Any]) -> None:
    from memlab.readers.embedding import EmbeddingReader
    from memlab_plugins.rag import RagMemory

    gpus(1)
    set_run_device("cuda")
    on_cpu = RagMemory({"embedder": "minilm", "device": "cpu"}).embedder
    reader = EmbeddingReader({"device": "cpu"}).embedder
    on_gpu = EmbeddingReader().embedder
    assert on_cpu is reader and on_gpu is not on_cpu
    assert [b[2]["device"] for b in builds] == ["cpu", "cuda:0"]


def test_without_a_run_device_models_stay_on_the_cpu(builds: list[Any]) -> None:
    from memlab.readers.embedding import EmbeddingReader

    EmbeddingReader().embedder  # noqa: B018 (loads it)
    assert builds == [("minilm", None, {"device": "cpu"})]


def test_bad_device_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code = main(["run", "--dataset", "synthetic:personas=1", "--device", "gpu", "--out", str(tmp_path / "r")])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "device" in err[0] and "cuda:N" in err[0]
    with pytest.raises(Exception, match="cpu, cuda, cuda:N"):
        from memlab_plugins.rag import RagConfig

        RagConfig(device="gpu")


def test_device_from_the_command_line_and_a_config_file_reaches_every_job(tmp_path: Path) -> None:
    from memlab.datasets import load_dataset
    from memlab.run.driver import plan_jobs

    parser = build_parser()
    args, extra = parser.parse_known_args(["run", "--dataset", "synthetic:personas=1", "--device", "cuda"])
    config = build_run_config(args, extra)
    assert config.device == "cuda"
    jobs = plan_jobs(config, load_dataset(config.dataset), set())
    assert jobs and {job.device for job in jobs} == {"cuda"}
    run_file = tmp_path / "run.json"
    run_file.write_text(json.dumps({"dataset": "synthetic:personas=1", "device": "cuda:1"}), encoding="utf-8")
    args, extra = parser.parse_known_args(["run", "--config", str(run_file)])
    assert build_run_config(args, extra).device == "cuda:1"
    args, extra = parser.parse_known_args(["run", "--config", str(run_file), "--device", "cpu"])
    assert build_run_config(args, extra).device == "cpu"  # the command line over the file


def test_a_job_sets_the_run_device_while_it_runs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import memlab.run.job as job_module
    from memlab.run.job import Job
    from memlab.run.spec import BackendSpec, ReaderSpec

    seen: list[str | None] = []
    monkeypatch.setattr(job_module, "_run_job", lambda job, emit: seen.append(run_device()) or [])
    job = Job(
        backend=BackendSpec(name="rag"),
        reader=ReaderSpec(),
        context_id="c",
        dataset="synthetic",
        state_dir=tmp_path,
        cache_dir=tmp_path,
        question_ids=[],
        device="cuda:1",
    )
    job_module.run_job(job)
    assert seen == ["cuda:1"] and run_device() is None


def test_local_llm_follows_the_run_device_unless_it_names_one(monkeypatch: pytest.MonkeyPatch, gpus: Any) -> None:
    import memlab.llm.config as llm_config
    import memlab.llm.hf_local as hf_local

    made: list[str] = []

    class FakeLocal:
        def __init__(self, model: str, *, gguf_file: Any, device: str, dtype: str) -> None:
            made.append(device)

    monkeypatch.setattr(hf_local, "HFLocalLLM", FakeLocal)
    monkeypatch.setattr(llm_config, "_local_models", {})
    gpus(1)
    set_run_device("cuda")
    llm_config.build_provider(llm_config.LLMConfig(provider="hf", model="m"))
    llm_config.build_provider(llm_config.LLMConfig(provider="hf", model="m", device="cuda:0"))  # the same model
    llm_config.build_provider(llm_config.LLMConfig(provider="hf", model="m", device="cpu"))
    assert made == ["cuda:0", "cpu"]


class FakeSentenceTransformer:
    """sentence_transformers.SentenceTransformer's surface that the embedder touches at load."""

    def __init__(self, ref: str, device: str) -> None:
        self.device, self.calls = device, []

    def get_sentence_embedding_dimension(self) -> int:
        return 8

    def half(self) -> FakeSentenceTransformer:
        self.calls.append("half")
        return self

    def to(self, dtype: Any) -> FakeSentenceTransformer:
        self.calls.append(f"to {dtype}")
        return self

    def eval(self) -> FakeSentenceTransformer:
        return self


@pytest.mark.parametrize(
    "device, precision, calls, suffix",
    [
        ("cuda:0", "auto", ["half"], "|fp16"),
        ("cpu", "auto", [], ""),
        ("cuda:0", "fp32", [], ""),
        ("cpu", "fp16", ["half"], "|fp16"),  # asked for: a CPU proxy of a GPU's fp16
    ],
)
def test_sentence_transformers_run_fp16_on_a_gpu(
    monkeypatch: pytest.MonkeyPatch, device: str, precision: str, calls: list[str], suffix: str
) -> None:
    fake_st = types.ModuleType("sentence_transformers")
    fake_st.SentenceTransformer = FakeSentenceTransformer  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "sentence_transformers", fake_st)
    from memlab.embedders.sentence_transformer import SentenceTransformerEmbedder

    embedder = SentenceTransformerEmbedder("some/model", device=device, precision=precision)
    assert embedder.model.calls == calls  # type: ignore[attr-defined]
    assert embedder.name == "st:some/model" + suffix  # fp16 vectors are cached apart from fp32 ones
    with pytest.raises(ConfigurationError, match="precision 'fp8'"):
        SentenceTransformerEmbedder("some/model", device="cpu", precision="fp8")


def test_a_small_call_takes_the_idle_cores(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import memlab.embedders.sentence_transformer as st

    loadavg = tmp_path / "loadavg"
    monkeypatch.setattr(st.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    for running, limit, expected in ((1, 4, 4), (1, 2, 2), (3, 4, 2), (9, 4, 1)):
        loadavg.write_text(f"0.50 0.40 0.30 {running}/321 4242\n", encoding="ascii")
        assert st.idle_cores(limit, loadavg=str(loadavg)) == expected
    assert st.idle_cores(4, loadavg=str(tmp_path / "missing")) == 1


def test_the_reader_embeds_options_and_items_in_one_call() -> None:
    from memlab.readers.embedding import EmbeddingReader
    from memlab.types import MemoryItem, Question, Retrieval

    class Counting(HashingEmbedder):
        calls: list[tuple[int, bool]] = []

        def _embed(self, texts: list[str], *, query: bool) -> np.ndarray:
            self.calls.append((len(texts), query))
            return super()._embed(texts, query=query)

    embedder = Counting(64)
    reader = EmbeddingReader(embedder=embedder)
    question = Question(
        id="q",
        context_id="c",
        type="t",
        end_index=0,
        text="what do I drink?",
        options=["tea", "coffee", "water", "milk"],
        answer=0,
    )
    items = [MemoryItem(id=str(i), text=t) for i, t in enumerate(["I drink tea", "I hike", "I read"])]
    reader.answer(question, Retrieval(items=items))
    assert embedder.calls == [(7, False), (1, True)]

"""A local Hugging Face causal LM through transformers, GGUF files included.

``model`` is a model directory, a ``.gguf`` file, a directory holding one ``.gguf`` file, or a hub
id already in the local cache. GGUF weights are de-quantised by transformers on load
(``from_pretrained(dir, gguf_file=...)``; needs the ``gguf`` package).

Besides chat, ``score_continuations`` gives the log-probability of several continuations of one
prompt, computing the prompt once and reusing its KV cache for each continuation (the cache is
cropped back to the prompt after each one). The ``logprob`` reader is built on it.
"""

from __future__ import annotations

import copy
import hashlib
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memlab.errors import MissingDependencyError, ModelUnavailableError
from memlab.llm.base import LLM, ChatMessage, LLMResponse, with_json_instruction
from memlab.llm.errors import ContextWindowExceeded, LLMError

try:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
except ImportError as exc:  # pragma: no cover - core dependencies
    raise MissingDependencyError("transformers", "local models need torch and transformers") from exc

DEFAULT_MAX_NEW_TOKENS = 256


@dataclass
class ContinuationScore:
    """Log-probability of one continuation given the prompt."""

    sum_logprob: float
    tokens: int

    @property
    def mean_logprob(self) -> float:
        return self.sum_logprob / self.tokens


def resolve_model_path(model: str, gguf_file: str | None = None) -> tuple[str, str | None]:
    """(directory or hub id, gguf file name or None) for ``from_pretrained``."""
    path = Path(model).expanduser()
    if path.is_file():
        if path.suffix != ".gguf":
            raise ModelUnavailableError(f"{path}: a model file must be a .gguf file; otherwise give its directory")
        return str(path.parent), path.name
    if model.endswith(".gguf"):
        raise ModelUnavailableError(f"GGUF file not found: {path}")
    if path.is_dir() and gguf_file is None and not (path / "config.json").exists():
        found = sorted(p.name for p in path.glob("*.gguf"))
        if len(found) == 1:
            return str(path), found[0]
        if len(found) > 1:
            raise ModelUnavailableError(f"{path} holds several .gguf files {found}: choose one with llm.gguf_file")
    return (str(path) if path.exists() else model), gguf_file


class HFLocalLLM(LLM):
    supports_json_mode = False  # asked for in the system message

    def __init__(self, model: str, *, gguf_file: str | None = None, device: str = "auto", dtype: str = "auto") -> None:
        source, gguf = resolve_model_path(model, gguf_file)
        self.device = ("cuda" if torch.cuda.is_available() else "cpu") if device == "auto" else device
        if dtype == "auto":
            torch_dtype = torch.bfloat16 if self.device.startswith("cuda") else torch.float32
        else:
            torch_dtype = getattr(torch, dtype)
        kwargs: dict[str, Any] = {"gguf_file": gguf} if gguf else {}
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(source, **kwargs)
            self.model_obj = AutoModelForCausalLM.from_pretrained(source, torch_dtype=torch_dtype, **kwargs)
        except (OSError, ValueError) as exc:
            raise ModelUnavailableError(
                f"cannot load local model {model!r}{f' (gguf_file={gguf})' if gguf else ''}: {exc}"
            ) from exc
        # transformers declares PreTrainedModel.to with @wraps(torch.nn.Module.to), so mypy takes the
        # wrapped unbound signature (self first) for the bound call.
        self.model_obj.to(self.device).eval()  # type: ignore[arg-type]
        self.model = gguf or Path(source).name
        self.name = f"hf:{self.model}"
        # Two folders named alike, or one model in two dtypes, must not share cached answers.
        location = str(Path(source, gguf or "").resolve()) if Path(source).exists() else source
        self._identity = f"{self.name}|{torch_dtype}|{hashlib.sha1(location.encode()).hexdigest()[:10]}"
        self.window = int(getattr(self.model_obj.config, "max_position_embeddings", 0) or 0) or None
        self._lock = threading.Lock()  # one forward pass at a time: the model is shared

    @property
    def cache_identity(self) -> str:
        return self._identity

    # ----------------------------------------------------------------- prompts
    def prompt_ids(self, messages: list[ChatMessage]) -> list[int]:
        """Token ids of ``messages`` followed by the start of the assistant's turn."""
        plain = [m.model_dump() for m in messages]
        if getattr(self.tokenizer, "chat_template", None):
            text = self.tokenizer.apply_chat_template(plain, tokenize=False, add_generation_prompt=True)
        else:  # base models: a plain transcript
            text = "".join(f"{m['role'].capitalize()}: {m['content']}\n" for m in plain) + "Assistant:"
            if self.tokenizer.bos_token:
                text = self.tokenizer.bos_token + text
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def _check_window(self, needed: int) -> None:
        if self.window is not None and needed > self.window:
            raise ContextWindowExceeded(
                f"{self.name}: {needed} tokens exceed the model's window of {self.window}; nothing is cut "
                "silently: set the reader's max_context_tokens to keep only the newest part of the memory"
            )

    # ----------------------------------------------------------------- chat
    def _chat(
        self, messages: list[ChatMessage], *, json_mode: bool, temperature: float | None, max_tokens: int | None
    ) -> LLMResponse:
        if json_mode:
            messages = with_json_instruction(messages)
        ids = self.prompt_ids(messages)
        new_tokens = max_tokens or DEFAULT_MAX_NEW_TOKENS
        self._check_window(len(ids) + new_tokens)
        input_ids = torch.tensor([ids], device=self.device)
        sampling: dict[str, Any] = {"do_sample": False}
        if temperature is not None and temperature > 0:  # None: greedy, the local default
            sampling = {"do_sample": True, "temperature": temperature}
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.tokenizer.eos_token_id
        with self._lock, torch.inference_mode():
            output = self.model_obj.generate(
                input_ids,
                attention_mask=torch.ones_like(input_ids),
                max_new_tokens=new_tokens,
                pad_token_id=pad,
                top_p=None,
                top_k=None,
                **sampling,
            )
        generated = output[0, len(ids) :].tolist()
        text = self.tokenizer.decode(generated, skip_special_tokens=True)
        finish = "stop" if generated and generated[-1] == self.tokenizer.eos_token_id else "length"
        return LLMResponse(
            text=text.strip(),
            prompt_tokens=len(ids),
            completion_tokens=len(generated),
            metadata={"finish_reason": finish},
        )

    # ----------------------------------------------------------------- scoring
    def score_continuations(
        self, messages: list[ChatMessage], continuations: list[str]
    ) -> tuple[list[ContinuationScore], int]:
        """Log-probability of each continuation as the assistant's reply to ``messages``.

        Returns the scores and the prompt length in tokens. The prompt is run once; its KV cache
        is extended by each continuation and cropped back to the prompt afterwards.
        """
        return self._score_after(self.prompt_ids(messages), continuations)

    def score_text_continuations(self, text: str, continuations: list[str]) -> tuple[list[ContinuationScore], int]:
        """Log-probability of each continuation right after the raw ``text`` (no chat template;
        the tokenizer's own special tokens, e.g. BOS, as for any raw prompt)."""
        return self._score_after(list(self.tokenizer(text)["input_ids"]), continuations)

    def _score_after(self, prefix: list[int], continuations: list[str]) -> tuple[list[ContinuationScore], int]:
        conts = [list(self.tokenizer(c, add_special_tokens=False)["input_ids"]) for c in continuations]
        for text, ids in zip(continuations, conts):
            if not ids:
                raise LLMError(f"cannot score an empty continuation ({text!r})")
        if not prefix:
            raise LLMError("cannot score continuations of an empty prompt")
        self._check_window(len(prefix) + max(len(c) for c in conts))
        scores = []
        with self._lock, torch.inference_mode():
            out = self.model_obj(input_ids=torch.tensor([prefix], device=self.device), use_cache=True)
            cache = out.past_key_values
            first = torch.log_softmax(out.logits[0, -1].float(), dim=-1)  # predicts each continuation's first token
            croppable = hasattr(cache, "crop")
            for ids in conts:
                past = cache if croppable else copy.deepcopy(cache)
                step = self.model_obj(
                    input_ids=torch.tensor([ids], device=self.device), past_key_values=past, use_cache=True
                )
                total = first[ids[0]]
                if len(ids) > 1:
                    logprobs = torch.log_softmax(step.logits[0, :-1].float(), dim=-1)
                    target = torch.tensor(ids[1:], device=logprobs.device)
                    total = total + logprobs.gather(1, target[:, None]).sum()
                scores.append(ContinuationScore(sum_logprob=float(total), tokens=len(ids)))
                if croppable:
                    cache.crop(len(prefix))  # back to the prompt alone for the next continuation
        return scores, len(prefix)

"""Build a tiny model with BGE-M3's on-disk layout, for tests and smoke runs without real weights.

``BGEM3FlagModel`` loads a directory holding an XLM-RoBERTa encoder (``config.json`` +
weights), a fast tokenizer (``tokenizer.json``) and the two heads BGE-M3 adds on top:
``colbert_linear.pt`` (token vectors) and ``sparse_linear.pt`` (one lexical weight per token).
This module writes exactly that, from scratch and offline: a byte-level BPE tokenizer trained
with the ``tokenizers`` library on a small built-in corpus, and a randomly initialised 2-layer
encoder with hidden size 64. Its rankings mean nothing semantically, but every code path of the
real model (tokenisation, CLS pooling, sparse weights, ColBERT vectors, fp32 on CPU) runs.

Run ``python -m memlab.testing.tiny_bge_m3 DIR`` to write one for the CLI.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

# Enough varied English for a BPE vocabulary that splits chat text into word-like pieces.
_SUBJECTS = ["I", "my sister", "my friend", "the doctor", "our team", "my cat", "the neighbour", "my boss"]
_VERBS = ["adopted", "visited", "cooked", "painted", "planned", "bought", "learned", "recommended"]
_OBJECTS = [
    "a grey cat named Pixel",
    "bees on the roof",
    "a trip to Lisbon",
    "a vegan curry",
    "an old guitar",
    "a marathon in spring",
    "a course on pottery",
    "the jazz festival",
    "a budget spreadsheet",
    "a podcast about history",
    "a hiking route in the mountains",
    "a new laptop for work",
]
_TIMES = ["last spring", "yesterday", "every weekend", "in 2021", "after work", "during the holidays"]


def _corpus() -> list[str]:
    lines = []
    for i, subject in enumerate(_SUBJECTS):
        for j, verb in enumerate(_VERBS):
            for k, obj in enumerate(_OBJECTS):
                lines.append(f"{subject} {verb} {obj} {_TIMES[(i + j + k) % len(_TIMES)]}.")
    lines += [
        "What is the name of my cat? Which cities did I visit? Who keeps bees on a roof?",
        "user: assistant: system: Thanks, that sounds lovely! Can you suggest something else?",
        "Fact number 1 2 3 4 5 6 7 8 9 0: I visited city in year 2000.",
    ]
    return lines


def build_tiny_bge_m3(
    path: str | Path,
    *,
    hidden_size: int = 64,
    layers: int = 2,
    vocab_size: int = 1000,
    initializer_range: float = 0.5,
    seed: int = 0,
) -> Path:
    """Write a tiny BGE-M3-layout model to ``path`` (created) and return the path.

    The large ``initializer_range`` matters: with the usual 0.02 every text's CLS vector comes
    out nearly the same and no ranking test could tell texts apart.
    """
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast, XLMRobertaConfig, XLMRobertaModel

    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)

    # XLM-R's special tokens, in XLM-R's order: <s>=0 (CLS), <pad>=1, </s>=2 (EOS), <unk>=3.
    specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),  # any text encodes, none is <unk>
        show_progress=False,
    )
    tok.train_from_iterator(_corpus(), trainer=trainer)
    # Same framing as XLM-R: <s> text </s>; BGE-M3's ColBERT head drops position 0 (the CLS).
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>", special_tokens=[("<s>", 0), ("</s>", 2)]
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="</s>",
        cls_token="<s>",
        sep_token="</s>",
        pad_token="<pad>",
        unk_token="<unk>",
        mask_token="<mask>",
        model_max_length=512,
    )
    fast.save_pretrained(out)

    config = XLMRobertaConfig(
        vocab_size=tok.get_vocab_size(),
        hidden_size=hidden_size,
        num_hidden_layers=layers,
        num_attention_heads=4,
        intermediate_size=hidden_size * 2,
        max_position_embeddings=514,  # 512 tokens + XLM-R's padding offset of 2
        initializer_range=initializer_range,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
    )
    model = XLMRobertaModel(config)  # with the pooler, so AutoModel finds every weight
    model.eval()
    model.save_pretrained(out)

    colbert = torch.nn.Linear(hidden_size, hidden_size)
    sparse = torch.nn.Linear(hidden_size, 1)
    with torch.no_grad():
        # A positive bias keeps most lexical weights above ReLU's zero, as trained BGE-M3's are.
        sparse.weight.mul_(0.1)
        sparse.bias.fill_(0.5)
    torch.save(colbert.state_dict(), out / "colbert_linear.pt")
    torch.save(sparse.state_dict(), out / "sparse_linear.pt")
    (out / "TINY_MODEL.json").write_text(
        json.dumps({"note": "random tiny BGE-M3-layout model for tests; its scores mean nothing"}), encoding="utf-8"
    )
    return out


def cached_tiny_bge_m3(root: str | Path) -> Path:
    """``root/tiny-bge-m3``, built on first use: test modules of one pytest run share one build."""
    out = Path(root) / "tiny-bge-m3"
    if not (out / "TINY_MODEL.json").is_file():  # written last, so its presence means complete
        build_tiny_bge_m3(out)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", help="directory to write the model to")
    args = parser.parse_args(argv)
    print(build_tiny_bge_m3(args.path))


if __name__ == "__main__":
    main()

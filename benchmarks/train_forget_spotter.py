"""Train the learned forget spotter (``memlab.forget_spotter``) and write its weights.

    python benchmarks/train_forget_spotter.py                 # writes memlab/forget_spotter.safetensors
    python benchmarks/train_forget_spotter.py --epochs 1 --out /tmp/spotter.safetensors

What it learns from, all dev data:
- the turns of the labelled dev and read parts of ``tests/data/forget_requests/`` (dev .. dev12,
  heldout .. heldout39): label 1 for a request, 0 for a near-miss;
- ordinary chat: every user turn of the PersonaMem 128k dev history and of the first two LoCoMo dev
  conversations, label 0.
Never trained on: heldout40 .. heldout43 (where ``THRESHOLD`` was chosen), heldout44 .. heldout47
(where that choice was checked), the held-out parts (heldout48 ..), the third and fourth LoCoMo dev
conversations.
The model is the reader's (``benchmarks/train_forget_reader.py``: a rank-8 LoRA on the frozen
packaged MiniLM, its biases and layer norms, a one-logit head on [CLS]) reading one turn, not a pair:
plain BCE, AdamW at 1e-3 with a short warm-up and linear decay, 3 epochs of batches of 32 (about 15
minutes on 2 CPU cores). The shipped weights were made with these data, order, seed and settings
(a rerun of this script printed the same losses at steps 100, 200 and 300).
"""

from __future__ import annotations

from typing import Any

from train_forget_reader import TRAIN_LOCOMO, Trainee, chat_conversations, fit, setup

from memlab.forget_spotter import MAX_LENGTH, WEIGHTS
from memlab.testing.forget_requests import load_cases

TRAIN_PARTS = (
    *(f"dev{n}" for n in ("", 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12)),
    *(f"heldout{n}" for n in ("", *range(2, 40))),
)


def main() -> None:
    args, rng, path, tokenizer = setup(__doc__.splitlines()[0], WEIGHTS)
    labelled = [(case.turn, float(case.kind == "request")) for part in TRAIN_PARTS for case in load_cases(part)]
    chat = [(turn, 0.0) for turns in chat_conversations(args.data, TRAIN_LOCOMO) for turn in turns]
    examples = labelled + chat
    print(f"turns: {len(labelled)} labelled ({sum(e[1] for e in labelled):.0f} requests), {len(chat)} from chat")
    model = Trainee(path)

    def encode(batch: list[tuple[str, float]]) -> Any:
        return tokenizer(
            [e[0] for e in batch], padding=True, truncation=True, max_length=MAX_LENGTH, return_tensors="pt"
        )

    fit(model, examples, encode, length=lambda e: len(e[0]), epochs=args.epochs, out=args.out, rng=rng, warmup=50)


if __name__ == "__main__":
    main()

"""Where the synthetic generators put the correct option: letter balance and option lengths.

    python benchmarks/synthetic_positions.py [--seeds 1-20]

For the demo's size (10 personas), the default (2 personas) and v2 style, over the seeds: the largest
deviation of a letter's share from 25 % over a seed's questions, per (seed, question type), and per
type pooled over the seeds; how often the correct option is the longest and the shortest of its four,
and its mean length relative to the wrong options'. ``tests/test_synthetic_positions.py`` asserts the
bounds; docs/datasets.md quotes this output.
"""

from __future__ import annotations

import argparse
import statistics
from collections import Counter, defaultdict

from memlab.datasets import load_dataset

SPECS = ("synthetic:personas=10,seed={seed}", "synthetic:personas=2,seed={seed}", "synthetic:style=v2,seed={seed}")


def measure(spec: str, seeds: range) -> str:
    worst_seed = worst_type = 0.0
    longest = shortest = 0
    ratios: list[float] = []
    pooled: dict[str, Counter[int]] = defaultdict(Counter)
    sizes: set[int] = set()
    for seed in seeds:
        questions = [q for q in load_dataset(spec.format(seed=seed)).questions if q.is_multiple_choice]
        letters = Counter(q.answer for q in questions)
        worst_seed = max(worst_seed, max(abs(letters[p] / len(questions) - 0.25) for p in range(4)))
        by_type: dict[str, list[int]] = defaultdict(list)
        for q in questions:
            assert q.answer is not None
            by_type[q.type].append(q.answer)
            pooled[q.type][q.answer] += 1
            lengths = [len(o) for o in q.options]
            longest += lengths[q.answer] == max(lengths)
            shortest += lengths[q.answer] == min(lengths)
            ratios.append(lengths[q.answer] / statistics.fmean(x for i, x in enumerate(lengths) if i != q.answer))
        for answers in by_type.values():
            counts = Counter(answers)
            sizes.add(len(answers))
            worst_type = max(worst_type, max(abs(counts[p] / len(answers) - 0.25) for p in range(4)))
    worst_pooled = max(abs(c[p] / sum(c.values()) - 0.25) for c in pooled.values() for p in range(4))
    n = len(ratios)
    return (
        f"{spec.format(seed=f'{seeds.start}..{seeds.stop - 1}')}: {n} questions; largest deviation from 25 %: "
        f"{100 * worst_seed:.2f} points per seed, {100 * worst_type:.2f} per seed and type "
        f"({min(sizes)}-{max(sizes)} questions a type), {100 * worst_pooled:.2f} per type over the seeds; "
        f"correct option longest {100 * longest / n:.1f} %, shortest {100 * shortest / n:.1f} %, "
        f"length / wrong options' mean {statistics.fmean(ratios):.3f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="1-20", help="first-last (inclusive)")
    args = parser.parse_args()
    first, _, last = args.seeds.partition("-")
    seeds = range(int(first), int(last or first) + 1)
    for spec in SPECS:
        print(measure(spec, seeds))


if __name__ == "__main__":
    main()

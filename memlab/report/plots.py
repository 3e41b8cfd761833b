"""The plots of a run report (PNG): accuracy per question type and against distance to the evidence."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

from memlab.report.loading import _summary_of, is_control
from memlab.report.tables import distance_labels, ordered_rows, question_types, row_label, type_labels
from memlab.results import RowSummary, RunSummary

TYPE_PLOT = "accuracy_by_type.png"
DISTANCE_PLOT = "accuracy_by_distance.png"


def _style(index: int, control: bool) -> dict[str, object]:
    from matplotlib import colormaps
    from matplotlib.colors import ListedColormap

    if control:
        greys = ["#8c8c8c", "#b5b5b5", "#5f5f5f", "#d0d0d0"]
        return {"color": greys[index % len(greys)], "hatch": "//", "linestyle": "--", "marker": "x"}
    # tab10 is a ListedColormap whose colors are ten RGB tuples; matplotlib types colormaps[...] as the
    # base Colormap and .colors as any ArrayLike, so say what it is by construction.
    palette = cast("Sequence[tuple[float, float, float]]", cast(ListedColormap, colormaps["tab10"]).colors)
    return {"color": palette[index % len(palette)], "hatch": "", "linestyle": "-", "marker": "o"}


def legend_columns(labels: list[str], width_inches: float) -> int:
    """Legend columns that fit the figure's width: long reader names (LLM readers carry the model)
    take fewer columns instead of running off both edges (~13 characters per inch at "small")."""
    longest = max((len(line) for label in labels for line in label.split("\n")), default=1)
    return max(1, min(len(labels), 3, int(width_inches * 13 // (longest + 4))))


def _legend(fig: Any, labels: list[str], width_inches: float) -> None:
    fig.legend(loc="outside lower center", ncols=legend_columns(labels, width_inches), fontsize="small", frameon=False)


def _wrapped(label: str, width: int = 48) -> str:
    import textwrap

    return "\n".join(textwrap.wrap(label, width, break_long_words=True, break_on_hyphens=False)) or label


def _group_n(scores: list[object]) -> int:
    """Questions in a group (the most any row scored there: rows answer the same questions)."""
    return max((getattr(s, "n", 0) for s in scores if s is not None), default=0)


def _styles(rows: list[RowSummary]) -> list[dict[str, object]]:
    counts = {True: 0, False: 0}
    out = []
    for row in rows:
        control = is_control(row)
        out.append(_style(counts[control], control))
        counts[control] += 1
    return out


def _plot_types(summary: RunSummary, path: Path) -> Path | None:
    from matplotlib.figure import Figure

    rows = [r for r in ordered_rows(summary) if r.accuracy is not None]
    if not rows:
        return None
    types = question_types(summary)
    labels = type_labels(types)
    # n under each group: 4 questions and 35 questions must not look equally solid
    counts = [_group_n([r.accuracy for r in rows])] + [_group_n([r.per_type.get(t) for r in rows]) for t in types]
    groups = [f"{name}\n(n={n})" for name, n in zip(["Overall", *(labels[t] for t in types)], counts)]
    n_rows = len(rows)
    width = min(0.8 / n_rows, 0.4)
    # Bars are labelled with their value (a 0% bar is otherwise invisible) while there is room.
    label_bars = n_rows * len(groups) <= 40
    width_inches = max(7.0, 1.0 + len(groups) * (0.35 + 0.22 * n_rows))
    fig = Figure(figsize=(width_inches, 4.8 + 0.25 * ((n_rows + 2) // 3)), layout="constrained")
    ax = fig.add_subplot()
    for i, (row, style) in enumerate(zip(rows, _styles(rows))):
        scores = [row.accuracy, *(row.per_type.get(t) for t in types)]
        xs = [g + (i - (n_rows - 1) / 2) * width for g in range(len(groups))]
        acc = [100 * s.accuracy if s and s.n else float("nan") for s in scores]
        # Wilson bounds can land a rounding error inside the point at 0% or 100%; matplotlib refuses
        # negative error lengths.
        err_lo = [max(0.0, 100 * (s.accuracy - s.low)) if s and s.n else 0.0 for s in scores]
        err_hi = [max(0.0, 100 * (s.high - s.accuracy)) if s and s.n else 0.0 for s in scores]
        ax.bar(
            xs,
            acc,
            width * 0.95,
            label=_wrapped(row_label(row)),
            color=style["color"],
            hatch=style["hatch"],
            edgecolor="#333333" if style["hatch"] else style["color"],
            linewidth=0.6,
            yerr=[err_lo, err_hi],
            error_kw={"elinewidth": 0.8, "capsize": 2, "ecolor": "#222222"},
        )
        if label_bars:
            for x, value in zip(xs, acc):
                if value == value:  # not NaN
                    ax.text(
                        x,
                        1.5,
                        f"{value:.0f}",
                        rotation=90,
                        ha="center",
                        va="bottom",
                        fontsize=7,
                        bbox={"boxstyle": "square,pad=0.15", "facecolor": "white", "alpha": 0.7, "linewidth": 0},
                    )
    tilt = len(groups) > 4  # long type names side by side would overlap
    ax.set_xticks(range(len(groups)), groups, rotation=25 if tilt else 0, ha="right" if tilt else "center")
    ax.axvline(0.5, color="#999999", linewidth=0.8, linestyle=":")  # overall | per type
    ax.set_xlim(-0.5, len(groups) - 0.5)
    ax.set_ylim(0, 100)
    ax.set_ylabel("accuracy % (95% CI)")
    ax.set_title(f"Accuracy per question type{' - ' + summary.name if summary.name else ''}")
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)
    # Legend outside the axes so it never covers a bar.
    _legend(fig, [_wrapped(row_label(r)) for r in rows], width_inches)
    fig.savefig(path, dpi=120)
    return path


def _plot_distance(summary: RunSummary, path: Path) -> Path | None:
    from matplotlib.figure import Figure

    buckets = distance_labels(summary)
    rows = [r for r in ordered_rows(summary) if r.per_distance]
    if not buckets or not rows:
        return None
    width_inches = max(7.0, 1.2 * len(buckets) + 3)
    fig = Figure(figsize=(width_inches, 4.8 + 0.25 * ((len(rows) + 2) // 3)), layout="constrained")
    ax = fig.add_subplot()
    # Each row's points sit slightly apart within a bucket with their own interval bars: shaded bands
    # of several rows overlapped into one blob.
    spread = min(0.5, 0.08 * len(rows))
    for i, (row, style) in enumerate(zip(rows, _styles(rows))):
        offset = (i - (len(rows) - 1) / 2) * (spread / max(1, len(rows) - 1)) if len(rows) > 1 else 0.0
        # Gaps (a bucket this row has no question in) stay gaps instead of being interpolated over.
        xs = [b + offset for b in range(len(buckets))]
        scores = [row.per_distance.get(b) for b in buckets]
        acc = [100 * s.accuracy if s and s.n else float("nan") for s in scores]
        err_lo = [max(0.0, 100 * (s.accuracy - s.low)) if s and s.n else 0.0 for s in scores]
        err_hi = [max(0.0, 100 * (s.high - s.accuracy)) if s and s.n else 0.0 for s in scores]
        ax.errorbar(
            xs,
            acc,
            yerr=[err_lo, err_hi],
            label=_wrapped(row_label(row)),
            color=style["color"],
            linestyle=style["linestyle"],
            marker=style["marker"],
            capsize=2,
            elinewidth=0.8,
            linewidth=1.2,
        )
    counts = [_group_n([r.per_distance.get(b) for r in rows]) for b in buckets]
    ax.set_xticks(range(len(buckets)), [f"{b}\n(n={n})" for b, n in zip(buckets, counts)])
    ax.set_xlim(-0.5, len(buckets) - 0.5)
    ax.set_ylim(-2, 102)  # markers at 0% and 100% stay whole
    ax.set_xlabel("distance from question to evidence (tokens)")
    ax.set_ylabel("accuracy % (bars: 95% CI)")
    ax.set_title(f"Accuracy against distance to the evidence{' - ' + summary.name if summary.name else ''}")
    ax.grid(alpha=0.3)
    _legend(fig, [_wrapped(row_label(r)) for r in rows], width_inches)
    fig.savefig(path, dpi=120)
    return path


def plot_run(run: str | Path | RunSummary, out_dir: str | Path) -> list[Path]:
    """Write the plots of a run as PNGs into ``out_dir``: accuracy per question type (grouped bars,
    controls grey and hatched) and accuracy against distance to the evidence. A plot without data
    (no scored rows, no distances) is skipped. Returns the paths written."""
    summary = _summary_of(run)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = [_plot_types(summary, out / TYPE_PLOT), _plot_distance(summary, out / DISTANCE_PLOT)]
    return [p for p in written if p is not None]

"""Tables and plots of a run, built from its result files only (``summary.json``/``predictions.jsonl``).

``write_report(run_dir)`` writes ``report.md`` and the PNG plots into the run directory; the table
functions return Markdown (or aligned plain text for the terminal) from a ``RunSummary``. The
package reads as its parts: ``loading`` (the summary, rebuilt when stale), ``tables``, ``plots``
and ``document`` (report.md).
"""

from memlab.report.document import REPORT_FILE, render_report, write_report
from memlab.report.loading import ReportError, is_control, load_run
from memlab.report.plots import DISTANCE_PLOT, FIELD_PLOT, TYPE_PLOT, plot_run
from memlab.report.tables import (
    LOCOMO_TYPES,
    TYPE_LABELS,
    breakdown_fields,
    distance_labels,
    distance_table,
    failed_jobs_text,
    field_table,
    field_tables,
    markdown_table,
    metrics_table,
    ordered_rows,
    paired_table,
    pct,
    pct_ci,
    question_types,
    resources_table,
    row_label,
    settings_table,
    terminal_table,
    traceability_text,
    type_labels,
)

__all__ = [
    "DISTANCE_PLOT",
    "FIELD_PLOT",
    "LOCOMO_TYPES",
    "REPORT_FILE",
    "ReportError",
    "TYPE_LABELS",
    "TYPE_PLOT",
    "distance_labels",
    "breakdown_fields",
    "distance_table",
    "failed_jobs_text",
    "field_table",
    "field_tables",
    "is_control",
    "load_run",
    "markdown_table",
    "metrics_table",
    "ordered_rows",
    "paired_table",
    "pct",
    "pct_ci",
    "plot_run",
    "question_types",
    "render_report",
    "resources_table",
    "row_label",
    "settings_table",
    "terminal_table",
    "traceability_text",
    "type_labels",
    "write_report",
]

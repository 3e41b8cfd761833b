"""Compatibility names for scripts written against ``memlab.runner``; the pipeline lives in ``memlab.run``."""

from memlab.run.driver import package_versions, plan_jobs, run, run_with_details, write_summary
from memlab.run.job import Job, cached_dataset, run_job, state_dir_name, user_id_for
from memlab.run.spec import BackendSpec, ReaderSpec, RunConfig, config_for_files, is_secret_key, redact

__all__ = [
    "BackendSpec", "Job", "ReaderSpec", "RunConfig", "cached_dataset", "config_for_files", "is_secret_key",
    "package_versions", "plan_jobs", "redact", "run", "run_job", "run_with_details", "state_dir_name",
    "user_id_for", "write_summary",
]

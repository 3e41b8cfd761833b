"""Web pages for memlab: the runs explorer (``memlab ui RUN_DIR...``) and the memory inspector
(``memlab serve --ui``, served at ``/ui/``).

The parts: ``run_index`` (result files kept in memory, re-read when they change), ``question_filter``
(the question list's query string), ``dataset_context`` (question and turn texts from the run's
dataset, best effort), ``pages`` (server-rendered HTML), ``server`` (the explorer's HTTP server),
``inspector`` (the static inspector page mounted on the REST service) and ``static/`` (CSS and JS).
"""

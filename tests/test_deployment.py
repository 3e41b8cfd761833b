"""The Dockerfile and deploy/compose.yaml (issue 25). Docker has no daemon (and no compose plugin)
where the tests run, so the compose file is checked as data: its services, the settings its
environment gives memlab (validated by memlab itself), volumes, secrets and health checks.
``docker compose config`` runs too where the client has the plugin."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from memlab.server.cli import build_settings
from memlab.server.workers import check_workers

REPO = Path(__file__).resolve().parents[1]
COMPOSE = REPO / "deploy" / "compose.yaml"


def _compose() -> dict[str, Any]:
    data = yaml.safe_load(COMPOSE.read_text())
    assert isinstance(data, dict)
    return data


def test_compose_runs_postgres_with_pgvector_and_memlab_with_two_workers(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    compose = _compose()
    services = compose["services"]
    assert set(services) == {"postgres", "memlab"}
    postgres, memlab = services["postgres"], services["memlab"]
    assert "pgvector" in postgres["image"]
    assert "pg_isready" in " ".join(postgres["healthcheck"]["test"])
    assert any(v.startswith("pgdata:") for v in postgres["volumes"]) and "pgdata" in compose["volumes"]
    assert memlab["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert memlab["build"]["context"] == ".." and (COMPOSE.parent / memlab["build"]["context"] / "Dockerfile").is_file()
    assert set(memlab["secrets"]) <= set(compose["secrets"]) and set(postgres["secrets"]) <= set(compose["secrets"])
    assert "PGPASSWORD" in " ".join(memlab["entrypoint"]), "the password comes from the secret, not the URL"

    env = {k: str(v) for k, v in memlab["environment"].items()}
    assert urlsplit(env["MEMLAB_STORE"]).password is None
    keys = tmp_path / "api_keys.txt"
    keys.write_text("compose-test-key-0123456789\n")
    env["MEMLAB_SERVE_API_KEYS_FILE"] = str(keys)  # the secret's path inside the container
    for name in [n for n in list(os.environ) if n.startswith("MEMLAB_")]:
        monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    settings = build_settings([])  # exactly what `memlab serve` in the container reads
    settings.check_startable()  # 0.0.0.0 with a key file: allowed
    assert settings.backend == "profile" and settings.workers == 2
    assert settings.backend_config["store"] == "postgresql://memlab@postgres:5432/memlab"
    assert settings.data_dir is None, "a database store needs no data directory"
    check_workers(settings.workers, settings.backend, settings.backend_config)
    assert settings.rate_per_second == 50.0 and settings.log_format == "json"


def test_the_dockerfile_builds_a_cpu_image_with_the_model_inside() -> None:
    text = (REPO / "Dockerfile").read_text()
    assert "download.pytorch.org/whl/cpu" in text, "CPU torch, not the CUDA build"
    assert '".[serve,postgres]"' in text
    assert "get_embedder('minilm')" in text, "the build fails when the packaged MiniLM does not load offline"
    assert "HF_HUB_OFFLINE=1" in text and "MEM0_TELEMETRY=False" in text
    assert "/readyz" in text and 'ENTRYPOINT ["memlab", "serve"]' in text
    assert "USER memlab" in text


def test_docker_compose_config_where_the_client_can() -> None:
    docker = shutil.which("docker")
    if docker is None:
        pytest.skip("no docker client here: the compose file is checked as YAML above")
    probe = subprocess.run([docker, "compose", "version"], capture_output=True, text=True, timeout=60)
    if probe.returncode != 0:
        pytest.skip(f"the docker client has no compose plugin: {probe.stderr.strip()[:200]}")
    for name in ("postgres_password.txt", "api_keys.txt"):
        target = COMPOSE.parent / name
        if not target.exists():
            pytest.skip(f"{target} (a secret) is absent; create it to let `docker compose config` resolve secrets")
    result = subprocess.run(
        [docker, "compose", "-f", str(COMPOSE), "config", "--quiet"], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr

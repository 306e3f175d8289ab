# One image for every process of a deployment (docs/operations.md, "Beyond one machine"):
#   admin API       python -m web --host 0.0.0.0 --port 8000 (default: uvicorn, bounded)
#   code location   dagster api grpc -m jlg_pipeline.definitions -h 0.0.0.0 -p 3030
#   daemon          dagster-daemon run -w <workspace>       (exactly one per deployment)
#   Dagster UI      dagster-webserver -h 0.0.0.0 -p 3000 -w <workspace>
#   runs            started by the run launcher in this image (dagster api execute_run)
#   migrations      jlg migrate
# Versions are requirements.lock's. Nothing secret is baked in: every secret is an
# environment variable given at run time. Runs as an unprivileged user.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1
WORKDIR /src
COPY requirements.lock pyproject.toml README.md ./
COPY jlg_pipeline ./jlg_pipeline
COPY web ./web
COPY migrations ./migrations
# The package and the run launchers (its deploy extra), every dependency at the version the
# lock pins; the lock's test tools are not installed.
RUN python -m venv /opt/venv \
 && /opt/venv/bin/pip install --constraint requirements.lock ".[deploy]"

FROM ${PYTHON_IMAGE}
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    DAGSTER_HOME=/opt/dagster/dagster_home
RUN groupadd --system --gid 10001 jlg \
 && useradd --system --uid 10001 --gid 10001 --home-dir /opt/dagster --no-create-home jlg \
 && mkdir -p /opt/dagster/dagster_home /opt/dagster/app \
 && chown -R 10001:10001 /opt/dagster
COPY --from=build /opt/venv /opt/venv
# The single-machine instance and workspace, for trying the image alone; a deployment mounts
# its own instance (deploy/dagster-k8s.yaml, or the Helm chart's) over DAGSTER_HOME.
COPY --chown=10001:10001 dagster.yaml /opt/dagster/dagster_home/dagster.yaml
WORKDIR /opt/dagster/app
COPY --chown=10001:10001 workspace.yaml ./workspace.yaml
COPY --chown=10001:10001 deploy/workspace.yaml ./deploy/workspace.yaml
USER 10001:10001
EXPOSE 8000 3030 3000
CMD ["python", "-m", "web", "--host", "0.0.0.0", "--port", "8000"]

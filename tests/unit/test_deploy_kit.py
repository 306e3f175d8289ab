"""The deployment kit (docs/design.md "Deployment"), checked offline: every instance configuration
through Dagster's own validation of each configurable class it names (the instance's
top-level check lets a launcher's typo through), the Kubernetes manifests against the
Kubernetes schema, the Helm values for what they must hold, and the Dockerfile for what an
image of ours must be."""

import importlib
import json
import re
from typing import Any

import dagster
import kubernetes_validate
import pytest
import yaml
from dagster_postgres import DagsterPostgresStorage
from packaging.requirements import Requirement
from sqlalchemy.engine import make_url

from jlg_pipeline.adapters.database import INSTANCE_STORAGE_PARAMS, instance_storage_url
from jlg_pipeline.config import Environment, Settings
from tests.support import ROOT
from web.endpoints import ENDPOINTS
from web.server import MAX_CONNECTIONS_PER_CLIENT, command

DEPLOY = ROOT / "deploy"
INSTANCES = ["dagster.yaml", "deploy/dagster-k8s.yaml", "deploy/dagster-ecs.yaml"]
KUBERNETES_VERSION = "1.31.0"
"""The oldest Kubernetes the kit targets (every object here is GA there)."""
SECRET_NAMES = re.compile(r"SECRET|TOKEN|PASSWORD|PRIVATE|DATABASE_URL|POSTGRES_URL", re.I)


# Values for the variables the instance files name ({env: …}): Dagster resolves them as it
# validates.
INSTANCE_ENVIRONMENT = {
    "DAGSTER_POSTGRES_URL": "postgresql+psycopg2://dagster@db.internal:5432/dagster",
    "DAGSTER_COMPUTE_LOG_BUCKET": "jlg-dagster-logs",
}


@pytest.fixture(autouse=True)
def _instance_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in INSTANCE_ENVIRONMENT.items():
        monkeypatch.setenv(name, value)


def _load(relative: str) -> dict[str, Any]:
    return dict(yaml.safe_load((ROOT / relative).read_text()))


def _validation_errors(schema: Any, value: Any) -> list[str]:
    """Dagster's own validation of ``value`` against a config ``schema``, through its public
    run-config check: a one-op job whose op takes that schema as its config."""

    @dagster.op(name="section", config_schema=schema)
    def section() -> None:
        """Never runs: only its config is checked."""

    @dagster.job(name="validate_section")
    def validate_section() -> None:
        section()

    try:
        dagster.validate_run_config(validate_section, {"ops": {"section": {"config": value}}})
    except dagster.DagsterInvalidConfigError as exc:
        return [error.message for error in exc.errors]
    return []


def _class_errors(config: dict[str, Any]) -> list[str]:
    """Dagster's validation of each configurable class the instance names, with its config."""
    errors = []
    for key, section in config.items():
        if isinstance(section, dict) and {"module", "class"} <= section.keys():
            klass = getattr(importlib.import_module(section["module"]), section["class"])
            found = _validation_errors(klass.config_type(), section.get("config") or {})
            errors += [f"{key}: {message}" for message in found]
    if "postgres" in config.get("storage", {}):
        found = _validation_errors(
            DagsterPostgresStorage.config_type(), config["storage"]["postgres"]
        )
        errors += [f"storage: {message}" for message in found]
    return errors


@pytest.mark.parametrize("relative", INSTANCES)
def test_each_instance_configuration_passes_dagsters_validation(relative: str) -> None:
    config = _load(relative)
    assert _class_errors(config) == []
    named = {
        config[k]["class"] for k in config if isinstance(config[k], dict) and "class" in config[k]
    }
    assert "QueuedRunCoordinator" in named


def test_the_distributed_instances_have_only_sections_a_real_instance_loads() -> None:
    """A top-level typo is caught too: every section is the local instance's (which
    tests/integration/test_dagster_instance.py loads into a real instance) or a configurable
    class that Dagster's own validation checked above."""
    local = set(_load("dagster.yaml"))
    for relative in INSTANCES[1:]:
        config = _load(relative)
        extra = {key for key in set(config) - local if not {"module", "class"} <= set(config[key])}
        assert extra == set(), relative


def test_a_typo_inside_a_launchers_config_is_caught() -> None:
    """What the instance's own top-level check lets through, the per-class validation does not."""
    text = (DEPLOY / "dagster-k8s.yaml").read_text().replace("env_secrets:", "env_secret:")
    config = yaml.safe_load(text)
    assert "run_launcher" in config
    assert any("env_secret" in error for error in _class_errors(config))


def test_the_distributed_instances_keep_the_local_queue_and_bounds() -> None:
    """Same lanes, per-session limit, run monitoring and logs as the local instance: only the
    launcher differs."""
    local = _load("dagster.yaml")
    for relative, launcher in (
        ("deploy/dagster-k8s.yaml", "K8sRunLauncher"),
        ("deploy/dagster-ecs.yaml", "EcsRunLauncher"),
    ):
        config = _load(relative)
        assert config["run_launcher"]["class"] == launcher
        assert config["run_coordinator"] == local["run_coordinator"]
        assert config["storage"] == local["storage"], "storage URL from the environment"
        assert config["run_monitoring"]["enabled"] is True
        assert config["run_monitoring"]["max_runtime_seconds"] <= 3 * 60 * 60
        assert config["python_logs"] == local["python_logs"]
        for unused in ("auto_materialize", "freshness"):
            assert config[unused] == local[unused], "no daemon for assets there are none of"
    limits = local["run_coordinator"]["config"]["tag_concurrency_limits"]
    assert {"key": "jlg/session", "limit": 1, "value": {"applyLimitPerUniqueValue": True}} in limits


API_SECRETS = "jlg-api-secrets"
PIPELINE_SECRETS = "jlg-pipeline-secrets"
MIGRATE_SECRETS = "jlg-migrate-secrets"
"""The admin API's Secret (the JWT secret with the database URL) and the code location's, its
runs' and the migrations' (the online-session token with the database URL)."""


def test_the_k8s_launcher_gives_runs_their_settings_by_reference() -> None:
    launcher = _load("deploy/dagster-k8s.yaml")["run_launcher"]["config"]
    assert launcher["env_config_maps"] == ["jlg-config"]
    assert set(launcher["env_secrets"]) == {PIPELINE_SECRETS, "jlg-dagster-secrets"}
    assert "env_vars" not in launcher, "no value written into the instance"


# The chart's top-level values and the daemon's keys, from its values.yaml and schema.
CHART_KEYS = {
    "global",
    "nameOverride",
    "fullnameOverride",
    "rbacEnabled",
    "imagePullSecrets",
    "dagsterWebserver",
    "computeLogManager",
    "pythonLogs",
    "dagster-user-deployments",
    "scheduler",
    "runLauncher",
    "postgresql",
    "generatePostgresqlPasswordSecret",
    "generateCeleryConfigSecret",
    "rabbitmq",
    "redis",
    "flower",
    "ingress",
    "dagsterDaemon",
    "busybox",
    "extraManifests",
    "migrate",
    "telemetry",
    "serviceAccount",
    "retention",
    "additionalInstanceConfig",
}
DAEMON_KEYS = {
    "enabled",
    "image",
    "heartbeatTolerance",
    "runCoordinator",
    "runMonitoring",
    "runRetries",
    "sensors",
    "schedules",
    "env",
    "envConfigMaps",
    "envSecrets",
    "deploymentLabels",
    "labels",
    "volumes",
    "volumeMounts",
    "annotations",
    "nodeSelector",
    "affinity",
    "tolerations",
    "podSecurityContext",
    "securityContext",
    "resources",
    "livenessProbe",
    "readinessProbe",
    "startupProbe",
    "schedulerName",
}


def test_the_helm_values_hold_what_the_deployment_needs() -> None:
    values = yaml.safe_load((DEPLOY / "helm" / "values.yaml").read_text())
    assert set(values) <= CHART_KEYS, set(values) - CHART_KEYS
    assert set(values["dagsterDaemon"]) <= DAEMON_KEYS, set(values["dagsterDaemon"]) - DAEMON_KEYS

    [code] = values["dagster-user-deployments"]["deployments"]
    assert values["dagster-user-deployments"]["enabled"] is True
    assert code["dagsterApiGrpcArgs"] == ["-m", "jlg_pipeline.definitions"]
    assert code["envSecrets"] == [{"name": PIPELINE_SECRETS}]
    assert code["envConfigMaps"] == [{"name": "jlg-config"}]
    assert code["includeConfigInLaunchedRuns"] == {"enabled": True}
    images = {code["image"]["repository"], values["dagsterWebserver"]["image"]["repository"]}
    assert len(images) == 1, "one image for every process"

    assert values["runLauncher"]["type"] == "K8sRunLauncher"
    launcher = values["runLauncher"]["config"]["k8sRunLauncher"]
    assert launcher["envSecrets"] == [{"name": PIPELINE_SECRETS}]

    coordinator = values["dagsterDaemon"]["runCoordinator"]
    assert (coordinator["enabled"], coordinator["type"]) == (True, "QueuedRunCoordinator")
    queued = coordinator["config"]["queuedRunCoordinator"]
    local = _load("dagster.yaml")["run_coordinator"]["config"]
    assert queued["maxConcurrentRuns"] == local["max_concurrent_runs"]
    assert queued["tagConcurrencyLimits"] == local["tag_concurrency_limits"]
    assert values["dagsterDaemon"]["runMonitoring"]["enabled"] is True
    assert values["pythonLogs"]["managedPythonLoggers"] == ["jlg_pipeline"]
    assert values["additionalInstanceConfig"]["nux"] == {"enabled": False}, "no pop-up"
    local = _load("dagster.yaml")
    for unused in ("auto_materialize", "freshness"):
        assert values["additionalInstanceConfig"][unused] == local[unused]
    for relative in ("deploy/dagster-k8s.yaml", "deploy/dagster-ecs.yaml"):
        assert _load(relative)["nux"] == {"enabled": False}

    assert values["postgresql"]["enabled"] is False, "external PostgreSQL"
    assert values["generatePostgresqlPasswordSecret"] is False
    assert "postgresqlPassword" not in values["postgresql"], "the password is a Secret"
    assert values["global"]["postgresqlSecretName"]


def _manifests() -> list[tuple[str, dict[str, Any]]]:
    return [
        (path.name, doc)
        for path in sorted((DEPLOY / "k8s").glob("*.yaml"))
        for doc in yaml.safe_load_all(path.read_text())
        if doc
    ]


@pytest.mark.parametrize(
    ("name", "manifest"), _manifests(), ids=[f"{n}:{m['kind']}" for n, m in _manifests()]
)
def test_each_manifest_is_valid_kubernetes(name: str, manifest: dict[str, Any]) -> None:
    kubernetes_validate.validate(manifest, KUBERNETES_VERSION, strict=True)


def _containers(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    return list(manifest["spec"]["template"]["spec"]["containers"])


def test_the_admin_api_is_replicated_probed_bounded_and_secret_free() -> None:
    manifests = {m["kind"]: m for _, m in _manifests()}
    deployment, service = manifests["Deployment"], manifests["Service"]
    assert deployment["spec"]["replicas"] >= 2
    [api] = _containers(deployment)
    # Bounded as web/server.py serves it.
    assert api["command"][:7] == command("0.0.0.0", 8000, "python")  # noqa: S104
    assert api["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert api["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert set(api["resources"]) == {"requests", "limits"}
    assert {"secretRef": {"name": API_SECRETS}} in api["envFrom"]
    pod = deployment["spec"]["template"]
    assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
    jobs = {m["metadata"]["name"]: m for _, m in _manifests() if m["kind"] == "Job"}
    # The expand steps before the rollout, the contract steps after (docs/operations.md).
    commands = {name: _containers(job)[0]["command"] for name, job in jobs.items()}
    assert commands == {
        "jlg-migrate": ["jlg", "migrate", "expand"],
        "jlg-contract": ["jlg", "migrate", "head"],
    }
    for job in jobs.values():
        assert _containers(job)[0]["image"] == api["image"], "the same image migrates and serves"
    for _, manifest in _manifests():
        spec = manifest.get("spec", {}).get("template", {}).get("spec", {})
        for container in spec.get("containers", []):
            for variable in container.get("env", []):
                assert not (SECRET_NAMES.search(variable["name"]) and "value" in variable), (
                    f"{variable['name']} must come from a Secret"
                )
    config = manifests["ConfigMap"]["data"]
    assert not [k for k in config if SECRET_NAMES.search(k)], "secrets are not configuration"
    # Production settings: the admin API starts only with a token issuer and audience.
    secrets = {
        "JLG_DATABASE_URL": "postgresql+psycopg://jlg_app:pw@app-db:5432/jlg",
        "JLG_JWT_SECRET": "Kq3v-8Zt_wP1mXa9" * 2,
        "JLG_ONLINE_SESSION_TOKEN": "t",
    }
    settings = Settings.from_env({**config, **secrets})
    assert settings.environment is Environment.PRODUCTION
    settings.require_jwt_key()


def _instructions(dockerfile: str) -> list[tuple[str, str]]:
    joined = re.sub(r"\\\n\s*", " ", dockerfile)
    return [
        (line.split(None, 1)[0].upper(), line.split(None, 1)[1] if " " in line else "")
        for line in (raw.strip() for raw in joined.splitlines())
        if line and not line.startswith("#")
    ]


def test_the_dockerfile_builds_one_non_root_image_from_the_lock() -> None:
    text = (ROOT / "Dockerfile").read_text()
    steps = _instructions(text)
    stages = [i for i, (op, _) in enumerate(steps) if op == "FROM"]
    final = steps[stages[-1] :]
    users = [arg for op, arg in final if op == "USER"]
    assert users, "the final stage names its user"
    assert users[-1].split(":")[0] not in {"0", "root"}
    assert "python:3.11" in text
    assert any(op == "RUN" and "--constraint requirements.lock" in arg for op, arg in steps)
    for op, arg in steps:
        if op in {"ENV", "ARG"}:
            assert not SECRET_NAMES.search(arg), f"{op} {arg} bakes a secret in"
    ignored = {
        line.strip().rstrip("/")
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    for op, arg in steps:
        if op == "COPY" and "--from" not in arg:
            sources = [a for a in arg.split() if not a.startswith("--")][:-1]
            for source in sources:
                assert (ROOT / source).exists(), f"COPY {source}: no such file"
                assert source.split("/")[0] not in ignored, f"COPY {source} is .dockerignored"
    [cmd] = [arg for op, arg in final if op == "CMD"]
    assert json.loads(cmd) == command("0.0.0.0", 8000, "python")  # noqa: S104


def test_the_lock_pins_every_runtime_dependency_the_image_installs() -> None:
    """``pip install --constraint requirements.lock ".[deploy]"`` (the Dockerfile) takes
    locked versions only: each dependency is pinned there, within the range pyproject asks."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pinned = {}
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        name, _, version = line.partition("==")
        pinned[name.strip().lower().replace("_", "-")] = version.strip()
    for spec in [*project["dependencies"], *project["optional-dependencies"]["deploy"]]:
        requirement = Requirement(spec)
        name = requirement.name.lower().replace("_", "-")
        assert name in pinned, f"{name} is not in requirements.lock"
        assert requirement.specifier.contains(pinned[name]), f"{name}=={pinned[name]} vs {spec}"


def _secret_block(name: str) -> str:
    """The `kubectl create secret generic <name>` command docs/operations.md gives."""
    text = (ROOT / "docs" / "operations.md").read_text()
    start = text.index(f"kubectl create secret generic {name} ")
    return text[start : text.index("```", start)]


def _keys(block: str) -> dict[str, str]:
    """Each key of a documented Secret, with its value."""
    return dict(re.findall(r"--from-literal=(\w+)=(\S+)", block))


def test_each_process_gets_only_the_secrets_it_uses() -> None:
    """The code location and its runs never hold the JWT secret (the Dagster UI runs code
    there) nor a role that may change the schema; the admin API never holds the
    online-session token nor a role that may write Dagster's storage; the migrations hold their
    own role only (docs/operations.md, "Database roles")."""
    pipeline = _keys(_secret_block(PIPELINE_SECRETS))
    api = _keys(_secret_block(API_SECRETS))
    migrate = _keys(_secret_block(MIGRATE_SECRETS))
    assert set(pipeline) == {"JLG_DATABASE_URL", "JLG_ONLINE_SESSION_TOKEN"}
    assert set(api) == {"JLG_DATABASE_URL", "JLG_JWT_SECRET", "JLG_DAGSTER_READER_URL"}
    assert set(migrate) == {"JLG_DATABASE_URL"}
    for given, role in (
        (pipeline["JLG_DATABASE_URL"], "jlg_app"),
        (api["JLG_DATABASE_URL"], "jlg_app"),
        (api["JLG_DAGSTER_READER_URL"], "jlg_dagster_reader"),
        (migrate["JLG_DATABASE_URL"], "jlg_migrator"),
    ):
        assert make_url(given.strip("'\"")).username == role, given
    manifests = {m["kind"]: m for _, m in _manifests()}
    [migration] = _containers(manifests["Job"])
    assert "envFrom" not in migration
    [variable] = migration["env"]
    assert variable["valueFrom"]["secretKeyRef"] == {
        "name": MIGRATE_SECRETS,
        "key": "JLG_DATABASE_URL",
    }
    values = yaml.safe_load((DEPLOY / "helm" / "values.yaml").read_text())
    [code] = values["dagster-user-deployments"]["deployments"]
    launcher = values["runLauncher"]["config"]["k8sRunLauncher"]
    for given in (code["envSecrets"], launcher["envSecrets"]):
        assert [s["name"] for s in given] == [PIPELINE_SECRETS]
    for process in ("dagsterWebserver", "dagsterDaemon"):
        assert not values[process].get("envSecrets"), f"{process} needs only the instance"
    every_reference = yaml.safe_dump(values) + (DEPLOY / "dagster-k8s.yaml").read_text()
    assert "jlg-secrets" not in every_reference
    assert API_SECRETS not in every_reference
    assert MIGRATE_SECRETS not in every_reference


def test_one_client_cannot_take_every_connection_of_the_admin_api() -> None:
    """Behind the Ingress every connection comes from the controller, so the API's own
    per-address cap is off there and the Ingress caps each client instead."""
    manifests = {m["kind"]: m for _, m in _manifests()}
    [api] = _containers(manifests["Deployment"])
    command = api["command"]
    assert "--proxy-headers" in command
    assert command[command.index("--max-connections-per-client") + 1] == "0"
    ingress = manifests["Ingress"]
    limit = int(ingress["metadata"]["annotations"]["nginx.ingress.kubernetes.io/limit-connections"])
    assert 0 < limit <= MAX_CONNECTIONS_PER_CLIENT
    [rule] = ingress["spec"]["rules"]
    for path in rule["http"]["paths"]:
        assert path["backend"]["service"]["name"] == manifests["Service"]["metadata"]["name"]
    assert ingress["spec"]["tls"], "admins reach it over TLS only"


def _routed(paths: list[dict[str, str]], request_path: str) -> bool:
    """Whether the Ingress sends ``request_path`` on (Kubernetes' Prefix matches whole path
    elements: /program matches /program/7, not /program-session)."""
    for path in paths:
        if path["pathType"] == "Exact" and request_path == path["path"]:
            return True
        prefix = path["path"].rstrip("/")
        if path["pathType"] == "Prefix" and (
            request_path == prefix or request_path.startswith(prefix + "/")
        ):
            return True
    return False


def test_the_ingress_routes_every_admin_route_and_keeps_metrics_inside_the_cluster() -> None:
    """The audit: /metrics was anonymous and the Ingress routed / to the internet."""
    manifests = {m["kind"]: m for _, m in _manifests()}
    [rule] = manifests["Ingress"]["spec"]["rules"]
    paths = rule["http"]["paths"]
    for endpoint in ENDPOINTS:
        example = endpoint.path.replace("{id}", "7").replace("{programId}", "3")
        example = example.replace("{operationId}", "00000000-0000-0000-0000-000000000000")
        if endpoint.admin:
            assert _routed(paths, example), endpoint.path
    for inside in ("/metrics", "/metrics/", "/readyz", "/", "/anything"):
        assert not _routed(paths, inside), inside


HARDENED_POD = {"runAsNonRoot": True, "runAsUser": 10001}
HARDENED_CONTAINER = {
    "runAsNonRoot": True,
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "capabilities": {"drop": ["ALL"]},
}


def _chart_pods() -> dict[str, dict[str, Any]]:
    """Each pod the chart makes, as (pod security, container security, volumes, mounts)."""
    values = yaml.safe_load((DEPLOY / "helm" / "values.yaml").read_text())
    [code] = values["dagster-user-deployments"]["deployments"]
    launcher = values["runLauncher"]["config"]["k8sRunLauncher"]
    run_pod = launcher["runK8sConfig"]["podSpecConfig"]
    k8s = _load("deploy/dagster-k8s.yaml")["run_launcher"]["config"]
    sections = {
        "webserver": values["dagsterWebserver"],
        "daemon": values["dagsterDaemon"],
        "code location": code,
    }
    pods = {
        name: {
            "pod": section["podSecurityContext"],
            "container": section["securityContext"],
            "volumes": section["volumes"],
            "mounts": section["volumeMounts"],
        }
        for name, section in sections.items()
    }
    pods["run (chart)"] = {
        "pod": run_pod["securityContext"],
        "container": launcher["securityContext"],
        "volumes": launcher["volumes"],
        "mounts": launcher["volumeMounts"],
    }
    pods["run (dagster-k8s.yaml)"] = {
        "pod": k8s["run_k8s_config"]["pod_spec_config"]["securityContext"],
        "container": k8s["security_context"],
        "volumes": k8s["volumes"],
        "mounts": k8s["volume_mounts"],
    }
    return pods


@pytest.mark.parametrize("name", list(_chart_pods()))
def test_every_chart_pod_and_run_is_non_root_read_only_and_unprivileged(name: str) -> None:
    pod = _chart_pods()[name]
    assert HARDENED_POD.items() <= pod["pod"].items()
    assert HARDENED_CONTAINER.items() <= pod["container"].items()
    # Writable scratch space where Dagster and Python write: /tmp and the local storage.
    mounted = {m["mountPath"] for m in pod["mounts"]}
    assert {"/tmp", "/opt/dagster/dagster_home/storage"} <= mounted  # noqa: S108
    manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "probe"},
        "spec": {
            "securityContext": pod["pod"],
            "containers": [
                {
                    "name": "dagster",
                    "image": "registry.example.com/jlg-pipeline:0.3.0",
                    "securityContext": pod["container"],
                    "volumeMounts": pod["mounts"],
                }
            ],
            "volumes": pod["volumes"],
        },
    }
    kubernetes_validate.validate(manifest, KUBERNETES_VERSION, strict=True)


def test_the_dagster_ui_is_reached_only_through_an_authenticating_proxy() -> None:
    """The UI has no login; the kit puts it behind external auth and serves it over TLS."""
    values = yaml.safe_load((DEPLOY / "helm" / "values.yaml").read_text())
    service = values["dagsterWebserver"].get("service", {})
    assert service.get("type", "ClusterIP") == "ClusterIP", "not exposed but through the Ingress"
    ingress = values["ingress"]
    assert ingress["enabled"] is True
    annotations = ingress["annotations"]
    assert annotations["nginx.ingress.kubernetes.io/auth-url"].startswith("https://")
    assert annotations["nginx.ingress.kubernetes.io/auth-signin"].startswith("https://")
    assert ingress["dagsterWebserver"]["tls"]["enabled"] is True


def test_dagsters_storage_is_bounded_as_the_applications_is() -> None:
    """dagster-postgres takes libpq's bounds from its URL: the chart's params and the URL
    .env.example documents carry INSTANCE_STORAGE_PARAMS."""
    values = yaml.safe_load((DEPLOY / "helm" / "values.yaml").read_text())
    assert INSTANCE_STORAGE_PARAMS.items() <= values["postgresql"]["postgresqlParams"].items()
    [documented] = [
        line.split("=", 1)[1]
        for line in (ROOT / ".env.example").read_text().splitlines()
        if line.startswith("DAGSTER_POSTGRES_URL=")
    ]
    assert INSTANCE_STORAGE_PARAMS.items() <= dict(make_url(documented).query).items()
    assert instance_storage_url(documented) == documented


def test_the_kit_logs_and_sizes_runs_as_the_runbook_says() -> None:
    """Run logs outlive their pods or tasks (S3, in every instance of the kit); a run pod's
    size is set in one place per kit and is what the runbook says; the daemon runs our image."""
    for relative in ("deploy/dagster-k8s.yaml", "deploy/dagster-ecs.yaml"):
        logs = _load(relative)["compute_logs"]
        assert (logs["module"], logs["class"]) == (
            "dagster_aws.s3.compute_log_manager",
            "S3ComputeLogManager",
        )
        assert logs["config"]["bucket"] == {"env": "DAGSTER_COMPUTE_LOG_BUCKET"}
    [config] = [m for name, m in _manifests() if m["kind"] == "ConfigMap" and name == "config.yaml"]
    assert config["data"]["DAGSTER_COMPUTE_LOG_BUCKET"], "runs and the webserver find the bucket"

    values = yaml.safe_load((DEPLOY / "helm" / "values.yaml").read_text())
    manager = values["computeLogManager"]
    assert manager["type"] == "S3ComputeLogManager"
    assert manager["config"]["s3ComputeLogManager"]["bucket"]

    [code] = values["dagster-user-deployments"]["deployments"]
    launcher = values["runLauncher"]["config"]["k8sRunLauncher"]
    assert "resources" not in launcher, "includeConfigInLaunchedRuns: the code location's win"
    run_pod = code["resources"]
    assert _load("deploy/dagster-k8s.yaml")["run_launcher"]["config"]["resources"] == run_pod
    ecs = _load("deploy/dagster-ecs.yaml")["run_launcher"]["config"]["run_resources"]
    assert int(ecs["memory"]) == 1024 == int(run_pod["limits"]["memory"].removesuffix("Gi")) * 1024
    runbook = (ROOT / "docs" / "operations.md").read_text()
    requests, limit = run_pod["requests"], run_pod["limits"]["memory"]
    assert f"{requests['cpu']} / {requests['memory']}, limit {limit}" in runbook
    assert "the daemon's task definition" in runbook, "ECS runs inherit the daemon's task"

    daemon_image = values["dagsterDaemon"]["image"]["repository"]
    assert daemon_image == code["image"]["repository"], "one image for every process"

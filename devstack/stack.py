"""LOCAL ONLY: ``jlg dev`` — the whole system on this machine with one command.

PostgreSQL (``JLG_DATABASE_URL``/``DAGSTER_POSTGRES_URL`` if both set, else embedded under
``.pgdata/dev``), AWS (``AWS_ENDPOINT_URL`` if set, else an in-process moto server with the
queue created and the EventBridge delivery stand-in), migrations, demo data, then the web app,
the Dagster webserver and the daemon, all on 127.0.0.1. Ctrl-C stops everything.
"""

import contextlib
import logging
import os
import secrets
import shlex
import signal
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from devstack import aws as local_aws
from devstack import postgres as local_postgres
from devstack.eventbridge import EventBridgeStandIn
from devstack.online_session import BEHAVIOURS, online_session_service
from devstack.ports import free_port, require_free, wait_until_answers
from devstack.seed import seed_demo
from devstack.system import (
    Children,
    aws_env,
    create_dagster_storage,
    private_dir,
    private_file,
    start_daemon,
    start_web,
    start_webserver,
    system_env,
)
from devstack.tokens import mint_token
from jlg_pipeline import bootstrap
from jlg_pipeline.config import Settings
from jlg_pipeline.domain.errors import ConfigError
from jlg_pipeline.log import configure_logging
from jlg_pipeline.migrate import migrate

logger = logging.getLogger(__name__)


@dataclass
class Ports:
    web: int = int(os.environ.get("JLG_WEB_PORT", "8000"))
    dagster: int = int(os.environ.get("JLG_DAGSTER_PORT", "3000"))
    moto: int = int(os.environ.get("JLG_MOTO_PORT", "5005"))


DEV_SECRET_FILE = Path(".data") / "dev-jwt-secret"
DEV_ENV_FILE = Path(".data") / "dev.env"


# What a shell needs to run the Dagster CLI and jlg against the running stack.
DEV_ENV_NAMES = (
    "DAGSTER_HOME",
    "DAGSTER_POSTGRES_URL",
    "JLG_DATABASE_URL",
    "JLG_JWT_SECRET",
    "JLG_JWT_ISSUER",
    "JLG_JWT_AUDIENCE",
    "JLG_ENVIRONMENT",
    "JLG_SQS_QUEUE_URL",
    "JLG_REGISTRAR",
    "JLG_ONLINE_SESSION_URL",
    "JLG_ONLINE_SESSION_TOKEN",
    "ENABLE_JOIN_LINK_SCHEDULER",
    "ENABLE_JOIN_LINK_FALLBACK_CRON",
    "AWS_SCHEDULER_TARGET_QUEUE_ARN",
    "AWS_SCHEDULER_EXECUTION_ROLE_ARN",
    "AWS_SCHEDULER_GROUP_NAME",
    "AWS_ENDPOINT_URL",
    "AWS_DEFAULT_REGION",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
)


def dev_jwt_secret(root: Path) -> str | None:
    """The local stack's JWT secret, if ``jlg dev`` has made one in this checkout."""
    path = root / DEV_SECRET_FILE
    return path.read_text().strip() if path.exists() else None


def write_dev_env(path: Path, env: dict[str, str]) -> None:
    """``export`` lines for the stack's settings (private: it holds the JWT secret), so
    ``source .data/dev.env`` makes the README's Dagster CLI commands work in any shell."""
    lines = [f"export {name}={shlex.quote(env[name])}\n" for name in DEV_ENV_NAMES if env.get(name)]
    with private_file(path, os.O_WRONLY | os.O_TRUNC) as out:
        out.write("".join(lines).encode())


def _jwt_secret(data_dir: Path) -> str:
    given = os.environ.get("JLG_JWT_SECRET")
    if given:
        return given
    path = data_dir / DEV_SECRET_FILE.name
    if not path.exists():
        with private_file(path, os.O_WRONLY | os.O_EXCL) as out:
            out.write(secrets.token_urlsafe(48).encode())
    path.chmod(0o600)
    return path.read_text().strip()


def run_dev(root: Path, online_session: str | None = None) -> int:
    """The whole system on this machine. ``online_session``: register over HTTP against a
    local stand-in behaving so (a name of online_session.BEHAVIOURS, or ``down``)."""
    with contextlib.ExitStack() as resources:
        return _run_dev(root, online_session, resources)


def _run_dev(root: Path, online_session: str | None, resources: contextlib.ExitStack) -> int:
    configure_logging()
    logging.getLogger("httpx").setLevel(logging.WARNING)  # the readiness polls
    ports = Ports()
    data = private_dir(root / ".data")
    logs = private_dir(data / "logs")
    for port, what in ((ports.web, "the web app"), (ports.dagster, "the Dagster webserver")):
        require_free(port, what)

    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())

    children = Children()
    standin: EventBridgeStandIn | None = None
    aws: local_aws.LocalAws | None = None
    pg = local_postgres.start(
        root / local_postgres.DEV_DATA_DIR,
        os.environ.get("JLG_DATABASE_URL"),
        os.environ.get("DAGSTER_POSTGRES_URL"),
    )
    try:
        external_aws = bool(
            os.environ.get("AWS_ENDPOINT_URL") or os.environ.get("JLG_SQS_QUEUE_URL")
        )
        if external_aws and not os.environ.get("JLG_SQS_QUEUE_URL"):
            raise ConfigError("with AWS_ENDPOINT_URL set, JLG_SQS_QUEUE_URL must be set too")
        if not external_aws:
            require_free(ports.moto, "the moto server")
            aws = local_aws.start_moto(ports.moto)
            standin = EventBridgeStandIn(aws.client("scheduler"), aws.client("sqs"))
            standin.start()

        registered: dict[str, str] = {}
        registrar = _registrar(registered, online_session, resources)
        migrate(pg.app_url)
        engine = bootstrap.build_engine(pg.app_url)
        try:
            demo_ids = seed_demo(engine)
        finally:
            engine.dispose()

        secret = _jwt_secret(data)
        env = system_env(
            data / "dagster_home",
            pg.dagster_url,
            pg.app_url,
            (root / "dagster.yaml").read_text(),
            **(aws_env(aws) if aws is not None else {}),
            JLG_JWT_SECRET=secret,
            # This machine only: tokens need no issuer or audience (production's do).
            JLG_ENVIRONMENT=os.environ.get("JLG_ENVIRONMENT", "local"),
            ENABLE_JOIN_LINK_SCHEDULER=os.environ.get("ENABLE_JOIN_LINK_SCHEDULER", "true"),
            ENABLE_JOIN_LINK_FALLBACK_CRON=os.environ.get("ENABLE_JOIN_LINK_FALLBACK_CRON", "true"),
            TMPDIR=str(private_dir(data / "tmp")),
            **registered,
        )
        write_dev_env(root / DEV_ENV_FILE, env)
        settings = Settings.from_env(env)
        if settings.scheduler_enabled and settings.scheduler_target:
            # The emulator keeps schedules in memory only: rebuild them from the database.
            marked = bootstrap.resync_schedules(settings)
            print(f"jlg dev: {marked} armed session(s) queued for schedule sync", file=sys.stderr)
        create_dagster_storage(env)
        web_env = dict(env)
        if pg.server is not None:
            # As in the kit: the admin API reads Dagster's storage as a SELECT-only role and
            # holds no URL of Dagster's owner.
            web_env.pop("DAGSTER_POSTGRES_URL", None)
            web_env["JLG_DAGSTER_READER_URL"] = local_postgres.dagster_reader(
                pg.dagster_url, root / "deploy" / "postgres" / "dagster-reader.sql"
            )
        start_web(children, web_env, ports.web, logs / "web.log")
        start_webserver(
            children, env, ports.dagster, logs / "dagster-webserver.log", root / "workspace.yaml"
        )
        start_daemon(children, env, logs / "dagster-daemon.log", root / "workspace.yaml")
        wait_until_answers(f"http://127.0.0.1:{ports.web}/readyz", 60, children.running)
        wait_until_answers(f"http://127.0.0.1:{ports.dagster}/server_info", 120, children.running)
        if not children.exited():
            _banner(root, ports, secret, demo_ids, logs, standin is not None, registrar)

        while not stop.is_set():
            dead = children.exited()
            if dead:
                for name, code in dead:
                    print(
                        f"jlg dev: {name} exited with {code}; see {logs / (name + '.log')}",
                        file=sys.stderr,
                    )
                return 1
            stop.wait(1)
        print("\njlg dev: stopping…", file=sys.stderr)
        return 0
    finally:
        children.stop()
        if standin is not None:
            standin.stop()
        if aws is not None:
            aws.stop()
        pg.stop()


def _registrar(env: dict[str, str], behaviour: str | None, resources: contextlib.ExitStack) -> str:
    """Point the registrar at a local online-session stand-in that behaves as asked (in
    ``env``); what the banner says about the registrar."""
    if behaviour is None:
        if env.get("JLG_REGISTRAR", "local") == "http":
            return f"http: {env.get('JLG_ONLINE_SESSION_URL', '(no JLG_ONLINE_SESSION_URL)')}"
        return "local (PostgreSQL-backed bulkRegister; --online-session=… for a misbehaving one)"
    if behaviour == "down":
        url = f"http://127.0.0.1:{free_port()}/"  # nothing listens there
    else:
        service = resources.enter_context(online_session_service())
        service.answer = BEHAVIOURS[behaviour]
        url = service.url
    env.update(
        {
            "JLG_REGISTRAR": "http",
            "JLG_ONLINE_SESSION_URL": url,
            "JLG_ONLINE_SESSION_TOKEN": "local-online-session-token",
        }
    )
    return f"http: online-session stand-in at {url}, answering '{behaviour}'"


def _banner(
    root: Path,
    ports: Ports,
    secret: str,
    demo_ids: list[int],
    logs: Path,
    standin: bool,
    registrar: str,
) -> None:
    token = mint_token(secret, user_id=1, roles=("admin",), ttl_seconds=12 * 3600)
    first = demo_ids[0]
    where = (
        f"in-process moto server on 127.0.0.1:{ports.moto} + EventBridge delivery stand-in"
        if standin
        else os.environ.get("AWS_ENDPOINT_URL", "the configured AWS")
    )
    print(
        f"""
jlg-pipeline is running (Ctrl-C stops everything)

  admin API        http://127.0.0.1:{ports.web}   (OpenAPI: /openapi.json, metrics: /metrics)
  Dagster UI       http://127.0.0.1:{ports.dagster}
  AWS              {where}
  registrar        {registrar}
  logs             {logs}
  demo sessions    {", ".join(map(str, demo_ids))}

  admin token (12 h):
    {token}

  schedule demo session {first} one minute from now:
    curl -s -X PATCH http://127.0.0.1:{ports.web}/program-session/{first}/link-generation \\
      -H "Authorization: Bearer {token}" -H "X-Active-Role: admin" \\
      -H "Content-Type: application/json" \\
      -d "{{\\"linkGenerationAt\\": \\"$(date -u -d '+1 minute' +%Y-%m-%dT%H:%M:%SZ)\\"}}"
    (under 2 minutes away it is launched directly, trigger direct; with '+3 minutes' it
    goes through EventBridge Scheduler, the delivery stand-in and the SQS sensor)

  more tokens: .venv/bin/jlg token [--user-id 2] [--roles mentor]   (a mentor token with
    X-Active-Role: mentor shows the 403s; jlg token reads this stack's secret by itself)
  the Dagster CLI against this stack, from another shell in {root}:
    source {DEV_ENV_FILE}
    .venv/bin/dagster job launch -j join_link_fallback_sweep_job -w workspace.yaml
    .venv/bin/dagster job backfill -j join_link_backfill_job -w workspace.yaml \\
      --from $(date -u +%Y-%m-%d) --to $(date -u +%Y-%m-%d) --noprompt
""",
        flush=True,
    )

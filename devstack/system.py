"""LOCAL ONLY: the one builder of the system on this machine, as it is deployed: the
environment its processes share and the commands that start them (the admin API as the image
runs it, ``dagster-daemon``, ``dagster-webserver``, a code server on its own). ``jlg dev``, the
end-to-end tests, the production-topology test, the benchmarks and the trials all assemble the
system here, so a change of how it starts is made once."""

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import yaml

from devstack.aws import EXECUTION_ROLE_ARN, LocalAws
from jlg_pipeline.adapters.database import instance_storage_url
from jlg_pipeline.domain.errors import ConfigError
from web.server import command

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
WORKSPACE = ROOT / "workspace.yaml"


@dataclass
class Children:
    """The system's processes, each the leader of its own process group (a daemon's code
    servers and run workers are in its group, so stopping or killing the group takes them)."""

    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def start(self, name: str, argv: list[str], env: dict[str, str], cwd: Path, log: Path) -> None:
        out = private_file(log, os.O_WRONLY | os.O_APPEND)
        self.processes[name] = subprocess.Popen(  # noqa: S603 - our own executables
            argv,
            cwd=cwd,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            # Started from a non-interactive shell SIGINT arrives ignored, and Dagster maps
            # SIGTERM onto its SIGINT handler: reset both so stopping the group works.
            preexec_fn=_default_signals,
        )
        out.close()

    def running(self) -> bool:
        return not self.exited()

    def exited(self) -> list[tuple[str, int]]:
        return [(n, p.returncode) for n, p in self.processes.items() if p.poll() is not None]

    def stop(self) -> None:
        for process in self.processes.values():
            _signal_group(process, signal.SIGTERM)
        deadline = time.monotonic() + 15
        for process in self.processes.values():
            try:
                process.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                _signal_group(process, signal.SIGKILL)
                process.wait(timeout=5)
        for process in self.processes.values():
            _signal_group(process, signal.SIGKILL)  # grandchildren left in the group


def _default_signals() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _signal_group(process: subprocess.Popen[bytes], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, sig)


def private_dir(path: Path) -> Path:
    """A folder only its owner can enter, created so from the start (and tightened if an
    earlier version left it open)."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.chmod(0o700)
    return path


def private_file(path: Path, flags: int) -> BinaryIO:
    """Open (creating) a file readable by its owner only; never a moment world-readable."""
    descriptor = os.open(path, flags | os.O_CREAT, 0o600)
    os.fchmod(descriptor, 0o600)
    return os.fdopen(descriptor, "ab" if flags & os.O_APPEND else "wb")


def dagster_home(home: Path, instance_yaml: str | None = None) -> Path:
    """A Dagster instance's home, holding ``instance_yaml`` (the repository's dagster.yaml
    unless given)."""
    private_dir(home)
    (home / "dagster.yaml").write_text(instance_yaml or (ROOT / "dagster.yaml").read_text())
    return home


def dagster_env(
    home: Path, dagster_url: str, base: Mapping[str, str] | None = None
) -> dict[str, str]:
    """What Dagster's own processes (the daemon, the webserver) need: the instance in ``home``
    on the storage ``dagster_url``; ``base`` (this process's environment unless given) under it."""
    return {
        **(os.environ if base is None else base),
        "DAGSTER_HOME": str(home),
        "DAGSTER_POSTGRES_URL": instance_storage_url(dagster_url),
        "TMPDIR": str(home),
    }


def aws_env(aws: LocalAws, endpoint_url: str | None = None) -> dict[str, str]:
    """The real-time path's AWS settings for the local ``aws``: the queue, the schedules'
    target and role; with ``endpoint_url`` (a fault box in front of it) every call goes there."""
    endpoint = endpoint_url or aws.endpoint_url
    return {
        **aws.env,
        "AWS_ENDPOINT_URL": endpoint,
        "JLG_SQS_QUEUE_URL": aws.queue_url.replace(aws.endpoint_url, endpoint),
        "AWS_SCHEDULER_TARGET_QUEUE_ARN": aws.queue_arn,
        "AWS_SCHEDULER_EXECUTION_ROLE_ARN": EXECUTION_ROLE_ARN,
    }


def app_env(app_url: str, /, **settings: str) -> dict[str, str]:
    """The admin API's environment alone (no Dagster instance): this process's, the application
    database ``app_url``, this machine's name for the environment (so the windows may be
    shortened: JLG_TEST_*), and ``settings`` (``**aws_env(aws)`` for the real-time path) over it."""
    return {**os.environ, **_app(app_url), **settings}


def system_env(
    home: Path, dagster_url: str, app_url: str, instance_yaml: str | None = None, /, **settings: str
) -> dict[str, str]:
    """The environment every process of the system shares on one machine: a Dagster instance
    in ``home`` (made, with ``instance_yaml``) on ``dagster_url``, and :func:`app_env`'s."""
    dagster_home(home, instance_yaml)
    return {**dagster_env(home, dagster_url), **_app(app_url), **settings}


def _app(app_url: str) -> dict[str, str]:
    return {"JLG_ENVIRONMENT": "local", "JLG_DATABASE_URL": app_url}


def create_dagster_storage(env: dict[str, str]) -> None:
    """Dagster's tables, made once before its processes start: a webserver and a daemon
    creating them at the same moment on a fresh database can collide (PostgreSQL's
    DuplicateObject on ``alembic_version``) and one of them exits."""
    done = subprocess.run(  # noqa: S603
        [str(BIN / "dagster"), "instance", "migrate"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise ConfigError(f"could not create Dagster's storage: {done.stderr.strip()[-500:]}")


def from_tree(env: dict[str, str], root: Path) -> dict[str, str]:
    """``env`` for a process that runs the code of ``root`` (a release's tree checked out beside
    this one: the upgrade trial's), ahead of this checkout's."""
    return env if root == ROOT else {**env, "PYTHONPATH": str(root)}


def start_web(
    children: Children,
    env: dict[str, str],
    port: int,
    log: Path,
    name: str = "web",
    root: Path = ROOT,
) -> str:
    """The admin API as the image runs it (``python -m web``: web/server.py's bounds), from the
    code of ``root``; its URL. The caller waits for ``/readyz``."""
    argv = command("127.0.0.1", port, str(BIN / "python"))
    children.start(name, argv, from_tree(env, root), root, log)
    return f"http://127.0.0.1:{port}"


def start_daemon(
    children: Children,
    env: dict[str, str],
    log: Path,
    workspace: Path = WORKSPACE,
    root: Path = ROOT,
) -> int:
    """``dagster-daemon run`` on ``workspace``, from the code of ``root``; its process group id
    (the daemon, the code servers it starts and their run workers)."""
    argv = [str(BIN / "dagster-daemon"), "run", "-w", str(workspace)]
    children.start("dagster-daemon", argv, from_tree(env, root), root, log)
    return children.processes["dagster-daemon"].pid


def grpc_workspace(path: Path, port: int) -> Path:
    """deploy/workspace.yaml (the daemon's and the webserver's, knowing only the code server's
    address), pointed at a code server on ``port``, written to ``path``."""
    workspace = yaml.safe_load((ROOT / "deploy" / "workspace.yaml").read_text())
    [entry] = workspace["load_from"]
    entry["grpc_server"].update(host="127.0.0.1", port=port)
    path.write_text(yaml.safe_dump(workspace))
    return path


def start_webserver(
    children: Children, env: dict[str, str], port: int, log: Path, workspace: Path = WORKSPACE
) -> str:
    """The Dagster UI on ``workspace``; its URL. The caller waits for ``/server_info``."""
    argv = [
        str(BIN / "dagster-webserver"),
        *("-w", str(workspace), "-h", "127.0.0.1", "-p", str(port)),
    ]
    children.start("dagster-webserver", argv, env, ROOT, log)
    return f"http://127.0.0.1:{port}"


def start_code_server(
    children: Children,
    env: dict[str, str],
    port: int,
    log: Path,
    root: Path = ROOT,
    name: str = "code-location",
) -> None:
    """The code location on its own, as the Helm chart's user-code deployment runs it, from the
    code of ``root``."""
    argv = [
        str(BIN / "dagster"),
        *("api", "grpc", "-m", "jlg_pipeline.definitions", "-h", "127.0.0.1", "-p", str(port)),
    ]
    children.start(name, argv, from_tree(env, root), root, log)

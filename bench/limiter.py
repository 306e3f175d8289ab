"""A rate limiter no one here wrote, for the service-budget bench: nginx's ``limit_req`` (Debian's
``nginx-light``) at rate R with burst R - 1, ``nodelay``, answering 429 (PITFALLS.md: a leaky
bucket at millisecond granularity; the zone is keyed by the client's address, never empty) in
front of the online-session stand-in, whose own limit is then off. Every call is logged with
its time, status and session, so the bench counts 429s it never sees at the stand-in."""

import json
import shutil
import socket
import subprocess
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from devstack.ports import free_port

NGINX = "/usr/sbin/nginx"
INSTALL = "apt-get install -y --no-install-recommends nginx-light"


@contextmanager
def nginx_limit(upstream: str, rate: float, home: Path) -> Iterator[tuple[str, Path]]:
    """nginx on a free local port passing calls to ``upstream`` at most ``rate`` a second
    (burst ``rate - 1``, the rest 429); its URL and its access log (JSON lines)."""
    if not shutil.which(NGINX):
        raise SystemExit(f"nginx is not installed: {INSTALL}")
    port = free_port()
    root = home / "nginx"
    for sub in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    log = root / "access.log"
    host = upstream.rstrip("/").split("://", 1)[1]
    config = root / "nginx.conf"
    config.write_text(
        textwrap.dedent(
            f"""\
            user root;
            worker_processes 1;
            daemon off;
            pid {root}/nginx.pid;
            error_log {root}/error.log warn;
            events {{ worker_connections 4096; }}
            http {{
                client_body_temp_path {root}/body;
                proxy_temp_path {root}/proxy;
                fastcgi_temp_path {root}/fastcgi;
                uwsgi_temp_path {root}/uwsgi;
                scgi_temp_path {root}/scgi;
                log_format calls escape=json
                    '{{"at": $msec, "status": $status, "body": "$request_body"}}';
                access_log {log} calls;
                limit_req_zone $binary_remote_addr zone=service:1m rate={rate:g}r/s;
                limit_req_status 429;
                server {{
                    listen 127.0.0.1:{port};
                    location / {{
                        limit_req zone=service burst={max(int(rate) - 1, 0)} nodelay;
                        proxy_pass http://{host};
                    }}
                }}
            }}
            """
        )
    )
    server = subprocess.Popen([NGINX, "-c", str(config), "-p", str(root)])  # noqa: S603
    try:
        _listening(port, server)
        yield f"http://127.0.0.1:{port}/", log
    finally:
        server.terminate()
        server.wait(timeout=10)


def _listening(port: int, server: subprocess.Popen[bytes], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and server.poll() is None:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"nginx did not listen on {port} (see its error.log)")


def calls_seen(log: Path) -> list[dict[str, Any]]:
    """Each call nginx took, as the stand-in records them: ``at`` (Unix seconds: compare only
    with one another), ``status`` and the request's ``json``."""
    seen = []
    for line in log.read_text().splitlines():
        entry = json.loads(line)
        try:
            body = json.loads(entry["body"]) if entry["body"] else None
        except ValueError:
            body = None
        seen.append({"at": float(entry["at"]), "status": int(entry["status"]), "json": body})
    return seen

"""The ``jlg`` command: migrations, the shared view of the online-session service, why a
session waits, schedule resync and the version; from a checkout also the development stack
and tokens."""

import argparse
import getpass
import importlib
import logging
import sys
from collections.abc import Sequence
from importlib.metadata import version
from types import ModuleType

from sqlalchemy.exc import DBAPIError, OperationalError

from jlg_pipeline import bootstrap
from jlg_pipeline.config import Settings, check_jwt_secret
from jlg_pipeline.domain import validation
from jlg_pipeline.domain.errors import ConfigError, JlgError
from jlg_pipeline.migrate import REPOSITORY_ROOT, downgrade, migrate, plan

ONLINE_SESSION_BEHAVIOURS = ("ok", "reject", "throttle", "slow", "flaky")
"""How ``jlg dev --online-session`` makes the stand-in answer (``devstack.online_session``)."""


def _devstack(module: str) -> ModuleType:
    """The development stack, which the image does not ship: ``jlg dev`` and ``jlg token``
    work in a checkout (an editable install), where it sits beside the package."""
    if not (REPOSITORY_ROOT / "devstack").is_dir():
        raise ConfigError(
            "jlg dev and jlg token run from a checkout of the repository: the development "
            "stack is not part of the installed package"
        )
    if str(REPOSITORY_ROOT) not in sys.path:
        sys.path.insert(0, str(REPOSITORY_ROOT))
    return importlib.import_module(f"devstack.{module}")


MAX_OPERATOR_CHARS = 64


def _operator(args: argparse.Namespace) -> str:
    """Who acts (``--by``, else this login's user name), as the view's row records it."""
    by = validation.text(getattr(args, "by", None) or getpass.getuser(), "--by", MAX_OPERATOR_CHARS)
    assert by is not None
    return by


def _session_id(raw: str) -> validation.SessionId:
    digits = raw.isascii() and raw.isdigit() and len(raw) <= 19
    return validation.session_id(int(raw) if digits else raw[:40], "SESSION_ID")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="jlg", description="Scheduled join-link generation.")
    parser.add_argument("--version", action="version", version=f"jlg {version('jlg-pipeline')}")
    parser.add_argument(
        "--database-url", help="SQLAlchemy URL; default JLG_DATABASE_URL", default=None
    )
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("migrate", help="apply migrations (to head by default)")
    up.add_argument(
        "revision",
        nargs="?",
        default="head",
        help="head (every step, contract ones too: once every process runs this release), "
        "expand (the steps safe while the previous release still runs), or a revision",
    )
    up.add_argument(
        "--adopt",
        action="store_true",
        help="brownfield: the host tables exist already; apply only what a guest adds to them",
    )
    up.add_argument(
        "--plan",
        action="store_true",
        help="print every statement that will touch a host table, with the lock it takes, "
        "then those on our own tables with theirs, and apply nothing",
    )
    down = sub.add_parser("downgrade", help="revert migrations to a revision (e.g. base)")
    down.add_argument("revision")
    dev = sub.add_parser(
        "dev", help="LOCAL ONLY: run the whole system on this machine (Ctrl-C stops)"
    )
    dev.add_argument(
        "--online-session",
        choices=[*ONLINE_SESSION_BEHAVIOURS, "down"],
        help="register through the HTTP registrar against a local online-session stand-in "
        "that behaves so (ok; reject: 422 MEETING_DELETED; throttle: 429 Retry-After 30; "
        "slow: 20 s per call; flaky: 503; down: nothing listens) instead of the local registrar",
    )
    schedules = sub.add_parser("schedules", help="EventBridge schedules of armed sessions")
    schedules_sub = schedules.add_subparsers(dest="schedules_command", required=True)
    schedules_sub.add_parser(
        "resync",
        help="mark every armed, not-yet-due session pending, so the next sync rebuilds "
        "EventBridge from the database (after turning the scheduler on, recreating the "
        "schedule group, moving region)",
    )
    service = sub.add_parser(
        "service", help="the online-session service as every caller sees it (pause, breaker)"
    )
    service_sub = service.add_subparsers(dest="service_command", required=True)
    service_sub.add_parser("show", help="print the pause, the breaker, the budget and the backlog")
    resume = service_sub.add_parser(
        "resume",
        help="clear a pause or an open breaker now (every session it held is due at once); "
        "on record with who and when",
    )
    resume.add_argument(
        "--by", default=None, help="who is resuming (default: this login's user name)"
    )
    why = sub.add_parser(
        "why",
        help="why a session is not generated yet: every hold with the time it ends, its last "
        "attempts and what happens to it next",
    )
    why.add_argument("session_id", metavar="SESSION_ID")
    why.add_argument("--json", action="store_true", help="the API's answer, as JSON")
    token = sub.add_parser(
        "token", help="mint an HS256 bearer token from JLG_JWT_SECRET (local use)"
    )
    token.add_argument("--user-id", type=int, default=1)
    token.add_argument("--roles", default="admin", help="comma-separated roles")
    token.add_argument("--ttl", type=int, default=3600, help="seconds until it expires")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s %(message)s")
    try:
        if args.command == "dev":
            run_dev = _devstack("stack").run_dev
            return int(run_dev(REPOSITORY_ROOT, online_session=args.online_session))
        settings = Settings.from_process(
            {"JLG_DATABASE_URL": args.database_url} if args.database_url else None,
            # jlg token (local use only: it mints what an IdP would) runs as local unless told.
            {"JLG_ENVIRONMENT": "local"} if args.command == "token" else None,
        )
        if args.command == "token":
            if not settings.jwt_secret and not settings.jwt_public_key:
                # Under `jlg dev` the secret is this checkout's; nothing to export by hand.
                secret = _devstack("stack").dev_jwt_secret(REPOSITORY_ROOT)
                settings = settings.model_copy(update={"jwt_secret": secret})
            if not settings.jwt_secret:
                raise ConfigError("jlg token signs with JLG_JWT_SECRET (HS256)")
            check_jwt_secret(settings.jwt_secret)
            if not 0 < args.ttl <= settings.jwt_max_ttl_s:
                # The API refuses a token whose exp lies further ahead (401).
                raise ConfigError(
                    f"--ttl must be from 1 to {settings.jwt_max_ttl_s} seconds "
                    "(JLG_JWT_MAX_TTL_S): the API refuses tokens that live longer"
                )
            roles = tuple(r.strip() for r in args.roles.split(",") if r.strip())
            print(
                _devstack("tokens").mint_token(
                    settings.jwt_secret,
                    user_id=args.user_id,
                    roles=roles,
                    ttl_seconds=args.ttl,
                    issuer=settings.jwt_issuer,
                    audience=settings.jwt_audience,
                )
            )
            return 0
        url = settings.database_url
        if args.command == "service":
            print(
                "\n".join(
                    bootstrap.service_command(settings, args.service_command, _operator(args))
                )
            )
            return 0
        if args.command == "why":
            session = _session_id(args.session_id)
            print("\n".join(bootstrap.why_command(settings, session, args.json)))
            return 0
        if args.command == "schedules":
            marked = bootstrap.resync_schedules(settings.model_copy(update={"database_url": url}))
            print(
                f"{marked} armed session(s) marked pending; join_link_schedule_sync_sensor "
                "launches the sync (or run join_link_schedule_sync_job now)"
            )
        elif args.command == "migrate" and args.plan:
            print(plan(url, args.revision, adopt=args.adopt))
        elif args.command == "migrate":
            migrate(url, args.revision, adopt=args.adopt)
        else:
            downgrade(url, args.revision)
    except JlgError as exc:
        print(f"jlg: {exc}", file=sys.stderr)
        return 2
    except OperationalError as exc:
        print(f"jlg: cannot reach the database: {exc.orig}", file=sys.stderr)
        return 2
    except DBAPIError as exc:
        # The database's own one line (a right this role lacks, say), not SQLAlchemy's story.
        reason = str(exc.orig).splitlines()[0] if str(exc.orig) else type(exc.orig).__name__
        print(f"jlg: the database refused: {reason}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

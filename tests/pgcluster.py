"""A throwaway PostgreSQL cluster for the test session (the PostgreSQL backend's tests).

Started from the server binaries installed on the machine (Debian's ``postgresql-15``:
``/usr/lib/postgresql/15/bin``), as the ``postgres`` user when the tests run as root (initdb
refuses root), in a short folder under /tmp (Unix socket paths are limited to 107 bytes) on a
free TCP port of 127.0.0.1, with fsync off (nothing here must survive a crash of the machine).
graph-memory connects as ``graph``, an ordinary role (no superuser) that owns each test's
database, over TCP with a password (scram-sha-256), as it would in production; the superuser
connects over the socket (trust) only to create and drop databases.

A killed test run leaves its cluster running: the next session stops and removes clusters whose
owning process is gone (:func:`clean_stale`).
"""

from __future__ import annotations

import contextlib
import glob
import itertools
import os
import shutil
import signal
import socket
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

ROLE = "graph"
PASSWORD = "s3cret-for-tests"
_PREFIX = "gm-pg-"


def find_bin() -> Path | None:
    """The folder of the newest installed PostgreSQL server binaries (initdb, pg_ctl), or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[4]))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_postgres(args: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *args] if os.geteuid() == 0 else args


def clean_stale() -> None:
    """Stop and remove clusters of earlier sessions whose process is gone."""
    for base in glob.glob(f"/tmp/{_PREFIX}*"):
        owner = Path(base, "owner.pid")
        try:
            pid = int(owner.read_text())
            os.kill(pid, 0)
            continue  # its session still runs
        except (OSError, ValueError):
            pass
        bindir = find_bin()
        if bindir is not None and Path(base, "data", "postmaster.pid").exists():
            subprocess.run(_as_postgres([str(bindir / "pg_ctl"), "-D", f"{base}/data", "-m", "immediate", "stop"]),
                           capture_output=True, check=False, timeout=60)
        shutil.rmtree(base, ignore_errors=True)


@dataclass
class Cluster:
    """A running cluster: ``port`` on 127.0.0.1, the superuser's socket in ``base``."""

    bindir: Path
    base: Path
    port: int
    _names: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    @classmethod
    def start(cls, bindir: Path) -> Cluster:
        clean_stale()
        base = Path(tempfile.mkdtemp(prefix=_PREFIX, dir="/tmp"))
        base.chmod(0o755)
        Path(base, "owner.pid").write_text(str(os.getpid()))
        if os.geteuid() == 0:
            shutil.chown(base, "postgres", "postgres")
        data = base / "data"
        password_file = base / "pwfile"
        password_file.write_text("postgres\n")
        if os.geteuid() == 0:
            shutil.chown(password_file, "postgres")
        subprocess.run(_as_postgres([str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "-E", "UTF8",
                                     "--locale=C.UTF-8", "--no-sync", "--auth-local=trust",
                                     "--auth-host=scram-sha-256", f"--pwfile={password_file}"]),
                       check=True, capture_output=True, timeout=120)
        port = _free_port()
        options = (f"-p {port} -k {base} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off "
                   f"-c full_page_writes=off -c max_connections=400")
        subprocess.run(_as_postgres([str(bindir / "pg_ctl"), "-D", str(data), "-l", str(base / "log"), "-o", options,
                                     "-w", "-t", "60", "start"]), check=True, capture_output=True, timeout=90)
        cluster = cls(bindir, base, port)
        cluster.admin(f"CREATE ROLE {ROLE} LOGIN PASSWORD '{PASSWORD}'")
        return cluster

    def admin(self, sql: str, dbname: str = "postgres") -> None:
        """Run ``sql`` as the superuser (over the socket)."""
        import psycopg

        with psycopg.connect(host=str(self.base), port=self.port, user="postgres", dbname=dbname,
                             autocommit=True) as conn:
            conn.execute(sql.encode())

    def create_database(self) -> str:
        """A new empty database owned by the ordinary role; returns its name."""
        name = f"gm_{os.getpid()}_{next(self._names)}"
        self.admin(f'CREATE DATABASE "{name}" OWNER {ROLE}')
        return name

    def drop_database(self, name: str) -> None:
        self.admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def url(self, name: str, *, password: bool = True) -> str:
        """The URL graph-memory connects with (TCP, the ordinary role)."""
        secret = f":{PASSWORD}" if password else ""
        return f"postgresql://{ROLE}{secret}@127.0.0.1:{self.port}/{name}"

    def stop(self) -> None:
        subprocess.run(_as_postgres([str(self.bindir / "pg_ctl"), "-D", str(self.base / "data"), "-m", "immediate",
                                     "stop"]), capture_output=True, check=False, timeout=60)
        with contextlib.suppress(OSError):
            pid_file = self.base / "data" / "postmaster.pid"
            if pid_file.exists():
                os.kill(int(pid_file.read_text().split()[0]), signal.SIGKILL)
        shutil.rmtree(self.base, ignore_errors=True)

"""Where MLflow lives: `MLFLOW_TRACKING_URI` when set, else an embedded SQLite store.

The embedded store sits under the cache root of the real repository, by absolute path, so runs
from `dvc exp run --queue` temporary workspaces land in the same store as `dvc repro`.
"""

from __future__ import annotations

import base64
import logging
import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hackable_rl.core.errors import UserError
from hackable_rl.core.redact import masked_uri
from hackable_rl.core.storage import mlflow_store_dir

# The schemes MLflow has tracking stores for ("" is a local folder); `postgresql+psycopg2` counts as
# postgresql. Anything else fails deep inside MLflow, so it is refused where the URI is read.
KNOWN_SCHEMES = (
    "", "file", "sqlite", "postgresql", "mysql", "mssql", "http", "https", "databricks", "databricks-uc", "uc",
)


def tracking_uri(cache_dir: str | Path) -> str:
    """The tracking URI this process should use (infrastructure: the environment may set it)."""
    from_env = os.environ.get("MLFLOW_TRACKING_URI")
    if from_env:
        return checked_uri(from_env)
    return _checked_sqlite(f"sqlite:///{mlflow_store_dir(cache_dir) / 'mlflow.db'}", "the project's MLflow store")


def checked_uri(uri: str) -> str:
    """`uri` when MLflow has a usable store for it; otherwise a UserError naming MLFLOW_TRACKING_URI
    (with any credentials in it masked)."""
    scheme = urllib.parse.urlparse(uri).scheme.lower().split("+", 1)[0]
    shown = masked_uri(uri)
    if scheme not in KNOWN_SCHEMES and len(scheme) != 1:  # one letter: a Windows drive
        known = ", ".join(f"{name}:" for name in KNOWN_SCHEMES if name)
        raise UserError(
            f"MLFLOW_TRACKING_URI: {shown!r} has the unknown scheme {scheme!r}; expected one of {known} "
            "or a local folder (unset it to use the project's SQLite store)"
        )
    if scheme in FILE_SCHEMES and os.environ.get("MLFLOW_ALLOW_FILE_STORE", "").lower() != "true":
        # MLflow 3 refuses its folder store with a traceback-long message, after the work has begun.
        raise UserError(
            f"MLFLOW_TRACKING_URI: {shown!r} is a folder store, which MLflow 3 no longer opens; use "
            "sqlite:///PATH/mlflow.db (or set MLFLOW_ALLOW_FILE_STORE=true)"
        )
    if scheme == "sqlite":
        return _checked_sqlite(uri, "MLFLOW_TRACKING_URI")
    return uri


# A plain folder ("") and `file:` open MLflow's folder store; one letter is a Windows drive's folder.
FILE_SCHEMES = ("", "file")
_SQLITE_MAGIC = b"SQLite format 3\x00"


def _checked_sqlite(uri: str, source: str) -> str:
    """An SQLite URI whose database path is a new file or an SQLite database: a folder there stalls
    MLflow for minutes before it fails, a text file fails deep inside SQLAlchemy."""
    path = Path(uri.removeprefix("sqlite:///")) if uri.startswith("sqlite:///") else None
    if path is None or not path.exists():
        return uri
    if path.is_dir():
        raise UserError(f"{source}: {path} is a folder; expected an SQLite database file (e.g. {path / 'mlflow.db'})")
    try:
        with path.open("rb") as handle:
            header = handle.read(len(_SQLITE_MAGIC))
    except OSError as error:
        raise UserError(f"{source}: {path}: cannot be read ({error.strerror})") from None
    if header and header != _SQLITE_MAGIC:
        raise UserError(f"{source}: {path} is not an SQLite database (it holds other data); point it at a new "
                        "file or an MLflow database")
    return uri


def artifact_root(cache_dir: str | Path) -> Path:
    """Artifact folder of the embedded store (absolute; never ./mlruns of the current directory)."""
    return mlflow_store_dir(cache_dir) / "artifacts"


def is_reachable(uri: str, timeout_s: float = 3.0) -> bool:
    """Whether a tracking server answers; a file or SQLite store is reachable when its folder can exist."""
    if uri.startswith(("http://", "https://")):
        try:
            with urllib.request.urlopen(_health_request(uri), timeout=timeout_s) as response:
                return response.status == 200
        except (urllib.error.URLError, OSError, ValueError):
            return False
    if uri.startswith("sqlite:///"):
        folder = Path(uri.removeprefix("sqlite:///")).parent
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError:
            return False
        return os.access(folder, os.W_OK)
    return True


def _health_request(uri: str) -> urllib.request.Request:
    """GET <server>/health; credentials in the URI become a basic-auth header, as MLflow sends them
    (urllib refuses a URL that carries them)."""
    parts = urllib.parse.urlsplit(uri)
    netloc = (parts.hostname or "") + (f":{parts.port}" if parts.port else "")
    request = urllib.request.Request(urllib.parse.urlunsplit(
        (parts.scheme, netloc, parts.path.rstrip("/") + "/health", parts.query, "")))
    if parts.username is not None:
        user = urllib.parse.unquote(parts.username)
        token = base64.b64encode(f"{user}:{urllib.parse.unquote(parts.password or '')}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    return request


@contextmanager
def store_creation_lock(uri: str) -> Iterator[None]:
    """Held while a client opens `uri`. The first opening of an embedded SQLite store runs MLflow's
    schema migrations; two processes doing it at once (`dvc queue start -j 2` or `seeds` on a fresh
    clone, whose store DVC does not carry) break each other's migration and one crashes. The others
    wait here, then find the tables made. No lock for a server, or where flock is missing (Windows)."""
    try:
        # deferred: POSIX only (the module imports everywhere)
        import fcntl
    except ImportError:
        fcntl = None
    if fcntl is None or not uri.startswith("sqlite:///"):
        yield
        return
    with open(uri.removeprefix("sqlite:///") + ".lock", "a") as handle:  # its folder: is_reachable made it
        fcntl.flock(handle, fcntl.LOCK_EX)  # released when the file closes
        yield


def quiet_local_transfers(uri: str) -> None:
    """No "Downloading artifacts" / "Uploading artifacts" bars for a store on this machine (and no
    schema lines for a new SQLite store): a local copy takes milliseconds, yet each bar leaves a line
    (several per `eval --run-id`). A server keeps them, where a transfer can take long.
    MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR set by the user wins."""
    if not uri.startswith(("http://", "https://", "databricks")):
        os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    if uri.startswith("sqlite:"):
        # "Creating initial MLflow database tables..." and "Updating database tables": two lines the
        # first time a store is opened, about MLflow's own schema; a failed migration still raises.
        logging.getLogger("mlflow.store.db.utils").setLevel(logging.WARNING)

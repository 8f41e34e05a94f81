"""A Spark standalone cluster on 127.0.0.1 from the Spark that pyspark ships (its jars and
`bin/spark-class`; nothing downloaded): one master, one worker, each a JVM this module starts
and stops by PID. The worker runs with the environment given (the tests give it a PATH whose
`python3` lacks kraftlab, and no PYTHONPATH), so its executors see only what Spark ships.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pyspark

SPARK_HOME = Path(pyspark.__file__).resolve().parent
START_TIMEOUT_S = 180.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Standalone:
    url: str
    directory: Path
    pids: list[int] = field(default_factory=list)  # master, then worker

    def log(self, name: str) -> str:
        path = self.directory / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""


def _start(cluster: Standalone, name: str, args: list[str], env: dict[str, str]) -> int:
    with (cluster.directory / f"{name}.log").open("wb") as log:
        # spark-class execs java: the PID is the JVM's.
        proc = subprocess.Popen([str(SPARK_HOME / "bin" / "spark-class"), *args],
                                stdout=log, stderr=subprocess.STDOUT, env=env,
                                cwd=cluster.directory, start_new_session=True)
    cluster.pids.append(proc.pid)
    return proc.pid


def _wait_for(cluster: Standalone, name: str, text: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while text not in cluster.log(name):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{name} did not log {text!r} in {START_TIMEOUT_S:g} s:\n"
                               f"{cluster.log(name)[-2000:]}")
        time.sleep(0.2)  # polling the log for a condition, not waiting a fixed time


def start(directory: Path, worker_env: dict[str, str], cores: int = 2,
          memory: str = "2g") -> Standalone:
    """Master and worker on 127.0.0.1; returns once the worker has registered."""
    directory.mkdir(parents=True, exist_ok=True)
    port = free_port()
    cluster = Standalone(f"spark://127.0.0.1:{port}", directory)
    base = {"SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_NO_DAEMONIZE": "1"}
    try:
        _start(cluster, "master", ["org.apache.spark.deploy.master.Master", "--host",
                                   "127.0.0.1", "--port", str(port), "--webui-port",
                                   str(free_port())], {**worker_env, **base})
        _wait_for(cluster, "master", f"Starting Spark master at {cluster.url}")
        work = directory / "work"
        _start(cluster, "worker", ["org.apache.spark.deploy.worker.Worker", "--host",
                                   "127.0.0.1", "--webui-port", str(free_port()), "--cores",
                                   str(cores), "--memory", memory, "--work-dir", str(work),
                                   cluster.url],
               {**worker_env, **base, "SPARK_WORKER_DIR": str(work)})
        _wait_for(cluster, "worker", "Successfully registered with master")
    except BaseException:
        stop(cluster)
        raise
    return cluster


def _children(pid: int) -> list[int]:
    """Every descendant of `pid` (the worker's executor JVMs and their Python workers)."""
    by_parent: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        by_parent.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        for child in by_parent.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def stop(cluster: Standalone, timeout_s: float = 30.0) -> None:
    """SIGTERM the worker (it stops its executors), then the master, then SIGKILL whatever of
    theirs is left: only these PIDs and their descendants."""
    pids = [p for pid in reversed(cluster.pids) for p in (*_children(pid), pid)]
    for pid in reversed(cluster.pids):
        if _alive(pid):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        for pid in cluster.pids:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)  # reap our own children so they stop being alive
        time.sleep(0.1)
    for pid in pids:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
    for pid in cluster.pids:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)

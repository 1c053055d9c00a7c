#!/usr/bin/env python3
"""Power-loss trials: what does a server's store (SQLite, or PostgreSQL) keep of what it
acknowledged when the machine loses power, and is what it keeps whole?

Each trial starts the server on a fresh SQLite file with the shim of powerloss/shim.c preloaded
(with `--durability postgres`, a fresh PostgreSQL server runs under it instead, and the host on
it): the process's writes reach the files as ever, and the shim journals every write, truncate,
rename and fsync/fdatasync of the store's files. 8 clients create tasks as fast as they can (a
quarter finish at once, a quarter after 50-400 ms, the rest sleep on) while a watcher reads the ones
that finish; at a random moment (0.3-2.5 s) the server is killed with SIGKILL. The power loss
is then worked out from the journal: each file keeps what its last sync covered and loses every
write after (a file never synced is gone; SQLite's -shm index, which it rebuilds, is dropped).
The server restarts on what is left, and every acknowledged fact is read back:

- a create is acknowledged when a client received its CreateTaskResult, a completion when a
  client read the task `completed`;
- lost: an acknowledged create the restarted server does not know; reverted: a task read
  `completed` that is not any more;
- stuck: an acknowledged task still `working` or `input_required` after the restart;
- torn: a task that cannot be read, a completed one without its result, or a store that does
  not open;
- out of order: a fact lost while one more than 50 ms newer survived (what is lost must be the
  last writes, not a hole). A fact's time is the server's: the task's `createdAt` for a create,
  its `lastUpdatedAt` for a completion, so the clients' own scheduling does not blur the order;
  50 ms covers a write stamped before it waited its turn in the log;
- window: how long before the power loss the earliest lost fact happened;
- history: a task whose history does not match what its row kept (an entry of a change that
  was lost, a kept change without its entry: `servers.history_problems`).

    tests/reliability/powerloss.py [rust|python|node] [--durability normal|full|both|postgres]
                                   [--keep none|prefix|some] [--trials 20] [--seed N] [--smoke]
                                   [--pg-setting NAME=VALUE ...]

`--keep` says what the disk had written of the unsynced writes when the power went: none (the
default), a random prefix in the order they were made, or a random subset
(a disk that reorders), each write kept or lost whole.

Targets: with `?durability=full` and PostgreSQL, 0 lost, 0 reverted, 0 stuck, 0 torn, 0 history;
with the default (`normal`, the redo log), 0 stuck, 0 torn, 0 out of order, 0 history, and the
window reported. Prints one
line per trial and a total per durability; exits 1 when a target is missed. `--smoke` runs 2
trials per durability (tests/run-all); docs/reliability.md quotes a full run.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import shutil
import struct
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from servers import KINDS, ROOT, Client, Server, build, create_until, free_port, history_problems, log

WRITERS = 8
# A fact lost this long before one that survived is out of order (see the docstring).
ORDER_SLACK_S = 0.05
SHIM_SOURCE = Path(__file__).resolve().parent / "powerloss" / "shim.c"


def compile_shim() -> Path:
    """Builds the shim into target/ (cc, as the Rust toolchain's linker is)."""
    out = ROOT / "target" / "powerloss-shim.so"
    out.parent.mkdir(exist_ok=True)
    if not out.exists() or out.stat().st_mtime < SHIM_SOURCE.stat().st_mtime:
        subprocess.run(
            ["cc", "-O2", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC", "-o", str(out), str(SHIM_SOURCE),
             "-ldl", "-lpthread"],
            check=True,
        )
    return out


# -- the disk after the power loss ---------------------------------------------------------------


@dataclass
class File:
    """One file's durable bytes (None: the file does not exist on disk yet) and the operations
    since, in order: ('W', seq, offset, bytes), ('T', seq, length), ('A', seq, offset, length)."""

    durable: bytearray | None
    pending: list[tuple] = field(default_factory=list)


def _apply(image: bytearray, op: tuple) -> None:
    kind = op[0]
    if kind == "W":
        _, _, offset, data = op
        if len(image) < offset:
            image.extend(bytes(offset - len(image)))
        image[offset:offset + len(data)] = data
    elif kind == "T":
        del image[op[2]:]
        if len(image) < op[2]:
            image.extend(bytes(op[2] - len(image)))
    elif kind == "A":
        end = op[2] + op[3]
        if len(image) < end:
            image.extend(bytes(end - len(image)))


def _sync(file: File, before: int) -> None:
    """Makes durable the file's operations with a seq below `before`."""
    keep = []
    for op in file.pending:
        if op[1] < before:
            if file.durable is None:
                file.durable = bytearray()
            _apply(file.durable, op)
        else:
            keep.append(op)
    file.pending = keep


def after_power_loss(journal: Path, initial: dict[str, bytes], keep: str = "none",
                     rng: random.Random | None = None) -> dict[str, bytes]:
    """The files of the directory after a power loss at the journal's end, from `initial` (the
    directory's durable files when the process started): what each file's syncs covered, plus
    what `keep` says the disk had written of the rest before the power went: `none`; `prefix`, the
    unsynced writes up to a random point, in the order they were made; `some`, each one or not at
    random (a disk that reorders; a write is kept or lost whole, not torn within itself)."""
    files = {path: File(bytearray(data)) for path, data in initial.items()}
    raw = journal.read_bytes() if journal.exists() else b""
    at = 0
    # A record cut short by the SIGKILL is the last one: its operation never returned to the
    # process, and counts as not done.
    while at < len(raw):
        try:
            at = _record(raw, at, files)
        except (struct.error, UnicodeDecodeError, IndexError):
            break
    rng = rng or random.Random(0)
    unsynced = sorted(op[1] for f in files.values() for op in f.pending)
    # Ops below `cut` are kept: none of them at k = 0, all at k = len.
    k = rng.randrange(len(unsynced) + 1)
    cut = unsynced[k] if k < len(unsynced) else (unsynced[-1] + 1 if unsynced else 0)
    for file in files.values():
        for op in file.pending:
            if (keep == "prefix" and op[1] < cut) or (keep == "some" and rng.random() < 0.5):
                if file.durable is None:
                    file.durable = bytearray()
                _apply(file.durable, op)
    return {path: bytes(f.durable) for path, f in files.items() if f.durable is not None}


def _pending(file: File | None, kind: str) -> list[tuple]:
    """The operations waiting on a record's file (a write, truncate or allocate names one)."""
    if file is None:
        raise SystemExit(f"journal: a {kind!r} record without a path")
    return file.pending


def _record(raw: bytes, at: int, files: dict[str, File]) -> int:
    """Applies the journal record at `at` to `files`; returns the next record's offset."""

    def take(fmt: str) -> tuple:
        nonlocal at
        values = struct.unpack_from(fmt, raw, at)
        at += struct.calcsize(fmt)
        return values

    kind = chr(raw[at])
    at += 1
    seq, length = take("<QI")
    if at + length > len(raw):
        raise IndexError("cut short")
    path = raw[at:at + length].decode()
    at += length
    file = files.setdefault(path, File(None)) if path else None
    if kind == "W":
        offset, size = take("<QI")
        if at + size > len(raw):
            raise IndexError("cut short")
        _pending(file, kind).append(("W", seq, offset, raw[at:at + size]))
        at += size
    elif kind == "T":
        (size,) = take("<Q")
        _pending(file, kind).append(("T", seq, size))
    elif kind == "A":
        offset, size = take("<QQ")
        _pending(file, kind).append(("A", seq, offset, size))
    elif kind == "S":
        (before,) = take("<Q")
        for target in (files.values() if file is None else [file]):
            _sync(target, before)
    elif kind == "U":
        # The model keeps an unlink at once (a directory's metadata reaches the filesystem's
        # journal within seconds; SQLite unlinks nothing while it runs, and PostgreSQL syncs the
        # directory after it).
        files[path] = File(None)
    elif kind == "R":
        (size,) = take("<I")
        to = raw[at:at + size].decode()
        at += size
        # Like an unlink, applied at once: the file, synced and not, goes by its new name.
        files[to] = files.pop(path)
    else:
        raise SystemExit(f"journal: a {kind!r} record, which the model does not handle")
    return at


# -- one trial ------------------------------------------------------------------------------------


@dataclass
class Outcome:
    creates: int = 0
    completions: int = 0
    lost: int = 0
    reverted: int = 0
    stuck: int = 0
    torn: int = 0
    out_of_order: int = 0
    history: int = 0
    window_ms: float = 0.0


class Postgres:
    """A PostgreSQL server for one trial, on a copy of a clean data directory, started under the
    shim; `power_loss` kills every one of its processes and leaves the directory as the syncs
    covered it, `restart` starts it again without the shim (it recovers from its WAL)."""

    def __init__(self, clean: Path, tmp: Path, shim: Path, settings: list[str]) -> None:
        self.settings = "".join(f" -c {setting}" for setting in settings)
        self.dir = tmp / "pg"
        shutil.copytree(clean, self.dir, symlinks=True)
        self.data = (self.dir / "data").resolve()
        self.initial = {str(p): p.read_bytes() for p in self.data.rglob("*") if p.is_file()}
        self.journal = tmp / "journal"
        self.journal.touch()
        os.chmod(self.journal, 0o666)
        os.chmod(tmp, 0o777)
        self.shim = tmp / "shim.so"  # where the postgres user can read it
        shutil.copy(shim, self.shim)
        os.chmod(self.shim, 0o755)
        _as_postgres(["chown", "-R", "postgres", str(self.dir)], root_only=True)
        self.port = free_port()
        self.url = f"postgres://mcp@127.0.0.1:{self.port}/postgres"
        self._start({"LD_PRELOAD": str(self.shim), "POWERLOSS_DIR": str(self.data),
                     "POWERLOSS_JOURNAL": str(self.journal)})

    def _start(self, env: dict[str, str]) -> None:
        bin_dir = _pg_bin()
        setting = ["env", *[f"{k}={v}" for k, v in env.items()]]
        _as_postgres([*setting, f"{bin_dir}/pg_ctl", "-D", str(self.data), "-l", str(self.dir / "server.log"), "-w",
                      "-o", f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c max_connections=200"
                      + self.settings,
                      "start"])

    def power_loss(self, keep: str, rng: random.Random) -> None:
        pid = int((self.data / "postmaster.pid").read_text().split()[0])
        family = [pid] + _descendants(pid)
        for member in family:
            try:
                os.kill(member, signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 30
        for member in family:
            while _state(member) not in ("Z", "X"):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"PostgreSQL process {member} outlived SIGKILL by 30 s")
                time.sleep(0.01)
        disk = after_power_loss(self.journal, self.initial, keep, rng)
        for stale in self.dir.glob(".s.PGSQL.*"):
            stale.unlink()  # the socket and its lock, held by no process after a reboot
        for stale in list(self.data.rglob("*")):
            if stale.is_file() or stale.is_symlink():
                stale.unlink()
        # After a real power loss no process has the pid postmaster.pid names; here the killed
        # postmaster may linger as a zombie its parent has not reaped, which PostgreSQL would take
        # for a live server.
        disk.pop(str(self.data / "postmaster.pid"), None)
        for path, content in disk.items():
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_bytes(content)
            os.chmod(path, 0o600)
        _as_postgres(["chown", "-R", "postgres", str(self.dir)], root_only=True)

    def restart(self) -> None:
        self._start({})

    def stop(self) -> None:
        subprocess.run(_postgres_command([f"{_pg_bin()}/pg_ctl", "-D", str(self.data), "-m", "immediate", "stop"]),
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)


def _pg_bin() -> str:
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: int(p.parent.name))
    if not found:
        raise SystemExit("no PostgreSQL under /usr/lib/postgresql (tests/pg/start installs it)")
    return str(found[-1])


def _postgres_command(command: list[str]) -> list[str]:
    # PostgreSQL refuses to run as root: as tests/pg/start does, run it as the postgres user.
    return ["runuser", "-u", "postgres", "--", *command] if os.getuid() == 0 else command


def _as_postgres(command: list[str], root_only: bool = False) -> None:
    if root_only and os.getuid() != 0:
        return
    run = command if root_only else _postgres_command(command)
    subprocess.run(run, check=True, cwd="/", stdout=subprocess.DEVNULL)


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for status in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = status.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(status.parent.name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "X"


def trial(kind: str, durability: str, keep: str, shim: Path, rng: random.Random, clean_pg: Path | None,
          pg_settings: list[str]) -> Outcome:
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp, "data").resolve()
        data.mkdir()
        journal = Path(tmp, "journal")
        pg = Postgres(clean_pg, Path(tmp), shim, pg_settings) if clean_pg is not None else None
        if pg is not None:
            # The host keeps nothing of its own: PostgreSQL runs under the shim. A 1 s lease lets
            # the restarted host fail the dead one's tasks soon after it starts.
            store, env, extra = pg.url, {}, ["--lease-ms", "1000", "--sweep-ms", "200"]
        else:
            store = f"sqlite://{data / 'tasks.db'}" + ("?durability=full" if durability == "full" else "")
            env = {"LD_PRELOAD": str(shim), "POWERLOSS_DIR": str(data), "POWERLOSS_JOURNAL": str(journal)}
            extra = []
        try:
            return _run(kind, store, env, extra, data, journal, keep, rng, pg)
        finally:
            if pg is not None:
                pg.stop()


def _run(kind: str, store: str, env: dict[str, str], extra: list[str], data: Path, journal: Path, keep: str,
         rng: random.Random, pg: Postgres | None) -> Outcome:
    server = Server(kind, store, env=env, extra=extra)
    # (the server's time of the fact, task id) of every create and every completion read.
    creates: list[tuple[float, str]] = []
    completions: list[tuple[float, str]] = []
    finishing: list[str] = []
    lock = threading.Lock()
    stop = threading.Event()

    def seconds(n: int) -> float:
        return 0 if n % 4 == 0 else rng.uniform(0.05, 0.4) if n % 4 == 1 else 60

    def on_ack(sleep: float, result: dict[str, Any]) -> None:
        with lock:
            creates.append((_when(result["createdAt"]), result["taskId"]))
            if sleep < 60:
                finishing.append(result["taskId"])

    def watcher() -> None:
        client = Client(server.port, timeout=10)
        seen: set[str] = set()
        while not stop.is_set():
            with lock:
                look = [t for t in finishing if t not in seen]
            for task in look[:200]:
                try:
                    result = client.call("tasks/get", {"taskId": task}).get("result") or {}
                except (OSError, ValueError):
                    break
                if result.get("status") == "completed":
                    seen.add(task)
                    with lock:
                        completions.append((_when(result["lastUpdatedAt"]), task))
            time.sleep(0.005)
        client.close()

    threads = [threading.Thread(target=create_until, args=(server.port, w, stop, seconds, on_ack))
               for w in range(WRITERS)]
    threads.append(threading.Thread(target=watcher))
    for t in threads:
        t.start()
    time.sleep(rng.uniform(0.3, 2.5))
    # The power loss: the database's processes go first (nothing more reaches its disk),
    # then the host.
    killed_at = time.time()
    if pg is not None:
        pg.power_loss(keep, rng)
    server.kill()
    stop.set()
    for t in threads:
        t.join()

    if pg is None:
        # The directory becomes what the syncs covered.
        disk = after_power_loss(journal, {}, keep, rng)
        shutil.rmtree(data)
        data.mkdir()
        for path, content in disk.items():
            if path.endswith("-shm"):
                continue  # SQLite rebuilds its shared-memory index when it opens the file
            Path(path).write_bytes(content)

    outcome = Outcome(creates=len(creates), completions=len(completions))
    try:
        if pg is not None:
            pg.restart()
        server = Server(kind, store, extra=extra)
    except (RuntimeError, subprocess.CalledProcessError) as e:
        log(f"  the store did not open after the power loss: {e}")
        if pg is not None:
            log("\n".join((pg.dir / "server.log").read_text(errors="replace").splitlines()[-15:]))
        outcome.torn = 1
        return outcome
    if pg is not None:
        time.sleep(3)  # the dead host's lease (1 s) lapses and a sweep fails its tasks
    try:
        client = Client(server.port)
        lost_at: list[float] = []
        kept_at: list[float] = []
        now: dict[str, dict] = {}
        for at, task in creates:
            answer = client.call("tasks/get", {"taskId": task})
            result = answer.get("result")
            if result is None:
                if answer.get("error", {}).get("code") != -32602:
                    outcome.torn += 1  # an error other than "unknown task"
                outcome.lost += 1
                lost_at.append(at)
                continue
            now[task] = result
            kept_at.append(at)
            if result.get("status") in ("working", "input_required"):
                outcome.stuck += 1
            if result.get("status") == "completed" and not _has_result(result):
                outcome.torn += 1
        for at, task in completions:
            if now.get(task, {}).get("status") == "completed":
                kept_at.append(at)
            else:
                outcome.reverted += 1
                lost_at.append(at)
        client.close()
    finally:
        server.kill()
    problems = history_problems(store, psql=f"{_pg_bin()}/psql" if pg is not None else None)
    for problem in problems[:5]:
        log(f"  history: {problem}")
    outcome.history = len(problems)
    if lost_at:
        earliest = min(lost_at)
        outcome.window_ms = (killed_at - earliest) * 1000
        outcome.out_of_order = sum(1 for at in kept_at if at > earliest + ORDER_SLACK_S)
    return outcome


def _when(stamp: str) -> float:
    """Seconds since the epoch of a task's RFC 3339 time (`2026-12-03T02:00:00.123Z`)."""
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def _has_result(task: dict) -> bool:
    """Whether a completed task carries its tool's result (a CallToolResult with content)."""
    result = task.get("result")
    return isinstance(result, dict) and bool(result.get("content"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kind", nargs="?", choices=KINDS, default="rust")
    parser.add_argument("--durability", choices=("normal", "full", "both", "postgres"), default="both",
                        help="SQLite's (both: normal, then full), or PostgreSQL (tests/pg/start's server)")
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--keep", choices=("none", "prefix", "some"), default="none",
                        help="what the disk had written of the unsynced writes (see after_power_loss)")
    parser.add_argument("--pg-setting", action="append", default=[], metavar="NAME=VALUE",
                        help="a PostgreSQL setting (-c): synchronous_commit=off shows what the trials catch")
    parser.add_argument("--smoke", action="store_true", help="2 trials per durability (CI)")
    args = parser.parse_args()
    trials = 2 if args.smoke else args.trials
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    build(args.kind)
    shim = compile_shim()
    clean_pg = None
    if args.durability == "postgres":
        # One clean data directory (initdb, then a clean stop), copied for each trial.
        clean_pg = Path(tempfile.mkdtemp(prefix="powerloss-pg-"))
        subprocess.run([str(ROOT / "tests/pg/start"), str(clean_pg)], check=True, stdout=subprocess.DEVNULL)
        subprocess.run([str(ROOT / "tests/pg/stop"), str(clean_pg)], check=True)
    log(f"power loss: {args.kind} server, {trials} trials per durability, unsynced writes kept: {args.keep}, "
        f"seed {seed}")
    failed = False
    for durability in (("normal", "full") if args.durability == "both" else (args.durability,)):
        total = Outcome()
        windows = []
        for i in range(trials):
            o = trial(args.kind, durability, args.keep, shim, rng, clean_pg, args.pg_setting)
            log(f"  {durability} trial {i + 1}: {o.creates} creates and {o.completions} completions acknowledged; "
                f"lost {o.lost}, reverted {o.reverted}, stuck {o.stuck}, torn {o.torn}, "
                f"out of order {o.out_of_order}, history {o.history}, window {o.window_ms:.0f} ms")
            for name in ("creates", "completions", "lost", "reverted", "stuck", "torn", "out_of_order", "history"):
                setattr(total, name, getattr(total, name) + getattr(o, name))
            if o.lost or o.reverted:
                windows.append(o.window_ms)
        missed = total.stuck + total.torn + total.out_of_order + total.history
        if durability in ("full", "postgres"):
            missed += total.lost + total.reverted
        failed |= missed > 0
        window = f"window max {max(windows):.0f} ms, median {sorted(windows)[len(windows) // 2]:.0f} ms " \
                 f"({len(windows)} of {trials} trials lost something)" if windows else "nothing lost in any trial"
        log(f"{durability}: {total.creates} creates and {total.completions} completions acknowledged; "
            f"lost {total.lost}, reverted {total.reverted}, stuck {total.stuck}, torn {total.torn}, "
            f"out of order {total.out_of_order}, history {total.history}; {window}")
    if clean_pg is not None:
        shutil.rmtree(clean_pg, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The judge endpoint pool: one ``vllm serve`` of the pinned Qwen3-32B per GPU group, as upstream's launcher starts it.

Upstream (``rlvr/evaluation/scripts/run_trace_eval.sh`` -> ``start_vllm_endpoint_pool.sh``) starts the judge only
after generation, on the same GPU groups, one server per group on ports ``JUDGE_PORT_START + i`` with
:data:`JUDGE_SERVE_FLAGS` plus ``--reasoning-parser qwen3 --chat-template rlvr/examples/prompts/
chat_template_no_think.jinja`` (read from the release, its SHA-256 checked against ``rlvr/release_files.v1.json``),
``--tensor-parallel-size`` = the group's size, and per-server environment (``CUDA_VISIBLE_DEVICES``, ``VLLM_PORT =
29000 + 100 i``, 8 CPU threads). :func:`start_pool` writes ``pids.txt`` (``pid port group log`` per line, upstream's
format) and ``pool.json`` (each server's identity: pid, kernel start time, boot id) into the log directory, waits
until every ``/v1/models`` lists the judge, writes ``endpoints.txt`` and leaves the servers running; when one server
dies or the wait times out or is interrupted it stops what it started and leaves no ``endpoints.txt``.
:func:`stop_pool` sends SIGTERM to each server's process group, then SIGKILL after a grace period (upstream's
``stop_vllm_endpoint_pool.sh``).

``pids.txt`` is input: a process group is signalled only when its leader is a server this suite started and still
the same process (its pid, start time and boot match ``pool.json``, and it leads its own session). Pid 0, 1, a
negative pid or the caller's own process group is a one-line error before anything is signalled.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from trace_lib.atomic import write_json_atomic, write_text_atomic
from trace_lib.decoding import ascii_digits
from trace_lib.errors import InputError, JudgeError, UsageError
from trace_lib.interrupts import pause
from trace_lib.outputs import check_replaceable
from trace_lib.release import identity
from trace_lib.release.load import sha256_file
from trace_lib.scoring.judge import JUDGE_SERVED_NAME

#: Release path of the no-think chat template upstream's launcher passes to the judge servers.
CHAT_TEMPLATE_REL = "rlvr/examples/prompts/chat_template_no_think.jinja"
#: ``run_trace_eval.sh``: JUDGE_PORT_START, JUDGE_SERVED_NAME, JUDGE_MAX_MODEL_LEN, JUDGE_MAX_NUM_SEQS,
#: JUDGE_MAX_NUM_BATCHED_TOKENS, JUDGE_GPU_MEMORY_UTILIZATION, the reasoning parser; the launcher's defaults for
#: HOST, VLLM_PORT_BASE, the multimodal limit, CPU threads and READY_TIMEOUT_SEC.
JUDGE_PORT_START = 18100
JUDGE_HOST = "127.0.0.1"
JUDGE_SERVE_FLAGS: tuple[tuple[str, str], ...] = (
    ("--gpu-memory-utilization", "0.90"),
    ("--max-model-len", "8192"),
    ("--max-num-seqs", "128"),
    ("--max-num-batched-tokens", "32768"),
    ("--limit-mm-per-prompt", '{"image":24,"video":3}'),
)
JUDGE_REASONING_PARSER = "qwen3"
VLLM_PORT_BASE = 29000
CPU_THREADS_PER_SERVER = 8
READY_TIMEOUT_S = 900.0
STOP_GRACE_S = 10.0
PIDS_FILE = "pids.txt"
ENDPOINTS_FILE = "endpoints.txt"
#: Identity of every server :func:`start_pool` started (what :func:`stop_pool` checks before signalling).
RECORD_FILE = "pool.json"
_BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


@dataclass(frozen=True)
class PoolSpec:
    """What to start: the judge weights, the GPU groups (one server each) and where logs and pids go."""

    model_root: Path
    gpu_groups: tuple[str, ...]  # "0,1" per group (comma-separated GPU ids)
    log_dir: Path
    chat_template: Path | None
    served_names: tuple[str, ...] = (JUDGE_SERVED_NAME,)
    port_start: int = JUDGE_PORT_START
    host: str = JUDGE_HOST
    vllm: str = "vllm"
    ready_timeout_s: float = READY_TIMEOUT_S
    extra_args: tuple[str, ...] = ()
    #: each server's share of its GPUs' memory (None: upstream's 0.90); less leaves room for generation engines
    gpu_memory_utilization: float | None = None

    def port(self, i: int) -> int:
        return self.port_start + i

    def urls(self) -> list[str]:
        return [f"http://{self.host}:{self.port(i)}/v1" for i in range(len(self.gpu_groups))]


@dataclass(frozen=True)
class Server:
    """One started server: its process group leader's pid, port, GPU group and log file; ``start_ticks`` is the
    leader's kernel start time (``/proc/PID/stat`` field 22) when it was started, ``None`` when unknown."""

    pid: int
    port: int
    group: str
    log: Path
    start_ticks: int | None = None


@dataclass(frozen=True)
class ProcessIdentity:
    """What ``/proc/PID/stat`` says of a live (not zombie) process."""

    start_ticks: int
    pgid: int
    sid: int


def process_identity(pid: int) -> ProcessIdentity | None:
    """``pid``'s start time, process group and session from ``/proc``; ``None`` when it is gone or a zombie."""
    try:
        data = Path(f"/proc/{int(pid)}/stat").read_bytes()
    except OSError:
        return None
    fields = data.rsplit(b")", 1)[-1].split()  # fields[0] is field 3 (state); comm may hold spaces and ')'
    if len(fields) < 20 or fields[0] in (b"Z", b"X"):
        return None
    return ProcessIdentity(start_ticks=int(fields[19]), pgid=int(fields[2]), sid=int(fields[3]))


def boot_id() -> str | None:
    try:
        return _BOOT_ID.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None


def observe_server(pid: int, port: int, group: str, log: Path) -> Server:
    """The record of a server this process has just started (its start time read from ``/proc``)."""
    identity_now = process_identity(pid)
    return Server(pid, port, group, Path(log), identity_now.start_ticks if identity_now else None)


def check_pid(pid: int, *, file: str | None = None, field: str | None = None) -> None:
    """``pid`` can name a server's process group: not 0, 1, negative, nor the caller's own process group.

    Raises:
        InputError: it cannot.
    """
    if pid == 0 or pid in (os.getpgrp(), os.getpid()):
        what = "the caller's own process group"
    elif pid == 1:
        what = "init"
    elif pid < 0:
        what = "every process (a negative pid)"
    else:
        return
    raise InputError(f"pid {pid} would signal {what}; nothing was signalled", file=file, field=field,
                     hint="pids.txt must list the servers 'trace-repro judge serve' started")


def owned(server: Server, *, boot: str | None) -> bool:
    """``server`` is still the process group leader this suite started: same pid, same kernel start time, same
    boot (``boot`` is the recorded boot id), and it leads its own session."""
    if server.start_ticks is None or boot is None or boot != boot_id():
        return False
    now = process_identity(server.pid)
    return (now is not None and now.start_ticks == server.start_ticks and now.pgid == server.pid
            and now.sid == server.pid)


@dataclass
class Pool:
    """A started pool (what ``pids.txt`` records) and its endpoint URLs."""

    spec: PoolSpec
    servers: list[Server] = field(default_factory=list)
    processes: list[subprocess.Popen] = field(default_factory=list, repr=False)  # when started by this process

    def stop(self, *, grace_s: float = STOP_GRACE_S, out: Any = None) -> list[Server]:
        """Stop every server of this pool (and reap the ones this process started); empties ``pids.txt`` and
        removes ``pool.json`` and ``endpoints.txt``."""
        stopped = stop_servers([s for s in self.servers if owned(s, boot=boot_id())], grace_s=grace_s, out=out,
                               children=self.processes)
        self.servers = [s for s in self.servers if s not in stopped and process_identity(s.pid) is not None]
        for process in self.processes:
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        _clear_records(self.spec.log_dir)
        return stopped

    @property
    def urls(self) -> list[str]:
        return [f"http://{self.spec.host}:{s.port}/v1" for s in self.servers]

    @property
    def judge_url(self) -> str:
        """The ``--judge-url`` value that spreads requests over the whole pool."""
        return ",".join(self.urls)

    @property
    def pids_file(self) -> Path:
        return self.spec.log_dir / PIDS_FILE


def release_chat_template(release: Any) -> Path:
    """The release's ``chat_template_no_think.jinja``, its SHA-256 checked against ``release_files.v1.json``.

    Raises:
        InputError: the file is absent (a data-only release copy) or differs from the release's record.
    """
    path = Path(release.path) / CHAT_TEMPLATE_REL
    if not path.is_file():
        raise InputError("the judge's no-think chat template is not in this release copy (a data-only copy?)",
                         file=str(path),
                         hint="point --trace-root at the full TRACE release, or pass --chat-template FILE "
                              "(a copy of it)")
    expected = None
    try:
        record = json.loads((Path(release.path) / identity.RELEASE_FILES).read_text(encoding="utf-8"))
        rel = CHAT_TEMPLATE_REL.removeprefix("rlvr/")
        expected = next((f.get("sha256") for f in record.get("files", []) if f.get("path") == rel), None)
    except (OSError, ValueError, AttributeError):
        expected = None
    found = sha256_file(path)
    if expected is not None and found != expected:
        raise InputError("chat template differs from the release record", file=str(path), field="sha256",
                         expected=expected, found=found)
    return path


def check_weights(model_root: Path) -> None:
    """The judge directory holds a config and weight files.

    Raises:
        InputError: missing directory, ``config.json`` or ``*.safetensors``/``*.bin`` weights.
    """
    root = Path(model_root)
    hint = "download it with 'trace-repro prepare-models' (Qwen/Qwen3-32B at the pinned revision) or pass --model-root"
    if not root.is_dir():
        raise InputError("judge weights missing (no such directory)", file=str(root), hint=hint)
    if not (root / "config.json").is_file():
        raise InputError("judge weights missing (no config.json)", file=str(root), hint=hint)
    if not any(root.glob("*.safetensors")) and not any(root.glob("*.bin")):
        raise InputError("judge weights missing (no *.safetensors or *.bin files)", file=str(root), hint=hint)


def port_taken(host: str, port: int) -> bool:
    """True when something already listens on ``host:port`` (or this user may not bind it).

    Raises:
        UsageError: ``host`` is not an IPv4 address or name of this machine (``--host``).
    """
    check_host(host)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                return True
            raise UsageError(f"cannot listen on {host}:{port} ({exc.strerror or exc})", field="--host",
                             found=host) from None
    return False


def check_host(host: str) -> None:
    """``host`` resolves to an IPv4 address a server here could listen on.

    Raises:
        UsageError: it does not (one line naming ``--host``).
    """
    try:
        socket.getaddrinfo(host, None, socket.AF_INET, socket.SOCK_STREAM)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind((host, 0))  # any free port: only whether this machine has the address is asked
    except (socket.gaierror, UnicodeError, ValueError) as exc:
        raise UsageError(f"not a host name or IPv4 address ({exc})", field="--host", found=host) from None
    except OSError as exc:
        raise UsageError(f"not an address of this machine ({exc.strerror or exc})", field="--host",
                         found=host) from None


def serve_command(spec: PoolSpec, i: int) -> list[str]:
    """The ``vllm serve`` argv of server ``i`` (upstream's flags; the TP size is the group's size)."""
    group = spec.gpu_groups[i]
    argv = [spec.vllm, "serve", str(spec.model_root), "--served-model-name", *spec.served_names,
            "--host", spec.host, "--port", str(spec.port(i)), "--trust-remote-code",
            "--tensor-parallel-size", str(len(group.split(",")))]
    for flag, value in JUDGE_SERVE_FLAGS:
        if flag == "--gpu-memory-utilization" and spec.gpu_memory_utilization is not None:
            value = f"{spec.gpu_memory_utilization:g}"  # a judge sharing its GPU with generation engines
        argv += [flag, value]
    argv += ["--reasoning-parser", JUDGE_REASONING_PARSER]
    if spec.chat_template is not None:
        argv += ["--chat-template", str(spec.chat_template)]
    return argv + list(spec.extra_args)


def serve_environment(spec: PoolSpec, i: int, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """Server ``i``'s environment: its GPUs, vLLM's internal port, upstream's thread settings."""
    env = dict(os.environ if base is None else base)
    threads = str(CPU_THREADS_PER_SERVER)
    env.update({
        "CUDA_VISIBLE_DEVICES": spec.gpu_groups[i],
        "VLLM_PORT": str(VLLM_PORT_BASE + i * 100),
        "VLLM_WORKER_MULTIPROC_METHOD": env.get("VLLM_WORKER_MULTIPROC_METHOD", "spawn"),
        "VLLM_DISABLE_COMPILE_CACHE": env.get("VLLM_DISABLE_COMPILE_CACHE", "1"),
        "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads, "OPENBLAS_NUM_THREADS": threads,
        "NUMEXPR_NUM_THREADS": threads, "TOKENIZERS_PARALLELISM": "false",
    })
    return env


def _last_log_line(path: Path) -> str:
    try:
        lines = [ln.strip() for ln in path.read_text(encoding="utf-8", errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1][:200] if lines else ""


def _ready(url: str, names: Sequence[str]) -> bool:
    """``url``'s ``/v1/models`` answers and lists ``names[0]`` (:func:`~trace_lib.scoring.judge_http.probe`)."""
    from trace_lib.scoring.judge_http import probe

    try:
        probe(url, names[0], timeout_s=5.0)
    except JudgeError:
        return False
    return True


def start_pool(spec: PoolSpec, *, poll_s: float = 1.0, out: Any = None) -> Pool:
    """Start one server per GPU group and wait until all are ready (module docstring).

    Raises:
        InputError: judge weights missing.
        UsageError: a port is taken, or the ``vllm`` executable is not found.
        JudgeError: a server exited while starting, or was not ready within ``ready_timeout_s`` (everything
            started is stopped first). KeyboardInterrupt also stops everything started, then propagates.
    """
    from trace_lib.outputs import check_output_dir

    check_output_dir(spec.log_dir, flag="--log-dir")
    check_host(spec.host)
    check_weights(spec.model_root)
    executable = shutil.which(spec.vllm)
    if executable is None:
        raise UsageError("vllm executable not found", field="--vllm", found=spec.vllm,
                         hint="install vLLM (pip install 'trace-repro[eval]') or pass --vllm PATH")
    for i in range(len(spec.gpu_groups)):
        if port_taken(spec.host, spec.port(i)):
            raise UsageError(f"port {spec.port(i)} is taken", field="--port-start", found=spec.port_start,
                             hint="another judge pool? stop it with 'trace-repro judge stop', or choose --port-start")
    spec.log_dir.mkdir(parents=True, exist_ok=True)
    pool = Pool(spec)
    boot = boot_id()
    (spec.log_dir / ENDPOINTS_FILE).unlink(missing_ok=True)  # written once every server is ready
    write_text_atomic(pool.pids_file, "")
    processes: list[subprocess.Popen] = []
    try:
        for i, group in enumerate(spec.gpu_groups):
            log = spec.log_dir / f"endpoint_{i}_port_{spec.port(i)}_gpu_{group.replace(',', '')}.log"
            argv = serve_command(spec, i)
            argv[0] = executable
            check_replaceable(log)  # a log path that is a FIFO, device or link is refused, never written through
            with open(log, "wb") as handle:
                process = subprocess.Popen(argv, stdout=handle, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                           env=serve_environment(spec, i), start_new_session=True)
            processes.append(process)
            server = observe_server(process.pid, spec.port(i), group, log)
            pool.servers.append(server)
            write_records(spec.log_dir, pool.servers, boot)
            if out is not None:
                print(f"[judge] start port={server.port} gpus={group} pid={server.pid} log={log}", file=out, flush=True)
        deadline = time.monotonic() + spec.ready_timeout_s
        waiting = list(range(len(processes)))
        while waiting:
            for i in list(waiting):
                code = processes[i].poll()
                server = pool.servers[i]
                if code is not None:
                    raise JudgeError(f"judge server on port {server.port} exited with code {code} while starting"
                                     f" ({_last_log_line(server.log) or 'empty log'})", file=str(server.log))
                if _ready(f"http://{spec.host}:{server.port}/v1", spec.served_names):
                    waiting.remove(i)
                    if out is not None:
                        print(f"[judge] ready port={server.port}", file=out, flush=True)
            if waiting and time.monotonic() >= deadline:
                server = pool.servers[waiting[0]]
                raise JudgeError(f"judge server on port {server.port} not ready within {spec.ready_timeout_s:g} s",
                                 file=str(server.log), hint="see its log; raise --ready-timeout for slow disks")
            if waiting:
                pause(poll_s)  # a stop signal Python discarded (see trace_lib.interrupts) is raised here again
    except BaseException:
        pool.processes = processes
        pool.stop(grace_s=5.0)
        raise
    pool.processes = processes
    write_text_atomic(spec.log_dir / ENDPOINTS_FILE, "".join(u + "\n" for u in spec.urls()))
    return pool


def write_records(log_dir: Path, servers: Sequence[Server], boot: str | None) -> None:
    """``pids.txt`` (upstream's ``pid port group log`` lines) and ``pool.json`` (the identities of those whose start
    time is known: only an identity vouches for a server), each atomically."""
    write_text_atomic(log_dir / PIDS_FILE, "".join(f"{s.pid} {s.port} {s.group} {s.log}\n" for s in servers))
    write_json_atomic(log_dir / RECORD_FILE, {"boot_id": boot, "servers": [
        {"pid": s.pid, "port": s.port, "group": s.group, "log": str(s.log), "start_ticks": s.start_ticks}
        for s in servers if s.start_ticks is not None]}, indent=1)


def _clear_records(log_dir: Path) -> None:
    """After a stop: an empty ``pids.txt`` (as upstream's stop script leaves it), no identities, no endpoints."""
    if log_dir.is_dir():
        write_text_atomic(log_dir / PIDS_FILE, "")
        (log_dir / RECORD_FILE).unlink(missing_ok=True)
        (log_dir / ENDPOINTS_FILE).unlink(missing_ok=True)


def _reap(children: Sequence[subprocess.Popen]) -> None:
    for child in children:
        child.poll()  # a leader this process started is a zombie until reaped: reap it so it counts as gone


def group_alive(pgid: int) -> bool:
    """Some live (not zombie) process is in process group ``pgid`` (read from ``/proc``)."""
    for entry in os.scandir("/proc"):
        if not ascii_digits(entry.name):
            continue
        now = process_identity(int(entry.name))
        if now is not None and now.pgid == pgid:
            return True
    return False


def _signal_group(pgid: int, sig: int) -> None:
    """``killpg(pgid, sig)`` for a group :func:`owned` vouched for (never 0, 1 or the caller's own group)."""
    check_pid(pgid)
    try:
        os.killpg(pgid, sig)  # each server leads its own session (start_new_session), like upstream's setsid
    except ProcessLookupError:
        pass


def stop_servers(servers: Sequence[Server], *, grace_s: float = STOP_GRACE_S, out: Any = None,
                 children: Sequence[subprocess.Popen] = ()) -> list[Server]:
    """SIGTERM the process group of each of ``servers`` (already checked with :func:`owned`), wait up to
    ``grace_s`` for every member of every group to exit, SIGKILL the groups still alive; returns ``servers``.
    ``children`` are the leaders' ``Popen`` objects when this process started them (reaped while waiting)."""
    for server in servers:
        if out is not None:
            print(f"[judge] stop pid={server.pid} port={server.port} gpus={server.group}", file=out, flush=True)
        _signal_group(server.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while True:
        _reap(children)
        if not any(group_alive(s.pid) for s in servers) or time.monotonic() >= deadline:
            break
        time.sleep(0.05)
    for server in servers:
        if group_alive(server.pid):  # a live member keeps the pgid from being reused, so the group is still ours
            if out is not None:
                print(f"[judge] kill pid={server.pid} port={server.port}", file=out, flush=True)
            _signal_group(server.pid, signal.SIGKILL)
    _reap(children)
    return list(servers)


def read_pids(log_dir: Path) -> list[Server]:
    """The servers ``pids.txt`` in ``log_dir`` records, with the start times ``pool.json`` records for them.

    Raises:
        InputError: no ``pids.txt`` there; it is not UTF-8 text; a line that is not ``pid port group log``; a pid
            of 0, 1, a negative one or the caller's own process group.
    """
    from trace_lib.decoding import check_input_file, read_text

    path = Path(log_dir) / PIDS_FILE
    if Path(log_dir).exists() and not Path(log_dir).is_dir():
        raise InputError("--log-dir is not a directory", file=str(log_dir),
                         hint="pass the --log-dir the pool was started with")
    try:
        check_input_file(path)  # a FIFO or device is refused, never opened
    except FileNotFoundError:
        raise InputError("no judge pool here (pids.txt missing)", file=str(path),
                         hint="pass the --log-dir the pool was started with") from None
    record = _read_record(Path(log_dir), strict=True)
    recorded = {entry["pid"]: entry.get("start_ticks") for entry in record["servers"]}
    servers = []
    for number, line in enumerate(read_text(path).splitlines(), start=1):
        parts = line.split(maxsplit=3)
        if not parts:
            continue
        if len(parts) != 4 or not ascii_digits(parts[0].removeprefix("-")) or not ascii_digits(parts[1]):
            raise InputError("not 'pid port group log'", file=str(path), field=f"line {number}", found=line[:80])
        pid = int(parts[0])
        check_pid(pid, file=str(path), field=f"line {number}")
        start = recorded.get(pid)
        servers.append(Server(pid, int(parts[1]), parts[2], Path(parts[3]), start if isinstance(start, int) else None))
    return servers


def _read_record(log_dir: Path, *, strict: bool = False) -> dict[str, Any]:
    """``pool.json`` (``{"boot_id": None, "servers": []}`` when absent: nothing is vouched for). Unreadable, it is
    that empty record too, unless ``strict`` (``judge stop``: a record it cannot read is never overwritten).

    Raises:
        InputError: ``strict`` and ``pool.json`` is not a regular file, not strict JSON or not a pool record.
    """
    from trace_lib.decoding import check_input_file, read_text
    from trace_lib.jsonio import loads_strict, strict_error

    empty: dict[str, Any] = {"boot_id": None, "servers": []}
    path = log_dir / RECORD_FILE
    try:
        record = loads_strict(read_text(check_input_file(path)))
    except FileNotFoundError:
        return empty
    except InputError:  # a FIFO, a device, not UTF-8: the line names it
        if strict:
            raise
        return empty
    except ValueError as exc:
        if strict:
            raise InputError(f"the pool record is unreadable: {strict_error(exc)}", file=str(path),
                             hint="nothing was signalled or removed; repair or move it away") from None
        return empty
    if not isinstance(record, dict) or not isinstance(record.get("servers"), list):
        if strict:
            raise InputError("not a pool record", file=str(path), field="servers",
                             hint="nothing was signalled or removed; repair or move it away")
        return empty
    record["servers"] = [e for e in record["servers"] if isinstance(e, dict) and isinstance(e.get("pid"), int)]
    return record


def stop_pool(log_dir: Path, *, grace_s: float = STOP_GRACE_S, out: Any = None) -> list[Server]:
    """Stop the pool recorded in ``log_dir``; returns the servers that were running. The record keeps the lines of
    processes still running that were not signalled (:func:`read_pids` reads them back); with none, ``pids.txt`` is
    emptied and ``pool.json`` and ``endpoints.txt`` removed.

    Only servers :func:`owned` vouches for are signalled; every other line of ``pids.txt`` gets a ``[judge] skip``
    line on ``out`` (exited, pid reused, or never started by this suite).

    Raises:
        InputError: as :func:`read_pids`, or an unreadable ``pool.json`` (nothing is signalled or removed then).
        UsageError: ``pids.txt``, ``pool.json`` or ``endpoints.txt`` is not a regular file (the same).
    """
    log_dir = Path(log_dir)
    servers = read_pids(log_dir)
    record = _read_record(log_dir, strict=True)
    for name in (PIDS_FILE, RECORD_FILE, ENDPOINTS_FILE):  # what the stop rewrites or removes: regular files only
        check_replaceable(log_dir / name)
    boot = record.get("boot_id")
    ours = [s for s in servers if owned(s, boot=boot)]
    for server in servers:
        if server not in ours and out is not None:
            reason = ("not running" if process_identity(server.pid) is None else
                      "not a server this suite started (no matching record in pool.json)")
            print(f"[judge] skip pid={server.pid} port={server.port}: {reason}; not signalled", file=out, flush=True)
    stopped = stop_servers(ours, grace_s=grace_s, out=out)
    kept = [s for s in servers if s not in stopped and process_identity(s.pid) is not None]
    if kept == servers:  # nothing stopped, nothing gone: the record stays byte for byte
        return stopped
    if kept:  # running but not vouched for: never signalled, not forgotten, and still not vouched for later
        write_records(log_dir, kept, boot)
    else:
        _clear_records(log_dir)
    return stopped


def pool_spec(
    release: Any,
    *,
    model_root: str | Path | None = None,
    judge_model: str | Path | None = None,
    gpu_groups: str = "0 1 2 3 4 5 6 7",
    port_start: int = JUDGE_PORT_START,
    host: str = JUDGE_HOST,
    chat_template: str | Path | None = None,
    vllm: str = "vllm",
    ready_timeout_s: float = READY_TIMEOUT_S,
    log_dir: Path,
    extra_args: Sequence[str] = (),
    gpu_memory_utilization: float | None = None,
) -> PoolSpec:
    """The pool upstream's launcher would start, from the release: served names (the evaluation judge's and the
    TRACE validation suite's), the no-think chat template (``chat_template`` overrides the release file);
    ``gpu_memory_utilization`` replaces upstream's 0.90 (a judge sharing its GPUs with generation engines).

    Raises:
        UsageError: bad GPU groups, port or timeout. InputError: the release lacks the chat template.
    """
    from trace_lib.options import MODEL_ROOT_ENV, cuda_visible_devices, parse_gpu_groups, work_root
    from trace_lib.release.validation_suite import load_validation_suite
    from trace_lib.scoring.judge import JUDGE_SLUG

    groups = tuple(cuda_visible_devices(group) for group in parse_gpu_groups(gpu_groups))  # one per server
    if not 1 <= port_start <= 65536 - len(groups):  # server i listens on port_start + i
        raise UsageError("not a port", field="--port-start", found=port_start)
    if not ready_timeout_s > 0:
        raise UsageError("must be positive", field="--ready-timeout", found=ready_timeout_s)
    weights = (Path(judge_model) if judge_model
               else work_root(model_root, MODEL_ROOT_ENV.name, "models", directory="--model-root") / JUDGE_SLUG)
    template = Path(chat_template) if chat_template else release_chat_template(release)
    if chat_template and not template.is_file():
        raise InputError("no such chat template", file=str(template))
    names = [JUDGE_SERVED_NAME]
    validation_name = load_validation_suite(release).judge.served_model_name
    if validation_name not in names:
        names.append(validation_name)
    return PoolSpec(model_root=weights.expanduser().resolve(), gpu_groups=groups, log_dir=Path(log_dir),
                    chat_template=template.resolve(), served_names=tuple(names), port_start=port_start, host=host,
                    vllm=vllm, ready_timeout_s=ready_timeout_s, extra_args=tuple(extra_args),
                    gpu_memory_utilization=gpu_memory_utilization)

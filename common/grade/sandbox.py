"""sandbox.py: one command of a submission's, run where it can do no harm.

Note: [the sandbox] Bubblewrap (Debian's `bubblewrap`) gives the command new
namespaces: its own network (loopback only: the tests' MPI ranks talk over
it), its own processes, and a file system that holds only what is bound into
it: /usr and the few files of /etc that MPI reads, read-only; the grading kit,
LibTorch and the common headers, read-only; and the submission's own folders.
Neither solutions/ nor hints.md nor another submission is there to be read.
As root (CI, a machine of the instructor's), the command runs as `nobody`
(setpriv), since a process limit does not bind root, in a cgroup of its own
whose memory.max (memory.limit_in_bytes) and pids.max bound it; prlimit bounds
each process's CPU time and file size, and this module the wall-clock time
and the bytes printed, which it counts as it reads them. Without root there
are no cgroups to make: the limits are prlimit's per-process ones (data size,
processes of the user), weaker, and the gradebook says so.
Why bubblewrap and not `unshare` with mounts of our own: it is the tool
Flatpak runs every application in, it builds the whole view from an empty
root (nothing is visible unless bound), and it ends everything it started
when its parent dies (--die-with-parent).
"""
from __future__ import annotations

import dataclasses
import itertools
import os
import select
import shutil
import signal
import subprocess
import time
from pathlib import Path

NOBODY = 65534
KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30


@dataclasses.dataclass
class Limits:
    wall_s: float = 300.0
    cpu_s: int = 300            # per process
    memory_bytes: int = 4 * GIB  # the whole command, every process
    pids: int = 256
    output_bytes: int = 8 * MIB  # stdout and stderr together
    file_bytes: int = 1 * GIB    # any one file written


@dataclasses.dataclass
class Outcome:
    exit_code: int
    reason: str | None  # a bound it hit, as the gradebook says it; None when none
    output: str         # the first and last 32 KiB of what it printed
    wall_s: float


def describe_bytes(n: int) -> str:
    return f"{n / GIB:g} GiB" if n >= GIB else f"{n / MIB:g} MiB"


class _CGroups:
    """The command's cgroups: cgroup v2's one folder, or v1's memory and pids folders."""

    def __init__(self, name: str, limits: Limits):
        root = Path("/sys/fs/cgroup")
        self.v2 = (root / "cgroup.controllers").exists()
        self.dirs: list[Path] = []
        if self.v2:
            wanted = {"memory", "pids"}
            enabled = set((root / "cgroup.subtree_control").read_text().split())
            if not wanted <= enabled:
                (root / "cgroup.subtree_control").write_text(" ".join("+" + c for c in sorted(wanted - enabled)))
            d = root / name
            d.mkdir()
            self.dirs = [d]
            (d / "memory.max").write_text(str(limits.memory_bytes))
            if (d / "memory.swap.max").exists():
                (d / "memory.swap.max").write_text("0")
            (d / "pids.max").write_text(str(limits.pids))
            self.memory, self.pids = d, d
        else:
            self.memory, self.pids = root / "memory" / name, root / "pids" / name
            for d in (self.memory, self.pids):
                d.mkdir()
                self.dirs.append(d)
            (self.memory / "memory.limit_in_bytes").write_text(str(limits.memory_bytes))
            if (self.memory / "memory.memsw.limit_in_bytes").exists():  # no swap either
                (self.memory / "memory.memsw.limit_in_bytes").write_text(str(limits.memory_bytes))
            (self.pids / "pids.max").write_text(str(limits.pids))

    def enter(self) -> None:  # in the child, before exec
        for d in self.dirs:
            (d / "cgroup.procs").write_text(str(os.getpid()))

    def _count(self, file: Path, key: str) -> int:
        try:
            for line in file.read_text().splitlines():
                k, _, v = line.partition(" ")
                if k == key:
                    return int(v)
        except OSError:
            pass
        return 0

    def out_of_memory(self) -> bool:
        if self.v2:
            return self._count(self.memory / "memory.events", "oom_kill") > 0
        return self._count(self.memory / "memory.oom_control", "oom_kill") > 0 or \
            int((self.memory / "memory.failcnt").read_text() or 0) > 0 and \
            self._count(self.memory / "memory.oom_control", "under_oom") > 0

    def hit_process_limit(self) -> bool:
        return self._count(self.pids / "pids.events", "max") > 0

    def kill_all(self) -> None:
        for _ in range(100):
            pids = set()
            for d in self.dirs:
                try:
                    pids |= {int(p) for p in (d / "cgroup.procs").read_text().split()}
                except OSError:
                    pass
            if not pids:
                return
            if self.v2 and (self.dirs[0] / "cgroup.kill").exists():
                (self.dirs[0] / "cgroup.kill").write_text("1")
            else:
                for p in pids:
                    try:
                        os.kill(p, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
            time.sleep(0.05)

    def remove(self) -> None:
        self.kill_all()
        for d in self.dirs:
            for _ in range(50):
                try:
                    d.rmdir()
                    break
                except OSError:
                    time.sleep(0.05)


def _user_processes() -> int:
    """The user's processes and threads now: RLIMIT_NPROC counts every one."""
    uid = os.getuid()
    count = 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid == uid:
                    count += len(os.listdir(f"/proc/{entry.name}/task"))
            except OSError:
                pass
    return count


def system_binds() -> list[str]:
    """bwrap's arguments for the system's read-only part: /usr, /etc's few files, /proc, /dev, /tmp."""
    args = ["--ro-bind", "/usr", "/usr"]
    for link in ("lib", "lib64", "bin", "sbin"):
        if Path("/" + link).is_symlink():
            args += ["--symlink", os.readlink("/" + link), "/" + link]
        elif Path("/" + link).is_dir():
            args += ["--ro-bind", "/" + link, "/" + link]
    for etc in ("/etc/alternatives", "/etc/openmpi", "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d",
                "/etc/hwloc", "/etc/localtime"):
        if os.path.exists(etc):
            args += ["--ro-bind", etc, etc]
    # hwloc (under MPI) reads the CPUs' topology; nothing else of /sys.
    args += ["--ro-bind-try", "/sys/devices/system/cpu", "/sys/devices/system/cpu"]
    args += ["--proc", "/proc", "--dev", "/dev",
             "--size", str(256 * MIB), "--tmpfs", "/tmp", "--size", str(256 * MIB), "--tmpfs", "/dev/shm"]
    return args


def unavailable() -> str | None:
    """Why no sandbox can start on this machine, or None when one can (tried, not assumed)."""
    if shutil.which("bwrap") is None:
        return "bubblewrap is not installed (Debian's package `bubblewrap`: ./install-packages installs it)"
    if os.geteuid() == 0:
        root = Path("/sys/fs/cgroup")
        v2 = (root / "cgroup.controllers").exists()
        if not (v2 and os.access(root, os.W_OK)) and not (
                (root / "memory").is_dir() and (root / "pids").is_dir() and os.access(root / "pids", os.W_OK)):
            return "no writable cgroups with memory and pids controllers under /sys/fs/cgroup (a plain chroot has none)"
    probe = Sandbox("probe", Limits(wall_s=20, pids=16, memory_bytes=256 * MIB))
    try:
        outcome = probe.run(["/usr/bin/true"])
    except OSError as e:
        return f"the sandbox could not start: {e}"
    if outcome.exit_code != 0:
        return "bubblewrap could not start a sandbox here: " + (outcome.output.strip().splitlines() or ["?"])[-1]
    return None


class Sandbox:
    """Runs commands bounded by `limits`, seeing only `ro` (read-only) and `rw` paths besides the system's."""

    counter = itertools.count(1)  # names the cgroups apart (next() is atomic under the GIL)

    def __init__(self, name: str, limits: Limits, ro: list[Path] = (), rw: list[Path] = (), cwd: Path | None = None):
        self.name, self.limits, self.ro, self.rw, self.cwd = name, limits, list(ro), list(rw), cwd

    def _argv(self, command: list[str]) -> list[str]:
        lim = self.limits
        argv = ["prlimit", f"--cpu={lim.cpu_s}", f"--fsize={lim.file_bytes}", "--core=0"]
        if os.geteuid() == 0:
            argv += ["--", "setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
                     "--inh-caps=-all", "--"]
        else:  # no cgroups: each process's data and the user's processes (Note [the sandbox]), which
            # RLIMIT_NPROC counts with those the user has already
            argv += [f"--data={lim.memory_bytes}", f"--nproc={_user_processes() + lim.pids}", "--"]
        argv += ["bwrap", "--unshare-all", "--die-with-parent", "--new-session", "--hostname", "sandbox",
                 "--clearenv"] + system_binds()
        for path in self.ro:
            argv += ["--ro-bind", str(path), str(path)]
        for path in self.rw:
            argv += ["--bind", str(path), str(path)]
        argv += ["--setenv", "PATH", "/usr/bin:/bin", "--setenv", "HOME", "/tmp", "--setenv", "TMPDIR", "/tmp"]
        for key, value in self.env.items():
            argv += ["--setenv", key, value]
        if self.cwd:
            argv += ["--chdir", str(self.cwd)]
        return argv + ["--"] + command

    def run(self, command: list[str], env: dict[str, str] | None = None) -> Outcome:
        self.env = env or {}
        lim = self.limits
        groups = _CGroups(f"workbook-grade-{os.getpid()}-{next(Sandbox.counter)}", lim) if os.geteuid() == 0 else None
        started = time.monotonic()
        head, tail, printed = bytearray(), bytearray(), 0
        reason = None
        try:
            process = subprocess.Popen(self._argv(command), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                       stderr=subprocess.STDOUT, start_new_session=True,
                                       preexec_fn=groups.enter if groups else None)
            fd = process.stdout.fileno()
            while True:
                left = lim.wall_s - (time.monotonic() - started)
                if left <= 0:
                    reason = f"killed after {lim.wall_s:g} s (the time limit)"
                    break
                ready, _, _ = select.select([fd], [], [], min(left, 1.0))
                if not ready:
                    continue
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    break
                printed += len(chunk)
                if len(head) < 32 * KIB:
                    head += chunk[:32 * KIB - len(head)]
                tail = (tail + chunk)[-32 * KIB:]
                if printed > lim.output_bytes:
                    reason = f"killed: printed more than {describe_bytes(lim.output_bytes)}"
                    break
            if reason:
                try:
                    os.killpg(process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                if groups:
                    groups.kill_all()
            process.stdout.close()
            code = process.wait()
            if code < 0:
                code = 128 - code
            # A bound hit inside is why it ended, even when the clock then ran out (a fork bomb).
            if groups and (reason is None or reason.startswith("killed after")):
                if groups.out_of_memory():
                    reason = f"out of memory (the limit is {describe_bytes(lim.memory_bytes)})"
                elif groups.hit_process_limit():
                    reason = f"hit the limit of {lim.pids} processes and threads"
            if reason is None and code in (128 + signal.SIGXCPU, 128 + signal.SIGKILL) and \
                    time.monotonic() - started >= lim.cpu_s * 0.9:
                reason = f"killed after {lim.cpu_s} s of CPU time (the limit)"
            if reason is None and code == 128 + signal.SIGXFSZ:
                reason = f"killed: wrote a file over {describe_bytes(lim.file_bytes)}"
        finally:
            if groups:
                groups.remove()
        text = head.decode(errors="replace")
        if printed > len(head):
            skipped = printed - len(head) - len(tail)
            text += (f"\n[... {skipped} bytes not kept ...]\n" if skipped > 0 else "") + \
                tail[max(0, len(tail) - (printed - len(head))):].decode(errors="replace")
        return Outcome(code, reason, text, time.monotonic() - started)

"""submissions.py: the files a submission holds, read without trusting it.

A submission is a folder, a tarball, a git repository or a git bundle, given
by path; nothing is fetched. Only the files a chapter's manifest names as the
student's are read (chapters/NN_name/FILE), as bytes; nothing in it is run,
extracted or checked out here. A tarball with an absolute path or a `..`
entry, a repository with submodules or Git LFS files, and a symbolic link on
the way to a file are refused with one line (SubmissionError).
"""
from __future__ import annotations

import re
import subprocess
import tarfile
import tempfile
from pathlib import Path, PurePosixPath

MAX_FILE_BYTES = 1 << 20  # an exercise file larger than this is refused
LFS_POINTER = b"version https://git-lfs.github.com/spec/"


class SubmissionError(Exception):
    """Why a whole submission cannot be graded: one line for the gradebook."""


def name_of(path: Path) -> str:
    name = path.name
    for suffix in (".tar.gz", ".tar.xz", ".tar.bz2", ".tgz", ".tar", ".bundle", ".git"):
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return name


def _checked(data: bytes, where: str) -> bytes:
    if len(data) > MAX_FILE_BYTES:
        raise SubmissionError(f"{where} is {len(data)} bytes, over the {MAX_FILE_BYTES} an exercise file may have")
    if data.startswith(LFS_POINTER):
        raise SubmissionError(f"{where} is a Git LFS pointer: submit the file itself (LFS is not fetched)")
    return data


class Submission:
    """`files(wanted)`: {relative path under chapters/: bytes} for those of `wanted` it holds."""

    def __init__(self, path: Path):
        self.path = path
        self.name = name_of(path)
        if not path.exists():
            raise SubmissionError(f"{path} does not exist")
        self._tmp = None
        if path.is_dir() and not (path / ".git").exists() and not (path / "HEAD").is_file():
            self.kind = "folder"
        elif path.is_dir() or _is_bundle(path):
            self.kind = "git"
            self._clone()
        elif tarfile.is_tarfile(path):
            self.kind = "tarball"
            self._read_tarball()
        else:
            raise SubmissionError(f"{path} is not a folder, a tarball, a git repository or a git bundle")

    # ---- folders ----
    def _folder_file(self, relative: str) -> bytes | None:
        root = self.path.resolve()
        for prefix in ("", *(p.name + "/" for p in sorted(root.iterdir()) if p.is_dir() and not p.is_symlink())):
            parts = PurePosixPath(prefix + "chapters/" + relative).parts
            here = root
            for i, part in enumerate(parts):
                here = here / part
                if here.is_symlink():
                    raise SubmissionError(f"chapters/{relative}: {'/'.join(parts[: i + 1])} is a symbolic link")
                if not here.exists():
                    break
            else:
                if here.is_file():
                    return _checked(here.read_bytes(), "chapters/" + relative)
        return None

    # ---- tarballs ----
    def _read_tarball(self) -> None:
        self._members: dict[str, bytes] = {}
        with tarfile.open(self.path) as tar:
            members = tar.getmembers()
            for m in members:
                pure = PurePosixPath(m.name)
                if pure.is_absolute() or ".." in pure.parts:
                    raise SubmissionError(f"the tarball has an entry outside its folder: {m.name!r} (an absolute path "
                                          f"or '..'); nothing of it was extracted")
            for m in members:
                match = re.search(r"(?:^|/)chapters/(\d\d_[^/]+/[^/]+)$", m.name)
                if not match:
                    continue
                if not m.isfile():
                    raise SubmissionError(f"{m.name} in the tarball is not a regular file (a link?)")
                if m.size > MAX_FILE_BYTES:
                    _checked(b"x" * (MAX_FILE_BYTES + 1), m.name)
                self._members.setdefault(match.group(1), _checked(tar.extractfile(m).read(), m.name))

    # ---- git ----
    def _clone(self) -> None:
        # A bare clone: nothing of the student's repository is checked out, and its
        # configuration and hooks (which could run commands) are not ours to read.
        self._tmp = tempfile.TemporaryDirectory(prefix="workbook-grade-git-")
        done = subprocess.run(["git", "clone", "--quiet", "--bare", "--no-hardlinks", str(self.path.resolve()),
                               self._tmp.name + "/repo.git"], capture_output=True, timeout=300,
                              env={"GIT_TERMINAL_PROMPT": "0", "PATH": "/usr/bin:/bin",
                                   "GIT_CONFIG_NOSYSTEM": "1", "HOME": self._tmp.name})
        if done.returncode != 0:
            raise SubmissionError("not a git repository or bundle git can clone: " +
                                  done.stderr.decode(errors="replace").strip().splitlines()[-1][:300])
        self._tmp_repo = self._tmp.name + "/repo.git"
        tree = subprocess.run(["git", "--git-dir", self._tmp_repo, "ls-tree", "-r", "-z", "HEAD"],
                              capture_output=True, timeout=120)
        if tree.returncode != 0:
            raise SubmissionError("the repository has no commit at HEAD to grade")
        self._blobs: dict[str, str] = {}
        for entry in tree.stdout.split(b"\0"):
            if not entry:
                continue
            meta, path = entry.decode(errors="replace").split("\t", 1)
            mode, kind, sha = meta.split()
            if path == ".gitmodules" or mode == "160000":
                raise SubmissionError(f"the repository has submodules ({path}): submit their files in it instead")
            if path.endswith(".gitattributes"):
                text = subprocess.run(["git", "--git-dir", self._tmp_repo, "cat-file", "blob", sha],
                                      capture_output=True).stdout
                if b"filter=lfs" in text:
                    raise SubmissionError(f"{path} stores files in Git LFS, which is not fetched: commit them plainly")
            match = re.search(r"(?:^|/)chapters/(\d\d_[^/]+/[^/]+)$", path)
            if match:
                if mode == "120000":
                    raise SubmissionError(f"{path} is a symbolic link in the repository")
                self._blobs.setdefault(match.group(1), sha)

    def files(self, wanted: list[str]) -> dict[str, bytes]:
        found = {}
        for relative in wanted:
            if self.kind == "folder":
                data = self._folder_file(relative)
            elif self.kind == "tarball":
                data = self._members.get(relative)
            else:
                sha = self._blobs.get(relative)
                data = None if sha is None else _checked(subprocess.run(
                    ["git", "--git-dir", self._tmp_repo, "cat-file", "blob", sha], capture_output=True,
                    timeout=60).stdout, "chapters/" + relative)
            if data is not None:
                found[relative] = data
        return found


def _is_bundle(path: Path) -> bool:
    if not path.is_file():
        return False
    with open(path, "rb") as f:
        start = f.read(16)
    return start.startswith(b"# v2 git bundle") or start.startswith(b"# v3 git bundle")

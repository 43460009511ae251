"""Bank files from and to the browser: a zip or a folder upload in, the bank as a zip out.

Uploads are untrusted: every member path is checked before anything is written
(no absolute paths, no `..`, no symlinks), and the total size and file count are
capped while reading, so a zip that lies about its sizes cannot fill the disk.
"""

from __future__ import annotations

import io
import stat
import tempfile
import zipfile
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

from app.errors import InvalidInput
from app.questions.bank import write_bank
from app.questions.schema import QuestionDoc, TopicDoc

# The whole bank is a few hundred small text files; 5 MB leaves room for growth
# and refuses anything that is clearly not a bank.
MAX_UPLOAD_BYTES = 5 * 1024 * 1024
# Far more than a bank has; a folder upload meets Starlette's own limit of 1000 parts first.
MAX_UPLOAD_FILES = 1000
# Only these are part of a bank; anything else in an upload is skipped and listed.
BANK_SUFFIXES = {".yaml", ".py"}


class UploadError(InvalidInput):
    """The upload cannot be read as a bank at all (bad path, too big, not a zip)."""


def member_path(name: str) -> PurePosixPath | None:
    """The safe relative path of an upload member; None for folders and OS clutter.

    Raises UploadError for a path that could escape the folder it is unpacked into.
    """
    if "\\" in name or "\x00" in name:
        raise UploadError(f"{name!r}: backslashes and NUL bytes are not allowed in paths")
    if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        raise UploadError(f"{name!r}: absolute paths are not allowed")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if any(p == ".." for p in parts):
        raise UploadError(f"{name!r}: '..' is not allowed in paths")
    if name.endswith("/") or not parts:
        return None
    if parts[0] == "__MACOSX" or any(p.startswith(".") for p in parts):
        return None
    return PurePosixPath(*parts)


class _Budget:
    def __init__(self) -> None:
        self.bytes = 0
        self.files = 0

    def take(self, name: str, size: int) -> None:
        self.bytes += size
        self.files += 1
        if self.files > MAX_UPLOAD_FILES:
            raise UploadError(f"more than {MAX_UPLOAD_FILES} files")
        if self.bytes > MAX_UPLOAD_BYTES:
            raise UploadError(f"more than {MAX_UPLOAD_BYTES // (1024 * 1024)} MB in all (at {name})")


def files_from_zip(data: bytes) -> tuple[dict[str, bytes], list[str]]:
    """(bank files by relative path, skipped names) from a zip's bytes."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile:
        raise UploadError("not a zip file") from None
    files: dict[str, bytes] = {}
    skipped: list[str] = []
    budget = _Budget()
    with archive:
        for info in archive.infolist():
            path = member_path(info.filename)
            if path is None:
                continue
            if stat.S_ISLNK(info.external_attr >> 16):
                raise UploadError(f"{info.filename!r}: symbolic links are not allowed")
            if path.suffix not in BANK_SUFFIXES:
                skipped.append(str(path))
                continue
            # The header's size may lie: read at most one byte past what is left.
            left = MAX_UPLOAD_BYTES - budget.bytes
            with archive.open(info) as fh:
                content = fh.read(left + 1)
            budget.take(str(path), len(content))
            files[str(path)] = content
    return files, skipped


def files_from_folder(items: Iterable[tuple[str, bytes]]) -> tuple[dict[str, bytes], list[str]]:
    """(bank files, skipped names) from a folder upload: (relative path, content) pairs."""
    files: dict[str, bytes] = {}
    skipped: list[str] = []
    budget = _Budget()
    for name, content in items:
        path = member_path(name)
        if path is None:
            continue
        if path.suffix not in BANK_SUFFIXES:
            skipped.append(str(path))
            continue
        budget.take(str(path), len(content))
        files[str(path)] = content
    return files, skipped


def bank_root(folder: Path) -> Path:
    """The folder holding the topic folders: wrapper folders (a zipped `question_bank/`) skipped."""
    root = folder
    while True:
        entries = [p for p in root.iterdir()]
        dirs = [p for p in entries if p.is_dir()]
        if len(entries) != 1 or len(dirs) != 1 or any(dirs[0].glob("*.yaml")):
            return root
        root = dirs[0]


def unpack(files: dict[str, bytes], dest: Path) -> Path:
    """Write checked files under dest; returns the bank root inside it."""
    for name, content in files.items():
        path = dest.joinpath(*PurePosixPath(name).parts)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
    return bank_root(dest)


def to_zip(files: dict[str, bytes]) -> bytes:
    """Files as a zip, in path order (stable bytes for stable content)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name in sorted(files):
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, files[name])
    return buf.getvalue()


def bank_zip(docs: list[QuestionDoc], topics: dict[str, TopicDoc]) -> bytes:
    """The bank as a zip with the layout `ddpdrill bank export` writes to a folder."""
    with tempfile.TemporaryDirectory(prefix="ddpdrill-export-") as tmp:
        root = Path(tmp)
        paths = write_bank(root, docs, topics)
        files = {str(p.relative_to(root).as_posix()): p.read_bytes() for p in paths}
    return to_zip(files)

"""Files replaced whole or not at all, and the file system's refusals as one :class:`StorageError` that says what to
do (docs/architecture.md, "One way to fail"). The standard library only.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from .errors import ScratchformerError, StorageError, one_line

DISK_FULL = frozenset({errno.ENOSPC, errno.EDQUOT})
DENIED = frozenset({errno.EACCES, errno.EPERM})
READ_ONLY = frozenset({errno.EROFS})
_OS_ERROR_CODE = re.compile(r"\(os error (\d+)\)|\bcode: (\d+)")  # Rust's io::Error (tokenizers, safetensors)
_TORCH_WRITE_FAILED = ("unexpected pos", "file write failed", "PytorchStreamWriter failed")

T = TypeVar("T")


@contextlib.contextmanager
def replace_file(path: str | os.PathLike, needed: int | None = None, suffix: str = ".tmp") -> Iterator[Path]:
    """Yield a temporary path beside ``path`` (a short name, so that a 255-byte name can be replaced too) to write;
    on leaving the block it takes ``path``'s place. Any failure deletes it and leaves ``path`` untouched."""
    target = Path(os.path.realpath(path)) if os.path.islink(path) else Path(path)  # a link stays a link
    if os.path.isdir(target):  # os.replace would fail late, with "Is a directory"; nothing is written
        raise StorageError(f"cannot write {target}: a folder is in the way, where this file goes; move or rename the "
                           "folder, or write somewhere else", errno.EISDIR, str(target))
    with writing(target, needed):
        descriptor, name = tempfile.mkstemp(prefix=".writing-", suffix=suffix, dir=target.parent)
        os.close(descriptor)
        temporary = Path(name)
        try:
            yield temporary
            fsync(temporary)  # the permissions open(path, "w") would leave: the file's own, else 0o666 less umask
            os.chmod(temporary, os.stat(target).st_mode & 0o7777 if target.exists() else 0o666 & ~current_umask())
            os.replace(temporary, target)
        except BaseException:
            with contextlib.suppress(OSError):
                temporary.unlink()
            raise


def write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Replace ``path`` with ``data`` (whole or not at all)."""
    with replace_file(path, len(data)) as temporary, open(temporary, "wb") as handle:
        handle.write(data)
    return Path(path)


def write_text(path: str | os.PathLike, text: str, encoding: str = "utf-8") -> Path:
    """Replace ``path`` with ``text`` (whole or not at all)."""
    return write_bytes(path, text.encode(encoding))


def write_json(path: str | os.PathLike, payload: Any, indent: int | None = 2, **dumps: Any) -> Path:
    """Replace ``path`` with ``payload`` as JSON and a final newline (whole or not at all)."""
    return write_text(path, json.dumps(payload, indent=indent, **dumps) + "\n")


def save_figure(fig: Any, path: str | os.PathLike, **savefig: Any) -> Path:
    """A matplotlib figure into ``path`` (whole or not at all), in the format of ``path``'s suffix by default."""
    import io

    buffer = io.BytesIO()
    savefig.setdefault("format", Path(path).suffix.lstrip(".").lower() or "png")
    fig.savefig(buffer, **savefig)
    return write_bytes(path, buffer.getvalue())


def current_umask() -> int:
    """The process's umask, read from ``/proc/self/status`` where there is one (setting it is not thread-safe)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def fsync(path: Path) -> None:
    """Flush ``path``'s content to disk, so that the rename never publishes an empty file after a power cut."""
    with open(path, "rb") as handle:
        os.fsync(handle.fileno())


def save_files_into(folder: str | os.PathLike, save: Callable[[Path], T], needed: int | None = None) -> T:
    """``save(staging)`` into a temporary folder in ``folder``, whose files then replace theirs, all or none."""
    folder = Path(folder)
    with writing(folder, needed):
        folder.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".saving-", dir=folder))
        try:
            result = save(staging)
            _move_into(staging, folder)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return result


def _move_into(source: Path, target: Path) -> None:
    """Every entry of ``source`` into ``target`` (one ``os.replace`` each; a folder that exists there is merged)."""
    for entry in sorted(source.iterdir()):
        destination = target / entry.name
        if entry.is_dir() and not entry.is_symlink():
            if destination.is_dir():
                _move_into(entry, destination)
                continue
        else:
            fsync(entry)
        os.replace(entry, destination)


@contextlib.contextmanager
def signals_end_the_block(names: tuple[str, ...] = ("SIGTERM", "SIGHUP")) -> Iterator[None]:
    """SIGTERM and SIGHUP raise ``SystemExit(128 + signal)`` in the block (main thread, unhandled signals only), so
    that its cleanup runs as on Ctrl-C."""
    import signal
    import threading

    def end(number: int, frame: Any) -> None:
        raise SystemExit(128 + number)

    replaced = {}
    if threading.current_thread() is threading.main_thread():
        for name in names:
            number = getattr(signal, name, None)
            if number is not None and signal.getsignal(number) is signal.SIG_DFL:
                replaced[number] = signal.signal(number, end)
    try:
        yield
    finally:
        for number, handler in replaced.items():
            signal.signal(number, handler)


@contextlib.contextmanager
def writing(path: str | os.PathLike, needed: int | None = None, reading: bool | None = False, *,
            error: type[ScratchformerError] | None = None, what: str = "", every_os_error: bool = False,
            named_by_error: bool = False) -> Iterator[None]:
    """A refusal of the file system while writing ``path`` as a ``StorageError`` (or ``error``, prefixed by ``what``;
    ``every_os_error``: any ``OSError``; ``named_by_error``: naming the error's file); anything else goes through."""
    try:
        yield
    except Exception as caught:
        if isinstance(caught, ScratchformerError) and (error is None or not isinstance(caught, StorageError)):
            raise
        where = (getattr(caught, "filename", None) if named_by_error else None) or path
        failure = storage_error(caught, where, needed, reading)
        if failure is None and not (every_os_error and isinstance(caught, OSError)):
            raise
        if error is None and failure is not None:
            raise failure from caught
        raise (error or ScratchformerError)(f"{what}{failure or caught}") from caught


def reading(path: str | os.PathLike) -> contextlib.AbstractContextManager[None]:
    """:func:`writing` for a read of ``path``, which must be a regular file (a named pipe would block the read)."""
    check_file(path)
    return writing(path, reading=True)


def storage_error(error: BaseException, path: str | os.PathLike, needed: int | None = None,
                  reading: bool | None = False) -> StorageError | None:
    """``error`` (writing ``path``; ``reading``: reading it; ``None``: either) as a ``StorageError`` when the file
    system refused (full, denied, read-only), else ``None``."""
    if isinstance(error, StorageError):
        return error
    number = error_number(error)
    if number is None and not reading and any(words in str(error) for words in _TORCH_WRITE_FAILED):
        free = free_bytes(folder_of(path))  # torch.save says no more than "unexpected pos": ask the disk
        number = errno.ENOSPC if free is not None and free < max(needed or 0, 1 << 20) else errno.EIO
        if number == errno.EIO:
            return StorageError(f"could not write {path}: {one_line(error)}", number, str(path))
    filename = getattr(error, "filename", None) or str(path)
    if number in DISK_FULL:
        return StorageError(disk_full_message(path, needed, number), number, filename)
    if number in DENIED:
        return permission_denied(path, reading, number)
    if number in READ_ONLY:
        return read_only(path, number)
    return None


def read_only(path: str | os.PathLike, number: int = errno.EROFS) -> StorageError:
    """``cannot write PATH: FOLDER is on a read-only file system; ...``: no chmod helps there."""
    return StorageError(f"cannot write {path}: {folder_of(path)} is on a read-only file system; write somewhere else "
                        "(or mount it read-write)", number, str(path))


def permission_denied(path: str | os.PathLike, reading: bool | None = False, number: int = errno.EACCES
                      ) -> StorageError:
    """The ``StorageError`` of a permission denied, naming user, owner and mode; on a read-only file system (where
    ``os.access`` says "no" even for root), :func:`read_only`."""
    try:
        mounted_read_only = bool(os.statvfs(folder_of(path)).f_flag & os.ST_RDONLY)
    except (OSError, AttributeError):
        mounted_read_only = False
    if reading is not True and mounted_read_only:
        return read_only(path)
    if reading is not False:
        verb = "read" if reading else "access"
        return StorageError(denied(Path(path), verb, "read " if reading else "", "run as a user who may"), number,
                            str(path))
    where = Path(path) if os.path.isfile(path) and not may(path, os.W_OK) else folder_of(path)
    verb = "write" if os.path.isfile(where) else "write into"
    return StorageError(denied(where, verb, "write ", "choose another place"), number, str(path))


def denied(path: str | os.PathLike, action: str, access: str = "read ", advice: str = "run as a user who may read it"
           ) -> str:
    """The one permission message: ``permission denied: user nobody (uid 65534) may not ACTION PATH (...): ...``."""
    return (f"permission denied: {describe_user()} may not {action} {path}{_owner(path)}: give that user {access}access "
            f"(chmod, chown) or {advice}")


def disk_full_message(path: str | os.PathLike, needed: int | None, number: int = errno.ENOSPC) -> str:
    """``no space left on the device of FOLDER: writing NAME needs about 2.3 MB, 120 kB free; ...``."""
    folder = folder_of(path)
    free = free_bytes(folder)
    try:  # f_files is 0 where the file system does not count inodes
        info = os.statvfs(folder)
        no_inodes = info.f_files > 0 and info.f_favail == 0
    except (OSError, AttributeError):
        no_inodes = False
    if number == errno.ENOSPC and no_inodes:
        shown = "an unknown amount of space" if free is None else human_size(free)
        return (f"no free inodes on the device of {folder}: writing {Path(path).name} needs a new file, and the file "
                f"system can hold no more files ({shown} free, but no inode left); delete files there (many small "
                "ones count most) or write somewhere else")
    what = "disk quota exceeded in" if number == errno.EDQUOT else "no space left on the device of"
    need = f"needs about {human_size(needed)}" if needed else "needs more space than there is"
    shown = "an unknown amount" if free is None else human_size(free)
    return (f"{what} {folder}: writing {Path(path).name} {need}, {shown} free; free some space or write "
            "somewhere else")


def error_number(error: BaseException) -> int | None:
    """The ``errno`` behind ``error``, also from a Rust library's ``(os error N)`` message; else ``None``."""
    if isinstance(error, OSError) and error.errno:
        return error.errno
    match = _OS_ERROR_CODE.search(str(error))
    return int(match.group(1) or match.group(2)) if match else None


def folder_of(path: str | os.PathLike) -> Path:
    """``path`` when it is a folder, else the nearest existing folder above it (absolute)."""
    folder = Path(path).absolute()
    if os.path.isdir(folder):
        return folder
    folder = folder.parent
    while not os.path.exists(folder) and folder != folder.parent:
        folder = folder.parent
    return folder


def free_bytes(folder: str | os.PathLike) -> int | None:
    """The bytes free for this user on ``folder``'s file system (``shutil.disk_usage``), or ``None``."""
    try:
        return shutil.disk_usage(folder).free
    except OSError:
        return None


def human_size(size: int) -> str:
    """``1234567`` -> ``'1.2 MB'`` (decimal units, as ``df -H`` shows them)."""
    for unit in ("bytes", "kB", "MB", "GB"):
        if size < 1000:
            return f"{size} {unit}" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{size:.1f} TB"


def describe_user(uid: int | None = None) -> str:
    """``user nobody (uid 65534)``: the user this process runs as (or ``uid``)."""
    if uid is None:
        uid = os.geteuid() if hasattr(os, "geteuid") else None
    if uid is None:
        import getpass

        return f"user {getpass.getuser()}"
    try:
        import pwd

        return f"user {pwd.getpwuid(uid).pw_name} (uid {uid})"
    except (ImportError, KeyError):
        return f"uid {uid}"


def _owner(path: str | os.PathLike) -> str:
    """`` (a folder of user root (uid 0), mode drwxr-xr-x)``, or nothing where ``path`` cannot be looked at."""
    try:
        info = os.stat(path)
    except OSError:
        return ""
    kind = "folder" if stat.S_ISDIR(info.st_mode) else "file"
    return f" (a {kind} of {describe_user(info.st_uid)}, mode {stat.filemode(info.st_mode)})"


_NOT_FILES = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a named pipe (FIFO: a read would wait for a writer)"),
              (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def not_a_file(path: str | os.PathLike) -> str | None:
    """Why ``path`` cannot be read as a file, or ``None`` (a regular file, or nothing there); asked by ``stat``
    only, which a named pipe cannot block."""
    try:
        mode = os.stat(path).st_mode
    except OSError as error:
        return f"{path} is a loop of symbolic links" if error.errno == errno.ELOOP else None
    if stat.S_ISREG(mode):
        return None
    kind = next((name for test, name in _NOT_FILES if test(mode)), "not a regular file")
    return f"{path} is {kind}, not a regular file"


def check_file(path: str | os.PathLike, error: type[ScratchformerError] = ScratchformerError) -> None:
    """Raise ``error`` when ``path`` is empty (``Path("")`` is the working folder) or no regular file."""
    if isinstance(path, str) and not path.strip():
        raise error(f"no file named {path!r}: give a file")
    if problem := not_a_file(path):
        raise error(f"{problem}; put the real file there")


def check_output_folder(output: str | os.PathLike, inputs: Iterable[tuple[str, str | os.PathLike]] = (), *,
                        writes: Iterable[str] | None = None, error: type[ScratchformerError] = ScratchformerError,
                        name: str | None = None, why: str = "choose another folder") -> Path:
    """The one check of an output folder before anything is written: writable, no file, and apart from the
    ``inputs`` (``(what, path)``; with ``writes``, only it and the files it names may not be one)."""
    folder, name = Path(output), name or str(output)
    if isinstance(output, str) and not output.strip():  # Path("") is the working folder
        raise error(f"{name}: an empty name is no folder; give a folder to write into")
    if folder.is_file():
        raise error(f"{name} is a file, not a folder; give a folder to write into")
    if (problem := not_a_file(folder)) and not folder.is_dir():  # a loop of symbolic links, a named pipe, ...
        raise error(f"{problem}; give a folder to write into")
    if folder.is_symlink() and not folder.exists():  # where it leads nothing can be made ("File exists")
        raise error(f"{name} is a symbolic link to nothing or a loop of them; give a folder to write into")
    written = [] if writes is None else list(writes)
    for what, path in inputs:
        relation = overlap(folder, path)
        if relation == "is" or (relation and writes is None):
            raise error(f"{name} {relation} {what}: {why}")
        if clash := next((file for file in written if overlap(folder / file, path) == "is"), None):
            raise error(f"{name}: writing {clash} there would replace {what}; {why}")
    parent = folder_of(folder)
    if not os.path.isdir(parent):
        raise error(f"{name}: {parent} is not a folder")
    check_writable(parent)
    return folder


def check_writable(folder: str | os.PathLike) -> None:
    """Raise :func:`permission_denied` unless this user may write into (and enter) the existing ``folder``."""
    if not may(folder, os.W_OK | os.X_OK):
        raise permission_denied(folder)


def may(path: str | os.PathLike, mode: int) -> bool:
    """Whether this user may access ``path`` in ``mode`` (``os.R_OK``, ...), asked with the effective ids."""
    return os.access(path, mode, effective_ids=os.access in os.supports_effective_ids)


def overlap(output: str | os.PathLike, source: str | os.PathLike) -> str | None:
    """``"is"``, ``"is inside"``, ``"contains"`` or ``None``: how ``output`` overlaps ``source``, paths resolved."""
    out, src = _resolved(output), _resolved(source)
    if out == src or (os.path.exists(out) and os.path.exists(src) and os.path.samefile(out, src)):
        return "is"
    if out.is_relative_to(src):
        return "is inside"
    if src.is_relative_to(out):
        return "contains"
    return None


def _resolved(path: str | os.PathLike) -> Path:
    """``path`` resolved; a loop of symbolic links stays as written, absolute, for its reader to name."""
    path = Path(path).expanduser()
    try:
        return path.resolve()
    except (RuntimeError, OSError):
        return path.absolute()


def available_memory() -> int | None:
    """The bytes a new request may take without swapping: ``MemAvailable`` within the container's cgroup limit (less
    what it uses besides droppable page cache); ``None`` off Linux."""
    known = []
    with contextlib.suppress(OSError, AttributeError):  # AttributeError: no MemAvailable line
        meminfo = Path("/proc/meminfo").read_text()
        known.append(int(re.search(r"^MemAvailable:\s+(\d+) kB", meminfo, re.MULTILINE).group(1)) * 1024)
    for folder, limit, usage, inactive in (("/sys/fs/cgroup", "memory.max", "memory.current", "inactive_file"),
                                           ("/sys/fs/cgroup/memory", "memory.limit_in_bytes", "memory.usage_in_bytes",
                                            "total_inactive_file")):
        with contextlib.suppress(OSError, ValueError, AttributeError):  # ValueError: "max", no limit
            cap, used = (int(Path(folder, name).read_text()) for name in (limit, usage))
            stat = Path(folder, "memory.stat").read_text()
            cache = int(re.search(rf"^{inactive} (\d+)", stat, re.MULTILINE).group(1))
            if cap < 2**60:  # v1 writes "no limit" as a page-rounded 2**63
                known.append(max(0, cap - used + cache))
    return min(known) if known else None

"""Writing files so that nothing a user had is lost, and the file system's refusals as one clear error.

- **Replacing a file**: :func:`replace_file` (a temporary path to write, which then takes the file's place),
  :func:`write_bytes`, :func:`write_text`, :func:`write_json` and :func:`save_figure`. The new content goes to a
  temporary file in the same folder (``tempfile.mkstemp``), is flushed to disk, and takes the old file's place in one
  ``os.replace``: a failure at any moment (a full disk, a kill) leaves the old file as it was and no partial file
  behind. ``mkstemp`` makes the file ``-rw-------``; before the rename it gets the permissions a plain
  ``open(path, "w")`` would have left: the old file's, or for a new file ``0o666`` less the umask. A symbolic link is
  followed (its target is replaced, the link stays).
- **Saving several files into a folder**: :func:`save_files_into` runs a library's ``save(folder)``
  (``save_pretrained``, which writes in place) on a temporary folder inside the target, then moves each file into
  place with ``os.replace``; a failure leaves the files already there as they were.
- **The file system's refusals** (:func:`storage_error`, :func:`writing`, :func:`reading`) become a
  :class:`~scratchformer.errors.StorageError` (a ``ScratchformerError`` and an ``OSError``): a full disk names the
  folder, about how much the write needed and how much is free (``shutil.disk_usage``); a permission denied names
  the path and the user; a read-only file system says so (also where a permission check is what refused: ``access``
  says "no" on a read-only mount), and a disk with bytes free but no inode left says that. Libraries report a full disk in their own ways and all
  are recognised: an ``OSError`` with ``errno.ENOSPC``, ``tokenizers``' bare ``Exception: No space left on device
  (os error 28)``, safetensors' ``SafetensorError`` with the same words, ``torch.save``'s ``RuntimeError: ...
  unexpected pos`` (no errno: the free space decides).
- **Reading only regular files**: :func:`not_a_file` and :func:`check_file` refuse, in one line, a path that is a
  loop of symbolic links, a named pipe (a read would wait for a writer for ever), a socket, a device or a folder,
  before anything opens it; :func:`reading` asks it too. Every reader of a user's file asks it (the loader through
  :func:`scratchformer.loading.check_readable`).
- **Output folders**: :func:`check_output_folder` is every command's one check of where it writes, before it makes,
  writes or deletes anything: not a file, a folder this user may write into (:func:`check_writable`), and apart from
  every input (:func:`overlap`: is, is inside or contains; paths resolved: symbolic links, relative paths).

The standard library only (``scratchformer --help`` imports it nowhere: the command line imports it inside a
command); every layer above :mod:`scratchformer.errors` may use it (the model core excepted: it imports nothing of
ours, so ``save_pretrained`` stages its own files).
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


# ----------------------------------------------------------------------------------------------------------------
# Replacing a file
# ----------------------------------------------------------------------------------------------------------------


@contextlib.contextmanager
def replace_file(path: str | os.PathLike, needed: int | None = None, suffix: str = ".tmp") -> Iterator[Path]:
    """Yield a temporary path in ``path``'s folder (an empty file, named ``.NAME.XXXXXXXX`` + ``suffix``); write the
    new content there, and on leaving the block it takes ``path``'s place (see the module docstring). ``needed``
    (bytes, an estimate) goes into a full disk's message.
    Any failure deletes the temporary file and leaves ``path`` untouched; a refusal of the file system is a
    :class:`~scratchformer.errors.StorageError`."""
    target = _followed(Path(path))
    if os.path.isdir(target):  # os.replace would fail late, with "Is a directory"; nothing is written
        raise StorageError(f"cannot write {target}: a folder is in the way, where this file goes; move or rename the "
                           "folder, or write somewhere else", errno.EISDIR, str(target))
    with writing(target, needed):
        descriptor, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=suffix, dir=target.parent)
        os.close(descriptor)
        temporary = Path(name)
        try:
            yield temporary
            fsync(temporary)
            os.chmod(temporary, new_file_mode(target))
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
    """A matplotlib figure into ``path`` (whole or not at all): drawn into memory, then written with
    :func:`write_bytes`. The format is ``path``'s suffix unless ``format=`` is given."""
    import io

    buffer = io.BytesIO()
    savefig.setdefault("format", Path(path).suffix.lstrip(".").lower() or "png")
    fig.savefig(buffer, **savefig)
    return write_bytes(path, buffer.getvalue())


def new_file_mode(path: str | os.PathLike) -> int:
    """The permissions ``open(path, "w")`` would leave: an existing file's own, else ``0o666`` less the umask."""
    try:
        return os.stat(path).st_mode & 0o7777
    except OSError:
        return 0o666 & ~current_umask()


def current_umask() -> int:
    """The process's umask (read from ``/proc/self/status`` where there is one: setting it to read it back is not
    thread-safe)."""
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


def _followed(path: Path) -> Path:
    """``path``, or the file a symbolic link at ``path`` points to (so that the link stays a link)."""
    return Path(os.path.realpath(path)) if os.path.islink(path) else path


def fsync(path: Path) -> None:
    """Flush ``path``'s content to disk, so that the rename never publishes an empty file after a power cut."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


# ----------------------------------------------------------------------------------------------------------------
# Saving several files into a folder
# ----------------------------------------------------------------------------------------------------------------


def save_files_into(folder: str | os.PathLike, save: Callable[[Path], T], needed: int | None = None) -> T:
    """Run ``save(staging)`` on a temporary folder inside ``folder`` (created with its parents), then move each file
    it wrote into ``folder`` with ``os.replace``; returns what ``save`` returned. A failure leaves the files already
    in ``folder`` as they were, and nothing of the staging folder; a refusal of the file system is a
    :class:`~scratchformer.errors.StorageError` (``needed``: bytes, an estimate for its message)."""
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


# ----------------------------------------------------------------------------------------------------------------
# The file system's refusals
# ----------------------------------------------------------------------------------------------------------------


@contextlib.contextmanager
def signals_end_the_block(names: tuple[str, ...] = ("SIGTERM", "SIGHUP")) -> Iterator[None]:
    """While the block runs, SIGTERM and SIGHUP (``kill``, a closed terminal) raise ``SystemExit(128 + signal)``
    where they would have ended the process on the spot, as Ctrl-C raises ``KeyboardInterrupt``: the block's own
    cleanup (``finally``: a staging folder removed) runs, then the process ends with the status a shell gives a
    killed command. Only the main thread may set handlers; elsewhere, and for a signal that something already
    handles, nothing changes. The earlier handlers come back when the block ends."""
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
    """Turn a refusal of the file system while writing ``path`` (a file, or a folder being written into; ``reading``
    as in :func:`storage_error`) into a :class:`~scratchformer.errors.StorageError`; anything else goes through
    unchanged. The caller's own error type: ``error``, with ``what`` before the message, carries the refusal instead
    (and, with ``every_os_error``, any other ``OSError``); ``named_by_error``: the message names the file the error
    names, where it names one."""
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


@contextlib.contextmanager
def reading(path: str | os.PathLike) -> Iterator[None]:
    """Turn a permission denied while reading ``path`` into a :class:`~scratchformer.errors.StorageError`; before
    that, refuse a ``path`` that is not a regular file (:func:`check_file`): a named pipe would block the read."""
    check_file(path)
    try:
        yield
    except StorageError:
        raise
    except Exception as error:
        failure = storage_error(error, path, reading=True)
        if failure is None:
            raise
        raise failure from error


def storage_error(error: BaseException, path: str | os.PathLike, needed: int | None = None,
                  reading: bool | None = False) -> StorageError | None:
    """``error`` (raised while writing, or with ``reading`` reading, ``path``; ``reading=None``: either) as a
    :class:`~scratchformer.errors.StorageError` when the file system refused (full, denied, read-only), else
    ``None``."""
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


def on_read_only_file_system(path: str | os.PathLike) -> bool:
    """Whether the file system of ``path`` (or of the nearest existing folder above it) is mounted read-only."""
    try:
        return bool(os.statvfs(folder_of(path)).f_flag & os.ST_RDONLY)
    except (OSError, AttributeError):
        return False


def permission_denied(path: str | os.PathLike, reading: bool | None = False, number: int = errno.EACCES
                      ) -> StorageError:
    """``permission denied: user nobody (uid 65534) may not write into /out (a folder of user root (uid 0), mode
    drwxr-xr-x): ...``: for a write, the file when it exists and may not be written, else its folder; ``reading``
    ``None``: not known whether it was a read or a write (``may not access PATH``). A write refused on a read-only
    file system (``os.access`` says "no" there too, for root as well) is said as that instead."""
    if reading is not True and on_read_only_file_system(path):
        return read_only(path)
    if reading is None:
        where, verb, access, advice = Path(path), "access", "", "run as a user who may"
    elif reading:
        where, verb, access, advice = Path(path), "read", "read ", "run as a user who may"
    else:
        where = _denied_write_target(Path(path))
        verb = "write" if os.path.isfile(where) else "write into"
        access, advice = "write ", "choose another place"
    return StorageError(denied(where, verb, access, advice), number, str(path))


def denied(path: str | os.PathLike, action: str, access: str = "read ", advice: str = "run as a user who may read it"
           ) -> str:
    """The permission message, one for every refusal: ``permission denied: user nobody (uid 65534) may not ACTION
    PATH (a folder of user root (uid 0), mode drwxr-xr-x): give that user ACCESSaccess (chmod, chown) or ADVICE``."""
    return (f"permission denied: {describe_user()} may not {action} {path}{_owner(path)}: give that user {access}access "
            f"(chmod, chown) or {advice}")


def _denied_write_target(path: Path) -> Path:
    """What refused a write of ``path``: the file itself when it is one and not writable, else its folder."""
    if os.path.isfile(path) and not may(path, os.W_OK):
        return path
    return folder_of(path)


def disk_full_message(path: str | os.PathLike, needed: int | None, number: int = errno.ENOSPC) -> str:
    """``no space left on the device of FOLDER: writing NAME needs about 2.3 MB, 120 kB free; ...``."""
    folder = folder_of(path)
    free = free_bytes(folder)
    if number == errno.ENOSPC and free_inodes(folder) == 0:
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
    """The operating system's error number behind ``error``: an ``OSError``'s ``errno``, or the ``(os error N)`` of
    a Rust library's message (``tokenizers``, ``safetensors``); ``None`` when there is none."""
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


def free_inodes(folder: str | os.PathLike) -> int | None:
    """The inodes (new files) free for this user on ``folder``'s file system, or ``None`` where it does not count
    them (``f_files`` 0: btrfs and some network file systems)."""
    try:
        info = os.statvfs(folder)
    except (OSError, AttributeError):
        return None
    return info.f_favail if info.f_files else None


def human_size(size: int) -> str:
    """``1234567`` -> ``'1.2 MB'`` (decimal units, as ``df -H`` shows them)."""
    for unit in ("bytes", "kB", "MB", "GB", "TB"):
        if size < 1000 or unit == "TB":
            return f"{size} {unit}" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{size:.1f} TB"  # not reached


def describe_user(uid: int | None = None) -> str:
    """``user nobody (uid 65534)``: the user this process runs as (or ``uid``), for the messages of refused reads and
    writes."""
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
    import stat

    try:
        info = os.stat(path)
    except OSError:
        return ""
    kind = "folder" if stat.S_ISDIR(info.st_mode) else "file"
    return f" (a {kind} of {describe_user(info.st_uid)}, mode {stat.filemode(info.st_mode)})"


# ----------------------------------------------------------------------------------------------------------------
# Reading only regular files
# ----------------------------------------------------------------------------------------------------------------

_NOT_FILES = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a named pipe (FIFO: a read would wait for a writer)"),
              (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def not_a_file(path: str | os.PathLike) -> str | None:
    """Why ``path`` cannot be read as a file (``/m/config.json is a named pipe (FIFO) ..., not a regular file``), or
    ``None`` for a regular file (through symbolic links) and for a path that does not exist (the caller says what is
    missing). Only ``stat`` is asked: nothing is opened, so a named pipe cannot block."""
    try:
        mode = os.stat(path).st_mode
    except OSError as error:
        return f"{path} is a loop of symbolic links" if error.errno == errno.ELOOP else None
    if stat.S_ISREG(mode):
        return None
    kind = next((name for test, name in _NOT_FILES if test(mode)), "not a regular file")
    return f"{path} is {kind}, not a regular file"


def check_file(path: str | os.PathLike, error: type[ScratchformerError] = ScratchformerError) -> None:
    """Raise ``error`` in one line when ``path`` is empty (``Path("")`` is the working folder) or exists but is no
    regular file (:func:`not_a_file`)."""
    if isinstance(path, str) and not path.strip():
        raise error(f"no file named {path!r}: give a file")
    if problem := not_a_file(path):
        raise error(f"{problem}; put the real file there")


# ----------------------------------------------------------------------------------------------------------------
# Output folders: writable, and apart from the inputs
# ----------------------------------------------------------------------------------------------------------------


def check_output_folder(output: str | os.PathLike, inputs: Iterable[tuple[str, str | os.PathLike]] = (), *,
                        writes: Iterable[str] | None = None, error: type[ScratchformerError] = ScratchformerError,
                        name: str | None = None, why: str = "choose another folder") -> Path:
    """The one check of an output folder, before anything is made, written or deleted; raises ``error`` in one line
    (``name``, by default the path, says which folder). ``output`` may not be a file, nor overlap an input
    (``inputs``: ``(what, path)``, ``what`` as the message names it): without ``writes`` it may not be, lie inside or
    contain one (a command that deletes there); with ``writes`` (the names written there) it may not be one, nor may
    those files. The nearest existing folder must be one this user may write into (:func:`permission_denied`)."""
    folder, name = Path(output), name or str(output)
    if isinstance(output, str) and not output.strip():  # Path("") is the working folder
        raise error(f"{name}: an empty name is no folder; give a folder to write into")
    if folder.exists() and not folder.is_dir():
        raise error(f"{name} is a file, not a folder; give a folder to write into")
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
    """How the output folder ``output`` overlaps the input ``source`` (a file or a folder): ``"is"``,
    ``"is inside"`` or ``"contains"``; ``None`` when they are apart. Paths are resolved (symbolic links, ``..``,
    relative paths), and two existing paths that are the same file count as the same. A path this user may not look
    at counts as what its name says (the command that reads it says why it cannot)."""
    out, src = _resolved(output), _resolved(source)
    if out == src or (os.path.exists(out) and os.path.exists(src) and os.path.samefile(out, src)):
        return "is"
    if out.is_relative_to(src):
        return "is inside"
    if src.is_relative_to(out):
        return "contains"
    return None


def _resolved(path: str | os.PathLike) -> Path:
    """``path`` resolved; a loop of symbolic links (``RuntimeError`` before Python 3.13, ``OSError`` after) stays as
    written, absolute: whoever reads it says what it is (:func:`check_file`)."""
    path = Path(path).expanduser()
    try:
        return path.resolve()
    except (RuntimeError, OSError):
        return path.absolute()

"""The documents of a batch run, read from a folder of text files, a JSONL or a CSV file.

Each document is a `Document`: its text (a `str`, so that it is the user's message of the
run's `ChatRequest` as it is) and its label, what the summary, the ledger and the output
call it: the file name, the id field or column, else `line N` / `row N`.

`read_inputs` checks the whole source before anything is sent (a missing field, a line that
is no JSON, a value that is not text: an `InputError` naming the file and the line or row)
and counts it, then reads it again as the run goes: a large file is never held in memory.
"""

from __future__ import annotations

import codecs
import csv
import dataclasses
import errno
import io
import itertools
import json
import math
import os
import stat
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

__all__ = ["TEXT_SUFFIXES", "Document", "InputError", "Inputs", "NoSuchField", "read_inputs"]

TEXT_SUFFIXES = (".txt", ".md")
"""The files of a folder that are documents."""

DEFAULT_FIELD = "text"
_FIELD_LIMIT = 2**31 - 1
"""The longest CSV field read, in characters (the `csv` module's own limit is 128 KiB, and
a long contract or paper is a larger document than that)."""
DEFAULT_ID_FIELD = "id"


class InputError(ValueError):
    """An input source that cannot be read as documents; the message says where and why."""


class NoSuchField(InputError):
    """The field or column named for the documents (or their ids) is not in the source's
    first object, or its header, or the source (a folder) has none, or the source is of no
    kind read here (a `.txt` file, a CSV file separated by semicolons): the argument is
    wrong rather than a line of the data."""


class Document(str):
    """A document's text, with the `label` a run calls it by."""

    label: str

    def __new__(cls, text: str, label: str) -> Document:
        document = super().__new__(cls, text)
        document.label = label
        return document


@dataclass(frozen=True, slots=True)
class Inputs:
    """The documents of `path`, read anew on each iteration; `total` is how many there are."""

    path: Path
    kind: str
    """`folder`, `jsonl` or `csv`."""
    total: int
    field: str
    id_field: str | None
    ids_unused: tuple[int, tuple[str, ...]] = (0, ())
    """Documents whose `id` (no `id_field` given) is no text or number, named by their line
    or row instead: how many, and where the first three are."""
    labels_repeated: tuple[int, int, tuple[str, ...]] = (0, 0, ())
    """Documents whose label an earlier document has (an id given twice): how many, how many
    such labels, and the first three. Their output rows share a label; their keys tell them
    apart."""
    skipped: frozenset[Path] = frozenset()
    """A folder's files that are no documents: the run's own output and prompt."""
    left_out: tuple[str, ...] = ()
    """The names of the folder's files that would be documents but are among `skipped`:
    said, since a prompt kept beside the documents is otherwise dropped without a word."""
    not_read: tuple[tuple[str, int], ...] = ()
    """What else a folder holds, by kind (`SUBFOLDER`, `OTHER_SUFFIX`, `DANGLING_LINK`,
    `LINK_LOOP`, `NOT_REGULAR`: those it has, in that order) and how many of each: said,
    since a run that finds some documents would otherwise pass over the rest without a
    word (reports in subfolders, a `.text` file). Hidden entries and the run's own files
    are not counted."""
    files: tuple[str, ...] = ()
    """A folder's documents, as counted and checked: a file added to the folder since (one
    that sorts first would have pushed the last out) is for a run that reads it again."""
    removed: list[str] = dataclasses.field(default_factory=list)
    """A folder's files removed since the check, found as the run read them: not sent."""
    stamp: tuple[int, int, int] | None = None
    """A file's inode, size and time of change when it was checked: written over since
    (another file in its place, cut short, rewritten to its size), what is read of it is no
    longer what was checked. (Grown, it is taken for a log appended to, and read no further
    than its size then: a file rewritten longer in place is not told from one.)"""

    changed: list[str] = dataclasses.field(default_factory=list)
    """What is said of a JSONL or CSV file that changed after the run began to read it
    (`_changed`), where the run read it to its end all the same: replaced by another (the
    run read on the one it had opened), or rewritten in place."""

    def __iter__(self) -> Iterator[Document]:
        # No more than were counted and checked: what is added to the file during a run
        # (a log still written) is for a run that reads it whole. (A file is read no
        # further than its size when checked, `_documents`; the count bounds the rest.)
        self.changed.clear()
        yield from itertools.islice(self._documents(), self.total)
        changed = "" if self.kind == "folder" else self._changed()
        if changed:
            self.changed.append(changed.strip(" ()"))

    def _documents(self) -> Iterator[Document]:
        if self.kind == "folder":
            self.removed.clear()  # (read again: by a look-up before the run, a run again)
            for name in self.files:
                file = self.path / name
                try:
                    text = _read_text(file)
                except InputError:
                    if file.is_file():  # there, and unreadable (its permissions): an error
                        raise
                    # Removed, or no file now (a folder, a dangling link), as it would not
                    # have been counted: no document, and the others go on.
                    self.removed.append(name)
                    continue
                yield Document(text, name)
        else:
            changed = self._changed()
            if changed:  # another file in its place, or cut short, before it is read
                raise InputError(f"{self.path}: {changed.strip(' ()')}")
            rows = _jsonl if self.kind == "jsonl" else _csv
            # The bytes checked, and no more: a line appended to a last one that had no
            # newline yet would otherwise be read as part of it (`doc 10doc 11`).
            limit = None if self.stamp is None else self.stamp[1]
            read = 0
            try:
                for document in rows(self.path, self.field, self.id_field, None, None, limit):
                    read += 1
                    yield document
            except InputError as error:
                raise InputError(f"{error}{self._changed()}") from None
            if read < self.total:
                raise InputError(
                    f"{self.path}: {read} document{'' if read == 1 else 's'}, where "
                    f"{self.total} were counted"
                    f"{self._changed() or ' (changed since)'}"
                )

    def _changed(self) -> str:
        """What is said of a file that is no longer the one checked, if it is not."""
        try:
            now = self.path.stat()
        except OSError:
            return " (the file was removed during the run)"
        if self.stamp is None:
            return ""
        inode, size, modified = self.stamp
        if (
            now.st_ino != inode
            or now.st_size < size
            # Rewritten to the size it had (an append would have made it longer).
            or (now.st_size == size and now.st_mtime_ns != modified)
        ):
            return " (the file was written over during the run: run again on the new one)"
        return ""

    def __len__(self) -> int:
        return self.total


def read_inputs(
    path: str | os.PathLike[str],
    *,
    field: str | None = None,
    id_field: str | None = None,
    skip: Collection[str | os.PathLike[str]] = (),
) -> Inputs:
    """The documents at `path`, checked and counted.

    A folder: every `*.txt` and `*.md` file in it (not below it, and not hidden ones, such
    as `.#notes.txt` or `._notes.txt`), sorted by name; the label is the file name. A
    `.jsonl` file: one JSON object per line (blank lines are skipped), the document in
    `field` (default `text`), the label from `id_field` (default `id` where a line has one)
    else `line N` (an `id` that is no text or number, such as `true`, is counted in
    `ids_unused`). A `.csv` file with a header row: the document in the column `field`
    (default `text`), the label from the column `id_field` (default `id` when there is one)
    else `row N`, counting the rows after the header from 1. A document that is empty, or
    is not text that can be sent, is an error that names its place (a CSV row's by its
    number and the line it begins on). A folder's files in
    `skip` (the run's output, its prompt) are not documents.
    """
    source = Path(path)
    if source.is_dir():
        if field is not None or id_field is not None:
            raise NoSuchField(
                f"{source}: --field and --id-field are for JSONL and CSV files; "
                "a folder's documents are its files"
            )
        skipped = frozenset(real for real in map(_leads_to, skip) if real is not None)
        files, not_read = _folder_entries(source, skipped)
        # The run's own files (its output, its prompt) among them are no documents.
        left_out = tuple(file.name for file in files if skipped and file.resolve() in skipped)
        files = [file for file in files if file.name not in left_out]
        if not files:
            raise InputError(
                f"{source}: no *.txt or *.md files in this folder{_why_none(source, left_out)}"
            )
        problems = _Problems(source, within=True)
        for file in files:
            try:
                _read_text(file)
            except InputError as error:
                problems.add(error)
        problems.raise_any()
        return Inputs(
            source,
            "folder",
            len(files),
            DEFAULT_FIELD,
            None,
            skipped=skipped,
            left_out=left_out,
            not_read=not_read,
            files=tuple(file.name for file in files),
        )
    if not source.exists():
        raise InputError(f"{source}: no such file or folder")
    suffix = source.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        kind, rows = "jsonl", _jsonl
    elif suffix == ".csv":
        kind, rows = "csv", _csv
    else:
        raise NoSuchField(
            f"{source}: not a folder, a .jsonl or a .csv file; give a folder of text files, "
            "a JSONL file (one object per line) or a CSV file with a header row"
        )
    chosen = DEFAULT_FIELD if field is None else field  # `""` is a column of no name
    unused: list[str] = []
    labels: set[str] = set()
    repeated: list[str] = []
    total = 0
    try:
        checked = source.stat()  # (before it is read: a file written over meanwhile is told)
    except OSError as error:
        raise InputError(f"{source}: cannot be read ({error.strerror or error})") from None
    problems = _Problems(source)
    # As far as its size when stat'ed, as the run reads it: what is written meanwhile is
    # neither checked nor sent.
    for document in rows(source, chosen, id_field, unused, problems, checked.st_size):
        total += 1
        if document.label in labels:
            repeated.append(document.label)
        else:
            labels.add(document.label)
    problems.raise_any()
    if total == 0:
        raise InputError(f"{source}: no documents in this file")
    return Inputs(
        source,
        kind,
        total,
        chosen,
        id_field,
        (len(unused), tuple(unused[:3])),
        (len(repeated), len(set(repeated)), tuple(dict.fromkeys(repeated))[:3]),
        stamp=(checked.st_ino, checked.st_size, checked.st_mtime_ns),
    )


SUBFOLDER = "subfolder"
OTHER_SUFFIX = "other suffix"
DANGLING_LINK = "dangling link"
LINK_LOOP = "link loop"
NOT_REGULAR = "not regular"
_NOT_READ = (SUBFOLDER, OTHER_SUFFIX, DANGLING_LINK, LINK_LOOP, NOT_REGULAR)
"""The kinds of a folder's entries that are no documents, in the order they are said."""


def _folder_entries(
    folder: Path, skipped: frozenset[Path] = frozenset()
) -> tuple[list[Path], tuple[tuple[str, int], ...]]:
    """The documents of a folder, sorted by name, and how many of its other entries there
    are of each kind (`Inputs.not_read`). Hidden entries (an editor's lock, a copy's
    resource fork) are neither; nor is what is not a regular file, whatever its name (a
    folder named `x.txt`, a dangling link, a pipe): those are counted."""
    documents: list[Path] = []
    counts = dict.fromkeys(_NOT_READ, 0)
    real = _leads_to(folder) if skipped else None
    # The run's own files here, and those written beside them (the output's `.part`, the
    # ledger's `-wal`): its own output is said elsewhere, not as a file passed over.
    own = tuple(path.name for path in skipped if path.parent == real)
    with os.scandir(folder) as entries:
        for entry in entries:
            if entry.name.startswith("."):
                continue
            kind = _entry_kind(entry)
            if kind is None:  # removed since it was listed
                continue
            path = folder / entry.name
            if kind == OTHER_SUFFIX and path.suffix.lower() in TEXT_SUFFIXES:
                documents.append(path)
            elif not _run_own(entry, path, real, own, skipped):
                counts[kind] += 1
    documents.sort(key=lambda entry: entry.name)
    return documents, tuple((kind, count) for kind, count in counts.items() if count)


def _run_own(
    entry: os.DirEntry[str],
    path: Path,
    real: Path | None,
    own: tuple[str, ...],
    skipped: frozenset[Path],
) -> bool:
    """Whether a folder's entry is one of the run's own files (`skipped`), or one written
    beside one (its name begins with its name) in the folder `real`."""
    if not skipped:
        return False
    if entry.name.startswith(own):
        return True
    # Resolved only where it is a link: else it is the folder's own, by its name.
    where = _leads_to(path) if entry.is_symlink() else None if real is None else real / entry.name
    return where in skipped


def _entry_kind(entry: os.DirEntry[str]) -> str | None:
    """What a folder's entry is, a link followed: `OTHER_SUFFIX` for any regular file (its
    suffix is looked at by the caller); `None` for one gone since it was listed."""
    try:
        mode = entry.stat().st_mode
    except FileNotFoundError:
        if entry.is_symlink():  # (known from the listing: no look at the file)
            return DANGLING_LINK
        return None
    except OSError as error:
        if not entry.is_symlink():
            raise  # (the folder's own permissions: as before, not passed over)
        # A link that cannot be followed (into a folder it may not enter): it leads nowhere
        # the run can read.
        return LINK_LOOP if error.errno == errno.ELOOP else DANGLING_LINK
    if stat.S_ISDIR(mode):
        return SUBFOLDER
    if stat.S_ISREG(mode):
        return OTHER_SUFFIX
    return NOT_REGULAR


def _why_none(folder: Path, left_out: tuple[str, ...]) -> str:
    """What a folder without documents holds that the run does not read: the run's own
    files, and subfolders (documents there are not read: said, rather than none found)."""
    said: list[str] = []
    if left_out:
        are = "is" if len(left_out) == 1 else "are"
        said.append(f"{', '.join(left_out)} {are} the run's own output or prompt")
    try:
        nested = any(
            entry.is_dir() and not entry.name.startswith(".") for entry in folder.iterdir()
        )
    except OSError:
        nested = False
    if nested:
        said.append("its subfolders are not read")
    return f" ({'; '.join(said)})" if said else ""


def resolved(path: Path) -> Path:
    """`path.resolve()`, whose loop of symbolic links is an `OSError` as on Python 3.13,
    not the `RuntimeError` of 3.11 and 3.12."""
    try:
        return path.resolve()
    except RuntimeError:
        raise OSError(errno.ELOOP, "a loop of symbolic links", str(path)) from None


def _leads_to(path: str | os.PathLike[str]) -> Path | None:
    """Where `path` leads, or `None` for a loop of symbolic links, which is no document."""
    try:
        return resolved(Path(path))
    except OSError:
        return None


def _read_text(file: Path) -> str:
    try:
        return _checked(file.read_text(encoding="utf-8-sig"), str(file), "the file")
    except UnicodeDecodeError:
        raise _undecodable(file) from None
    except OSError as error:
        raise InputError(f"{file}: cannot be read ({error.strerror or error})") from None


_OTHER_BOMS = (
    (codecs.BOM_UTF32_LE, "UTF-32"),  # (UTF-16's little-endian mark begins it)
    (codecs.BOM_UTF32_BE, "UTF-32"),
    (codecs.BOM_UTF16_LE, "UTF-16"),
    (codecs.BOM_UTF16_BE, "UTF-16"),
)


def _undecodable(path: Path, chunk_size: int = 1 << 20, limit: int | None = None) -> InputError:
    """Where a file stops being UTF-8, by its line and its byte in the file: a text reader
    decodes ahead in chunks, so its own error comes early and counts within the chunk. Read
    again a chunk at a time (the file may be larger than the memory), as far as `limit`
    bytes (what was read as text: a character cut there is the error)."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    at = 0  # where the chunk read next begins
    lines = 1
    try:
        with _binary(path, limit) as file:
            chunk = file.read(max(chunk_size, 4))  # (UTF-8's byte order mark is UTF-8)
            for bom, encoding in _OTHER_BOMS:
                if chunk.startswith(bom):
                    return InputError(
                        f"{path}: {encoding} text (it begins with {encoding}'s byte order "
                        "mark), not UTF-8: save it as UTF-8"
                    )
            while True:
                held = len(decoder.getstate()[0])  # a character begun in the last chunk
                try:
                    decoder.decode(chunk, final=not chunk)
                except UnicodeDecodeError as error:
                    # (A character held over has no `\n` in it: lines end before it.)
                    where = at - held + error.start
                    lines += chunk.count(b"\n", 0, max(0, error.start - held))
                    return InputError(
                        f"{path} line {lines}: not UTF-8 text (byte {where} of the file cannot be "
                        "decoded)"
                    )
                if not chunk:
                    break
                lines += chunk.count(b"\n")
                at += len(chunk)
                chunk = file.read(chunk_size)
    except OSError as error:
        return InputError(f"{path}: cannot be read ({error.strerror or error})")
    return InputError(f"{path}: not UTF-8 text")


class _Bounded(io.RawIOBase):
    """The first `size` bytes of a file open for reading, and the end of it after them."""

    def __init__(self, file: io.FileIO, size: int) -> None:
        super().__init__()
        self._file = file
        self._left = size

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: WriteableBuffer, /) -> int:
        if self._left <= 0:
            return 0
        with memoryview(buffer) as view, view.cast("B") as cells, cells[: self._left] as part:
            count = self._file.readinto(part) or 0
        self._left -= count
        return count

    def close(self) -> None:
        self._file.close()
        super().close()


def _binary(path: Path, limit: int | None) -> io.BufferedReader:
    """`path` for reading in bytes, no further than `limit` bytes where one is given."""
    file = io.FileIO(path, "r")
    if limit is None:
        return io.BufferedReader(file)
    return io.BufferedReader(_Bounded(file, limit), buffer_size=1 << 20)


def _open(path: Path, limit: int | None, *, newline: str) -> io.TextIOWrapper:
    """`path` as UTF-8 text (a BOM skipped), read as far as `limit` bytes: the text
    decoder and the `csv` module see no byte written since the file was checked."""
    try:
        return io.TextIOWrapper(_binary(path, limit), encoding="utf-8-sig", newline=newline)
    except OSError as error:
        raise InputError(f"{path}: cannot be read ({error.strerror or error})") from None


class _Problems:
    """The lines or rows of a file (the files of a folder) that are no document, found by
    its check: the first few said (a file with many to mend is mended in one go, not one
    run each), and how many in all; and the row past which the file could not be read, if
    one was met (`stop`), said last whatever came before. Where a run reads the file
    (`strict`), the first is raised as it is met."""

    SHOWN = 5

    def __init__(self, path: Path, *, strict: bool = False, within: bool = False) -> None:
        self.path = path
        self.strict = strict
        self.prefix = f"{path}{os.sep}" if within else f"{path} "
        """What the places after the first leave out: the file's name (its lines'), or the
        folder's (`within`: its files')."""
        self.said: list[str] = []
        self.count = 0
        self.stopped: str | None = None
        """The row the check read no further than (a CSV quote out of place)."""

    def add(self, error: InputError) -> None:
        """One more to mend: the check reads on, to say every one at once. A wrong argument
        (a field the first document lacks) is no line to mend: raised, as under `strict`."""
        if self.strict or isinstance(error, NoSuchField):
            raise error
        self.count += 1
        if len(self.said) < self.SHOWN:
            self.said.append(str(error))

    def stop(self, error: InputError) -> None:
        """One more to mend, past which nothing can be read: the check ends there (its
        caller reads no further), and it is said with those found before it."""
        if self.strict:
            raise error
        self.count += 1
        self.stopped = str(error)

    def raise_any(self) -> None:
        if not self.count:
            return
        listed = [*self.said, *([self.stopped] if self.stopped is not None else [])]
        places = [listed[0], *(said.removeprefix(self.prefix) for said in listed[1:])]
        if self.count > len(listed):  # (before the row it stopped at, which is said)
            places.insert(len(self.said), f"and {self.count - len(listed)} more")
        if self.stopped is None:
            tail = "" if self.count == 1 else f" ({self.count} to mend in all)"
        elif self.count == 1:
            tail = " (reading stopped at this row)"
        else:
            tail = f" (reading stopped at this row; {self.count} to mend up to it)"
        raise InputError(f"{'; '.join(places)}{tail}")


def _jsonl(
    path: Path,
    field: str,
    id_field: str | None,
    unused: list[str] | None,
    problems: _Problems | None = None,
    limit: int | None = None,
) -> Iterator[Document]:
    problems = _Problems(path, strict=True) if problems is None else problems
    # One decoder for the file's lines (`json.loads` with a hook would make one per line).
    keys = _Keys(field, DEFAULT_ID_FIELD if id_field is None else id_field)
    decoder = json.JSONDecoder(object_pairs_hook=keys)
    # Lines end at `\n` alone (a `\r\n` too): a bare `\r` is JSON's whitespace inside one.
    with _open(path, limit, newline="\n") as lines:
        number = 0
        first: int | None = None
        while True:
            where = f"{path} line {number + 1}"
            try:
                line = lines.readline()
            except UnicodeDecodeError:
                raise _undecodable(path, limit=limit) from None
            if not line:
                return
            number += 1
            if not line.strip():
                continue
            first = number if first is None else first
            try:
                document = _jsonl_document(
                    line, number, number == first, field, id_field, where, unused, decoder, keys
                )
            except InputError as error:
                problems.add(error)
                continue
            yield document


def _jsonl_document(
    line: str,
    number: int,
    first: bool,
    field: str,
    id_field: str | None,
    where: str,
    unused: list[str] | None,
    decoder: json.JSONDecoder,
    keys: _Keys,
) -> Document:
    text = line.rstrip("\r\n")
    if text.startswith("\ufeff"):  # (the file's own is read past as it is opened)
        raise InputError(
            f"{where}: a byte-order mark at the start of the line (files joined?): remove it"
        )
    try:
        item = decoder.decode(text)
    except json.JSONDecodeError as error:
        if error.msg == "Extra data" and "\r" in text[: error.pos]:  # one line: lines end at \n
            raise InputError(
                f"{where}: its lines end in a bare CR (classic Mac): save it with LF line endings"
            ) from None
        said = error.msg.removesuffix(" at")  # "Unterminated string starting at"
        raise InputError(f"{where}: not JSON ({said} at column {error.colno})") from None
    except ValueError as error:  # JSON, but an integer Python will not read
        reason = str(error).split(";")[0]
        raise InputError(f"{where}: JSON that cannot be read ({reason})") from None
    except RecursionError:
        raise InputError(f"{where}: JSON that cannot be read (nested too deeply)") from None
    if not isinstance(item, dict):
        raise InputError(f"{where}: a JSON {_json_kind(item)}, not an object")
    if keys.twice:  # (the line's object is the last the decoder made: its own)
        raise InputError(f"{where}: {_named_twice('field', keys.twice)}")
    if first:  # a name the first document lacks is wrong, not the line
        if field not in item:
            raise NoSuchField(_no_field(item, field, where))
        if id_field is not None and id_field not in item:
            raise NoSuchField(_no_field(item, id_field, where, "the id's", "--id-field"))
    return Document(
        _text(item, field, where, "field"),
        _label(item, id_field, where, "field", f"line {number}", unused),
    )


def _csv(
    path: Path,
    field: str,
    id_field: str | None,
    unused: list[str] | None,
    problems: _Problems | None = None,
    limit: int | None = None,
) -> Iterator[Document]:
    problems = _Problems(path, strict=True) if problems is None else problems
    # The limit is the `csv` module's, for the whole process: the command's own.
    if csv.field_size_limit() < _FIELD_LIMIT:
        csv.field_size_limit(_FIELD_LIMIT)
    with _open(path, limit, newline="") as handle:
        # Strict: a stray quote is an error that names its row, not a field that runs on
        # to the end of the file, swallowing the rows after it.
        reader = csv.reader(handle, strict=True)
        try:
            columns = next(reader, None)
            while columns == []:  # blank lines before the header, skipped as those after it
                columns = next(reader, None)
        except UnicodeDecodeError:
            raise _undecodable(path, limit=limit) from None
        except csv.Error as error:
            raise InputError(f"{path} (the header row): {error}") from None
        if not columns:
            raise InputError(f"{path}: no header row (a CSV file names its columns first)")
        if columns[0].startswith("\ufeff"):  # (the file's own is read past as it is opened)
            # A second mark (an empty export joined before another): its first column,
            # the id's most often, would have a name no one gave it, and go unread.
            raise InputError(
                f"{path} (the header row): a byte-order mark at the start of the row (files "
                "joined?): remove it"
            )
        # A column named twice is ambiguous only where it is read: the spreadsheet's
        # columns with no name (`id,text,,`) or an unused one repeated are no matter.
        read = {field, DEFAULT_ID_FIELD if id_field is None else id_field}
        twice = sorted({column for column in columns if columns.count(column) > 1} & read)
        if twice:
            raise InputError(f"{path} (the header row): {_named_twice('column', twice)}")
        for name in (field, id_field):
            if name is not None and name not in columns:
                flag = "--field" if name == field else "--id-field"
                shown = ", ".join(f"`{column}`" for column in columns)
                separator = _other_separator(columns, name)
                if separator is not None:  # naming its column would send rows whole
                    raise NoSuchField(
                        f"{path}: the header reads as {shown}, and the file is separated by "
                        f"{separator}, not by commas (a spreadsheet's export in many "
                        "locales); save it as CSV with commas, or as JSONL"
                    )
                raise NoSuchField(
                    f"{path}: no column `{name}` (the columns are {shown}); "
                    f"name the column with {flag}"
                )
        number = 0
        while True:
            # A row is named by its place among the rows (its label's `row N`) and by the
            # file's line it begins on, where an editor finds it: blank lines, skipped, and
            # a quoted field's line ends are no rows, and lines all the same.
            begins = reader.line_num + 1
            try:
                fields = next(reader)
            except StopIteration:
                return
            except UnicodeDecodeError:
                raise _undecodable(path, limit=limit) from None
            except csv.Error as error:
                # A quote out of place: where the rows after it begin is anyone's guess, so
                # the check reads no further, and says so after what it found before.
                problems.stop(InputError(f"{path} row {number + 1} (line {begins}): {error}"))
                return
            if not fields:  # a blank line
                continue
            number += 1
            where = f"{path} row {number} (line {begins})"
            try:
                document = _csv_document(fields, columns, number, field, id_field, where, unused)
            except InputError as error:
                problems.add(error)
                continue
            yield document


def _named_twice(what: str, twice: Collection[str]) -> str:
    """A document's field or column (or the id's) named twice: which value is meant is
    anyone's guess, so neither is sent."""
    shown = ", ".join(f"`{name}`" for name in twice)
    if len(twice) == 1:
        return f"the {what} {shown} is named twice"
    return f"the {what}s {shown} are named twice"


class _Keys:
    """The `object_pairs_hook` of a JSONL file's lines: the object, and which of the
    document's and the id's fields it names twice (`json` keeps the last value of a key
    without a word). The hook is called for each object as it closes, a line's own last."""

    __slots__ = ("read", "twice")

    def __init__(self, *read: str) -> None:
        self.read = tuple(dict.fromkeys(read))
        self.twice: tuple[str, ...] = ()

    def __call__(self, pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        item = dict(pairs)
        if len(item) == len(pairs):  # no key twice: the common case, checked no further
            self.twice = ()
        else:
            self.twice = tuple(
                sorted(name for name in self.read if sum(key == name for key, _ in pairs) > 1)
            )
        return item


def _other_separator(columns: list[str], wanted: str) -> str | None:
    """The separator a header is split by where the file is not a comma's, as the column
    `wanted` is among its names split so: a semicolon (Excel's CSV where a comma is the
    decimal point) or a tab."""
    header = ",".join(columns)
    for mark, said in ((";", "semicolons"), ("\t", "tabs")):
        if mark in header and wanted in (name.strip() for name in header.split(mark)):
            return said
    return None


def _csv_document(
    fields: list[str],
    columns: list[str],
    number: int,
    field: str,
    id_field: str | None,
    where: str,
    unused: list[str] | None,
) -> Document:
    if fields[0].startswith("\ufeff"):  # (the file's own is read past as it is opened)
        # Another export's first row, its header most likely: sent, it would be paid for.
        raise InputError(
            f"{where}: a byte-order mark at the start of the row (files joined?): remove it"
        )
    if len(fields) > len(columns):
        raise InputError(
            f"{where}: {len(fields) - len(columns)} more "
            f"field{'' if len(fields) - len(columns) == 1 else 's'} than the header's "
            f"{len(columns)} columns (a comma in a field that is not quoted?)"
        )
    if len(fields) < len(columns):
        raise InputError(
            f"{where}: {len(fields)} field{'' if len(fields) == 1 else 's'} where the "
            f"header has {len(columns)} columns (a row cut short?)"
        )
    row = dict(zip(columns, fields, strict=True))
    return Document(
        _text(row, field, where, "column"),
        _label(row, id_field, where, "column", f"row {number}", unused),
    )


def _text(item: dict[str, Any], field: str, where: str, what: str) -> str:
    if field not in item or item[field] is None:
        if what == "column":
            raise InputError(f"{where}: no value in the column `{field}`")
        if field in item:
            raise InputError(f"{where}: the field `{field}` is null")
        raise InputError(_no_field(item, field, where))
    value = item[field]
    if not isinstance(value, str):
        raise InputError(f"{where}: the {what} `{field}` is a JSON {_json_kind(value)}, not text")
    return _checked(value, where, f"the {what} `{field}`")


def _no_field(
    item: dict[str, Any],
    field: str,
    where: str,
    whose: str = "the document's",
    flag: str = "--field",
) -> str:
    shown = ", ".join(f"`{key}`" for key in item) or "none"
    return f"{where}: no field `{field}` (its fields: {shown}); name {whose} field with {flag}"


def _checked(text: str, where: str, what: str) -> str:
    """A document worth sending: not empty, and text that can be sent (JSON can spell half
    of a character, `\\ud800`, which is no text and no provider reads)."""
    if not text.strip():
        raise InputError(f"{where}: {what} is empty")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise InputError(
            f"{where}: {what} holds half of a character (a lone surrogate, "
            f"\\u{ord(text[error.start]):04x}), not text"
        ) from None
    return text


def _label(
    item: dict[str, Any],
    id_field: str | None,
    where: str,
    what: str,
    fallback: str,
    unused: list[str] | None,
) -> str:
    value = item.get(DEFAULT_ID_FIELD if id_field is None else id_field)
    if isinstance(value, str) and value:
        return value
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return str(value)
    if id_field is None:  # no usable `id`: the line or row number names it
        if unused is not None and value is not None and value != "":
            unused.append(fallback)  # an `id` there is, but of no use: the command says so
        return fallback
    if value is None or value == "":
        raise InputError(f"{where}: no value in the {what} `{id_field}` (--id-field)")
    kind = "number that is not finite" if isinstance(value, float) else _json_kind(value)
    raise InputError(
        f"{where}: the {what} `{id_field}` is a JSON {kind}: an id is text or a number"
    )


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"

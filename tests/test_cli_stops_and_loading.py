"""`allama batch run` stopped after its input file was replaced, `--type` files of a
package, loaded the same under the `allama` script as under `python -m allama.cli`, and a
`--type` file whose import fails with a message of many lines, said by its first."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from _batch_server import BatchServer
from allama.cli import main
from allama.cli._load import TypeNotFound, load_type

ROOT = Path(__file__).resolve().parent.parent
NUMBERS = [1, 2, 4, 5, 6, 8, 9, 10, 11, 12]
"""Documents the fake server answers at once (no 503 first, no failure)."""


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[BatchServer]:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    served = BatchServer().start()
    yield served
    served.stop()


def replaced_once_opened(monkeypatch: pytest.MonkeyPatch, source: Path, read: int) -> None:
    """Reading `source` the `read`th time (after its check), the run replaces it (`mv new.jsonl
    in.jsonl`, an editor's save) once it has read the first document from the file it opened."""
    from allama.batch import _inputs

    reader = _inputs._jsonl
    reads = []

    def reading(path: Path, field: str, id_field: str | None, unused: Any, *rest: Any) -> Any:
        documents = reader(path, field, id_field, unused, *rest)
        if unused is None:  # (the check passes a list)
            reads.append(path)
        if len(reads) != read or unused is not None:
            yield from documents
            return
        yield next(documents)
        new = source.with_name("new.jsonl")
        new.write_text('{"id": "x", "text": "doc 99"}\n', encoding="utf-8")
        os.replace(new, source)
        yield from documents

    monkeypatch.setattr(_inputs, "_jsonl", reading)


def terminate_after_two_sends(server: BatchServer, already: int = 0) -> None:
    """SIGTERM to this process, from a thread of its own, once the server has received two
    requests more than `already`."""

    def wait_and_act() -> None:
        deadline = time.monotonic() + 30
        while sum(server.sent.values()) < already + 2 and time.monotonic() < deadline:
            time.sleep(0.005)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=wait_and_act, daemon=True).start()


@pytest.mark.parametrize("stop", ["budget", "sigterm"])
def test_a_stopped_run_whose_input_was_replaced_keeps_its_output_and_its_exit_code(
    server: BatchServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    stop: str,
) -> None:
    module = tmp_path / "row.py"
    module.write_text("from pydantic import BaseModel\n\nclass Row(BaseModel):\n    n: int\n")
    command = ["--type", f"{module}:Row", "--provider", "openai", "--base-url", server.url]
    command += ["--model", "gpt-4o-mini", "--concurrency", "1", "--no-progress"]
    ledger = tmp_path / "shared.sqlite"
    read = 1
    if stop == "sigterm":  # an earlier run finished the last two: its values are not written
        earlier = tmp_path / "earlier.jsonl"
        earlier.write_text('{"text": "doc 11"}\n{"text": "doc 12"}\n', encoding="utf-8")
        done = ["batch", "run", str(earlier), *command, "--out", str(tmp_path / "earlier.out")]
        assert main([*done, "--ledger", str(ledger)]) == 0
        read = 2  # the look-up of what the ledger holds reads it first
    source = tmp_path / "in.jsonl"
    source.write_text(
        "".join(json.dumps({"id": f"e{n}", "text": f"doc {n}"}) + "\n" for n in NUMBERS),
        encoding="utf-8",
    )
    out = tmp_path / "out.jsonl"
    # An earlier run's output, replaced by this one's values.
    previous = {"label": "e0", "key": "0" * 64, "value": {"n": 0}, "record": None}
    out.write_text(json.dumps(previous) + "\n", encoding="utf-8")
    replaced_once_opened(monkeypatch, source, read)
    if stop == "budget":  # $0.000021 a call: the third reaches it
        options = ["--max-cost", "0.00005"]
    else:  # once two requests came, with the file replaced at the first read
        server.delay = 0.05
        terminate_after_two_sends(server, already=2)
        options = []
    capsys.readouterr()
    command = ["batch", "run", str(source), *command, "--out", str(out), "--ledger", str(ledger)]
    status = main([*command, *options])
    err = capsys.readouterr().err
    assert status == (3 if stop == "budget" else 128 + signal.SIGTERM), err
    # The run's own values are the output, in place of the one before; nothing is left.
    sent = [n for n, count in server.sent.items() for _ in range(count)]
    if stop == "sigterm":
        assert sent[:2] == [11, 12]
        sent = sent[2:]
    assert 1 <= len(sent) < len(NUMBERS) - 2
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert sorted(row["value"]["n"] for row in rows) == sorted(sent)
    assert not out.with_name("out.jsonl.part").exists()
    values = f"{len(sent)} value{'s' if len(sent) > 1 else ''}"
    assert f"output: {out} ({values})\n" in err
    assert "the run stopped" not in err and "is left as it was" not in err
    written_over = f"{source}: the file was written over during the run: run again on the new one"
    assert (
        f"note: {written_over}; the values the ledger holds for the documents the run did not "
        "reach are not written: they are no longer those the run read\n"
    ) in err
    # The budget's stop reads on to the end of the file it opened, and says it changed.
    read_to_its_end = f"note: {written_over} (read to its end as it was opened: "
    assert (read_to_its_end in err) == (stop == "budget")
    assert f"{len(sent)} done, 0 failed, {len(NUMBERS) - len(sent)} not started, in " in err


# Loading `--type` files

CONSOLE_SCRIPT = "import sys; from allama.cli import main; sys.exit(main())"
"""What the installed `allama` script runs: with `python -P`, the current directory is not
on the path, as it is not for a console script."""


def allama(*args: str, cwd: Path, module: bool = False) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "PYTHONDONTWRITEBYTECODE": "1"}
    start = ["-m", "allama.cli"] if module else ["-P", "-c", CONSOLE_SCRIPT]
    return subprocess.run(
        [sys.executable, *start, *args], cwd=cwd, env=env, text=True, capture_output=True
    )


def project(root: Path, package: str) -> Path:
    """A project at `root`: the package `package` with a base class, a file that imports it
    absolutely, one relatively, and one its sibling by its name."""
    folder = root / package
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text("")
    (folder / "base.py").write_text(
        "from pydantic import BaseModel\n\nclass Base(BaseModel):\n    n: int\n"
    )
    (folder / "absolute.py").write_text(
        f"from {package}.base import Base\n\nclass Row(Base):\n    pass\n"
    )
    (folder / "relative.py").write_text("from .base import Base\n\nclass Row(Base):\n    pass\n")
    (folder / "sibling.py").write_text("from base import Base\n\nclass Row(Base):\n    pass\n")
    return folder


PLANNED = "Row: what each provider would enforce on calls (no model was asked)\n"


@pytest.mark.parametrize("how", ["script", "module"])
def test_a_file_of_a_package_loads_the_same_under_the_script_and_python_m(
    tmp_path: Path, how: str
) -> None:
    project(tmp_path, "shop")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for name, cwd in [
        ("absolute", tmp_path),  # from the project's root
        ("relative", tmp_path),
        ("relative", elsewhere),  # the package found from the file, wherever the command is
        ("sibling", tmp_path),  # its folder on the path, as before
    ]:
        reference = f"shop/{name}.py:Row" if cwd == tmp_path else f"{tmp_path}/shop/{name}.py:Row"
        done = allama("plan", reference, "--provider", "openai", cwd=cwd, module=how == "module")
        assert (done.returncode, done.stderr) == (0, ""), (name, done.stderr)
        assert done.stdout.startswith(PLANNED)


@pytest.fixture
def loaded_here(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The modules and the path as they were, after a test that loads types."""
    before = set(sys.modules)
    path = list(sys.path)
    yield
    assert sys.path == path  # what a load put on the path is taken away
    for name in set(sys.modules) - before:
        monkeypatch.delitem(sys.modules, name)


def test_a_file_of_a_package_is_its_package_module_loaded_again_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, loaded_here: None
) -> None:
    project(tmp_path, "f5_catalogue")
    monkeypatch.chdir(tmp_path / "f5_catalogue")  # inside the package: found all the same
    first = load_type(f"{tmp_path}/f5_catalogue/relative.py:Row")
    assert first.__module__ == "f5_catalogue.relative"
    assert load_type(f"{tmp_path}/f5_catalogue/relative.py:Row") is first
    assert load_type("f5_catalogue.relative:Row") is first


def test_a_package_whose_name_is_another_modules_does_not_take_its_place(
    tmp_path: Path, loaded_here: None
) -> None:
    import json as standard_json

    # A project's package named as a standard library module: loaded alone, by its file,
    # as before; the standard module is not replaced by it, nor it by the standard one.
    folder = project(tmp_path, "json")
    (folder / "decoder.py").write_text(
        "from pydantic import BaseModel\n\nclass Row(BaseModel):\n    mine: int\n"
    )
    row = load_type(f"{folder}/decoder.py:Row")
    assert list(row.model_fields) == ["mine"]
    assert list(load_type(f"{folder}/sibling.py:Row").model_fields) == ["n"]
    assert sys.modules["json"] is standard_json
    with pytest.raises(TypeNotFound) as refused:
        load_type(f"{folder}/relative.py:Row")
    assert str(refused.value) == (
        f"importing `{folder}/relative.py` failed: ImportError: attempted relative import with "
        f"no known parent package (`{folder / 'relative.py'}`, line 1); the file is in the "
        "package `json`, a name that is the standard library's here: it was loaded alone, "
        "without its package"
    )
    # Two projects with a package of the same name: the second's file is its own.
    one, two = tmp_path / "one", tmp_path / "two"
    for root, field in ((one, "first"), (two, "second")):
        (root / "f5_shop").mkdir(parents=True)
        (root / "f5_shop" / "__init__.py").write_text("")
        (root / "f5_shop" / "models.py").write_text(
            f"from pydantic import BaseModel\n\nclass Row(BaseModel):\n    {field}: int\n"
        )
    assert list(load_type(f"{one}/f5_shop/models.py:Row").model_fields) == ["first"]
    assert list(load_type(f"{two}/f5_shop/models.py:Row").model_fields) == ["second"]
    assert list(load_type(f"{one}/f5_shop/models.py:Row").model_fields) == ["first"]


def test_an_import_failing_over_many_lines_is_said_by_its_first_line_in_both_commands(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    loaded_here: None,
) -> None:
    from pydantic import BaseModel, PydanticSchemaGenerationError

    # A field typed `callable`: pydantic's error goes on, over blank lines, with advice on
    # `handler.generate_schema`, which `batch run` printed as `\n\n` on one long line.
    module = tmp_path / "callable_field.py"
    module.write_text("from pydantic import BaseModel\n\nclass E(BaseModel):\n    f: callable\n")
    with pytest.raises(PydanticSchemaGenerationError) as raised:
        type("E", (BaseModel,), {"__annotations__": {"f": callable}})
    first, rest = str(raised.value).split("\n", 1)
    assert first.startswith("Unable to generate pydantic-core schema for <built-in function")
    assert "handler" in rest
    said = (
        f"importing `{module}` failed: PydanticSchemaGenerationError: {first} "
        f"(`{module}`, line 3)\n"
    )
    source = tmp_path / "in.jsonl"
    source.write_text('{"text": "doc 1"}\n', encoding="utf-8")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert main(["plan", f"{module}:E", "--provider", "openai"]) == 2
    assert capsys.readouterr().err == f"allama plan: {said}"
    batch = ["batch", "run", str(source), "--type", f"{module}:E", "--out", str(tmp_path / "o")]
    assert main([*batch, "--provider", "openai", "--model", "gpt-4o-mini"]) == 2
    assert capsys.readouterr().err == f"allama batch run: {said}"
    assert not (tmp_path / "o").exists()


TYPE_FAILURES = [
    (
        "from pydantic import BaseModel, ConfigDict\n\n"
        "def boom(schema):\n    raise ZeroDivisionError('x\\ny')\n\n"
        "class Row(BaseModel):\n    model_config = ConfigDict(json_schema_extra=boom)\n"
        "    n: int\n",
        "cannot extract `Row`: writing its JSON Schema raised ZeroDivisionError: x (code of "
        "the type's own runs there, such as a `json_schema_extra` or a "
        "`__get_pydantic_json_schema__`)",
    ),
    (
        "class Row:\n    @classmethod\n"
        "    def __get_pydantic_core_schema__(cls, source, handler):\n"
        "        raise ValueError('no \\x1b[31mvalidator')\n",
        "cannot extract `Row`: building its validator raised ValueError: no \\x1b[31mvalidator "
        "(code of the type's own runs there, such as a `__get_pydantic_core_schema__`)",
    ),
    (
        "import dataclasses\nfrom typing import Annotated\n\nfrom pydantic import Field\n\n"
        "@dataclasses.dataclass\nclass Row:\n"
        "    code: Annotated[str, Field(pattern=r'^[A-Z]{2}\\d{3')]\n",
        "cannot extract `Row`: pydantic failed to build the validator of its field `code` "
        "(regex parse error: unclosed counted repetition in `^[A-Z]{2}\\d{3`)",
    ),
    (
        "from pydantic import BaseModel\n\nclass Row(BaseModel):\n    kind: type[int]\n",
        "cannot extract `Row`: its JSON Schema cannot be written, and a provider needs it "
        "(Cannot generate a JsonSchema for core_schema.IsSubclassSchema (<class 'int'>)); a "
        "type to extract is a pydantic model, a dataclass, a TypedDict, or a type such as "
        "`list[...]`, a `Literal` or an enum, made of types JSON can carry",
    ),
]


@pytest.mark.parametrize(("source", "said"), TYPE_FAILURES)
def test_a_type_refused_as_its_schema_is_built_is_one_line_in_both_commands(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    loaded_here: None,
    source: str,
    said: str,
) -> None:
    """The type's own code failing as its schema or validator is built (or pydantic failing
    on a constraint, or a class as a value, which JSON cannot carry) is said as an import
    that fails is: one line, exit 2, and `batch run` leaves no `.part` file nor a ledger."""
    module = tmp_path / "failing_types.py"
    module.write_text(source)
    inputs = tmp_path / "in.jsonl"
    inputs.write_text('{"text": "doc 1"}\n', encoding="utf-8")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert main(["plan", f"{module}:Row", "--provider", "openai"]) == 2
    assert capsys.readouterr().err == f"allama plan: {said}\n"
    out = tmp_path / "o.jsonl"
    batch = ["batch", "run", str(inputs), "--type", f"{module}:Row", "--out", str(out)]
    assert main([*batch, "--provider", "openai", "--model", "gpt-4o-mini"]) == 2
    assert capsys.readouterr().err == f"allama batch run: {said}\n"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["failing_types.py", "in.jsonl"]

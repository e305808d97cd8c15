"""`allama plan`: every preset and both modes, offline, as text and as JSON."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import allama as allama_package
from allama.cli import main
from allama.cli._load import TypeNotFound, load_type
from allama.providers import PRESET_NAMES, PRESETS

ROOT = Path(__file__).resolve().parent.parent
INVOICE = f"{ROOT / 'examples' / 'invoice.py'}:Invoice"


def test_plan_json_covers_every_preset_and_both_modes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", INVOICE, "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["type"] == "Invoice"
    seen = {(row["provider"], row["mode"]) for row in document["plans"]}
    # Each preset, and each of its other APIs as a row of its own.
    names = [
        label
        for name in PRESET_NAMES
        for label in (name, *(f"{name} ({api})" for api in PRESETS[name].apis))
    ]
    assert seen == {(name, mode) for name in names for mode in ("native", "forced_tool")}
    assert "openai (responses)" in names
    by_key = {(row["provider"], row["mode"]): row for row in document["plans"]}
    # Endpoints that take a schema without saying what they enforce are approximate at best.
    assert by_key[("openai-compatible", "native")]["enforcement"] == "approximate"
    # Together does not honour strict mode: the plan says so, in the caller's terms.
    together = by_key[("together", "forced_tool")]
    assert together["enforcement"] == "not_enforced"
    assert any("`Invoice`" in note for note in together["notes"])
    assert all(
        row["enforcement"] in ("exact", "approximate", "not_enforced", "refused")
        for row in document["plans"]
    )


def test_plan_table_names_the_type_and_sends_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", INVOICE, "--provider", "groq"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(
        "Invoice: what each provider would enforce on calls (no model was asked)\n"
    )
    lines = [line for line in out.splitlines() if line.startswith("groq ")]
    assert [line.split()[2] for line in lines] == ["native", "forced_tool"]


def test_plan_rows_of_another_api(capsys: pytest.CaptureFixture[str]) -> None:
    choices = ["--provider", "openai", "--provider", "openai:responses"]
    assert main(["plan", INVOICE, "--json", *choices, "--provider", "xai (responses)"]) == 0
    plans = json.loads(capsys.readouterr().out)["plans"]
    assert [(row["provider"], row["model"], row["mode"]) for row in plans] == [
        ("openai", "gpt-5-mini", "native"),
        ("openai", "gpt-5-mini", "forced_tool"),
        ("openai (responses)", "gpt-5-mini", "native"),
        ("openai (responses)", "gpt-5-mini", "forced_tool"),
        ("xai (responses)", "grok-4", "native"),
        ("xai (responses)", "grok-4", "forced_tool"),
    ]
    # The Responses API enforces what Chat Completions enforces on the same endpoint.
    by_row = {(row["provider"], row["mode"]): row for row in plans}
    for mode in ("native", "forced_tool"):
        chat, responses = by_row[("openai", mode)], by_row[("openai (responses)", mode)]
        assert (chat["enforcement"], chat["notes"]) == (
            responses["enforcement"],
            responses["notes"],
        )
    assert main(["plan", INVOICE, "--provider", "groq:responses"]) == 2
    assert "groq has no api='responses'" in capsys.readouterr().err


def test_plan_loads_a_type_from_a_module_path(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "allama.types:Usage", "--provider", "openai", "--json"]) == 0
    plans = json.loads(capsys.readouterr().out)["plans"]
    assert [row["mode"] for row in plans] == ["native", "forced_tool"]


def test_an_unknown_option_is_said_with_its_commands_usage(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Argparse left it to the top-level parser, whose usage names no command's options."""
    assert main(["plan", INVOICE, "--bogus"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: allama plan [-h]")
    assert err.endswith("allama plan: error: unrecognized arguments: --bogus\n")
    assert main(["batch", "status", "ledger.db", "--bogus", "x"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: allama batch status [-h]")
    assert err.endswith("allama batch status: error: unrecognized arguments: --bogus x\n")
    assert main(["--bogus", "plan", INVOICE]) == 2
    assert capsys.readouterr().err.endswith("allama: error: unrecognized arguments: --bogus\n")


def test_what_a_module_prints_as_it_loads_goes_to_stderr_not_into_the_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # `plan --json | jq` read the module's own prints first, and was no JSON.
    module = tmp_path / "noisy.py"
    module.write_text(
        'print("loading models...")\nfrom pydantic import BaseModel\n\n\n'
        "class P(BaseModel):\n    name: str\n"
    )
    assert main(["plan", f"{module}:P", "--provider", "openai", "--json"]) == 0
    out, err = capsys.readouterr()
    assert [row["mode"] for row in json.loads(out)["plans"]] == ["native", "forced_tool"]
    assert err == "loading models...\n"


def test_a_folder_named_for_the_type_is_said_to_be_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plan", f"{tmp_path}:X"]) == 2
    assert f"`{tmp_path}` is a folder: name a Python file (`{tmp_path}/x.py`)" in (
        capsys.readouterr().err
    )


def test_bad_references_get_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "no-colon"]) == 2
    assert "is not a type reference" in capsys.readouterr().err
    assert main(["plan", "missing/file.py:X"]) == 2
    assert "no such file: `missing/file.py`" in capsys.readouterr().err
    assert main(["plan", INVOICE, "--provider", "nope"]) == 2
    assert "unknown provider 'nope'" in capsys.readouterr().err
    with pytest.raises(TypeNotFound, match="has no `Nope`"):
        load_type(f"{ROOT / 'examples' / 'invoice.py'}:Nope")


def test_a_type_no_extraction_takes_is_said_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # As `batch run` says it: no traceback, the usage status.
    module = tmp_path / "types_here.py"
    module.write_text(
        "from pydantic import AliasPath, BaseModel, Field\n"
        "class ByPath(BaseModel):\n"
        "    name: str = Field(validation_alias=AliasPath('names', 0))\n"
        "class Later(BaseModel):\n"
        "    other: 'Undefined'\n"
    )
    assert main(["plan", f"{module}:ByPath", "--provider", "openai"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("allama plan: cannot extract `ByPath`: the field `ByPath.name` is read")
    assert "Traceback" not in err and err.count("\n") == 1
    assert main(["plan", f"{module}:Later", "--provider", "openai"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("allama plan: cannot extract `Later`: pydantic cannot validate it")
    # An enum pydantic cannot write the schema of (its value serializes to nothing).
    enums = tmp_path / "enums_here.py"
    enums.write_text(
        "import enum\nfrom pydantic import BaseModel\n"
        "class E(enum.Enum):\n    A = object()\n"
        "class ObjEnum(BaseModel):\n    e: E\n"
    )
    assert main(["plan", f"{enums}:ObjEnum", "--provider", "openai"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("allama plan: ") and "Traceback" not in err


# Behaving as a Unix tool

SRC = ROOT / "src"
CONSOLE_SCRIPT = "import sys; from allama.cli import main; sys.exit(main())"
"""What the installed `allama` script runs. Started with `python -P`, so that the current
directory is not on the path, as it is not for a console script."""


def allama(*args: str, cwd: Path | None = None, **options: Any) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    return subprocess.run(
        [sys.executable, "-P", "-c", CONSOLE_SCRIPT, *args],
        cwd=cwd,
        env=env,
        text=True,
        timeout=120,
        **options,
    )


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"allama {allama_package.__version__}\n"
    done = allama("--version", capture_output=True)
    assert (done.returncode, done.stdout, done.stderr) == (
        0,
        f"allama {allama_package.__version__}\n",
        "",
    )


def test_usage_errors_return_their_status(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "the following arguments are required: command" in capsys.readouterr().err
    assert main(["--help"]) == 0
    assert capsys.readouterr().out.startswith("usage: allama")


def test_a_reader_that_goes_away_ends_the_output_quietly() -> None:
    # `allama plan ... | head`: the reader has closed the pipe before the table is written.
    read, write = os.pipe()
    os.close(read)
    try:
        done = allama("plan", INVOICE, "--provider", "openai", stdout=write, stderr=subprocess.PIPE)
    finally:
        os.close(write)
    assert done.stderr == ""  # no BrokenPipeError traceback, no "Exception ignored" line
    assert done.returncode == 128 + signal.SIGPIPE  # what a shell reports for `cat` killed so


def test_a_function_is_not_a_type(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    module = tmp_path / "handlers.py"
    module.write_text("import json\n\ndef make():\n    return 1\n\nLIMIT = 5\n")
    assert main(["plan", f"{module}:make"]) == 2
    assert capsys.readouterr().err == (
        f"allama plan: `{module}:make` is not a type: it is a function; name a class (a pydantic "
        "model, a dataclass, a TypedDict, an Enum) or a type alias such as `list[Invoice]`\n"
    )
    assert main(["plan", f"{module}:LIMIT"]) == 2
    assert "is not a type: it is a value of type `int`;" in capsys.readouterr().err
    assert main(["plan", f"{module}:json"]) == 2
    assert "is not a type: it is a module;" in capsys.readouterr().err
    assert main(["plan", f"{module}:json.loads"]) == 2
    assert "is not a type: it is a function;" in capsys.readouterr().err


def test_type_aliases_and_generic_types_are_types(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    module = tmp_path / "shapes.py"
    module.write_text(
        "from typing import Literal\nColours = list[Literal['red', 'green']]\nMaybe = int | None\n"
        "from typing_extensions import TypeAliasType\n"  # `type Counts = ...` before 3.12
        "Counts = TypeAliasType('Counts', list[int])\n"
    )
    for name, label in (("Colours", "list[Literal"), ("Maybe", ""), ("Counts", "")):
        assert main(["plan", f"{module}:{name}", "--provider", "openai", "--json"]) == 0
        document = json.loads(capsys.readouterr().out)
        assert document["type"].startswith(label)
        assert [row["mode"] for row in document["plans"]] == ["native", "forced_tool"]


def test_a_package_in_the_current_directory_is_found(tmp_path: Path) -> None:
    package = tmp_path / "shop"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "models.py").write_text(
        "from pydantic import BaseModel\n\nclass Item(BaseModel):\n    name: str\n"
    )
    done = allama(
        "plan", "shop.models:Item", "--provider", "openai", cwd=tmp_path, capture_output=True
    )
    assert done.stderr == ""
    assert done.returncode == 0
    assert done.stdout.startswith(
        "Item: what each provider would enforce on calls (no model was asked)\n"
    )


def test_the_current_directory_is_not_left_on_the_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "catalogue.py").write_text(
        "from dataclasses import dataclass\n\n@dataclass\nclass Book:\n    title: str\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    before = list(sys.path)
    assert main(["plan", "catalogue:Book", "--provider", "openai", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["type"] == "Book"
    assert sys.path == before
    monkeypatch.delitem(sys.modules, "catalogue")


def test_an_import_that_fails_is_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "broken_models.py").write_text("raise RuntimeError('half-written')\n")
    done = allama("plan", "broken_models:X", cwd=tmp_path, capture_output=True)
    assert done.returncode == 2
    assert done.stderr == (
        "allama plan: importing `broken_models` failed: RuntimeError: half-written "
        f"(`{tmp_path / 'broken_models.py'}`, line 1)\n"
    )
    # A syntax error at its line and column; an error raised inside an installed package
    # (pydantic's, at a class it cannot make) at the caller's line that led there.
    (tmp_path / "syntax.py").write_text("class Row(BaseModel)\n    n: int\n")
    (tmp_path / "unmade.py").write_text(
        "from pydantic import BaseModel\n\nclass Row(BaseModel):\n    n: 'Missing' = 1\n\n"
        "Row.model_rebuild()\n"
    )
    for name, said in [
        ("syntax", f"expected ':' (`{tmp_path / 'syntax.py'}`, line 1, column 21)"),
        ("unmade", "PydanticUndefinedAnnotation: name 'Missing' is not defined"),
    ]:
        done = allama("plan", f"{tmp_path / name}.py:Row", cwd=tmp_path, capture_output=True)
        assert done.returncode == 2
        assert done.stderr.startswith(f"allama plan: importing `{tmp_path / name}.py` failed: ")
        assert said in done.stderr
    assert done.stderr.endswith(f"(`{tmp_path / 'unmade.py'}`, line 6)\n")
    # One `:` between the file and the name.
    done = allama("plan", "unmade.py:Row:n", cwd=tmp_path, capture_output=True)
    assert done.returncode == 2 and "`unmade.py:Row:n` is not a type reference" in done.stderr


@pytest.mark.parametrize("how", ["file", "module"])
def test_a_type_module_that_exits_on_import_is_reported(
    tmp_path: Path, how: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "exiting_models.py"
    script.write_text("import sys\n\nclass X:\n    pass\n\nsys.exit(3)\n")
    reference = f"{script}:X" if how == "file" else "exiting_models:X"
    monkeypatch.chdir(tmp_path)
    with pytest.raises(TypeNotFound) as refused:
        load_type(reference)
    name = str(script) if how == "file" else "exiting_models"
    assert str(refused.value).startswith(f"importing `{name}` exited (`SystemExit(3)`): ")
    monkeypatch.delitem(sys.modules, "exiting_models", raising=False)


def test_plan_says_where_a_root_is_wrapped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    module = tmp_path / "labels.py"
    module.write_text(
        "from typing import Literal\nLabels = list[Literal['spam', 'ham']]\n", encoding="utf-8"
    )
    assert main(["plan", f"{module}:Labels", "--provider", "openai", "--json"]) == 0
    rows = {row["mode"]: row for row in json.loads(capsys.readouterr().out)["plans"]}
    for mode in ("native", "forced_tool"):
        assert rows[mode]["root_wrapped"] is True
        assert rows[mode]["enforcement"] == "exact"
        assert rows[mode]["notes"][0].startswith('sent wrapped in {"value": ...}')
    assert main(["plan", f"{module}:Labels", "--provider", "vllm", "--json"]) == 0
    rows = {row["mode"]: row for row in json.loads(capsys.readouterr().out)["plans"]}
    assert (rows["native"]["root_wrapped"], rows["forced_tool"]["root_wrapped"]) == (False, True)


def test_plan_of_streamed_calls(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", INVOICE, "--provider", "groq", "--stream", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["stream"] is True
    native = next(row for row in document["plans"] if row["mode"] == "native")
    assert native["enforcement"] == "not_enforced"
    assert main(["plan", INVOICE, "--provider", "groq", "--stream"]) == 0
    assert "on streamed calls" in capsys.readouterr().out.splitlines()[0]


class _Full:
    """Standard output on a full disk (`> /dev/full`)."""

    def write(self, text: str) -> int:
        raise OSError(28, "No space left on device")

    def flush(self) -> None:
        pass


@pytest.mark.parametrize("stdout", ["full", "closed"])
def test_a_stdout_that_cannot_be_written_is_said_in_one_line(
    stdout: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "stdout", _Full() if stdout == "full" else None)
    why = "No space left on device" if stdout == "full" else "it is closed"
    assert main(["plan", INVOICE, "--provider", "openai"]) == 1
    assert capsys.readouterr().err == f"allama plan: cannot write to stdout: {why}\n"
    assert main(["--version"]) == 1
    assert capsys.readouterr().err == f"allama: cannot write to stdout: {why}\n"
    # A usage error is said on stderr, whatever stdout is.
    assert main([]) == 2
    assert "the following arguments are required: command" in capsys.readouterr().err


def test_a_full_stdout_ends_the_output_in_one_line_without_a_traceback() -> None:
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here")
    # The table is buffered: the write fails at the flush, which the interpreter's own last
    # flush would report with a traceback ("Exception ignored ...") and status 120.
    for command in (["plan", INVOICE, "--provider", "openai"], ["--version"]):
        with open("/dev/full", "w") as full:
            done = allama(*command, stdout=full, stderr=subprocess.PIPE)
        name = "allama plan" if command[0] == "plan" else "allama"
        assert (done.returncode, done.stderr) == (
            1,
            f"{name}: cannot write to stdout: No space left on device\n",
        )


def test_ctrl_c_while_the_command_loads_ends_it_quietly(monkeypatch: pytest.MonkeyPatch) -> None:
    # The command's modules take about half a second to import: a Ctrl-C then is no traceback.
    class Interrupted:
        def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
            if name == "allama.cli._main":
                raise KeyboardInterrupt
            return None

    monkeypatch.delitem(sys.modules, "allama.cli._main")
    monkeypatch.setattr(sys, "meta_path", [Interrupted(), *sys.meta_path])
    from allama import cli

    assert cli.main(["--version"]) == 130


def test_plan_of_the_model_given(capsys: pytest.CaptureFixture[str]) -> None:
    # What Groq enforces depends on the model: its Llama has no JSON Schema output, so the
    # plan of the model the run will use differs from that of the preset's own model.
    groq = ["--provider", "groq", "--provider", "openai"]
    assert main(["plan", INVOICE, "--json", *groq, "--model", "llama-3.3-70b-versatile"]) == 0
    plans = json.loads(capsys.readouterr().out)["plans"]
    assert [(row["provider"], row["model"], row["mode"]) for row in plans] == [
        ("groq", "llama-3.3-70b-versatile", "native"),
        ("groq", "llama-3.3-70b-versatile", "forced_tool"),
        ("openai", "llama-3.3-70b-versatile", "native"),
        ("openai", "llama-3.3-70b-versatile", "forced_tool"),
    ]
    assert [row["enforcement"] for row in plans[:2]] == ["not_enforced", "approximate"]
    assert main(["plan", INVOICE, "--provider", "groq", "--model", "llama-3.3-70b-versatile"]) == 0
    rows = [line.split()[:4] for line in capsys.readouterr().out.splitlines()[3:5]]
    assert rows == [
        ["groq", "llama-3.3-70b-versatile", "native", "not_enforced"],
        ["groq", "llama-3.3-70b-versatile", "forced_tool", "approximate"],
    ]
    # A model is one provider's: planned on every preset, it would be on the others' too.
    assert main(["plan", INVOICE, "--model", "gpt-4o"]) == 2
    assert capsys.readouterr() == (
        "",
        "allama plan: --model goes with --provider: a model is one provider's (name it: "
        "`--provider openai`, say)\n",
    )
    assert main(["plan", INVOICE, "--provider", "openai", "--model", ""]) == 2
    assert capsys.readouterr() == ("", "allama plan: --model is empty; name the model to plan\n")


def test_plan_names_each_provider_once(capsys: pytest.CaptureFixture[str]) -> None:
    twice = ["--provider", "openai", "--provider", "groq", "--provider", "openai"]
    others = ["--provider", "openai:responses", "--provider", "openai (responses)"]
    assert main(["plan", INVOICE, "--json", *twice, *others]) == 0
    plans = json.loads(capsys.readouterr().out)["plans"]
    assert [(row["provider"], row["mode"]) for row in plans] == [
        ("openai", "native"),
        ("openai", "forced_tool"),
        ("groq", "native"),
        ("groq", "forced_tool"),
        ("openai (responses)", "native"),
        ("openai (responses)", "forced_tool"),
    ]


def test_python_m_allama_runs_the_command() -> None:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    done = subprocess.run(
        [sys.executable, "-P", "-m", "allama", "--version"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (done.returncode, done.stdout, done.stderr) == (
        0,
        f"allama {allama_package.__version__}\n",
        "",
    )
    # As the command: a usage error is said with its status.
    done = subprocess.run(
        [sys.executable, "-P", "-m", "allama", "plan"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.endswith("allama plan: error: the following arguments are required: type\n")

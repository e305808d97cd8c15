"""A streamed extraction: the provider's events as they come, the value so far, then the value."""

from __future__ import annotations

import copy
from functools import partial
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, Self, TypeVar, cast

from pydantic import BaseModel

from allama.errors import REPORTED_USAGE_KEY, Error
from allama.extract._engine import (
    END,
    Extracted,
    Opened,
    Settings,
    _answered,
    _answered_by,
    cut_after_sending,
    finish,
    from_the_wire,
    record_cut,
    refused_midway,
)
from allama.extract._errors import EXTRACTION_TOOL
from allama.extract._mode import ExtractionMode
from allama.extract._output import output_plan
from allama.extract._parse import Checked
from allama.extract._partial import PartialValue, root_of
from allama.extract._root import wrapper_type
from allama.extract._validation import Failure, check_answer
from allama.stream import _SURROGATE, AsyncChatStream, ChatStream, StreamCollector
from allama.stream import _joined as _paired_parts
from allama.types import (
    BlockStart,
    Finish,
    StreamBlockType,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    Usage,
)

if TYPE_CHECKING:
    from allama._tracing import ExtractionSpan
    from allama.extract._metadata import ExtractionMetadata

T = TypeVar("T")


def _record_so_far(opened: Opened, made: bool = False) -> ExtractionMetadata:
    """The record of a stream not (or not yet) finished: its usage so far (with what a
    wrapper read ahead of it, which a stream dropped unclosed never took), not a pass; a
    call made, its cost unknown, where nothing was reported of one made (`made`, or its
    response had begun: `Opened.received`; `record_cut`)."""
    record = opened.metadata.model_copy(deep=True)
    record_cut(record, opened.stream, opened.target, made or opened.received)
    return record


def _record_at_close(opened: Opened) -> tuple[ExtractionMetadata, bool]:
    """The record of a stream closed (or dropped) without `finish()`, and whether it was
    closed early. One whose response ended (its `Finish` event came, no error after it) was
    answered whole: its pass was made and paid, counted as `finish()` counts it (its usage,
    its degradations), without reading the value; `False`. Else `_record_so_far`, `True`."""
    collector = opened.stream.collector
    if not collector.finished or collector.error is not None:
        return _record_so_far(opened), True
    record = opened.metadata.model_copy(deep=True)
    record.record_pass(collector.finish(), opened.target.reword)
    return record, False


def _same_fields_set(built: Any, value: Any) -> bool:
    """Whether a model built by the partial value lists the fields set that the validated
    one does (`==` does not compare them; a validator that fills a field may add one)."""
    if not isinstance(value, BaseModel):
        return True
    same: bool = built.model_fields_set == value.model_fields_set
    return same


class _Observer(Generic[T]):
    """What both stream flavours share: the partial output, the partial value, `finish`."""

    def __init__(
        self, opened: Opened, settings: Settings, tp: Any, span: ExtractionSpan | None = None
    ) -> None:
        self._opened = opened
        self._settings = settings
        self._span = span
        self._failed: Error | None = None
        self._refusal: tuple[Error, Error] | None = None
        """The provider's refusal of the output that failed the stream, and the failure it
        was read as (`_with_record`): raised again as that when `finish()` meets it."""
        if span is not None:
            span.watch(self, partial(_record_at_close, opened))
        self._pieces: list[str] = []
        self._joined = ""
        self._joined_count = 0
        self._tool_index: int | None = None
        target = opened.target
        # A wrapped type streams as `{"value": ...}`: the partial value follows the wrapping
        # object and is shown unwrapped. A `RootModel` is followed as its root, each
        # snapshot wrapped in it.
        shown, self._root_model = root_of(tp)
        # A type that holds an `Iterable` has its preview's iterators made for each read.
        self._iterables = output_plan(target.type.adapter, target.type.schema).generators
        # The value, once it ends, is validated once, by `_settle` (as `finish()` will),
        # not by the partial value first.
        self._partial: PartialValue[Any] = PartialValue(
            wrapper_type(shown) if target.wrapped else shown,
            validate_root=False,
            iterables=self._iterables,
        )
        # Text not yet given to the partial value: it is read when `partial` is, so a
        # caller who never looks at it pays nothing for it.
        self._unread: list[str] = []
        self._half = ""
        """The first half of a surrogate pair that ended the last piece: held until the
        piece with its second half, so that the two are one character (an emoji whose
        escape a provider split across events)."""
        self._ended = False
        self._settled = False
        self._checked: Checked | None = None

    @property
    def mode(self) -> ExtractionMode:
        """The mode in use: `FORCED_TOOL` after an automatic fallback."""
        return self._opened.metadata.mode

    def observe(self, event: StreamEvent) -> None:
        if not self._opened.received and from_the_wire(event):
            self._opened.received = True  # (a stream stopped from now on was a call made)
        mode = self._opened.metadata.mode
        if isinstance(event, TextDelta):
            if mode is ExtractionMode.NATIVE:
                self._take(event.text)
        elif isinstance(event, BlockStart):
            if (
                event.block_type is StreamBlockType.TOOL_CALL
                and event.name == EXTRACTION_TOOL
                and self._tool_index is None
                and mode is ExtractionMode.FORCED_TOOL
            ):
                self._tool_index = event.index
        elif isinstance(event, ToolCallDelta) and event.index == self._tool_index:
            self._take(event.arguments)
        elif isinstance(event, Finish):
            self._end()

    def _end(self) -> None:
        self._ended = True
        half, self._half = self._half, ""
        if half:  # no second half came: kept as it came, as the response keeps it
            self._put(half)

    def _take(self, text: str) -> None:
        if self._half or not text.isascii():  # (ASCII holds no surrogate)
            text = self._paired(text)
            if not text:
                return
        self._pieces.append(text)
        if not self._partial.complete:
            self._unread.append(text)

    def _paired(self, text: str) -> str:
        """`text` with a surrogate pair split across deltas made one character: a first
        half that ends it is held for the next delta."""
        if self._half:
            text, self._half = self._half + text, ""
        if text and "\ud800" <= text[-1] <= "\udbff":
            text, self._half = text[:-1], text[-1]
        return _paired_parts([text]) if _SURROGATE.search(text) is not None else text

    def _put(self, text: str) -> None:
        self._pieces.append(text)
        if not self._partial.complete:
            self._unread.append(text)

    def _catch_up(self) -> None:
        """Give the partial value the text that arrived since it was last read."""
        partial = self._partial
        if self._unread:
            text = "".join(self._unread)
            self._unread.clear()
            if not partial.complete:
                partial.feed(text)
        if self._ended and not partial.complete:
            partial.end()
        if partial.complete and not self._settled:
            self._settled = True
            self._settle()

    def _settle(self) -> None:
        """The value has ended: validate the output once as `finish()` will, so the last
        partial value is the value `finish()` returns (when the output is that clean);
        `finish()` takes that value rather than validating the same text again. The
        preview holds objects of its own (`_show`): a caller who edits it (a UI) leaves
        the value `finish()` returns as it was. Where it finds no value, the partial value
        validates its own (`PartialValue.validate_root`)."""
        self._settle_found()
        self._partial.validate_root()  # (nothing left to do once settled)

    def _settle_found(self) -> None:
        target = self._opened.target
        raw = self.partial_output
        # Checked with undeclared keys rejected, the value stands whether `finish()` rejects
        # them or not (that depends on the enforcement the response reports); with one
        # there, the preview shows the value without it, and `finish()` decides.
        for reject in (True, False):
            try:
                value, halves = check_answer(raw, target.type.adapter, target.schema, reject)
            except Exception:  # the type's own code (a validator's `KeyError`)
                # Not settled: `finish()` validates again, and raises it with its record,
                # rather than a read of the preview raising it with none.
                return
            if not isinstance(value, Failure):
                self._checked = Checked(raw, reject, value, halves)
                if not self._iterables:
                    # (An `Iterable`'s value is one iterator, `finish()`'s: the preview
                    # keeps its own items, checked as `finish()` checks them.)
                    self._show(value)
                return
            if not value.undeclared:
                return

    def _show(self, value: Any) -> None:
        """Show `value`, the one `finish()` returns, as the last partial value: the value
        the scanner built where it equals it (its own objects already), else a copy."""
        built = self._partial.value()
        try:
            if type(built) is type(value) and built == value and _same_fields_set(built, value):
                self._partial.settle(built)
                return
            shown = copy.deepcopy(value)
        except Exception:  # the type's own `__eq__` or `__deepcopy__`: shown as built
            return
        self._partial.settle(shown)

    @property
    def partial_output(self) -> str:
        """The raw structured output so far: the text, or the extraction tool's arguments."""
        if self._joined_count != len(self._pieces):
            self._joined = "".join(self._pieces)
            self._pieces = [self._joined]
            self._joined_count = 1
        return self._joined

    @property
    def partial(self) -> T | None:
        """The value so far: completed parts validated, the open tail as far as it goes.

        A completed list item, field or object is a validated value and never changes (one
        that does not validate, or whose type's own validator raises, is left out as not
        valid yet; `finish()` raises why, with the record; the value itself, ended but
        invalid, stays as it was built); the object being written is built without
        validation, with the fields that have arrived
        (`model_fields_set`) and defaults for the rest (a dataclass holds `None` in a
        required field not yet arrived; a field a factory other than a built-in type's
        fills waits until the object completes, and `model_post_init` does not run);
        text being written grows. An `Iterable` shows once it completes, its items checked,
        each read an iterator of its own over them. Each read
        is a new snapshot that later chunks leave alone. `None` before anything usable
        arrived. Once the value ends, it is the value `finish()` returns (equal to it, not
        the same object: editing one leaves the other as it was), when the output is clean
        JSON. A preview only: `finish()` decides. The work is done when it is
        read, on the text that arrived since the last read.
        """
        self._catch_up()
        value = self._opened.target.unwrap(self._partial.value())
        wrap = self._root_model
        if wrap is not None and value is not None and not isinstance(value, wrap):
            value = wrap.model_construct(root=value)
        return cast("T | None", value)

    def _with_record(self, error: Error, collector: StreamCollector) -> Error:
        """`error` with the extraction's record attached: the usage and degradations the
        stream reported before it failed (a failed stream is not a pass). A refusal of the
        output by the provider (after a piece of the answer came; one before any comes is
        the opening's) is the `ParseError` holding it, as at the opening, to be raised from
        `error`; the same one each time the stream's error is raised."""
        refusal = self._refusal
        if refusal is not None and refusal[0] is error:
            return refusal[1]
        opened = self._opened
        try:
            refused = refused_midway(error, opened, self._settings)
        except Exception as raised:  # the type's own code (a validator's KeyError)
            if self._span is not None:
                self._span.fail(raised)  # with the record kept on it
            raise
        if refused is not None:
            self._refusal = (error, refused)
            self._failed = refused
            if self._span is not None:
                self._span.fail(refused, refused.metadata)
            return refused
        self._failed = error
        failed = opened.metadata.model_copy(deep=True)
        reported = collector.response_metadata()
        if (
            collector.error is None
            and opened.received
            and reported.usage is None
            and REPORTED_USAGE_KEY not in error.context.metadata
        ):
            # Stopped unfinished, not by a failure of its own (closed, or an exception not
            # allama's ended its reading), once its response had begun: made, as a stream
            # the network cut then is, and its error says so, as `StreamCollector.mark_made`
            # marks one whose answer had begun.
            error.with_metadata(REPORTED_USAGE_KEY, {})
        if reported.usage is None and error.context.metadata.get(REPORTED_USAGE_KEY) == {}:
            # Cut after its status with no usage before: made, and maybe billed, for what
            # nothing says (its cost unknown, not nothing). Its one charge, as `record_cut`
            # counts one: not also one with no usage reported.
            reported = reported.model_copy(
                update={
                    "usage": Usage(),
                    "provider": reported.provider or error.provider,
                    "model": reported.model or error.model,
                }
            )
        failed.record_usage_and_degradations(reported, opened.target.reword)
        attached = failed.attach_to(error)
        if self._span is not None:
            # The stream failed: its span ends now, with the error, rather than waiting for
            # a close or a collection that may never come (the error's traceback holds the
            # stream, which the span's watch on it would otherwise keep alive).
            self._span.fail(attached, failed)
        return attached

    def _interrupted(self, raised: BaseException) -> None:
        """A cancellation, Ctrl-C or an exception not allama's ended the stream: what it
        paid goes with the exception, and its span ends failed, as a non-streamed
        extraction's does (not as one the caller closed)."""
        # Cut after its status by the transport, or after its response began: a call made,
        # whatever it brought (`_record_so_far`).
        record = _record_so_far(self._opened, made=cut_after_sending(raised))
        record.keep_on(raised)
        if self._span is not None:
            self._span.fail(raised, record)

    def _closing(self) -> None:
        """The stream is closed: its span ends, failed, closed before its response ended,
        or with the pass its response made where it ended (`_record_at_close`)."""
        span = self._span
        if span is None or span.ended:
            return
        if self._failed is not None:
            span.fail(self._failed)
            return
        span.closed(*_record_at_close(self._opened))

    def finish_with(self, collector: StreamCollector) -> Extracted[T]:
        span = self._span
        if span is None:
            return self._finish_with(collector)
        try:
            extracted = self._finish_with(collector)
        except Exception as error:  # allama's, or the type's own (a validator's KeyError)
            span.fail(error)  # with the record the error holds
            raise
        span.succeed(extracted.metadata)
        return extracted

    def _finish_with(self, collector: StreamCollector) -> Extracted[T]:
        self._end()
        opened = self._opened
        target = opened.target
        metadata = opened.metadata.model_copy(deep=True)
        try:
            response = collector.finish()
        except Error as error:
            failed = self._with_record(error, collector)
            if failed is error:
                raise failed from None
            raise failed from error
        metadata.record_pass(response, target.reword)
        target.report_enforcement(metadata)
        # Named as the engine names a failure of an answer: the provider and model that
        # answered (a failover's, not the failover).
        named = _answered_by(target, response.provider, response.model)
        below = self._settings.below_floor(metadata, named.provider)
        if below is not None:
            raise _answered(below, named).with_response(response)
        try:
            extracted: Extracted[T] = finish(
                response, metadata, target, self._settings, self._checked, opened.stop
            )
        except Exception as raised:  # the type's own code (a validator's KeyError)
            metadata.keep_on(raised)  # the pass it paid for goes with it
            raise
        return extracted


class ExtractionStream(_Observer[T]):
    """A streamed extraction (sync). Iterate for the provider's events; then `finish()`.

    >>> import allama
    >>> from allama.mock import MockStreamingProvider
    >>> from pydantic import BaseModel
    >>> class Person(BaseModel):
    ...     name: str
    >>> provider = MockStreamingProvider.with_text('{"name": "Ada"}')
    >>> with allama.extract_stream(provider, Person, allama.ChatRequest("m").user("Ada")) as s:
    ...     for event in s:
    ...         pass
    ...     s.finish().value.name
    'Ada'
    """

    def __init__(
        self, opened: Opened, settings: Settings, tp: Any, span: ExtractionSpan | None = None
    ) -> None:
        super().__init__(opened, settings, tp, span)
        self._stream: ChatStream = opened.stream
        self._ahead = opened.ahead

    def __iter__(self) -> Self:
        return self

    def __next__(self) -> StreamEvent:
        first = self._ahead.pop(0) if self._ahead else None
        if first is END:
            raise StopIteration
        try:
            if isinstance(first, Error):
                raise first
            event: StreamEvent = first if first is not None else next(self._stream)
        except Error as error:
            failed = self._with_record(error, self._stream.collector)
            if failed is error:
                raise
            raise failed from error
        except (StopIteration, StopAsyncIteration):
            raise
        except BaseException as raised:  # a cancellation, Ctrl-C, a provider's own
            self._interrupted(raised)
            raise
        self.observe(event)
        return event

    def finish(self) -> Extracted[T]:
        """Read what is left, then parse the value (with repair, the key check, the floor).

        Raises the stream's error when it failed or ended early, with the record attached
        (`ExtractionMetadata.from_error`): the usage it reported before failing is in it.
        """
        try:
            for _ in self:
                pass
        except Error:
            pass
        return self.finish_with(self._stream.collector)

    def close(self) -> None:
        try:
            self._stream.close()
        finally:
            self._closing()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"ExtractionStream(mode={self.mode!r}, partial_output_len="
            f"{sum(len(p) for p in self._pieces)})"
        )


class AsyncExtractionStream(_Observer[T]):
    """The async twin of `ExtractionStream`: `async for`, then `await finish()`."""

    def __init__(
        self, opened: Opened, settings: Settings, tp: Any, span: ExtractionSpan | None = None
    ) -> None:
        super().__init__(opened, settings, tp, span)
        self._stream: AsyncChatStream = opened.stream
        self._ahead = opened.ahead

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> StreamEvent:
        first = self._ahead.pop(0) if self._ahead else None
        if first is END:
            raise StopAsyncIteration
        try:
            if isinstance(first, Error):
                raise first
            event: StreamEvent = first if first is not None else await anext(self._stream)
        except Error as error:
            failed = self._with_record(error, self._stream.collector)
            if failed is error:
                raise
            raise failed from error
        except (StopIteration, StopAsyncIteration):
            raise
        except BaseException as raised:  # a cancellation, Ctrl-C, a provider's own
            self._interrupted(raised)
            raise
        self.observe(event)
        return event

    async def finish(self) -> Extracted[T]:
        try:
            async for _ in self:
                pass
        except Error:
            pass
        return self.finish_with(self._stream.collector)

    async def aclose(self) -> None:
        try:
            await self._stream.aclose()
        finally:
            self._closing()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return (
            f"AsyncExtractionStream(mode={self.mode!r}, partial_output_len="
            f"{sum(len(p) for p in self._pieces)})"
        )

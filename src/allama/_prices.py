"""Cost in money of what a provider reported, from the `genai-prices` package.

`genai-prices` is an optional extra (`pip install 'allama[prices]'`): its price data ships
inside the package (no network at run time) and it is imported the first time a cost is
asked for, never before. Every question gets an answer, never an exception: a `Cost`, or
the reason there is none (a model run locally, an unknown model, no usage reported, the
package not installed).

How allama's names meet genai-prices' (`PROVIDER_IDS` below):

- a preset name becomes genai-prices' provider id (`azure-openai` → `azure`, `gemini` and
  `vertex-gemini` → `google`, `xai` → `x-ai`, `workers-ai` → `cloudflare`, the others
  their own name); a name allama does not know goes to genai-prices as it is, which
  matches provider ids loosely (`bedrock` → `aws`);
- local and self-hosted presets (`local`, `llama-cpp`, `ollama`, `ollama-openai`,
  `vllm`) have no price, and neither have endpoints of the caller's own
  (`openai-compatible`, `anthropic-compatible`), whatever their model is called;
- allama's `Usage` counts cache reads and writes inside `input_tokens`, and reasoning
  inside `output_tokens`, which is how genai-prices counts them too: the counts go over
  as they are, reasoning tokens as the part of the output a model may price apart (a
  deep-research model's reasoning costs less than its answer), not added again;
- a negative count (which no provider should send) has no price, as genai-prices says;
- what a response is billed for beyond those counts (`BILLED_EXTRAS`: Anthropic's web
  searches and one-hour cache writes, the Responses API's web and file searches, audio
  tokens, Gemini's image and video tokens) goes to genai-prices' general calculation; a
  model it has no price for them has no cost, rather than one that counts them free;
- Anthropic's fast mode (`usage.speed: "fast"`) is priced with genai-prices'
  `{"speed": "fast"}` prices, and has no cost where it has none; its US-only inference
  (`usage.inference_geo: "us"`, 1.1 times the standard price on Opus 4.6, Sonnet 4.6 and
  later models) has no cost on those models, since genai-prices has no price for it;
- a response served at another service tier than the standard one is priced at that
  tier's prices, or has no cost where genai-prices has none, never the standard price;
  except Groq's `flex` tier (which its `auto` tier falls back to), billed at the on-demand
  price, so priced at it (`source` says so); Groq's `performance` tier, provisioned
  throughput bought by enterprise agreement, has no cost;
- what no price data allama has can price has no cost, with the reason (`_UNPRICEABLE`):
  Gemini's grounding with Google Search or Maps (billed past a free quota a response does
  not report), the Responses API's `web_search_preview` searches (billed by the model's
  kind), code interpreter calls (billed by container session), image generation calls
  (billed by image) and Anthropic's code execution (billed by container time past a free
  quota);
- audio tokens (Gemini's, and those of OpenAI's audio models in the Chat Completions
  dialect, at OpenAI, Azure or OpenRouter) are priced at the model's audio prices. Google's
  price data leaves out an audio price where audio costs what text costs, so there audio
  without one is priced as text; elsewhere a model without an audio price has no cost
  (`gpt-4o-audio-preview`'s audio input costs 16 times its text input). Nor has a call whose
  usage does not say how many of its cached tokens are audio (the Chat Completions usage
  does not) at a model that prices cache reads apart;
- Gemini's image and video tokens (`promptTokensDetails`, `toolUsePromptTokensDetails`,
  `cacheTokensDetails` and `candidatesTokensDetails` by modality, a document's as an
  image's, as genai-prices' own Gemini usage extractor reads them) are priced at the
  model's image and video prices: input ones as text where it has none (Google's input
  price is the same for text, image and video); where it has no price for its output
  images or video, the call has no cost (`gemini-2.5-flash-image`'s images cost $30 a
  million tokens, its text $2.50).

The model is the one the response names (adapters fall back to the request's). Looking a
(provider, model) pair up is cached, misses included, so a repeated question costs only
genai-prices' arithmetic. Prices are those in force when the call was made (a record
keeps the time of each response), which matters for time-of-day prices (DeepSeek's
off-peak hours).

What a provider says a call cost is its cost where it says it in full: OpenRouter's
`usage.cost`, with its upstream's input and output parts (and, billed to the caller's own
upstream key, the upstream's charge beside OpenRouter's fee), is what the router billed,
whichever upstream served the call, so it is taken rather than genai-prices' list price
(`source` reads `as openrouter reported, <model>`). Given without its parts, or as xAI's
total alone, the usage is priced by genai-prices as any other's, except a call that searched
the web through OpenRouter (the model it names is an `:online` one, or its usage counts web
searches), billed per result beyond its tokens at prices genai-prices does not hold, which
has no cost, with the reason (xAI's total where it is
that price: no cost where it is not, as xAI's bill above 128,000 tokens; without one, a
request to Grok 4, 4 Fast or 4.1 Fast above 128,000 input tokens has no cost, billed at
long-context rates genai-prices does not hold for them), unless xAI says it ran
server-side tools (`num_server_side_tools_used`: searches, code execution), which
genai-prices has no price for: then the total xAI reported is the cost's total, beside
genai-prices' price of the tokens as its input and output (no cost without that total, or
with one below the tokens' price).

Batch prices (a provider's batch API, about half price) are the same usage priced with
genai-prices' `{"processing": "batch"}` context; a model without a batch price answers
with the reason rather than the standard price.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from decimal import Context, Decimal, InvalidOperation, localcontext
from typing import TYPE_CHECKING, Any, TypeAlias

from allama.types import Usage
from allama.types._response import (
    CODE_EXECUTIONS,
    CODE_INTERPRETER_CALLS,
    DECLINED_PASS_PREFIX,
    FAST_MODE,
    GROUNDED_SEARCHES,
    IMAGE_GENERATION_CALLS,
    INFERENCE_GEO_PREFIX,
    PASS_PREFIX,
    PREVIEW_WEB_SEARCHES,
    PROVISIONED_THROUGHPUT,
    SAMPLING_PASSES,
    SERVER_TOOLS_FIELD,
    UNCOUNTED_DECLINED_PASSES,
)

if TYPE_CHECKING:
    from types import ModuleType

    from genai_prices.types import ModelInfo, Provider

__all__ = [
    "INSTALL_HINT",
    "LOCAL_PRESETS",
    "OWN_ENDPOINTS",
    "PROVIDER_IDS",
    "Charge",
    "Cost",
    "cost_of",
    "price",
]

INSTALL_HINT = "install allama[prices] for costs"
"""The reason a cost is missing when `genai-prices` is not installed."""

PROVIDER_IDS: Mapping[str, str] = {
    "openai": "openai",
    "azure-openai": "azure",
    "azure-foundry": "azure",
    "azure-anthropic": "azure",
    "anthropic": "anthropic",
    "gemini": "google",
    "vertex-gemini": "google",
    "groq": "groq",
    "xai": "x-ai",
    "mistral": "mistral",
    "openrouter": "openrouter",
    "deepseek": "deepseek",
    "together": "together",
    "fireworks": "fireworks",
    "workers-ai": "cloudflare",
}
"""genai-prices' provider id for each allama preset it has prices for. Azure's id falls
back to OpenAI's, Anthropic's and others' models; DeepInfra has no prices there."""

LOCAL_PRESETS = frozenset({"local", "llama-cpp", "ollama", "ollama-openai", "vllm"})
"""Presets of a model run locally or self-hosted: no price list applies."""

OLLAMA_PRESETS = frozenset({"ollama", "ollama-openai"})
"""Ollama's presets, among `LOCAL_PRESETS`: a model may run on Ollama's cloud (a `-cloud`
name, or any model on ollama.com), which has no per-token price list either."""

OWN_ENDPOINTS = frozenset({"openai-compatible", "anthropic-compatible"})
"""Presets of an endpoint the caller names: its model names say nothing of its prices."""

_BATCH: Mapping[str, str] = {"processing": "batch"}
_FAST: Mapping[str, str] = {"speed": "fast"}

# What the reasons say.
NO_USAGE = "no usage was reported"
NO_PROVIDER = "the response names no provider"
NO_MODEL = "the response names no model"
NO_INPUT = "the provider did not report the input tokens"
NO_OUTPUT = "the provider did not report the output tokens"
NO_COUNTS = "no token counts came with a call that was made (its answer cut off, say)"
_UNREPORTED = frozenset({NO_USAGE, NO_INPUT, NO_OUTPUT, NO_COUNTS})
REPORTED_ONLY = (
    "the provider reported what it billed at its own prices, not a usage to price again "
    "at batch prices"
)
STANDARD_ONLY = (
    "the record holds its cost as it was priced (not all of it at batch prices), "
    "not the usage to price again"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Cost:
    """What calls cost in money, by input and output, with where the prices came from.

    `input` covers every input token (cached reads and writes at their own prices),
    `output` every output token (reasoning included); `total` is their sum plus any
    per-request fee. Amounts are exact `Decimal`s in `currency` (genai-prices' prices are
    in US dollars). `source` names the price data and what it matched, such as
    `"genai-prices 0.2.3, openai/gpt-4o"`; `batch` says the prices are a provider's batch
    prices. A sum of costs at batch prices and others is not one: its source names the
    batch part (`"openai/gpt-4o (batch) + openai/gpt-4o"`), as it does a service tier.

    >>> a = Cost(input=Decimal("0.25"), output=Decimal("1"), total=Decimal("1.25"), source="s")
    >>> (a + a).total
    Decimal('2.50')
    """

    input: Decimal
    output: Decimal
    total: Decimal
    currency: str = "USD"
    source: str
    batch: bool = False

    def __add__(self, other: Cost) -> Cost:
        if not isinstance(other, Cost):
            return NotImplemented
        if other.currency != self.currency:
            raise ValueError(f"cannot add a cost in {other.currency} to one in {self.currency}")
        return Cost(
            input=MONEY.add(self.input, other.input),
            output=MONEY.add(self.output, other.output),
            total=MONEY.add(self.total, other.total),
            currency=self.currency,
            source=_joined(_batch_named(self, other), _batch_named(other, self)),
            batch=self.batch and other.batch,
        )

    def to_json_dict(self) -> dict[str, Any]:
        """The JSON form: amounts as decimal strings, so they read back exactly."""
        data: dict[str, Any] = {
            "input": str(self.input),
            "output": str(self.output),
            "total": str(self.total),
            "currency": self.currency,
            "source": self.source,
        }
        if self.batch:
            data["batch"] = True
        return data

    @classmethod
    def from_json_dict(cls, data: Mapping[str, Any]) -> Cost:
        """Read the JSON form back; a `ValueError` when it is not one."""
        try:
            return cls(
                input=_decimal(data["input"]),
                output=_decimal(data["output"]),
                total=_decimal(data["total"]),
                currency=str(data.get("currency", "USD")),
                source=str(data.get("source", "")),
                batch=data.get("batch") is True,
            )
        except (KeyError, TypeError, InvalidOperation) as why:
            raise ValueError(f"not a cost: {why}") from None

    def __str__(self) -> str:
        kind = " at batch prices" if self.batch else ""
        return f"{self.total} {self.currency}{kind} ({self.source})"


def dollars(amount: Decimal) -> str:
    """An amount as a person reads it: plain digits, to the millionth of a dollar, and to
    its last digit when it is smaller than that (a budget of `1E-7` reads `0.0000001`, a
    cost of `3E-7` not `0.000000`)."""
    if amount and abs(amount) < _MILLIONTH:
        return format(amount.normalize(), "f")
    return f"{amount:.6f}"


_MILLIONTH = Decimal("0.000001")

MONEY = Context(prec=28)
"""The arithmetic of costs, whatever precision the caller's decimal context has (a program
that rounds its own amounts to four digits would otherwise round allama's too)."""


def _decimal(value: Any) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise TypeError(f"{value!r} is not an amount")
    return Decimal(value)


_BATCH_PART = " (batch)"
"""What a source adds to a price it names that was a batch price, in a cost not all at
batch prices (whose `batch` is false, and would otherwise read as at standard prices)."""


def _batch_named(cost: Cost, other: Cost) -> str:
    """`cost`'s source, each price it names marked as a batch one (`_BATCH_PART`) where it
    is at batch prices and `other` is not; as it is otherwise."""
    if not cost.batch or other.batch or not cost.source:
        return cost.source
    parts: list[str] = []
    for part in cost.source.split("; "):
        label, comma, refs = part.partition(", ")
        if not comma:  # a source not of the form `label, ref + ref`: marked whole
            parts.append(part + _BATCH_PART)
            continue
        parts.append(f"{label}, {' + '.join(ref + _BATCH_PART for ref in refs.split(' + '))}")
    return "; ".join(parts)


def _joined(a: str, b: str) -> str:
    """Two sources as one: the prices of one label (`genai-prices 0.2.5`) joined by `+`, as
    `_price` names them, each named once, so that a sum of many costs names what priced
    them, not every addition (a total over a run stays one short line)."""
    refs: dict[str, list[str]] = {}
    for part in (*a.split("; "), *b.split("; ")):
        if not part:
            continue
        label, comma, named = part.partition(", ")
        kept = refs.setdefault(label if comma else part, [])
        for ref in named.split(" + ") if comma else ():
            if ref not in kept:
                kept.append(ref)
    return "; ".join(
        f"{label}, {' + '.join(named)}" if named else label for label, named in refs.items()
    )


Charge: TypeAlias = (
    tuple[str | None, str | None, Usage | None, float]
    | tuple[str | None, str | None, Usage | None, float, bool]
    | tuple[str | None, str | None, Usage | None, float, bool, Mapping[str, int]]
    | tuple[str | None, str | None, Usage | None, float, bool, Mapping[str, int], str]
    | tuple[
        str | None,
        str | None,
        Usage | None,
        float,
        bool,
        Mapping[str, int],
        str | None,
        Mapping[str, Any],
    ]
)
"""One response's provider, model, usage and the time it arrived (`time.time()`), whether
it came from a provider batch job (priced at batch prices), what else it was billed for
beyond `Usage` (`BILLED_EXTRAS`), the service tier other than the standard one that
served it (OpenAI's `priority` or `flex`, priced at that tier's prices; Groq's `flex`, at
its on-demand ones), and what the provider said it cost (the money fields of its usage,
`USAGE_COST_KEY`): what an extraction's record keeps per response, a plain tuple so that
keeping it costs nothing."""

BILLED_EXTRAS: Mapping[str, str | None] = {
    "web_searches": "web_searches_kcount",
    "storage_searches": "storage_searches_kcount",
    "cache_write_1h_tokens": "cache_write_1h_mtok",
    "cache_write_5m_tokens": "cache_write_mtok",
    "input_audio_tokens": "input_audio_mtok",
    "cache_audio_read_tokens": "cache_audio_read_mtok",
    "output_audio_tokens": "output_audio_mtok",
    "input_image_tokens": "input_image_mtok",
    "cache_image_read_tokens": "cache_image_read_mtok",
    "output_image_tokens": "output_image_mtok",
    "input_video_tokens": "input_video_mtok",
    "cache_video_read_tokens": "cache_video_read_mtok",
    "output_video_tokens": "output_video_mtok",
}
"""What a response may be billed for beyond its `Usage` counts, by genai-prices' usage
key, and the price that key needs: server-side web searches and file searches (per
thousand: Anthropic's, the Responses API's), cache writes
split by how long they are kept (Anthropic's one-hour writes cost more than its five-minute
ones, which are the plain cache-write price), and audio, image and video tokens (Gemini's
images and video), part of the counts of their direction, at the model's prices for them
(at the text's in price data that leaves out a price that is the text's: `AUDIO_AS_TEXT`)."""

AUDIO_AS_TEXT = frozenset({"google"})
"""genai-prices' providers whose price data gives a model an audio price only where audio
costs more than text (Google's: "input rate is unified across text/image/video/audio"),
and whose usage says how many of its cached tokens are audio (Gemini's
`cacheTokensDetails`): there audio tokens without a price of their own are priced as text,
and so are input images and video. Elsewhere (OpenAI's audio models, and those OpenAI,
Azure and OpenRouter serve) a model without an audio price prices none of its audio, so
such a call has no cost; nor has one whose output images or video have no price of their
own anywhere (Gemini's drawn images cost many times its text)."""

_AS_TEXT_PRICES = frozenset(
    {
        "input_audio_mtok",
        "cache_audio_read_mtok",
        "output_audio_mtok",
        "input_image_mtok",
        "cache_image_read_mtok",
        "input_video_mtok",
        "cache_video_read_mtok",
    }
)
"""The prices that `AUDIO_AS_TEXT` price data leaves out where they are the text's."""

_NAMES: Mapping[str, str] = {"storage_searches": "file searches"}
"""What a reason calls a billed extra whose genai-prices name says it less plainly."""


def price(entries: Iterable[Charge | Cost | str], *, batch: bool = False) -> Cost | str:
    """The summed cost of `entries`, or the first reason one of them has no cost.

    An entry is a `Charge` to price, or a result already known (a record read back holds
    its cost or its reason). No entries: no usage was reported.
    """
    with localcontext(MONEY):
        return _price(entries, batch)


def _price(entries: Iterable[Charge | Cost | str], batch: bool) -> Cost | str:
    given = list(entries)
    entries = [
        part
        for entry in given
        for part in ((entry,) if isinstance(entry, str | Cost) else _by_model(entry))
    ]
    known: Cost | None = None
    charged: Cost | None = None
    matched: dict[str, list[tuple[str, bool]]] = {}  # what each price data's name matched
    for entry in entries:
        if isinstance(entry, str):
            return entry
        if isinstance(entry, Cost):
            if batch and not entry.batch:
                return STANDARD_ONLY
            known = entry if known is None else known + entry
            continue
        try:
            priced = _price_charge(entry, batch)
        except Exception as why:  # Whatever genai-prices raises, a cost never does.
            priced = f"genai-prices could not price {entry[1]!r} at {entry[0]}: {why}"
        if isinstance(priced, str):
            if priced in _UNREPORTED and any(
                other is not entry and (isinstance(other, Cost) or other[2] is not None)
                for other in entries
                if not isinstance(other, str)
            ):
                # Said of the calls, not of the record, whose usage sums the others'.
                return _calls_unreported(given, priced, batch)
            return priced
        one, ref, label = priced
        refs = matched.setdefault(label, [])
        if (ref, one.batch) not in refs:
            refs.append((ref, one.batch))
        charged = one if charged is None else charged + one
    if charged is not None:
        # One source however many passes matched the same model; where some passes were
        # at batch prices and others not, those named as such.
        mixed = not charged.batch and any(b for refs in matched.values() for _, b in refs)
        source = "; ".join(
            f"{label}, {' + '.join(ref + _BATCH_PART if b and mixed else ref for ref, b in refs)}"
            for label, refs in matched.items()
        )
        if charged.source != source:
            charged = replace(charged, source=source)
        return charged if known is None else known + charged
    return known if known is not None else NO_USAGE


def _calls_unreported(given: list[Charge | Cost | str], reason: str, batch: bool) -> str:
    """`reason`, a count unreported, said of the calls `given` (a record's charges) that
    left it out: `for one of its calls`, or how many of how many (`for 5 of its 6 calls`;
    of how many is unsaid where a cost or a reason read back stands for calls uncounted);
    as it is where every call left it out. Each entry is one response (a declined attempt
    `_by_model` splits off is of its call)."""
    charges = [entry for entry in given if not isinstance(entry, str | Cost)]
    count = 0
    for entry in charges:
        if _reason_before_lookup(*entry[:3]) != reason:
            continue
        if len(entry) > 7 and entry[7]:
            # What the provider said it cost may price a call whose counts it left out.
            try:
                if _price_charge(entry, batch) != reason:
                    continue
            except Exception:  # as `_price` takes it: a reason of its own, not this one
                continue
        count += 1
    if count <= 1:
        return f"{reason} for one of its calls"
    if len(charges) < len(given):
        return f"{reason} for {count} of its calls"
    if count == len(charges):
        return reason
    return f"{reason} for {count} of its {len(charges)} calls"


def cost_of(
    provider: str | None,
    model: str | None,
    usage: Usage | None,
    *,
    at: datetime | None = None,
    batch: bool = False,
) -> Cost | str:
    """What `usage` of `model` at `provider` (an allama preset name) cost, or why unknown.

    `at` is when the call was made (now when `None`; without a time zone, UTC, as
    genai-prices reads it); `batch=True` asks for the provider's batch price of the same
    usage.
    """
    if at is not None and at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    when = (at or datetime.now(tz=UTC)).timestamp()
    return price([(provider, model, usage, when)], batch=batch)


# Pricing one charge.


def _by_model(entry: Charge) -> tuple[Charge, ...]:
    """`entry` as one charge for each model that ran it: the attempts Anthropic's
    server-side fallback declined after they had output (`DECLINED_PASS_PREFIX`), each at
    its own model's prices (in the same tier, batch, fast mode and geography), beside the
    message's usage at the message's model; `entry` alone where it holds none."""
    extras = entry[5] if len(entry) > 5 else None
    if not extras or not any(key.startswith(DECLINED_PASS_PREFIX) for key in extras):
        return (entry,)
    provider, model, usage, at = entry[:4]
    in_job = len(entry) > 4 and entry[4] is True
    tier: str | None = entry[6] if len(entry) > 6 else None
    money: Mapping[str, Any] = (entry[7] if len(entry) > 7 else None) or {}
    own: dict[str, int] = {}
    declined: dict[tuple[str, str], dict[str, int]] = {}
    for key, count in extras.items():
        parts = key.removeprefix(DECLINED_PASS_PREFIX).split(":", 2)
        if (
            not key.startswith(DECLINED_PASS_PREFIX)
            or len(parts) != 3
            or parts[1] not in _DECLINED_COUNTS
            or not parts[2]
        ):
            own[key] = count  # (one not of this form has no price: the charge has no cost)
            continue
        index, name, pass_model = parts
        declined.setdefault((index, pass_model), {})[name] = count
    charges: list[Charge] = [(provider, model, usage, at, in_job, own, tier, money)]
    if money:
        return tuple(charges)  # what the provider said it cost is the whole bill
    shared = {
        key: count
        for key, count in own.items()
        if key == FAST_MODE or key.startswith(INFERENCE_GEO_PREFIX)
    }
    for (_, pass_model), counts in declined.items():
        pass_usage = Usage(
            input_tokens=counts.get("input_tokens", 0),
            output_tokens=counts.get("output_tokens", 0),
            cache_read_tokens=counts.get("cache_read_tokens"),
            cache_write_tokens=counts.get("cache_write_tokens"),
        )
        writes = {key: count for key, count in counts.items() if key in _CACHE_WRITES_BY_LIFE}
        pass_extras = {**shared, **writes}
        charges.append((provider, pass_model, pass_usage, at, in_job, pass_extras, tier, {}))
    return tuple(charges)


_CACHE_WRITES_BY_LIFE = frozenset({"cache_write_1h_tokens", "cache_write_5m_tokens"})
"""The cache writes by lifetime a declined attempt's counts may hold (`BILLED_EXTRAS`)."""
_DECLINED_COUNTS = _CACHE_WRITES_BY_LIFE | {
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
}
"""The counts of a declined attempt `DECLINED_PASS_PREFIX` names."""


def _reason_before_lookup(provider: str | None, model: str | None, usage: Usage | None) -> str:
    """The reason a charge has no price that needs no price data, else ``""``."""
    if provider is None:
        return NO_PROVIDER
    if provider in OLLAMA_PRESETS:  # its cloud's models have no price list either
        return f"no price for a model Ollama serves, locally or in its cloud ({provider})"
    if provider in LOCAL_PRESETS:
        return f"no price for a model run locally ({provider})"
    if provider in OWN_ENDPOINTS:
        return f"no price list for an endpoint of your own ({provider})"
    if usage is None:
        return NO_USAGE
    if usage.input_tokens is None and usage.output_tokens is None:
        return NO_COUNTS  # paid, with nothing to say what for (`transport._body_lost`)
    if usage.input_tokens is None:
        return NO_INPUT
    if usage.output_tokens is None:
        return NO_OUTPUT
    if not model:
        return NO_MODEL
    return ""


def _genai_prices() -> ModuleType | None:
    try:
        import genai_prices
    except ImportError:
        return None
    return genai_prices


def _price_charge(
    entry: Charge, batch: bool, *, total_reported: bool = False
) -> tuple[Cost, str, str] | str:
    """The cost of one charge, the `provider/model` it matched, and the price data's name;
    `total_reported`: the provider said what the whole call cost (xAI's ticks), which
    covers the rates genai-prices may lack (xAI's long-context ones)."""
    provider, model, usage, at = entry[:4]
    in_job = len(entry) > 4 and entry[4] is True
    money: Mapping[str, Any] = (entry[7] if len(entry) > 7 else None) or {}
    if money:
        reported = _reported(money, provider, model, in_job)
        if reported is not None:
            if batch and not in_job:
                return REPORTED_ONLY
            return reported
        tools = money.get(SERVER_TOOLS_FIELD)
        if type(tools) is int and tools > 0:
            return _with_total_reported(entry, money, tools, batch)
        billed = _ticks_total(money)
        if billed is not None:
            return _priced_as_billed(entry, billed, batch)
    batch = batch or in_job
    extras = dict(entry[5]) if len(entry) > 5 else {}
    tier: str | None = entry[6] if len(entry) > 6 else None
    reason = _reason_before_lookup(provider, model, usage)
    if reason:
        return reason
    reason = _searched_unreported(provider, model, money)
    if reason:
        return reason
    if tier == PROVISIONED_THROUGHPUT:
        return "served by provisioned throughput, billed by its reservation rather than by token"
    reason = _unpriceable(extras)
    if reason:
        return reason
    fast = extras.pop(FAST_MODE, 0) > 0
    geos = [key for key in extras if key.startswith(INFERENCE_GEO_PREFIX)]
    for key in geos:
        del extras[key]
    passes = _passes(extras) if SAMPLING_PASSES in extras else None
    assert provider is not None and model is not None and usage is not None
    genai_prices = _genai_prices()
    if genai_prices is None:
        return INSTALL_HINT
    version: str = genai_prices.__version__
    found = _lookup(genai_prices, provider, model)
    if isinstance(found, str):
        return found
    gp_provider, gp_model = found
    when = datetime.fromtimestamp(at, tz=UTC)
    ref = f"{gp_provider.id}/{gp_model.id}"
    if _SEARCH_MODEL.search(model):
        return (
            f"{model} searches the web on every call, billed per call (by the model's kind) "
            f"at prices genai-prices {version} does not hold for {ref}"
        )
    if geos and not _GEO_AT_STANDARD_PRICE.match(gp_model.id):
        geo = geos[0].removeprefix(INFERENCE_GEO_PREFIX)
        return (
            f"served by inference kept in one geography (inference_geo {geo!r}), billed "
            f"above the standard price on Claude Opus 4.6, Sonnet 4.6 and later models (1.1 "
            f"times it in the US), which genai-prices {version} has no price for ({ref})"
        )
    if tier is not None:
        unpriced_tier = _TIER_UNPRICED.get((gp_provider.id, tier))
        if unpriced_tier:
            return f"{unpriced_tier} ({ref})"
        if tier in _TIER_AT_STANDARD_PRICE.get(gp_provider.id, ()):
            # Billed as the standard tier is: priced as it, saying which tier served it.
            if not batch:
                ref = f"{ref} ({tier} tier, at on-demand prices)"
            tier = None
    if batch and not _has_variant(gp_provider, gp_model, when, _BATCH):
        return f"genai-prices {version} has no batch price for {ref}"
    context: Mapping[str, str] | None = _BATCH if batch else None
    if tier is not None:
        # Served at another tier's prices: those, or no cost (never the standard price).
        if batch or not _has_variant(gp_provider, gp_model, when, {"service_tier": tier}):
            return f"genai-prices {version} has no price for the {tier!r} service tier of {ref}"
        context = {"service_tier": tier}
        ref = f"{ref} ({tier} tier)"
    if fast:
        # Served in fast mode: at its prices, or no cost (never the standard price).
        if batch or tier is not None or not _has_variant(gp_provider, gp_model, when, _FAST):
            return f"genai-prices {version} has no fast-mode price for {ref}"
        context = _FAST
        ref = f"{ref} (fast mode)"
    label = f"genai-prices {version}"
    snapshot = genai_prices.data_snapshot.get_snapshot()
    if snapshot.from_auto_update:  # `UpdatePrices` fetched newer prices than the package's
        label += f" (prices of {snapshot.timestamp:%Y-%m-%d})"
    model_price = gp_model.get_prices(when, context)
    threshold = _long_context_start(model_price, gp_model.id)
    if threshold is not None and (usage.input_tokens or 0) > threshold:
        if passes is not None:
            by_pass = _by_pass(genai_prices, model_price, usage, extras, passes, threshold, ref)
            if isinstance(by_pass, str):
                return by_pass
            return replace(by_pass, source=f"{label}, {ref}", batch=batch), ref, label
        reason = _long_context_unknown(
            usage, extras, gp_model.id, _tiered(model_price), threshold, version, ref
        )
        if reason:
            return reason
    if (
        (usage.input_tokens or 0) > _XAI_LONG_CONTEXT
        and not total_reported
        and gp_provider.id == "x-ai"
        and _XAI_LONG_CONTEXT_TIERED.match(gp_model.id)
        and not _tiered(model_price)
    ):
        return (
            f"{usage.input_tokens} input tokens are over {_XAI_LONG_CONTEXT:,}, billed at the "
            f"model's long-context rates, which genai-prices {version} does not hold for {ref}"
        )
    tokens = (
        usage.input_tokens or 0,
        usage.output_tokens or 0,
        usage.cache_read_tokens or 0,
        usage.cache_write_tokens or 0,
    )
    flat_ok = tier is None and not fast and not extras
    if flat_ok and tokens[2] + tokens[3] <= tokens[0] and min(tokens) >= 0:
        # Flat prices: the same arithmetic as genai-prices', on the prices it holds,
        # without its general machinery (about 120 µs a call).
        flat = (
            _batch_flat(genai_prices, gp_model, when)
            if batch and any(gp_model is model for model in gp_provider.models)
            else _flat(
                genai_prices, model_price if context is None else gp_model.get_prices(when, None)
            )
        )
        if flat is not None:
            return _flat_cost(flat, tokens, f"{label}, {ref}", batch), ref, label
    try:
        counts = genai_prices.Usage(
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cache_read_tokens=usage.cache_read_tokens,
            cache_write_tokens=usage.cache_write_tokens,
            # Part of `output_tokens`: priced apart only where a model has a price for them.
            output_reasoning_tokens=usage.reasoning_tokens,
            **extras,
        )
        if extras:
            audio_as_text = gp_provider.id in AUDIO_AS_TEXT
            unpriced = _unpriced(model_price, extras, audio_as_text=audio_as_text)
            if unpriced:
                return f"genai-prices {version} has no price for the {unpriced} of {ref}"
            if not audio_as_text and _cached_audio_unknown(model_price, usage, extras):
                return (
                    f"the usage does not say how many of its {usage.cache_read_tokens} cached "
                    f"tokens are audio, which the prices of {ref} need"
                )
        calculated = gp_model.calc_price(
            counts, gp_provider, genai_request_timestamp=when, price_context=context
        )
    except ValueError as why:  # Counts that do not add up (more cached than input).
        return f"genai-prices {version} could not price the usage for {ref}: {why}"
    cost = Cost(
        input=calculated.input_price,
        output=calculated.output_price,
        total=calculated.total_price,
        source=f"{label}, {ref}",
        batch=batch,
    )
    return cost, ref, label


_UNPRICEABLE: Mapping[str, str] = {
    GROUNDED_SEARCHES: (
        "grounding with Google Search or Maps ({count} queries), billed past a free quota "
        "whose use the response does not say"
    ),
    PREVIEW_WEB_SEARCHES: (
        "{count} searches of the web_search_preview tool, billed by the model's kind (more "
        "on one that does not reason) at prices genai-prices does not hold"
    ),
    CODE_INTERPRETER_CALLS: (
        "the container sessions of {count} code interpreter calls, billed apart at prices "
        "genai-prices does not hold"
    ),
    IMAGE_GENERATION_CALLS: (
        "the images of {count} image generation calls, billed apart by their size and "
        "quality at the image model's prices, which genai-prices does not hold"
    ),
    CODE_EXECUTIONS: (
        "the container time of {count} code execution runs, billed past a free quota whose "
        "use the response does not say, at prices genai-prices does not hold"
    ),
    UNCOUNTED_DECLINED_PASSES: (
        "the attempts a server-side fallback declined ({count}), billed at their own "
        "model's rates where they had output, whose token counts the usage does not give"
    ),
}
"""What a response may be billed for that no price data allama has can price, and why:
such a response has no cost, rather than one that counts them free."""


def _unpriceable(extras: Mapping[str, int]) -> str:
    """Why `extras` cannot be priced (`_UNPRICEABLE`), else ``""``."""
    for key, why in _UNPRICEABLE.items():
        count = extras.get(key, 0)
        if count > 0:
            return why.format(count=count)
    return ""


_TIER_AT_STANDARD_PRICE: Mapping[str, frozenset[str]] = {"groq": frozenset({"flex"})}
"""The service tiers other than the standard one that a provider (by genai-prices' id)
bills at its standard price: Groq's `flex` ("pricing matches the on-demand tier"), which
its `auto` tier also falls back to past the on-demand rate limits. Priced as the standard
tier, whatever price variant genai-prices holds for the tier's name (OpenAI's `flex` is
another, cheaper tier)."""

_TIER_UNPRICED: Mapping[tuple[str, str], str] = {
    ("groq", "performance"): (
        "served at Groq's 'performance' service tier, provisioned throughput billed by the "
        "capacity bought under an enterprise agreement rather than by token"
    ),
}
"""Service tiers (by genai-prices' provider id) billed at prices no price list holds, and
why: such a response has no cost, rather than the standard price."""

_GEO_AT_STANDARD_PRICE = re.compile(
    r"claude-(?:instant|v?[123](?:\D|$)|(?:opus|sonnet|haiku)-4(?:$|-(?:[015]|20\d{6})(?:\D|$)))"
)
"""genai-prices' ids of the Claude models older than Opus 4.6, which Anthropic bills at the
standard price whatever geography ran them (its premium for `inference_geo: "us"` is on
Opus 4.6, Sonnet 4.6 and later models)."""

_SEARCH_MODEL = re.compile(r"-search-(?:preview|api)(?:\b|-|$)")
"""OpenAI's search models in Chat Completions (`gpt-4o-mini-search-preview-2025-03-11`,
`gpt-5-search-api`): every call searches, billed per call beside the tokens; genai-prices
prices their tokens alone (a dated one as the model it is built on)."""

_LONG_CONTEXT = 200_000
"""Input tokens above which Anthropic bills a request to Claude Sonnet 4 or 4.5 (each
sampling pass of it) at its long-context rates, where the price data holds no tier that
says so (`_LONG_CONTEXT_TIERED`)."""

_LONG_CONTEXT_TIERED = re.compile(r"claude-sonnet-4(?:[-.]5|-0)?(?:$|[@:]|-(?:v\d|\d{8}))")
"""genai-prices' ids of Claude Sonnet 4 and 4.5 (Anthropic's, Bedrock's, Vertex AI's),
billed at long-context rates above `_LONG_CONTEXT` input tokens (their 1M context window)
whether or not their prices hold that tier: where they hold none, no cost (rather than the
standard rates of a long request)."""


def _long_context_start(model_price: Any, model_id: str) -> int | None:
    """The input tokens above which the model `model_id`, priced at `model_price`, is
    billed at other rates, as its prices' tiers start (the lowest; Claude Haiku 5.5's at
    100,000, Sonnet 4.5's at 200,000), or `_LONG_CONTEXT` for a model Anthropic bills so
    whose prices lack the tier; `None` for one priced flat across its context window."""
    prices = vars(model_price).values()
    starts: list[int] = [tier.start for price in prices for tier in getattr(price, "tiers", ())]
    if starts:
        return min(starts)
    return _LONG_CONTEXT if _LONG_CONTEXT_TIERED.search(model_id) else None


def _long_context_unknown(
    usage: Usage,
    extras: Mapping[str, int],
    model_id: str,
    tiered: bool,
    threshold: int,
    version: str,
    ref: str,
) -> str:
    """Why a call of a model with long-context rates whose input is over their `threshold`
    (`_long_context_start`) has no cost; ``""`` where its price is known.

    Anthropic bills a request over the threshold at its long-context rates, every token of
    it, and each sampling pass of a server tool loop by its own input. The usage of a call
    that ran server tools (web searches) sums its passes' input, which passes all under the
    threshold reach as well as one over it: the rates of the sum would be several times the
    bill of the first. Prices without that tier (Sonnet 4's) would give about half the bill
    of a single request over it.
    """
    searches = extras.get("web_searches", 0)
    if searches > 0 and "claude" in model_id:
        return (
            f"its {usage.input_tokens} input tokens are summed over the sampling passes of a "
            f"server tool loop ({searches} web searches), and a pass is billed at the model's "
            f"long-context rates only where its own input is over {threshold:,}: the "
            f"passes' sizes are unknown ({ref})"
        )
    if not tiered:
        return (
            f"{usage.input_tokens} input tokens are over {threshold:,}, billed at the "
            f"model's long-context rates, which genai-prices {version} does not hold for {ref}"
        )
    return ""


def _tiered(model_price: Any) -> bool:
    """Whether a model's prices (genai-prices') have tiers by input size."""
    return any(hasattr(price, "tiers") for price in vars(model_price).values())


_XAI_LONG_CONTEXT = 128_000
"""Input tokens above which xAI bills a request to a Grok 4 model older than Grok 4.20 at
its long-context rates, every token of it (twice the standard ones)."""

_XAI_LONG_CONTEXT_TIERED = re.compile(r"grok-4(?:-\d{4})?(?:-(?:\d-)?fast(?:-non)?-reasoning)?$")
"""genai-prices' ids of xAI's Grok 4 models with long-context rates above
`_XAI_LONG_CONTEXT` input tokens (`grok-4-0709`; Grok 4 Fast and 4.1 Fast, reasoning or
not): where their prices hold no such tier and xAI reported no total
(`cost_in_usd_ticks`), no cost, rather than about half the bill. Grok 4.20 and later
(`grok-4.20`, `grok-4.3`) have their tiers, at 200,000, in the price data."""


_PASS_COUNTS = (
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "cache_write_1h_tokens",
)
"""The counts `billed_extras` gives of each sampling pass (`PASS_PREFIX`)."""


def _passes(extras: dict[str, int]) -> tuple[int, list[dict[str, int]]]:
    """The sampling passes `billed_extras` gave (`SAMPLING_PASSES`), taken out of `extras`:
    how many, and the genai-prices usage counts of each it gave any of (none missing). A
    key not of this form is left in `extras`, which has no price for it: no cost."""
    count = extras.pop(SAMPLING_PASSES)
    listed: dict[str, dict[str, int]] = {}
    for key in [key for key in extras if key.startswith(PASS_PREFIX)]:
        index, _, name = key.removeprefix(PASS_PREFIX).partition(":")
        if index.isdigit() and name in _PASS_COUNTS:
            listed.setdefault(index, dict.fromkeys(_PASS_COUNTS, 0))[name] = extras.pop(key)
    return count, list(listed.values())


def _by_pass(
    genai_prices: ModuleType,
    model_price: Any,
    usage: Usage,
    extras: Mapping[str, int],
    passes: tuple[int, list[dict[str, int]]],
    threshold: int,
    ref: str,
) -> Cost | str:
    """The cost of a call whose sampling passes the usage lists (`passes`, from `_passes`),
    of a model with long-context rates over `threshold` input tokens: each pass at the rates
    of its own input, as Anthropic bills it (genai-prices would price the sum at the rates
    of its size), and what the passes leave of the usage (the searches) at the standard
    ones; else why not."""
    version: str = genai_prices.__version__
    count, listed = passes
    over = [counts for counts in listed if counts["input_tokens"] > threshold]
    tiered = {key: value for key, value in vars(model_price).items() if hasattr(value, "tiers")}
    if over and not tiered:
        return (
            f"its sampling passes over {threshold:,} input tokens ({len(over)} of {count}, "
            f"{sum(counts['input_tokens'] for counts in over)} input tokens in all) are "
            f"billed at the model's long-context rates, which genai-prices {version} does "
            f"not hold for {ref}"
        )
    unpriced = _unpriced(model_price, extras, audio_as_text=False)
    if unpriced:
        return f"genai-prices {version} has no price for the {unpriced} of {ref}"
    kind = type(model_price)
    standard = kind(**{**vars(model_price), **{k: v.base for k, v in tiered.items()}})
    summed = {name: sum(counts[name] for counts in listed) for name in _PASS_COUNTS}
    # What the passes leave of the usage, with what is billed per call (searches).
    rest = {
        "input_tokens": (usage.input_tokens or 0) - summed["input_tokens"],
        "output_tokens": (usage.output_tokens or 0) - summed["output_tokens"],
        "cache_read_tokens": (usage.cache_read_tokens or 0) - summed["cache_read_tokens"],
        "cache_write_tokens": (usage.cache_write_tokens or 0) - summed["cache_write_tokens"],
    }
    rest_extras = {k: v for k, v in extras.items() if k != "cache_write_5m_tokens"}
    if "cache_write_1h_tokens" in rest_extras:
        rest_extras["cache_write_1h_tokens"] -= summed["cache_write_1h_tokens"]
    if min(*rest.values(), *rest_extras.values()) < 0:
        return (
            f"the sampling passes its usage lists count more than the usage itself, which "
            f"genai-prices {version} cannot price for {ref}"
        )
    # Each pass priced alone, at the tier its own input reaches.
    priced = [(standard, {**rest, **rest_extras}), *((model_price, c) for c in listed)]
    try:
        parts = [price.calc_price(genai_prices.Usage(**counts)) for price, counts in priced]
    except ValueError as why:  # Counts that do not add up (more cached than input).
        return f"genai-prices {version} could not price the usage for {ref}: {why}"
    return Cost(
        input=sum((part["input_price"] for part in parts), Decimal(0)),
        output=sum((part["output_price"] for part in parts), Decimal(0)),
        total=sum((part["total_price"] for part in parts), Decimal(0)),
        source=ref,
    )


_TICKS = Decimal(10_000_000_000)
"""xAI's `cost_in_usd_ticks` to the dollar."""


def _with_total_reported(
    entry: Charge, money: Mapping[str, Any], tools: int, batch: bool
) -> tuple[Cost, str, str] | str:
    """The cost of a call that ran `tools` server-side tools (xAI's web and X searches, code
    execution), which genai-prices has no price for: its tokens priced by genai-prices, and
    its total the one the provider reported (`cost_in_usd_ticks`), with the tools in it; no
    cost without that total, or with one below its tokens' price alone."""
    provider, model, usage, at = entry[:4]
    in_job = len(entry) > 4 and entry[4] is True
    total = _ticks_total(money)
    who = provider or "the provider"
    if total is None:
        return (
            f"{who} billed {tools} server-side tool calls, which genai-prices has no price "
            f"for, and did not say what the call cost"
        )
    if batch and not in_job:
        return REPORTED_ONLY
    # The tokens alone, priced as any others' (the tools' own searches left to the total).
    extras = {
        key: count
        for key, count in (entry[5] if len(entry) > 5 else {}).items()
        if key not in _TOOL_FEES
    }
    tier = entry[6] if len(entry) > 6 else None
    priced = _price_charge(
        (provider, model, usage, at, in_job, extras, tier, {}), batch, total_reported=True
    )
    if isinstance(priced, str):
        return priced
    tokens, ref, label = priced
    if MONEY.add(tokens.input, tokens.output) > MONEY.multiply(total, _SLACK):
        return (
            f"{who} reported a total of {dollars(total)} for {ref}, less than genai-prices' "
            f"price of its tokens alone: not a cost to take with its tool calls"
        )
    ref = f"{ref} (total as {who} reported, with {tools} server-side tool calls)"
    return replace(tokens, total=total, source=f"{label}, {ref}"), ref, label


def _ticks_total(money: Mapping[str, Any]) -> Decimal | None:
    """The total xAI reported a call cost (`cost_in_usd_ticks`), in dollars."""
    ticks = money.get("cost_in_usd_ticks")
    if type(ticks) is int and ticks >= 0:
        return _reported_amount(str(Decimal(ticks) / _TICKS))
    return None


def _priced_as_billed(entry: Charge, billed: Decimal, batch: bool) -> tuple[Cost, str, str] | str:
    """The cost of a call whose total xAI reported without tools: its usage priced by
    genai-prices where that price is the bill, else no cost. xAI bills a request over
    128,000 tokens at higher rates, which genai-prices may not hold: its price would be
    half the bill."""
    provider, model, usage, at = entry[:4]
    in_job = len(entry) > 4 and entry[4] is True
    extras = entry[5] if len(entry) > 5 else {}
    tier = entry[6] if len(entry) > 6 else None
    unreported: Charge = (provider, model, usage, at, in_job, extras, tier, {})
    as_sent = _price_charge(unreported, False, total_reported=True)  # what was billed
    if isinstance(as_sent, str):
        return as_sent
    priced, ref, label = as_sent
    if priced.total > MONEY.multiply(billed, _SLACK) or billed > MONEY.multiply(
        priced.total, _SLACK
    ):
        return (
            f"{provider or 'the provider'} reported a total of {dollars(billed)} for {ref}, "
            f"where {label} prices its tokens at {dollars(priced.total)}: billed at rates "
            "the price data does not hold (xAI's above 128,000 tokens, say)"
        )
    if not batch or in_job:
        return as_sent
    return _price_charge(unreported, batch, total_reported=True)


_TOOL_FEES = frozenset(
    {
        "web_searches",
        "storage_searches",
        PREVIEW_WEB_SEARCHES,
        CODE_INTERPRETER_CALLS,
        IMAGE_GENERATION_CALLS,
    }
)
"""The tool calls a provider's own total covers where it reports its server-side tools."""


def _reported(
    money: Mapping[str, Any], provider: str | None, model: str | None, batch: bool
) -> tuple[Cost, str, str] | None:
    """What the provider said the call cost, where it says it in full; `None` otherwise.

    OpenRouter's `cost` is in credits, which are US dollars, with its upstream's input and
    output parts in `cost_details`. A call billed to the caller's own upstream key
    (`is_byok`) costs the fee OpenRouter bills (`cost`) and what the upstream billed that
    key (`upstream_inference_cost`). Without its parts, with parts that sum past it, or an
    xAI total alone, the usage is priced by genai-prices as any other.
    """
    byok = money.get("is_byok")
    details = money.get("cost_details")
    if type(byok) is not bool or not isinstance(details, dict):
        return None
    cost = _reported_amount(money.get("cost"))
    input_part = _reported_amount(
        details.get("upstream_inference_prompt_cost", details.get("upstream_inference_input_cost"))
    )
    output_part = _reported_amount(
        details.get(
            "upstream_inference_completions_cost", details.get("upstream_inference_output_cost")
        )
    )
    if cost is None or input_part is None or output_part is None:
        return None
    total = cost
    if byok:
        upstream = _reported_amount(details.get("upstream_inference_cost"))
        if upstream is None:
            return None
        total = MONEY.add(cost, upstream)
    if MONEY.add(input_part, output_part) > MONEY.multiply(total, _SLACK):
        return None  # parts that say more than the whole: not a cost to take as it is
    label = f"as {provider or 'the provider'} reported"
    ref = model or "its model"
    return (
        Cost(
            input=input_part,
            output=output_part,
            total=total,
            source=f"{label}, {ref}",
            batch=batch,
        ),
        ref,
        label,
    )


def _searched_unreported(provider: str | None, model: str | None, money: Mapping[str, Any]) -> str:
    """Why a call that searched the web through OpenRouter (an `:online` model, or a usage
    that counts its web searches) has no cost, where what it cost was not reported in full
    (`_reported`: those are taken first); ``""`` for any other call. The searches are billed
    per result beyond the tokens, at prices genai-prices does not hold, and a total without
    its parts may be a fee alone (a call on one's own upstream key): the tokens' list price
    would leave them out."""
    tools = money.get(_ROUTER_TOOLS)
    found = tools.get("web_search_requests") if isinstance(tools, dict) else None
    if isinstance(found, float) and found.is_integer():  # (a proxy's `2.0`)
        found = int(found)
    searches = found if type(found) is int else 0
    counted = searches > 0
    online = provider == "openrouter" and model is not None and model.endswith(":online")
    if not counted and not online:
        return ""
    who = provider or "the provider"
    cost = _reported_amount(money.get("cost"))
    told = (
        "did not say what the call cost"
        if cost is None
        else f"reported a total of {dollars(cost)} without its parts (`cost_details`, `is_byok`)"
    )
    if counted:
        return (
            f"{who} billed {searches} web search{'' if searches == 1 else 'es'} beyond the "
            f"tokens, which genai-prices has no price for, and {told}"
        )
    return (
        f"{model} searches the web on every call (OpenRouter's `web` plugin), billed per "
        f"result beyond its tokens at prices genai-prices does not hold, and {who} {told}"
    )


_ROUTER_TOOLS = "server_tool_use"
"""Where OpenRouter's usage counts the server-side tool calls it ran (`web_search_requests`),
kept with its money fields (`USAGE_COST_KEY`) by the Chat Completions adapter."""


def _reported_amount(value: Any) -> Decimal | None:
    """An amount a provider reported: a finite number (or its digits as text), not below
    zero."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        amount = Decimal(str(value)) if isinstance(value, float | str) else Decimal(value)
    except InvalidOperation:
        return None
    if not amount.is_finite() or amount < 0 or amount > _MOST:
        return None
    return amount if amount == 0 or amount >= _LEAST else None


_MOST = Decimal(1_000_000)
"""The most a reported amount may be (a million dollars for one call): more is no cost."""
_LEAST = Decimal("1e-15")
"""The least an amount other than zero may be: less is no amount of money (and its digits
would fill a line)."""

_SLACK = Decimal("1.01")
"""How far a reported cost's parts may sum past its total (each rounded on its own) and
still be taken as its parts."""


def _unpriced(model_price: Any, extras: Mapping[str, int], *, audio_as_text: bool) -> str:
    """What `extras` holds that `model_price` has no price for (which genai-prices would
    count as free, or audio as text), in words; ``""`` when everything has a price.
    `audio_as_text`: the price data prices audio as text where it gives no audio price
    (`AUDIO_AS_TEXT`)."""
    missing = [
        _NAMES.get(key) or key.replace("_", " ").removesuffix(" tokens").replace("1h", "one-hour")
        for key, count in extras.items()
        if count
        and (needed := BILLED_EXTRAS.get(key, key)) is not None
        and not (audio_as_text and needed in _AS_TEXT_PRICES)
        and getattr(model_price, needed, None) is None
    ]
    return " and ".join(missing)


def _cached_audio_unknown(model_price: Any, usage: Usage, extras: Mapping[str, int]) -> bool:
    """Whether `usage` has cached tokens beside its input audio tokens without saying how
    many of them are audio (the Chat Completions usage never does), where `model_price`
    prices cache reads apart: each cached audio token would be priced both as audio and as
    a cache read, and one text token fewer priced at all (genai-prices refuses the usage
    where the model has a cached-audio price, and gets it wrong where it has not)."""
    if not extras.get("input_audio_tokens") or not usage.cache_read_tokens:
        return False
    if "cache_audio_read_tokens" in extras:
        return False
    return (
        getattr(model_price, "cache_read_mtok", None) is not None
        or getattr(model_price, "cache_audio_read_mtok", None) is not None
    )


_Flat: TypeAlias = tuple[Decimal | None, Decimal | None, Decimal | None, Decimal | None]
"""Prices per million input, output, cache-read and cache-write tokens."""

_TOKEN_PRICES = ("input_mtok", "output_mtok", "cache_read_mtok", "cache_write_mtok")

# A price (kept, so that its id is not reused) → its flat token prices, or None where the
# general calculation is needed (tiers, other units, an answer that differs).
_flats: dict[int, tuple[object, _Flat | None]] = {}


# A price made for the call (a batch price: genai-prices copies the standard price and
# lays the variant over it, anew each time) → the same, by what it holds.
_made_flats: dict[tuple[Any, ...], _Flat | None] = {}


def _flat(genai_prices: ModuleType, model_price: Any) -> _Flat | None:
    found = _flats.get(id(model_price))
    if found is not None and found[0] is model_price:
        return found[1]
    content = tuple(
        (key, value if value is None or type(value) is Decimal else id(value))
        for key, value in vars(model_price).items()
    )
    if content in _made_flats:
        return _made_flats[content]
    flat = _flat_prices(genai_prices, model_price)
    if len(_flats) >= _FOUND_LIMIT:
        _flats.clear()
        _made_flats.clear()
    if all(type(value) is not int for _, value in content):
        # Only prices that are all numbers (or none) are known by what they hold.
        _made_flats[content] = flat
    _flats[id(model_price)] = (model_price, flat)
    return flat


# (the standard price, the batch variants in force) → the flat batch prices: genai-prices
# makes a batch price by copying the standard one (about 100 µs), so it is made once.
_batch_flats: dict[tuple[int, ...], tuple[tuple[object, ...], _Flat | None]] = {}


def _batch_flat(genai_prices: ModuleType, gp_model: Any, when: datetime) -> _Flat | None:
    standard = gp_model.get_prices(when, None)
    variants = tuple(
        variant
        for variant in gp_model.price_variants or ()
        if variant.when == _BATCH
        and (variant.constraint is None or variant.constraint.active(when))
    )
    key = (id(standard), *map(id, variants))
    found = _batch_flats.get(key)
    if (
        found is not None
        and found[0][0] is standard
        and all(a is b for a, b in zip(found[0][1:], variants, strict=True))
    ):
        return found[1]
    flat = _flat(genai_prices, gp_model.get_prices(when, _BATCH))
    if len(_batch_flats) >= _FOUND_LIMIT:
        _batch_flats.clear()
    _batch_flats[key] = ((standard, *variants), flat)
    return flat


def _flat_prices(genai_prices: ModuleType, model_price: Any) -> _Flat | None:
    """The token prices of a price that holds only flat token prices (counted units that
    allama never reports, such as web searches, add nothing), checked against
    genai-prices' own answer for a usage of every kind."""
    for key, value in vars(model_price).items():
        if value is None or key.startswith("_") or key in _TOKEN_PRICES:
            continue
        if not key.endswith("_kcount") or key == "requests_kcount":
            return None
    prices = tuple(getattr(model_price, key, None) for key in _TOKEN_PRICES)
    if not all(p is None or type(p) is Decimal for p in prices):
        return None
    flat: _Flat = prices  # type: ignore[assignment]
    probe = (1_234_567, 765_432, 234_567, 34_567)
    try:
        got = model_price.calc_price(
            genai_prices.Usage(
                input_tokens=probe[0],
                output_tokens=probe[1],
                cache_read_tokens=probe[2],
                cache_write_tokens=probe[3],
            )
        )
    except (ValueError, ArithmeticError, KeyError, TypeError):
        return None
    mine = _flat_cost(flat, probe)
    same = (
        str(mine.input) == str(got["input_price"])
        and str(mine.output) == str(got["output_price"])
        and str(mine.total) == str(got["total_price"])
    )
    return flat if same else None


def _flat_cost(
    flat: _Flat, tokens: tuple[int, int, int, int], source: str = "", batch: bool = False
) -> Cost:
    """`price * count / 1,000,000` per kind of token, summed by direction, as genai-prices
    sums them."""
    input_mtok, output_mtok, read_mtok, write_mtok = flat
    given, output, read, write = tokens
    # A kind of cache token with no price of its own is priced as input (genai-prices
    # takes from the input only the parts it prices apart).
    uncached = given - (read if read_mtok is not None else 0)
    uncached -= write if write_mtok is not None else 0
    input_price = Decimal(0)
    for price, count in ((input_mtok, uncached), (read_mtok, read), (write_mtok, write)):
        if price is not None:
            input_price += price * Decimal(count) / _MILLION
    output_price = Decimal(0)
    if output_mtok is not None:
        output_price += output_mtok * Decimal(output) / _MILLION
    total = input_price + output_price
    return Cost(input=input_price, output=output_price, total=total, source=source, batch=batch)


_MILLION = 1_000_000


def _has_variant(
    provider: Provider, model: ModelInfo, when: datetime, context: Mapping[str, str]
) -> bool:
    """Whether genai-prices has a price for `context` (a batch, a service tier) in force
    at `when`. It applies one only to the provider's own models (not to those it falls
    back to, as Azure to OpenAI's), and answers the standard price otherwise."""
    if not any(model is own for own in provider.models):
        return False
    for variant in model.price_variants or ():
        if variant.when == context and (
            variant.constraint is None or variant.constraint.active(when)
        ):
            return True
    return False


# (provider id, model) → genai-prices' provider and model, or why there is none. Tied to
# the price data it was looked up in: genai-prices' `UpdatePrices` can swap the data.
_found: dict[tuple[str, str], tuple[Provider, ModelInfo] | str] = {}
_found_in: list[object] = [None]
_FOUND_LIMIT = 4096


def _lookup(
    genai_prices: ModuleType, provider: str, model: str
) -> tuple[Provider, ModelInfo] | str:
    snapshot = genai_prices.data_snapshot.get_snapshot()
    if _found_in[0] is not snapshot or len(_found) >= _FOUND_LIMIT:
        _found.clear()
        _found_in[0] = snapshot
    provider_id = PROVIDER_IDS.get(provider, provider)
    key = (provider_id, model)
    found = _found.get(key)
    if found is None:
        found = _found[key] = _find(snapshot, genai_prices.__version__, provider_id, model)
    return found


def _find(
    snapshot: Any, version: str, provider_id: str, model: str
) -> tuple[Provider, ModelInfo] | str:
    ref = model.rsplit("/", 1)[-1] if provider_id == "google" else model
    try:
        gp_provider: Provider = snapshot.find_provider(None, provider_id, None)
    except LookupError:
        return f"genai-prices {version} has no prices for the provider {provider_id!r}"
    try:
        found: tuple[Provider, ModelInfo] = snapshot.find_provider_model(
            ref, gp_provider, None, None
        )
    except LookupError:
        return f"genai-prices {version} has no price for {model!r} at {gp_provider.id}"
    if provider_id == "azure":
        owner = _fallback_owner(snapshot, gp_provider, found[1])
        if owner is not None and owner not in _AZURE_AT_VENDOR_PRICES:
            # A vendor's own price (DeepSeek's, with its off-peak hours) is not Azure's.
            return (
                f"genai-prices {version} has no Azure price for {model!r} (only "
                f"{owner}'s own, which Azure does not charge)"
            )
    return found


_AZURE_AT_VENDOR_PRICES = frozenset({"openai", "anthropic"})
"""The vendors whose models Azure bills at the vendor's list prices, as genai-prices
takes them; its Azure prices fall back to other vendors' too (DeepSeek, xAI, Moonshot),
whose own prices are not what Azure charges."""


def _fallback_owner(snapshot: Any, provider: Provider, model: ModelInfo) -> str | None:
    """The provider whose price list `model` was found in, when not `provider`'s own."""
    if any(model is own for own in provider.models):
        return None
    for other in snapshot.providers:
        if any(model is own for own in other.models):
            return str(other.id)
    return None

"""The options of a decision and their probabilities, below the public API: what each type
offers as options, where a JSON answer's string sits, and the walk over the tokens checked
against a brute-force count of every branch of a made-up model."""

from __future__ import annotations

import enum
import math
import random
import zlib
from typing import Any, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from allama.extract._choices import ABSTAIN_LABEL, options_of
from allama.extract._probabilities import Measured, Spelling, json_string_span, measure
from allama.types import TokenAlternative, TokenLogprob

# Options


class Size(enum.Enum):
    SMALL = "S"
    """Fits in a pocket."""
    LARGE = "L"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Colour(enum.StrEnum):
    RED = "red"
    GREEN = "green"


def test_each_kind_of_choice_has_the_labels_the_model_writes() -> None:
    assert options_of(bool).labels == ("Yes", "No")
    assert [o.value for o in options_of(bool).options] == [True, False]
    assert options_of(Size).labels == ("S", "L")
    assert options_of(Level).labels == ("LOW", "HIGH")  # a member that is no str: its name
    assert options_of(Colour).labels == ("red", "green")
    assert options_of(Literal["a", 2, True, Size.LARGE]).labels == ("a", "2", "true", "L")
    assert options_of(Literal["a", "b"]).name == "Literal['a', 'b']"


def test_an_enum_member_docstring_is_its_description_and_a_mapping_overrides_it() -> None:
    options = options_of(Size)
    assert [o.description for o in options.options] == ["Fits in a pocket.", None]
    described = options_of(Size, {Size.LARGE: "Needs a van", "S": "Small"})
    assert [o.description for o in described.options] == ["Small", "Needs a van"]
    assert options_of(bool, {True: "it holds", "No": "it does not"}).listing() == (
        "- Yes: it holds\n- No: it does not"
    )


def test_abstaining_adds_the_none_of_these_option_last() -> None:
    options = options_of(Size, allow_abstain=True)
    assert options.labels == ("S", "L", ABSTAIN_LABEL)
    assert options.options[-1].value is None and options.is_abstain(options.options[-1])
    with pytest.raises(ValueError, match="already has an option `none of these`"):
        options_of(Literal["none of these", "x"], allow_abstain=True)
    # Alike once trimmed, as an answer is read: `none of these` chose it, not abstaining.
    with pytest.raises(ValueError, match="already has an option `none of these`"):
        options_of(Literal["x", " none of these"], allow_abstain=True)


@pytest.mark.parametrize(
    ("descriptions", "error", "message"),
    [
        ({"XL": "?"}, ValueError, "`descriptions` names 'XL', which is not an option of Size"),
        ({1: "?"}, ValueError, "names 1, which is not an option"),
        ({Size.SMALL: 3}, TypeError, "must be a str, not int"),
        ("S", TypeError, "must map options to what they mean, not str"),
    ],
)
def test_descriptions_of_no_option_are_refused(
    descriptions: Any, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        options_of(Size, descriptions)


def test_a_bool_description_is_not_an_int_one() -> None:
    with pytest.raises(ValueError, match="names True, which is not an option"):
        options_of(Literal[1, 2], {True: "x"})


# Where the answer's string is


@pytest.mark.parametrize(
    ("text", "key", "found"),
    [
        ('"Yes"', None, (1, "Yes")),
        ('  "Yes" ', None, (3, "Yes")),
        ('{"value":"No"}', "value", (10, "No")),
        ('{ "other": [1, {"value": "x"}], "value" : "B\\u00e9" }', "value", (43, "Bé")),
        ('{"value": 3}', "value", None),
        ('{"x": "Yes"}', "value", None),
        ("Yes", None, None),
    ],
)
def test_the_answer_string_is_found_in_json(
    text: str, key: str | None, found: tuple[int, str] | None
) -> None:
    assert json_string_span(text, key) == found


# The walk


def tokens_of(pieces: list[tuple[str, float, list[tuple[str, float]]]]) -> list[TokenLogprob]:
    return [
        TokenLogprob(
            token=text,
            logprob=math.log(p),
            top=tuple(TokenAlternative(token=t, logprob=math.log(q)) for t, q in top),
        )
        for text, p, top in pieces
    ]


def test_single_token_options_are_measured_exactly() -> None:
    tokens = tokens_of([("red", 0.6, [("red", 0.6), ("green", 0.3), ("blue", 0.1)])])
    measured = measure(tokens, "red", ["red", "green"], "red", Spelling(0, json=False))
    assert isinstance(measured, Measured)
    assert measured.probabilities == pytest.approx({"red": 0.6, "green": 0.3})
    assert measured.unresolved == pytest.approx(0.0)


def test_tokens_that_do_not_spell_the_output_give_a_reason_not_a_number() -> None:
    tokens = tokens_of([("re", 0.6, [])])
    assert measure(tokens, "red", ["red"], "red", Spelling(0, json=False)) == (
        "the tokens the provider reported do not spell the output"
    )


def test_a_shared_alternative_is_unresolved_not_given_to_either_option() -> None:
    # "g" could still become "green" or "grey": its probability cannot be followed.
    tokens = tokens_of([("red", 0.5, [("red", 0.5), ("g", 0.4), ("x", 0.1)])])
    measured = measure(tokens, "red", ["red", "green", "grey"], "red", Spelling(0, json=False))
    assert isinstance(measured, Measured)
    assert measured.probabilities == pytest.approx({"red": 0.5, "green": 0.0, "grey": 0.0})
    assert measured.unresolved == pytest.approx(0.4)


def test_tokens_that_write_the_same_bytes_are_one_branch_of_their_summed_probability() -> None:
    # llama.cpp lists two special tokens that print nothing (the end of generation) at one
    # place: the branch they open is theirs together, not the last one's.
    tokens = tokens_of(
        [
            ("New", 0.9, [("New", 0.9), ("Boston", 0.1)]),
            (" York", 0.5, [(" York", 0.5), ("", 0.4), ("", 0.001)]),
        ]
    )
    labels = ["New", "New York", "Boston"]
    measured = measure(tokens, "New York", labels, "New York", Spelling(0, json=False))
    assert isinstance(measured, Measured)
    assert measured.probabilities == pytest.approx(
        {"New": 0.9 * 0.401, "New York": 0.45, "Boston": 0.1}
    )
    assert measured.unresolved == pytest.approx(0.9 * (1 - 0.5 - 0.401))
    assert measured.unlisted == frozenset()


def test_a_chosen_option_whose_end_was_not_listed_is_unmeasured_not_measured_at_zero() -> None:
    # `no` could go on into `not sure`, and no end of generation is listed: what `no` has
    # is unresolved. It was given a confidence of 0.0 (every option counted as seen).
    tokens = tokens_of([("no", 0.85, [("no", 0.85), ("not", 0.1), ("yes", 0.04)])])
    measured = measure(tokens, "no", ["yes", "no", "not sure"], "no", Spelling(0, json=False))
    assert isinstance(measured, Measured)
    assert measured.probabilities == pytest.approx({"yes": 0.04, "no": 0.0, "not sure": 0.1})
    assert measured.unlisted == frozenset({"no"})
    assert measured.unresolved == pytest.approx(0.86)


def test_one_token_listed_twice_counts_once_and_a_place_lists_at_most_all() -> None:
    tokens = tokens_of([("Yes", 0.5, [("Yes", 0.5), ("No", 0.3), ("No", 0.3)])])
    measured = measure(tokens, "Yes", ["Yes", "No"], "Yes", Spelling(0, json=False))
    assert isinstance(measured, Measured)
    assert measured.probabilities == pytest.approx({"Yes": 0.5, "No": 0.3})
    # Two tokens of one text whose figures add up past what is left: what is left.
    tokens = tokens_of([("Yes", 0.5, [("Yes", 0.5), ("No", 0.4), ("No", 0.3)])])
    measured = measure(tokens, "Yes", ["Yes", "No"], "Yes", Spelling(0, json=False))
    assert isinstance(measured, Measured)
    assert measured.probabilities == pytest.approx({"Yes": 0.5, "No": 0.5})
    assert sum(measured.probabilities.values()) + measured.unresolved <= 1.0 + 1e-9


def test_space_after_a_plain_answer_ends_its_option() -> None:
    # `New` then a line break, which the reader trims: the answer is `New`, and ` York`
    # listed at the break is `New York`'s (it was "the tokens do not spell the answer").
    tokens = tokens_of([("New", 0.9, [("New", 0.9)]), ("\n", 0.6, [("\n", 0.6), (" York", 0.3)])])
    measured = measure(tokens, "New\n", ["New", "New York"], "New", Spelling(0, json=False))
    assert isinstance(measured, Measured)
    assert measured.probabilities == pytest.approx({"New": 0.54, "New York": 0.27})
    assert measured.unlisted == frozenset()
    # A space that may go on into the other option is unresolved, not `New`'s.
    tokens = tokens_of([("New", 0.9, [("New", 0.9)]), ("\n", 0.6, [("\n", 0.6), (" ", 0.3)])])
    measured = measure(tokens, "New\n", ["New", "New York"], "New", Spelling(0, json=False))
    assert isinstance(measured, Measured)
    assert measured.probabilities == pytest.approx({"New": 0.54, "New York": 0.0})
    assert measured.unresolved == pytest.approx(0.1 + 0.9 * 0.3 + 0.9 * 0.1)
    assert measured.unlisted == frozenset({"New York"})


def test_json_answers_count_from_the_token_that_starts_the_option() -> None:
    text = '{"value": "Blue"}'
    tokens = tokens_of(
        [
            ('{"', 0.9, []),
            ("value", 0.9, []),
            ('": "', 0.9, []),
            ("Bl", 0.5, [("Bl", 0.5), ("Red", 0.3), ("Blu", 0.1)]),
            ("ue", 0.8, [("ue", 0.8), ("ack", 0.2)]),
            ('"}', 1.0, []),
        ]
    )
    span = json_string_span(text, "value")
    assert span == (11, "Blue")
    measured = measure(tokens, text, ["Blue", "Black", "Red"], "Blue", Spelling(11, json=True))
    assert isinstance(measured, Measured)
    # "Blu" leads to Blue alone; "Bl" is shared with Black until "ue" or "ack".
    assert measured.probabilities == pytest.approx(
        {"Blue": 0.1 + 0.5 * 0.8, "Black": 0.5 * 0.2, "Red": 0.3}
    )
    assert measured.unresolved == pytest.approx(0.1)


# A made-up model whose every branch can be counted: tokens over a two-letter alphabet, and
# a distribution at each prefix drawn from a seed. The walk sees the chosen path with some
# alternatives listed; the count follows every branch. What the walk reports must bound
# the truth: measured <= true <= measured + unresolved.

VOCABULARY = ("a", "b", "aa", "ab", "ba", "bb", "")  # "" ends the output


def distribution(seed: int, prefix: str) -> dict[str, float]:
    rng = random.Random(seed ^ zlib.crc32(prefix.encode()))
    weights = [rng.random() ** 2 for _ in VOCABULARY]
    total = sum(weights)
    return {token: w / total for token, w in zip(VOCABULARY, weights, strict=True)}


def fitting(labels: list[str], text: str, *, ended: bool) -> list[str]:
    if ended:
        return [label for label in labels if label == text]
    return [label for label in labels if label.startswith(text)]


def true_probabilities(seed: int, labels: list[str]) -> dict[str, float]:
    """Every branch followed to where one option alone can still follow."""
    found = dict.fromkeys(labels, 0.0)

    def walk(prefix: str, reach: float) -> None:
        for token, p in distribution(seed, prefix).items():
            options = fitting(labels, prefix + token, ended=not token)
            if len(options) == 1:
                found[options[0]] += reach * p
            elif len(options) > 1 and token:
                walk(prefix + token, reach * p)

    walk("", 1.0)
    return found


labels_strategy = st.lists(
    st.text(alphabet="ab", min_size=1, max_size=3), min_size=2, max_size=4, unique=True
)


@settings(max_examples=300, deadline=None)
@given(
    labels=labels_strategy,
    data=st.data(),
    seed=st.integers(0, 2**31),
)
def test_the_walk_bounds_the_true_probability_of_every_option(
    labels: list[str], data: st.DataObject, seed: int
) -> None:
    chosen = data.draw(st.sampled_from(labels))
    # Split the chosen option into tokens of the vocabulary, then maybe the end token.
    pieces: list[str] = []
    rest = chosen
    while rest:
        size = data.draw(st.sampled_from([1, 2])) if len(rest) > 1 else 1
        pieces.append(rest[:size])
        rest = rest[size:]
    if data.draw(st.booleans()):
        pieces.append("")
    tokens = []
    prefix = ""
    for piece in pieces:
        dist = distribution(seed, prefix)
        listed = data.draw(st.lists(st.sampled_from(VOCABULARY), unique=True, max_size=7))
        top = tuple(TokenAlternative(token=t, logprob=math.log(dist[t])) for t in listed)
        tokens.append(TokenLogprob(token=piece, logprob=math.log(dist[piece]), top=top))
        prefix += piece
    measured = measure(tokens, chosen, labels, chosen, Spelling(0, json=False))
    assert isinstance(measured, Measured)
    truth = true_probabilities(seed, labels)
    eps = 1e-9
    assert sum(measured.probabilities.values()) + measured.unresolved <= 1 + eps
    for label in labels:
        assert measured.probabilities[label] >= 0
        assert measured.probabilities[label] <= truth[label] + eps
        assert truth[label] <= measured.probabilities[label] + measured.unresolved + eps


def test_an_option_holding_u_fffd_is_measured_only_where_its_bytes_are_given() -> None:
    # A listed token's text holding U+FFFD, given without its bytes, may be part of a
    # character the provider could not show: unresolved, not the option's, even where the
    # option is that character. Given with its bytes, it is read.
    labels = ["0", "\ufffd"]
    spelling = Spelling(0, json=False)

    def measured_with(token_bytes: tuple[int, ...] | None) -> Measured:
        top = (
            TokenAlternative(token="0", logprob=math.log(0.5)),
            TokenAlternative(token="\ufffd", logprob=math.log(0.5), token_bytes=token_bytes),
        )
        tokens = [TokenLogprob(token="0", logprob=math.log(0.5), top=top)]
        measured = measure(tokens, "0", labels, "0", spelling)
        assert isinstance(measured, Measured)
        return measured

    unread = measured_with(None)
    assert unread.probabilities == pytest.approx({"0": 0.5, "\ufffd": 0.0})
    assert unread.unresolved == pytest.approx(0.5)
    assert unread.unlisted == frozenset({"\ufffd"})
    read = measured_with(tuple("\ufffd".encode()))
    assert read.probabilities == pytest.approx({"0": 0.5, "\ufffd": 0.5})
    assert read.unresolved == pytest.approx(0.0)


@settings(max_examples=200, deadline=None)
@given(
    # Without U+FFFD, which a token listed without its bytes may show for part of a
    # character (the test above).
    labels=st.lists(
        st.text(st.characters(codec="utf-8", exclude_characters="\ufffd"), min_size=1, max_size=6),
        min_size=2,
        max_size=5,
        unique=True,
    ),
    data=st.data(),
)
def test_every_option_listed_whole_is_measured_exactly(
    labels: list[str], data: st.DataObject
) -> None:
    # No option may start another, so that each whole option is a branch of its own.
    labels = [a for a in labels if not any(b != a and b.startswith(a) for b in labels)]
    if len(labels) < 2:
        return
    weights = [data.draw(st.floats(0.01, 1.0)) for _ in labels]
    total = sum(weights)
    probabilities = {label: w / total for label, w in zip(labels, weights, strict=True)}
    chosen = data.draw(st.sampled_from(labels))
    as_json = data.draw(st.booleans())
    spelling = Spelling(1 if as_json else 0, json=as_json)
    written = spelling.written(chosen).decode()
    text = f'"{written}"' if as_json else written
    top = tuple(
        TokenAlternative(token=spelling.written(label).decode(), logprob=math.log(p))
        for label, p in probabilities.items()
    )
    pieces = [TokenLogprob(token='"', logprob=0.0)] if as_json else []
    pieces.append(TokenLogprob(token=written, logprob=math.log(probabilities[chosen]), top=top))
    if as_json:
        pieces.append(TokenLogprob(token='"', logprob=0.0))
    measured = measure(pieces, text, labels, chosen, spelling)
    assert isinstance(measured, Measured)
    assert measured.probabilities == pytest.approx(probabilities)
    assert measured.unresolved == pytest.approx(0.0, abs=1e-9)

"""Tiny, deterministic llama-architecture GGUF models, written at test time.

Nothing is downloaded: the vocabulary is made here (control tokens, the 256 byte
fallbacks, printable ASCII), the weights are seeded random numbers. The model is a
bigram machine: attention and feed-forward outputs are zero, so the last hidden state
is the current token's embedding and the next-token logits are a fixed table. One
embedding dimension is a large constant, so a column of the output matrix acts as a
per-token preference; the grammar engine then picks the most preferred token it allows.
With end-of-turn most preferred, then the characters that close JSON, a constrained
answer is the shortest valid value, the same on every run, in milliseconds.

`tools=True` adds `<tool_call>`/`</tool_call>` tokens and a ChatML template with a tools
section, which llama.cpp recognises as a tool-calling format.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import gguf
import numpy as np

__all__ = ["TOOL_TEMPLATE", "TinyModel", "write_tiny_model"]

_CHATML = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

TOOL_TEMPLATE = """\
{%- if tools %}
{{- '<|im_start|>system\n' }}
{%- if messages[0]['role'] == 'system' %}{{- messages[0]['content'] + '\n\n' }}{%- endif %}
{{- 'Functions you may call, one per <tool_call></tool_call> pair:\n<tools>' }}
{%- for tool in tools %}{{- '\n' + (tool | tojson) }}{%- endfor %}
{{- '\n</tools>\nCall one as <tool_call>\n{"name": NAME, "arguments": ARGS}\n</tool_call>' }}
{{- '<|im_end|>\n' }}
{%- elif messages[0]['role'] == 'system' %}
{{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}
{%- endif %}
{%- for message in messages %}
{%- if message['role'] == 'user' or (message['role'] == 'system' and not loop.first) %}
{{- '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}
{%- elif message['role'] == 'assistant' %}
{{- '<|im_start|>assistant' }}
{%- if message['content'] %}{{- '\n' + message['content'] }}{%- endif %}
{%- for call in message['tool_calls'] or [] %}
{%- set fn = call['function'] if call['function'] is defined else call %}
{{- '\n<tool_call>\n{"name": "' + fn['name'] + '", "arguments": ' }}
{%- if fn['arguments'] is string %}{{- fn['arguments'] }}
{%- else %}{{- fn['arguments'] | tojson }}{%- endif %}
{{- '}\n</tool_call>' }}
{%- endfor %}
{{- '<|im_end|>\n' }}
{%- elif message['role'] == 'tool' %}
{{- '<|im_start|>user\n<tool_response>\n' + message['content'] + '\n</tool_response><|im_end|>\n' }}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- endif %}
"""

# Per-token preferences (logit scale before normalisation): end of turn first, then what
# closes JSON soonest. Strings stay empty because an opening quote is followed by a
# closing one (see `_QUOTE_DIM`).
_PREFERENCES = {"<|im_end|>": 3.0, '"': 2.0, "}": 1.8, "]": 1.6, "0": 1.2, ",": 1.0, "a": 0.8}
_TOOL_PREFERENCES = {"<tool_call>": 2.5, "</tool_call>": 1.9}

_CONSTANT_DIM = 0  # the same large value for every token: a global preference column
_TOOL_DIM = 1  # set only on `<tool_call>`: a newline must follow it
_QUOTE_DIM = 2  # set only on `"`: another quote follows it (empty strings)


@dataclass(frozen=True, slots=True)
class TinyModel:
    path: Path
    tools: bool
    vocabulary: int


def _vocabulary(tools: bool) -> tuple[list[str], list[float], list[int]]:
    kind = gguf.TokenType
    entries: list[tuple[str, int, float]] = [
        ("<unk>", kind.UNKNOWN, 0.0),
        ("<s>", kind.CONTROL, 0.0),
        ("</s>", kind.CONTROL, 0.0),
        ("<|im_start|>", kind.CONTROL, 0.0),
        ("<|im_end|>", kind.CONTROL, 0.0),
    ]
    if tools:
        entries += [
            ("<tool_call>", kind.USER_DEFINED, 0.0),
            ("</tool_call>", kind.USER_DEFINED, 0.0),
        ]
    entries += [(f"<0x{byte:02X}>", kind.BYTE, 0.0) for byte in range(256)]
    # Printable ASCII as pieces; SentencePiece writes a space as U+2581.
    entries += [(chr(code), kind.NORMAL, -1.0) for code in range(33, 127)]
    entries.append(("\u2581", kind.NORMAL, -1.0))
    return [e[0] for e in entries], [e[2] for e in entries], [int(e[1]) for e in entries]


def write_tiny_model(path: Path, *, tools: bool = False, seed: int = 7) -> TinyModel:
    """Write the model to `path` (about 0.5 MB, well under a second)."""
    tokens, scores, types = _vocabulary(tools)
    index = {token: i for i, token in enumerate(tokens)}
    n_vocab, n_embd, n_head, n_layer, n_ff = len(tokens), 64, 4, 2, 128
    rng = np.random.default_rng(seed)

    def noise(*shape: int, scale: float = 0.02) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    embeddings = noise(n_vocab, n_embd, scale=0.5)
    output = noise(n_vocab, n_embd, scale=0.5)
    embeddings[:, _CONSTANT_DIM] = 20.0
    embeddings[:, _TOOL_DIM : _QUOTE_DIM + 1] = 0.0
    output[:, _CONSTANT_DIM : _QUOTE_DIM + 1] = 0.0
    embeddings[index['"'], _QUOTE_DIM] = 20.0
    output[index['"'], _QUOTE_DIM] = 5.0
    preferences = dict(_PREFERENCES)
    if tools:
        preferences.update(_TOOL_PREFERENCES)
        embeddings[index["<tool_call>"], _TOOL_DIM] = 20.0
        output[index["<0x0A>"], _TOOL_DIM] = 5.0
        output[index["<tool_call>"], _TOOL_DIM] = -5.0
    for token, preference in preferences.items():
        output[index[token], _CONSTANT_DIM] = preference

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("allama-tiny-tools" if tools else "allama-tiny")
    writer.add_context_length(4096)
    writer.add_embedding_length(n_embd)
    writer.add_block_count(n_layer)
    writer.add_feed_forward_length(n_ff)
    writer.add_head_count(n_head)
    writer.add_head_count_kv(n_head)
    writer.add_rope_dimension_count(n_embd // n_head)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_vocab_size(n_vocab)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_bos_token_id(index["<s>"])
    writer.add_eos_token_id(index["<|im_end|>"])
    writer.add_unk_token_id(index["<unk>"])
    writer.add_add_bos_token(False)
    writer.add_add_space_prefix(False)
    writer.add_chat_template(TOOL_TEMPLATE if tools else _CHATML)

    ones = np.ones(n_embd, np.float32)
    writer.add_tensor("token_embd.weight", embeddings)
    writer.add_tensor("output_norm.weight", ones)
    writer.add_tensor("output.weight", output)
    for layer in range(n_layer):
        block = f"blk.{layer}"
        writer.add_tensor(f"{block}.attn_norm.weight", ones)
        for name in ("attn_q", "attn_k", "attn_v"):
            writer.add_tensor(f"{block}.{name}.weight", noise(n_embd, n_embd))
        writer.add_tensor(f"{block}.attn_output.weight", np.zeros((n_embd, n_embd), np.float32))
        writer.add_tensor(f"{block}.ffn_norm.weight", ones)
        writer.add_tensor(f"{block}.ffn_gate.weight", noise(n_ff, n_embd))
        writer.add_tensor(f"{block}.ffn_up.weight", noise(n_ff, n_embd))
        writer.add_tensor(f"{block}.ffn_down.weight", np.zeros((n_embd, n_ff), np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return TinyModel(path=path, tools=tools, vocabulary=n_vocab)

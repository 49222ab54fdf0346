"""Render a tokenizer's chat template the way ``transformers``' ``apply_chat_template(tokenize=False)`` does.

The judge prompt is rendered client side with the pinned Qwen3-32B tokenizer's own template, and its
sha256 goes into every judge receipt. :class:`ChatTemplate` reads the template text from a tokenizer directory
(``chat_template.jinja``, else ``tokenizer_config.json``'s ``chat_template``) and renders it with the same Jinja
sandbox settings transformers uses (``trim_blocks``, ``lstrip_blocks``, ``loopcontrols``, a ``tojson`` that keeps
non-ASCII, ``raise_exception``, ``strftime_now``), passing the tokenizer's special tokens as variables.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from trace_lib.errors import InputError
from trace_lib.validation.canonical import read_json_object, read_text

_SPECIAL_TOKEN_KEYS = (
    "bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token",
    "additional_special_tokens",
)


def _token_text(value: Any) -> Any:
    if isinstance(value, Mapping):  # AddedToken serialised as {"content": ...}
        return value.get("content")
    return value


@dataclass(frozen=True)
class ChatTemplate:
    """A chat template's text plus the special-token variables it is rendered with."""

    text: str
    special_tokens: Mapping[str, Any] = field(default_factory=dict)

    @property
    def sha256(self) -> str:
        """sha256 of the template text (what judge receipts record as ``tokenizer_template_sha256``)."""
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()

    @classmethod
    def from_tokenizer_dir(cls, directory: Path) -> ChatTemplate:
        """The template of a local tokenizer (a model checkpoint directory).

        Raises:
            InputError: the directory has no tokenizer_config.json or no chat template.
        """
        directory = Path(directory).expanduser()
        config_path = directory / "tokenizer_config.json"
        if not config_path.is_file():
            raise InputError("no tokenizer_config.json", file=str(directory), field="--judge-tokenizer",
                             hint="pass the local Qwen3-32B checkpoint directory the judge serves")
        config = read_json_object(config_path)
        jinja_file = directory / "chat_template.jinja"
        text = read_text(jinja_file) if jinja_file.is_file() else config.get("chat_template")
        if isinstance(text, list):  # named templates: the default one
            text = next((t.get("template") for t in text if isinstance(t, dict) and t.get("name") == "default"), None)
        if not isinstance(text, str) or not text:
            raise InputError("tokenizer has no chat template", file=str(config_path), field="chat_template")
        tokens = {k: _token_text(config[k]) for k in _SPECIAL_TOKEN_KEYS if k in config}
        source = jinja_file if jinja_file.is_file() else config_path
        try:
            _compile(text)  # a template that does not compile is this file's fault, said before any request
        except Exception as exc:  # noqa: BLE001 - jinja2.TemplateError and kin
            raise InputError(f"chat template does not compile ({type(exc).__name__}: {exc})", file=str(source),
                             field="chat_template") from None
        return cls(text=text, special_tokens=tokens)

    def render(self, messages: Sequence[Mapping[str, Any]], *, add_generation_prompt: bool = True, **kwargs: Any) -> str:
        """The rendered prompt text (``kwargs`` such as ``enable_thinking`` are template variables)."""
        template = _compile(self.text)
        variables = {**self.special_tokens, **kwargs}
        return template.render(
            messages=[dict(m) for m in messages], tools=None, documents=None,
            add_generation_prompt=add_generation_prompt, **variables,
        )


_COMPILED: dict[str, Any] = {}


def _compile(text: str) -> Any:
    if text in _COMPILED:
        return _COMPILED[text]
    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str) -> None:
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x: Any, ensure_ascii: bool = False, indent: Any = None, separators: Any = None,
               sort_keys: bool = False) -> str:
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt: str) -> str:
        return dt.datetime.now().strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    compiled = env.from_string(text)
    _COMPILED[text] = compiled
    return compiled

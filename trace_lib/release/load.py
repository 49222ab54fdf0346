"""Strict readers for release and user files: duplicate keys, NaN/Infinity and truncation are errors.

Every reader raises :class:`~trace_lib.errors.ReleaseFileError` whose message names the file and, where the
parser knows it, the line; nothing here ever returns a partially parsed document.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from trace_lib.decoding import read_text
from trace_lib.errors import ReleaseFileError
from trace_lib.jsonio import DuplicateKey, NonFinite, loads_strict, outside_strings


def sha256_file(path: Path, *, chunk: int = 1 << 20) -> str:
    """Hex SHA-256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def sha256_bytes(data: bytes) -> str:
    """Hex SHA-256 of bytes."""
    return hashlib.sha256(data).hexdigest()


def _position(text: str, token: str) -> str:
    """`` at line L column C`` of the first bare ``token`` outside strings, or '' if not found."""
    line, column = 1, 1
    for i, char, outside in outside_strings(text):
        if outside and text.startswith(token, i):
            return f" at line {line} column {column}"
        if char == "\n":
            line, column = line + 1, 1
        else:
            column += 1
    return ""


def parse_json_text(text: str, *, name: str) -> Any:
    """Parse JSON text strictly; ``name`` is the file name used in error messages."""
    try:
        return loads_strict(text)
    except DuplicateKey as exc:
        raise ReleaseFileError(f"duplicate key {exc.key!r}", file=name) from None
    except NonFinite as exc:
        where = _position(text, exc.name)
        raise ReleaseFileError(f"non-finite number {exc.name}{where} is not valid JSON", file=name) from None
    except json.JSONDecodeError as exc:
        raise ReleaseFileError(f"malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}", file=name) from None
    except ValueError as exc:
        raise ReleaseFileError(str(exc), file=name) from None


def _release_text(path: Path, label: str) -> str:
    """The text of a release file. Raises ReleaseFileError (missing, unreadable, not UTF-8) naming ``label``."""
    try:
        return read_text(path, name=label, error=ReleaseFileError)
    except FileNotFoundError:
        raise ReleaseFileError("file is missing", file=label) from None
    except OSError as exc:
        raise ReleaseFileError(f"cannot read file: {exc.strerror}", file=label) from None


def load_json(path: Path, *, name: str | None = None) -> Any:
    """Read and strictly parse a JSON file (UTF-8)."""
    label = name or str(path)
    text = _release_text(path, label)
    return parse_json_text(text, name=label)


def load_yaml(path: Path, *, name: str | None = None) -> Any:
    """Read a YAML file with PyYAML's safe loader, refusing duplicate mapping keys."""
    import yaml

    label = name or str(path)

    # libyaml's parser when present (same safe constructors and resolver, several times faster)
    class _StrictLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
        pass

    def _mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> dict[Any, Any]:
        loader.flatten_mapping(node)
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=True)
            if key in out:
                line = key_node.start_mark.line + 1
                raise ReleaseFileError(f"duplicate key {key!r} at line {line}", file=label)
            out[key] = loader.construct_object(value_node, deep=True)
        return out

    _StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)
    text = _release_text(path, label)
    try:
        return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark else ""
        raise ReleaseFileError(f"malformed YAML{where}: {exc.problem}", file=label) from None
    except yaml.YAMLError as exc:
        raise ReleaseFileError(f"malformed YAML: {exc}", file=label) from None

"""Group ``prompt_hash``: the system-prompt bytes are the ones every profile, suite and receipt pins.

Upstream hashes the prompt file only in ``train.py check`` (against a literal) and trusts the values recorded in
the profiles, the TRACE-validation suite and the source map. Here the file's SHA-256 is computed and every
recorded value must equal it: both profiles' ``release.prompt.sha256``, the validation suite's
``prompt.system_prompt_sha256`` and the source map's ``release_inputs.answer_prompt_sha256``.
"""

from __future__ import annotations

from trace_lib.preflight import views
from trace_lib.preflight.context import CheckContext, GroupOutcome
from trace_lib.preflight.fields import Fields
from trace_lib.preflight.registry import CheckGroup
from trace_lib.release import identity

FILE = identity.SYSTEM_PROMPT
#: (file that records the prompt hash, dotted field holding it)
PINS: tuple[tuple[str, str], ...] = (
    *((profile, "release.prompt.sha256") for profile in views.PROFILE_FILES),
    (identity.VALIDATION_SUITE, "prompt.system_prompt_sha256"),
    (identity.SOURCE_MAP, "release_inputs.answer_prompt_sha256"),
)


def check_prompt_hash(ctx: CheckContext, out: GroupOutcome) -> None:
    if not ctx.exists(FILE):
        out.fail(FILE, "file is missing")
        return
    data = ctx.release.read_bytes(FILE)
    actual = ctx.sha256(FILE)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        out.fail(FILE, f"not UTF-8 text (byte {exc.start})")
        text = ""
    if data and not text.strip():
        out.fail(FILE, "system prompt is blank")
    elif not data:
        out.fail(FILE, "system prompt is empty")
    for rel, field in PINS:
        doc = views.document(ctx, rel)
        if doc is None:
            out.not_checked(rel, f"{rel} is unreadable (see its group)", field=field)
            continue
        Fields(out, rel).expect(field, actual, views.dig(doc, field), f"differs from the SHA-256 of {FILE}")
    out.count("prompt_sha256", actual)
    out.count("bytes", len(data))


GROUP = CheckGroup(
    "prompt_hash",
    "system prompt bytes hash to the SHA-256 pinned by both profiles, the validation suite and the source map",
    check_prompt_hash,
)

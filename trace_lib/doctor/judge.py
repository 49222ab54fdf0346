"""The judge: an OpenAI-compatible server (or a comma-separated pool of them) answering ``GET <judge-url>/v1/models``,
or else its local model directory."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from trace_lib.doctor.context import CheckResult, DoctorContext, Status
from trace_lib.options import JUDGE_URL


def probe(url: str, timeout: float) -> tuple[bool, str]:
    """``(reachable, what was seen)`` for ``GET <url>/v1/models`` (the scorer's endpoint, see
    :func:`~trace_lib.scoring.judge_http.models_url`); never raises, never uses a proxy.

    Unlike :func:`~trace_lib.scoring.judge_http.probe` it asks for no particular served model name: it reports
    what the endpoint lists.
    """
    from trace_lib.options import BadValue, http_urls
    from trace_lib.scoring.judge_http import models_url

    try:
        http_urls(url)  # a file:// URL would be opened, a FIFO read
    except BadValue as exc:
        return False, f"not an http(s) URL: {exc} (a judge is an OpenAI-compatible server)"
    target = models_url(url)
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(target, timeout=timeout) as response:
            doc = json.loads(response.read().decode("utf-8"))
    except urllib.error.HTTPError as exc:
        return False, f"{target}: HTTP {exc.code}"
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return False, f"{target}: {type(exc).__name__}: {reason}"
    served = [m.get("id") for m in doc.get("data", []) if isinstance(m, dict)] if isinstance(doc, dict) else []
    return True, f"{target}: serving {', '.join(map(str, served)) or 'no models listed'}"


def check_judge(ctx: DoctorContext) -> CheckResult:
    url = ctx.judge_url or ctx.env.get(JUDGE_URL.env)
    endpoints = [u.strip() for u in url.split(",") if u.strip()] if url else []
    if endpoints:
        seen_all = []
        for endpoint in endpoints:
            ok, seen = probe(endpoint, ctx.timeout)
            if not ok:
                return CheckResult("judge", Status.MISSING, f"judge unreachable: {seen}",
                                   missing=f"a judge serving at {endpoint}",
                                   fix="vllm serve <model-root>/qwen3-32b-judge (or pass the right --judge-url)")
            seen_all.append(seen)
        return CheckResult("judge", Status.OK, "; ".join(seen_all))
    from trace_lib.campaign.models import release_judge
    from trace_lib.campaign.plan import MODEL_ROOT_ENV
    from trace_lib.data.model_dirs import verify_model_dir

    root = ctx.root(ctx.model_root, MODEL_ROOT_ENV, "models")
    judge = release_judge(ctx.release(), root)
    report = verify_model_dir(judge, deep=False)
    if report.ok:
        return CheckResult("judge", Status.OK, f"no --judge-url; judge model {judge.repository} present at "
                           f"{judge.local_path} (served locally)")
    return CheckResult("judge", Status.MISSING, f"no --judge-url ({JUDGE_URL.env}) and {report.problems[0]}",
                       missing="a judge (a served --judge-url or its model directory)",
                       fix=f"trace-repro prepare-models --judge --model-root {root} (or pass --judge-url URL)")


def _checks():
    from trace_lib.doctor.registry import Check

    return (Check("judge", "the Qwen3-32B judge reachable at --judge-url (or its model directory)", check_judge),)


CHECKS = _checks()

"""The generation engine this process runs on (vllm, torch, transformers, CUDA, GPU) against the paper's pins.

Versions come from installed-distribution metadata, so recording them imports nothing heavy; torch's CUDA build
and the GPU name are read only when torch is already imported (or with ``probe=True``), and the GPU only when
CUDA is already initialised (or probed). The paper's engine is read from the release at run time: the package
pins of ``rlvr/requirements-cu128.txt`` and the CUDA/GPU of ``rlvr/environment_receipt.v1.json``.

Matching rule: ``matches_paper`` is true iff vllm, torch and transformers equal the paper's pins by public
version (``2.8.0`` equals ``2.8.0+cu128``; the local build is then judged by CUDA) and, when known, torch's
CUDA equals the paper's. The GPU model is reported (``gpu_matches_paper``) but is hardware, not a pin, and
does not enter ``matches_paper``. A package that is not installed differs ("not installed").
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any, Mapping

from trace_lib.release import identity
from trace_lib.release.locate import ReleaseRoot

#: The packages that make the generation engine, in report order.
ENGINE_PACKAGES: tuple[str, ...] = ("vllm", "torch", "transformers")
SCHEMA = "trace-repro-engine-v1"


def installed_version(name: str) -> str | None:
    """The installed version of distribution ``name`` (None when absent), from its metadata (imports nothing)."""
    import importlib.metadata as metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


@dataclass(frozen=True)
class EngineVersions:
    """What this process would generate with (``None``: not installed / not known without probing)."""

    packages: Mapping[str, str | None]  # ENGINE_PACKAGES -> installed version
    cuda: str | None = None  # torch.version.cuda
    gpu: str | None = None  # name of the first visible GPU
    gpu_count: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {**{name: self.packages.get(name) for name in ENGINE_PACKAGES}, "cuda": self.cuda, "gpu": self.gpu,
                "gpu_count": self.gpu_count}


def engine_versions(*, probe: bool = False) -> EngineVersions:
    """The engine of this process; imports torch only with ``probe`` (and initialises CUDA only then)."""
    packages = {name: installed_version(name) for name in ENGINE_PACKAGES}
    torch = sys.modules.get("torch")
    if torch is None and probe and packages["torch"] is not None:
        try:
            import torch  # noqa: F811
        except Exception:  # a broken torch install is reported as unknown CUDA, not a crash
            torch = None
    cuda = gpu = count = None
    if torch is not None:
        cuda = getattr(getattr(torch, "version", None), "cuda", None)
        try:
            if probe or torch.cuda.is_initialized():
                if torch.cuda.is_available():
                    count = torch.cuda.device_count()
                    gpu = torch.cuda.get_device_name(0)
                else:
                    count = 0
        except Exception:
            pass
    return EngineVersions(packages, cuda, gpu, count)


@dataclass(frozen=True)
class PaperEngine:
    """The paper's engine as the release states it (``where``: name -> ``FILE:LINE`` or file of each fact)."""

    packages: Mapping[str, str]
    cuda: str | None
    gpu: str | None
    where: Mapping[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {**dict(self.packages), "cuda": self.cuda, "gpu": self.gpu}


def paper_engine(release: ReleaseRoot) -> PaperEngine:
    """The pins of :data:`ENGINE_PACKAGES` and the reference CUDA/GPU, read from the release.

    Raises:
        ReleaseFileError: a requirement file is missing or malformed, or an engine package is not pinned with
            ``==`` there.
    """
    from trace_lib.environment.requirements import read_requirements
    from trace_lib.errors import ReleaseFileError

    reqs = read_requirements(release, identity.REQUIREMENTS_CU128)
    packages: dict[str, str] = {}
    where: dict[str, str] = {}
    for pin in reqs.pins:
        if pin.name in ENGINE_PACKAGES and pin.name not in packages and pin.exact_version:
            packages[pin.name] = pin.exact_version
            where[pin.name] = pin.where
    missing = [name for name in ENGINE_PACKAGES if name not in packages]
    if missing:
        raise ReleaseFileError("engine package not pinned with ==", file=identity.REQUIREMENTS_CU128,
                               found=missing)
    cuda = gpu = None
    try:
        doc = release.read_json(identity.ENVIRONMENT_RECEIPT)
        ref = doc.get("reference_platform") if isinstance(doc, dict) else None
        if isinstance(ref, dict):
            cuda = str(ref["cuda"]) if ref.get("cuda") is not None else None
            gpu = str(ref["gpu"]) if ref.get("gpu") is not None else None
            where.update(cuda=identity.ENVIRONMENT_RECEIPT, gpu=identity.ENVIRONMENT_RECEIPT)
    except ReleaseFileError:
        pass
    return PaperEngine(packages, cuda, gpu, where)


def _public(version: str | None) -> str | None:
    if version is None:
        return None
    from packaging.version import InvalidVersion, Version

    try:
        return Version(version).public
    except InvalidVersion:
        return version.split("+", 1)[0]


def _cuda_major_minor(version: str | None) -> str | None:
    return None if version is None else ".".join(str(version).split(".")[:2])


@dataclass(frozen=True)
class EngineRecord:
    """This engine, the paper's, and every difference (``(name, found, paper)``; ``found`` None: not installed)."""

    engine: EngineVersions
    paper: PaperEngine
    differences: tuple[tuple[str, str | None, str], ...]
    unchecked: tuple[str, ...]  # facts not known without probing (e.g. "cuda")

    @property
    def matches_paper(self) -> bool:
        return not self.differences

    @property
    def gpu_matches_paper(self) -> bool | None:
        if self.engine.gpu is None or self.paper.gpu is None:
            return None
        return self.engine.gpu == self.paper.gpu

    def drift(self) -> str:
        """``""`` when matching, else ``engine differs from the paper's (vllm 0.24.0 vs 0.10.2; ...)``."""
        return describe_differences(self.differences)

    def to_json(self) -> dict[str, Any]:
        """The record stored in response-file headers, generation summaries and receipts."""
        return {
            "schema": SCHEMA,
            **self.engine.to_json(),
            "paper": self.paper.to_json(),
            "matches_paper": self.matches_paper,
            "differences": [{"name": n, "found": f, "paper": p} for n, f, p in self.differences],
            "unchecked": list(self.unchecked),
            "gpu_matches_paper": self.gpu_matches_paper,
        }

    def properties(self) -> list[tuple[str, str]]:
        """JUnit receipt properties: each engine version, the paper's, and the match flag."""
        return engine_properties(self.to_json())

    def render_lines(self) -> list[str]:
        """Human-readable lines for ``trace-repro env show`` and ``doctor``."""
        lines = []
        for name in ENGINE_PACKAGES:
            found = self.engine.packages.get(name)
            lines.append(f"{name:<13} {found or 'not installed':<22} paper {self.paper.packages[name]}"
                         f"  ({self.paper.where.get(name, '')})")
        lines.append(f"{'cuda':<13} {self.engine.cuda or 'not checked (--probe)':<22} paper {self.paper.cuda}")
        gpu = self.engine.gpu or ("none visible" if self.engine.gpu_count == 0 else "not checked (--probe)")
        lines.append(f"{'gpu':<13} {gpu:<22} paper {self.paper.gpu} (hardware: reported, not a pin)")
        lines.append("engine matches the paper's pins" if self.matches_paper else self.drift())
        return lines


def describe_differences(differences: Any) -> str:
    """The one-line drift message for ``(name, found, paper)`` triples (``""`` when there are none)."""
    items = [f"{name} {found if found is not None else 'not installed'} vs {paper}"
             for name, found, paper in differences]
    return f"engine differs from the paper's ({'; '.join(items)})" if items else ""


def compare_to_paper(engine: EngineVersions, paper: PaperEngine) -> EngineRecord:
    """Compare by public version (local labels ignored) and CUDA major.minor when both are known."""
    differences: list[tuple[str, str | None, str]] = []
    for name in ENGINE_PACKAGES:
        found = engine.packages.get(name)
        if _public(found) != _public(paper.packages[name]):
            differences.append((name, found, paper.packages[name]))
    unchecked: list[str] = []
    if engine.cuda is None or paper.cuda is None:
        unchecked.append("cuda")
    elif _cuda_major_minor(engine.cuda) != _cuda_major_minor(paper.cuda):
        differences.append(("cuda", engine.cuda, paper.cuda))
    if engine.gpu is None:
        unchecked.append("gpu")
    return EngineRecord(engine, paper, tuple(differences), tuple(unchecked))


def engine_record(release: ReleaseRoot, *, probe: bool = False) -> EngineRecord:
    """This process's engine compared with the paper's (see the module docstring for the rule)."""
    return compare_to_paper(engine_versions(probe=probe), paper_engine(release))


def stored_drift(engine_doc: Mapping[str, Any] | None) -> str:
    """The drift message of an engine record read back from a header or summary (``""`` when matching).

    ``None`` (a file written before engines were recorded) gives ``engine not recorded``.
    """
    if not isinstance(engine_doc, Mapping):
        return "engine not recorded"
    diffs = engine_doc.get("differences") or []
    return describe_differences((d.get("name"), d.get("found"), d.get("paper")) for d in diffs
                                if isinstance(d, Mapping))


# -- the engine a generation ran on (response-file headers, run metadata, receipts) -----------------------------

#: Backends whose engine is this process's installed packages (the openai backend's engine is the server's).
LOCAL_BACKENDS = ("vllm", "hf")


def remote_vllm_version(base_url: str, *, timeout: float = 2.0) -> str | None:
    """The version a ``vllm serve`` endpoint reports at ``/version`` (None: not a vLLM server or unreachable)."""
    import http.client
    import json
    from urllib.parse import urlsplit

    parts = urlsplit(base_url.split(",")[0].strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    try:
        conn = cls(parts.hostname, parts.port, timeout=timeout)
        try:
            conn.request("GET", "/version")
            response = conn.getresponse()
            body = response.read(4096)
        finally:
            conn.close()
        if response.status != 200:
            return None
        version = json.loads(body).get("version")
        return version if isinstance(version, str) else None
    except (OSError, ValueError, AttributeError, http.client.HTTPException):
        return None


def generation_engine(release: ReleaseRoot, backend: str, *, base_url: str | None = None) -> dict[str, Any]:
    """The engine record of a generation with ``backend``, as stored in headers, run metadata and receipts.

    ``vllm``/``hf``: this process's packages (torch's CUDA build once torch is imported, the GPU name once CUDA
    is initialised: :func:`refresh_engine` fills them in later). ``openai``: the server's engine, known only as
    far as the endpoint says (``vllm serve`` reports its vllm version at ``/version``); torch, transformers and
    CUDA stay unchecked. A release whose pins cannot be read (a partial copy) gives a record with ``paper``
    None and ``matches_paper`` None, never an error: recording the engine must not stop a generation.
    """
    from trace_lib.errors import ReleaseFileError

    try:
        paper = paper_engine(release)
    except ReleaseFileError as exc:
        engine = engine_versions(probe=False)
        return _with_load_format({"schema": SCHEMA, **engine.to_json(), "paper": None, "matches_paper": None,
                                  "differences": [], "unchecked": ["paper"], "paper_unreadable": exc.render(),
                                  "gpu_matches_paper": None, "backend": backend})
    if backend in LOCAL_BACKENDS:
        record = compare_to_paper(engine_versions(probe=False), paper).to_json()
    else:
        remote = remote_vllm_version(base_url) if base_url else None
        packages = {name: None for name in ENGINE_PACKAGES}
        packages["vllm"] = remote
        differences = [] if remote is not None and _public(remote) == _public(paper.packages["vllm"]) else [
            ("vllm", remote, paper.packages["vllm"])]
        record = EngineRecord(EngineVersions(packages), paper, tuple(differences),
                              ("torch", "transformers", "cuda", "gpu")).to_json()
        if remote is None:
            record["differences"] = []
            record["matches_paper"] = None  # unknown: the endpoint did not say which engine it runs
            record["unchecked"] = ["vllm", "torch", "transformers", "cuda", "gpu"]
        record["endpoint"] = base_url
    record["backend"] = backend
    return _with_load_format(record)


#: vLLM's switch between its model runners; V2 draws a seeded request's noise per (seed, position) in a Triton
#: kernel, V1 from a per-request ``torch.Generator`` per step: the same seed gives other tokens on each.
MODEL_RUNNER_ENV = "VLLM_USE_V2_MODEL_RUNNER"


def model_runner_setting(environ: Mapping[str, str] | None = None) -> str:
    """The model runner this process's vLLM engines are told to use: ``v1``, ``v2``, ``vllm default`` (unset:
    V1 for Qwen2.5-VL in vLLM 0.24, V2 for Qwen3), or the variable's text when vLLM could not read it."""
    import os

    value = (os.environ if environ is None else environ).get(MODEL_RUNNER_ENV)
    if value is None:
        return "vllm default"
    try:
        return "v2" if int(value) else "v1"  # vLLM reads it as bool(int(value))
    except ValueError:
        return value


def _with_load_format(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` with the vllm backend's ``load_format`` (``TRACE_VLLM_LOAD_FORMAT``) and model runner
    (:func:`model_runner_setting`). Random weights (``dummy``) also set ``random_weights``, ``matches_paper``
    False and a ``weights`` difference, so the file they are stored in can never pass as a real run; the V2 model
    runner is a ``model_runner`` difference (the paper's vLLM 0.10.2 had only V1)."""
    from trace_lib import options

    if record.get("backend") != "vllm":
        return record
    load_format = options.VLLM_LOAD_FORMAT_ENV.read()
    record["load_format"] = load_format
    record["model_runner"] = runner = model_runner_setting()
    if runner == "v2":
        record["matches_paper"] = False if record.get("matches_paper") is not None else None
        record["differences"] = [*(record.get("differences") or []),
                                 {"name": "model_runner", "found": "v2", "paper": "v1"}]
    if load_format in options.RANDOM_WEIGHT_LOAD_FORMATS:
        record["random_weights"] = True
        record["matches_paper"] = False
        record["differences"] = [*(record.get("differences") or []),
                                 {"name": "weights", "found": f"random (load_format {load_format})",
                                  "paper": "the checkpoint's"}]
    return record


def random_weights(doc: Mapping[str, Any] | None) -> bool:
    """True when an engine record (a header's ``engine``) says the responses came from random weights."""
    from trace_lib import options

    return isinstance(doc, Mapping) and (doc.get("random_weights") is True
                                         or doc.get("load_format") in options.RANDOM_WEIGHT_LOAD_FORMATS)


def refresh_engine(doc: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """A local engine record with the facts learnt since it was made (CUDA build, GPU), compared again with
    the paper engine it carries; other records are returned unchanged."""
    if not isinstance(doc, Mapping) or doc.get("backend") not in LOCAL_BACKENDS or not isinstance(doc.get("paper"),
                                                                                               Mapping):
        return doc
    if doc.get("cuda") is not None and doc.get("gpu") is not None:
        return doc
    paper_doc = doc["paper"]
    paper = PaperEngine({n: paper_doc[n] for n in ENGINE_PACKAGES}, paper_doc.get("cuda"), paper_doc.get("gpu"))
    record = compare_to_paper(engine_versions(probe=False), paper).to_json()
    record["backend"] = doc["backend"]
    return _with_load_format(record)


def engine_drift_text(doc: Mapping[str, Any] | None) -> str:
    """What a verdict or summary says about a stored engine record ("" when it matches the paper's)."""
    if not isinstance(doc, Mapping):
        return "engine not recorded"
    if doc.get("paper") is None:
        return f"engine not compared with the paper's ({doc.get('paper_unreadable') or 'pins not readable'})"
    if doc.get("matches_paper") is None:
        return f"engine not known ({doc.get('backend', 'remote')} endpoint did not report its versions)"
    return stored_drift(doc)


#: Engine facts that make two generations of one slice incomparable (GPU model excluded: hardware, reported).
_RESUME_FIELDS = (*ENGINE_PACKAGES, "cuda", "backend", "load_format", "model_runner")


def engine_change(stored: Mapping[str, Any] | None, current: Mapping[str, Any] | None) -> list[tuple[str, Any, Any]]:
    """``(field, stored, current)`` for each engine fact that differs; facts unknown on either side are skipped,
    and so is everything when either record is absent (a file written before engines were recorded)."""
    if not isinstance(stored, Mapping) or not isinstance(current, Mapping):
        return []
    changes = []
    for name in _RESUME_FIELDS:
        a, b = stored.get(name), current.get(name)
        if a is None or b is None:
            continue
        if name == "cuda":
            a, b = _cuda_major_minor(a), _cuda_major_minor(b)
        if a != b:
            changes.append((name, stored.get(name), current.get(name)))
    return changes


def refuse_engine_change(stored: Mapping[str, Any] | None, current: Mapping[str, Any] | None, *, file: str,
                         field: str, hint: str) -> None:
    """Resuming stored responses on another engine is refused: the first :func:`engine_change`, in one line.

    Raises:
        InputError: ``file``: ``field.<fact>``: responses were generated on another engine (expected, found).
    """
    from trace_lib.errors import InputError

    changes = engine_change(stored, current)
    if changes:
        name, found, expected = changes[0]
        raise InputError("responses were generated on another engine", file=file, field=f"{field}.{name}",
                         expected=expected, found=found, hint=hint)


def read_stored_engine(path: Any) -> Mapping[str, Any] | None:
    """The ``engine`` record of a response file's header line (reads only that line; None if absent)."""
    import json

    try:
        with open(path, "rb") as handle:
            first = handle.readline()
        header = json.loads(first)
    except (OSError, ValueError):
        return None
    engine = header.get("engine") if isinstance(header, dict) else None
    return engine if isinstance(engine, Mapping) else None


def campaign_engine_line(docs: Mapping[str, Mapping[str, Any] | None]) -> str:
    """One line for a set of slices' engines (slice id -> record): matching, differing (per distinct message)
    or not recorded, with counts."""
    groups: dict[str, list[str]] = {}
    for slice_id, doc in docs.items():
        groups.setdefault(engine_drift_text(doc), []).append(slice_id)
    if not groups:
        return "engine: no response files"
    parts = []
    for text, ids in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        label = text or "matches the paper's pins"
        parts.append(f"{label} ({len(ids)}/{len(docs)} slices)")
    return "engine: " + "; ".join(parts)


def engine_properties(doc: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """JUnit receipt properties of a stored engine record: each version, the paper's, the match flag, the drift
    (and ``engine_random_weights`` for responses from random weights)."""
    if not isinstance(doc, Mapping):
        return [("engine_matches_paper", "unknown"), ("engine_drift", "engine not recorded")]
    props = [(f"engine_{k}", str(doc.get(k))) for k in (*ENGINE_PACKAGES, "cuda", "gpu", "backend")]
    paper = doc.get("paper") if isinstance(doc.get("paper"), Mapping) else {}
    props += [(f"paper_{k}", str(v)) for k, v in paper.items()]
    flag = doc.get("matches_paper")
    props.append(("engine_matches_paper", "unknown" if flag is None else str(bool(flag)).lower()))
    drift = engine_drift_text(doc)
    if drift:
        props.append(("engine_drift", drift))
    if random_weights(doc):  # TRACE_VLLM_LOAD_FORMAT=dummy: a benchmark's receipt, never a reproduction's
        props.append(("engine_random_weights", "true"))
    if doc.get("model_runner") is not None:
        props.append(("engine_model_runner", str(doc["model_runner"])))
    return props

"""Read a fetched archive: discover its runs, list slices, stream one slice's rows joined across the three configs.

Layout (see :mod:`trace_lib.archive.schema`): an *archive root* holds ``runs/<run_id>/`` directories (as in the Hub
repository and as ``trace-repro fetch-runs`` writes them); a run directory itself is accepted too. Each part is
checked against its content address (SHA-256 in its name and in ``metadata/manifest.json``) before any of its rows
is used. Memory is bounded by one slice: parts are read column-selected with pyarrow, one slice at a time.

API for other modules::

    archive = open_archive(root, run_id=None)          # ArchiveRoot (all runs under root, or the one named)
    key = archive.find(model_id, seed, benchmark_id)   # SliceKey (unknown ids: one line with close matches)
    archive.run_of(key)                                # the one run holding it (two runs: one-line UsageError)
    for row in archive.iter_slice(key): ...            # ArchiveRow, in dataset (source_ordinal) order
    archive.aggregate(key)                             # SliceAggregate from the scores part
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from trace_lib import options
from trace_lib.archive.schema import (
    CONFIG_NAMES, EXPORT_MANIFEST_VERSION, MANIFEST_PATH, READ_COLUMNS, RESULTS_PATH, ArchiveRow, PartRef,
    SliceAggregate, SliceKey,
)
from trace_lib.errors import InputError, UsageError
from trace_lib.jsonio import json_array, json_object
from trace_lib.release.load import sha256_file

#: Environment variable / flag naming a fetched archive (trace_lib.options.ARCHIVE_ROOT).
ARCHIVE_ENV = options.ARCHIVE_ROOT.env


class PartDigestError(InputError):
    """A part's bytes do not match its content address; nothing from it is used."""


def close_matches(word: str, choices: Sequence[str], n: int = 3) -> list[str]:
    """Up to ``n`` of ``choices`` closest to ``word`` (difflib), for "unknown id" messages."""
    return difflib.get_close_matches(word, list(choices), n=n, cutoff=0.75)  # only close ones: 'bogus' is no typo


def unknown_id_error(kind: str, word: str, choices: Sequence[str], *, field_name: str) -> UsageError:
    """One line: ``unknown <kind> 'x'; did you mean: a, b (known: N)``."""
    near = close_matches(str(word), sorted(set(choices)))
    hint = f"did you mean: {', '.join(near)}" if near else f"known: {', '.join(sorted(set(choices))[:12])}"
    return UsageError(f"unknown {kind} {word!r}", field=field_name, hint=hint)


def _load_json(path: Path) -> Any:
    """The archive file's JSON, read strictly (a FIFO never opened; NaN and repeated keys refused)."""
    from trace_lib.decoding import read_text  # a FIFO is refused, never opened
    from trace_lib.jsonio import loads_strict, strict_error

    try:
        return loads_strict(read_text(path))
    except FileNotFoundError:
        raise InputError("file missing from the archive", file=str(path),
                         hint="fetch it with 'trace-repro fetch-runs --dest DIR'") from None
    except OSError as exc:
        raise InputError(f"unreadable: {exc.strerror or exc}", file=str(path)) from None
    except ValueError as exc:
        raise InputError(f"unreadable JSON: {strict_error(exc)}", file=str(path)) from None


def verify_file(path: Path, expected_sha256: str, *, label: str | None = None,
                reason: str = "content hash mismatch; the file is not used") -> None:
    """Raise :class:`PartDigestError` (``reason``) naming the file and both hashes when ``path``'s bytes differ."""
    actual = sha256_file(path)
    if actual != expected_sha256:
        raise PartDigestError(reason, file=label or str(path), expected=expected_sha256, found=actual)


@dataclass
class ArchiveRun:
    """One run directory (``runs/<run_id>``): its manifest's parts by slice, results, run metadata."""

    root: Path
    manifest: Mapping[str, Any]
    parts: dict[SliceKey, dict[str, PartRef]] = field(default_factory=dict)

    @property
    def run_id(self) -> str:
        ids = json_array(self.manifest.get("run_ids") or [self.root.name], file=str(self.root / MANIFEST_PATH),
                         field="run_ids")
        return str(ids[0])

    @classmethod
    def open(cls, root: Path) -> ArchiveRun:
        """Parse ``root/metadata/manifest.json`` (strictly: schema, artifact fields)."""
        path = Path(root) / MANIFEST_PATH
        manifest = _load_json(path)
        if not isinstance(manifest, dict) or manifest.get("schema_version") != EXPORT_MANIFEST_VERSION:
            raise InputError("not a trace_eval export manifest", file=str(path), field="schema_version",
                             expected=EXPORT_MANIFEST_VERSION,
                             found=manifest.get("schema_version") if isinstance(manifest, dict) else None)
        run = cls(Path(root), manifest)
        for i, art in enumerate(json_array(manifest.get("artifacts", []), file=str(path), field="artifacts")):
            try:
                key = SliceKey(str(art["model_id"]), int(art["seed"]), str(art["benchmark_id"]))
                ref = PartRef(str(art["config_name"]), key, int(art["rows"]), str(art["parquet_path"]),
                              str(art["parquet_sha256"]), int(art["parquet_size"]), art.get("manifest_path"),
                              art.get("manifest_sha256"), art.get("manifest_size"))
            except (KeyError, TypeError, ValueError) as exc:
                raise InputError(f"malformed artifact entry ({type(exc).__name__}: {exc})", file=str(path),
                                 field=f"artifacts[{i}]") from None
            if ref.config_name not in CONFIG_NAMES:
                raise InputError("unknown config", file=str(path), field=f"artifacts[{i}].config_name",
                                 expected=list(CONFIG_NAMES), found=ref.config_name)
            run.parts.setdefault(key, {})[ref.config_name] = ref
        return run

    def results(self) -> Mapping[str, Any]:
        """``metadata/results/benchmark_scores.json`` of this run."""
        return _load_json(self.root / RESULTS_PATH)

    @property
    def manifest_sha256(self) -> str:
        """SHA-256 of this run's ``metadata/manifest.json`` bytes (what a release pins)."""
        return sha256_file(self.root / MANIFEST_PATH)

    def view(self) -> tuple[str, ...]:
        """The benchmarks this run covers, as its metadata says: ``metadata/suites/<suite_id>.json``
        ``benchmark_ids`` when the run lists that file, else the benchmarks of its parts (first-seen order)."""
        suite_id = self.manifest.get("suite_id")
        files = json_array(self.manifest.get("metadata_files", []), file=str(self.root / MANIFEST_PATH),
                           field="metadata_files")
        listed = {str(f.get("path")) for f in files if isinstance(f, dict)}
        rel = f"metadata/suites/{suite_id}.json"
        if suite_id and rel in listed and (self.root / rel).is_file():
            ids = json_object(_load_json(self.root / rel), file=str(self.root / rel)).get("benchmark_ids")
            if isinstance(ids, list) and ids:
                return tuple(str(b) for b in ids)
        return tuple(dict.fromkeys(k.benchmark_id for k in self.parts))

    def part_path(self, ref: PartRef) -> Path:
        return self.root / ref.path


@dataclass
class ArchiveRoot:
    """Every run under an archive root, indexed by slice (model, seed, benchmark)."""

    root: Path
    runs: tuple[ArchiveRun, ...]
    verify: bool = True  # check each part's SHA-256 before reading it
    _verified: set[str] = field(default_factory=set, repr=False)

    @property
    def is_run_dir(self) -> bool:
        """Whether ``root`` is one run directory (``root/metadata/manifest.json``), not a root holding ``runs/``."""
        return (self.root / MANIFEST_PATH).is_file()

    @property
    def fetch_dest(self) -> Path | None:
        """The ``fetch-runs --dest`` that completes this archive: the root itself, or for a run directory laid out
        as ``<dest>/runs/<run_id>`` its ``<dest>``; None for a run directory outside that layout."""
        if not self.is_run_dir:
            return self.root
        parent = self.root.resolve().parent
        return parent.parent if parent.name == "runs" else None

    @property
    def tree(self) -> Path:
        """The directory the archive occupies (never written into by a command that reads it): :attr:`fetch_dest`,
        else the run directory itself."""
        return self.fetch_dest or self.root

    def fetch_hint(self, key: SliceKey | None = None, *, select: str | None = None) -> str:
        """The command that fetches ``key``'s parts (or the ``select`` flags) into this archive; never ``--dest`` a
        run directory."""
        if select is None:
            assert key is not None
            select = f"--model-id {key.model_id} --seeds {key.seed} --benchmark {key.benchmark_id}"
        dest = self.fetch_dest
        if dest is None:
            return (f"{self.root} is a run directory outside a fetch-runs layout: fetch into an archive root with "
                    f"'trace-repro fetch-runs --dest DIR {select}' and pass DIR")
        return f"trace-repro fetch-runs --dest {dest} {select}"

    def slices(self) -> list[SliceKey]:
        """Every slice of every run, once each, in run then manifest order."""
        return list(dict.fromkeys(k for run in self.runs for k in run.parts))

    def run_of(self, key: SliceKey) -> ArchiveRun:
        """The one run holding ``key``.

        Raises:
            UsageError: no run holds it (close matches), or several do (name them; ``--run-id`` picks one).
        """
        holders = [run for run in self.runs if key in run.parts]
        if len(holders) == 1:
            return holders[0]
        if not holders:
            raise self._unknown(key)
        raise UsageError(f"slice {key.id} is held by {len(holders)} runs under {self.root}: "
                         f"{', '.join(r.run_id for r in holders)}", field="--run-id",
                         hint="pass --run-id to choose one")

    def _unknown(self, key: SliceKey) -> UsageError:
        keys = self.slices()
        models = sorted({k.model_id for k in keys})
        if key.model_id not in models:
            return unknown_id_error("model id", key.model_id, models, field_name="--model-id")
        benches = sorted({k.benchmark_id for k in keys if k.model_id == key.model_id})
        if key.benchmark_id not in benches:
            return unknown_id_error("benchmark", key.benchmark_id, benches, field_name="--benchmark")
        seeds = sorted({str(k.seed) for k in keys if k.model_id == key.model_id})
        return UsageError(f"seed {key.seed} not in the archive for {key.model_id}", field="--seeds",
                          hint=f"archived seeds: {', '.join(seeds)}")

    def find(self, model_id: str, seed: int, benchmark_id: str) -> SliceKey:
        """The slice key, or one-line UsageError with close matches for an unknown model/benchmark/seed."""
        key = SliceKey(model_id, int(seed), benchmark_id)
        self.run_of(key)
        return key

    def _part(self, key: SliceKey, config: str) -> tuple[PartRef, Path]:
        run = self.run_of(key)
        ref = run.parts[key].get(config)
        if ref is None:
            raise InputError(f"the archive lists no {config} part for slice {key.id}", file=str(run.root / MANIFEST_PATH))
        path = run.part_path(ref)
        if not path.is_file():
            raise InputError(f"{config} part not fetched for slice {key.id}", file=str(path),
                             hint=self.fetch_hint(key))
        if self.verify and ref.sha256 not in self._verified:
            verify_file(path, ref.sha256)
            self._verified.add(ref.sha256)
        return ref, path

    def _read(self, key: SliceKey, config: str, columns: Sequence[str]):  # noqa: ANN202 - pyarrow.Table
        import pyarrow.parquet as pq

        ref, path = self._part(key, config)
        try:
            table = pq.ParquetFile(path).read(columns=list(columns), use_threads=False)
        except Exception as exc:  # noqa: BLE001 - pyarrow raises many types for corrupt files
            raise InputError(f"unreadable Parquet part ({type(exc).__name__}: {exc})", file=str(path)) from None
        if table.num_rows != ref.rows:
            raise InputError("part row count differs from the manifest", file=str(path), expected=ref.rows,
                             found=table.num_rows)
        return table

    def aggregate(self, key: SliceKey) -> SliceAggregate:
        """The slice's aggregate score (percent) and evaluated rows, from its scores part."""
        table = self._read(key, "scores", ("score_scope", "score_value", "evaluated_rows"))
        scopes = table.column("score_scope").to_pylist()
        if "aggregate" not in scopes:
            raise InputError("scores part has no aggregate row", file=str(self._part(key, "scores")[1]))
        i = scopes.index("aggregate")
        scope = "row_and_aggregate" if "row" in scopes else "aggregate_only"
        return SliceAggregate(key, float(table.column("score_value")[i].as_py()),
                              int(table.column("evaluated_rows")[i].as_py()), scope)

    def iter_slice(self, key: SliceKey) -> Iterator[ArchiveRow]:
        """The slice's rows joined by ``sample_id`` across responses, extractions and scores, in response order.

        Raises:
            PartDigestError: a part's bytes differ from its content address (nothing from it is used).
            InputError: a part is missing/unreadable, or an extraction/score row links to no response.
        """
        responses = self._read(key, "responses", READ_COLUMNS["responses"])
        extractions = self._read(key, "extractions", READ_COLUMNS["extractions"])
        scores = self._read(key, "scores", READ_COLUMNS["scores"])
        ex = {name: extractions.column(name).to_pylist() for name in READ_COLUMNS["extractions"]}
        ex_at = {sid: j for j, sid in enumerate(ex["sample_id"])}
        sc = {name: scores.column(name).to_pylist() for name in READ_COLUMNS["scores"]}
        sc_at = {sid: j for j, (sid, scope) in enumerate(zip(sc["sample_id"], sc["score_scope"])) if scope == "row"}
        rs = {name: responses.column(name).to_pylist() for name in READ_COLUMNS["responses"]}
        known = set(rs["sample_id"])
        for config, linked in (("extractions", ex_at), ("scores", sc_at)):
            stray = next((s for s in linked if s not in known), None)
            if stray is not None:
                raise InputError(f"{config} row {stray} links to no response of slice {key.id}",
                                 file=str(self._part(key, config)[1]))
        for k in range(responses.num_rows):
            sid = rs["sample_id"][k]
            j = ex_at.get(sid)
            m = sc_at.get(sid)
            yield ArchiveRow(
                source_index=rs["source_index"][k], source_ordinal=rs["source_ordinal"][k], sample_id=sid,
                dataset_sha256=rs["dataset_sha256"][k], source_row_sha256=rs["source_row_sha256"][k],
                source_record_sha256=rs["source_record_sha256"][k], media_set_sha256=rs["media_set_sha256"][k],
                ordered_media_sha256=tuple(rs["ordered_media_sha256"][k] or ()),
                prompt_sha256=rs["prompt_sha256"][k], request_sha256=rs["request_sha256"][k],
                prompt_contract_sha256=rs["prompt_contract_sha256"][k], response_sha256=rs["response_sha256"][k],
                response_text=rs["response_text"][k], finish_reason=rs["finish_reason"][k],
                generation_settings_json=rs["generation_settings_json"][k], prompt_tokens=rs["prompt_tokens"][k],
                completion_tokens=rs["completion_tokens"][k],
                extraction_status=None if j is None else ex["extraction_status"][j],
                extraction_value_json=None if j is None else ex["extraction_value_json"][j],
                extraction_candidates_json=None if j is None else ex["extraction_candidates_json"][j],
                extraction_method=None if j is None else ex["extraction_method"][j],
                used_judge=False if j is None else bool(ex["used_judge"][j]),
                judge_output=None if j is None else ex["judge_output"][j],
                retry_count=0 if j is None else int(ex["retry_count"][j] or 0),
                has_row_score=m is not None,
                score_value=None if m is None else sc["score_value"][m],
                excluded=False if m is None else bool(sc["excluded"][m]),
            )


def open_archive(root: Path | str | None, *, verify: bool = True, run_id: str | None = None) -> ArchiveRoot:
    """All runs under ``root`` (``root/runs/*/metadata/manifest.json``, or ``root`` itself as one run); with
    ``run_id``, only that run.

    Raises:
        UsageError: no root given (flag / ``TRACE_ARCHIVE_ROOT``), no run under it, or no run ``run_id``.
        InputError: a run manifest is unreadable or malformed.
    """
    if not root:
        raise UsageError("no archive root given", field="--archive-root",
                         hint=f"pass --archive-root DIR or set {ARCHIVE_ENV} (fetch with 'trace-repro fetch-runs')")
    base = Path(root).expanduser()
    if (base / MANIFEST_PATH).is_file():
        dirs = [base]
    else:
        dirs = sorted(p.parent.parent for p in base.glob("runs/*/" + MANIFEST_PATH))
    if not dirs:
        raise UsageError("no archive run found", field="--archive-root", found=str(base),
                         hint="expected runs/<run_id>/metadata/manifest.json under it; fetch with "
                              "'trace-repro fetch-runs --dest DIR'")
    runs = tuple(ArchiveRun.open(d) for d in dirs)
    if run_id is not None:
        chosen = tuple(r for r in runs if r.run_id == run_id)
        if not chosen:
            raise unknown_id_error("run id", run_id, [r.run_id for r in runs], field_name="--run-id")
        runs = chosen
    return ArchiveRoot(base, runs, verify=verify)

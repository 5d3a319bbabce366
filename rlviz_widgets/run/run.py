"""Run: the log frames and queries of one training run, answered by DuckDB over the cache."""

from __future__ import annotations

import contextlib
import hashlib
import os

import pandas as pd

from rlviz_widgets import _problems as problemsmod
from rlviz_widgets._ingest.readers import READERS
from rlviz_widgets._ingest.readers.detect import detect
from rlviz_widgets._ingest.readers.rlb import DEFAULT_PAD_TOKEN
from rlviz_widgets._ingest.readers.selective import SelectiveReader
from rlviz_widgets._ingest.sources import absolute, source_key
from rlviz_widgets._mismatch import MismatchRule
from rlviz_widgets.run._queries import Frames
from rlviz_widgets.run._sync import FileSync
from rlviz_widgets.run._views import FileParts, RunViews
from rlviz_widgets.run.options import OpenOptions, mismatch_rule_option, warn_unused


def open_run(source, *, format: str = "auto", columns: dict[str, str] | None = None, tokenizer=None,
             pad_token: str | None = DEFAULT_PAD_TOKEN,
             system_prompt_end: str | None = None, max_samples_per_step: int | None = None,
             steps: tuple[int | None, int | None] | None = None, cache_dir: str | os.PathLike | None = None,
             progress: bool = True, mismatch_rule: MismatchRule | str | None = None) -> Run:
    """Open rollout logs: a folder (every log file below it), a file, a glob, or a list of these.

    ``format`` is ``"auto"`` (from the file names and first records), ``"rlb"`` (RL Logging
    Board schema), ``"verl"``, ``"trl"``, ``"openinstruct"``, ``"nemo"``, ``"chat"`` (OpenAI-chat ``messages``)
    or ``"columns"``.
    ``columns`` maps common names to the file's field names (``{"reward": "score"}``), for any
    other JSON-lines dump. ``tokenizer`` (anything with ``convert_ids_to_tokens`` or ``decode``)
    spells logged token ids; without one they are shown as ``#1234``.

    ``pad_token`` is stripped from displayed texts; prompt text before the last
    ``system_prompt_end`` marker is dropped; at most ``max_samples_per_step`` samples are
    kept per step (the first ones, in line order across rank files); ``steps=(lo, hi)``
    keeps an inclusive step range. With either, the lines they leave out are skipped unread
    where each line's step can be told from its bytes (``run.skipped_lines`` counts them; their
    problems go unreported). The columnar cache lives in ``cache_dir`` (default:
    ``$RLVIZ_CACHE_DIR`` or the user cache dir), never in the log folder. ``progress``: a progress bar
    (in a notebook, else in the terminal) when a first open takes more than half a second. ``mismatch_rule``: which
    trained tokens a rollout–trainer mismatch correction masks (a ``MismatchRule``, or a rule kind's name; default:
    TRL's ``sequence_mask``), for the mismatch columns of logs with both log-probs; ``run.mismatch_rule = ...``
    changes it later.
    """
    return Run.with_options(source, OpenOptions(
        format=format, columns=columns, tokenizer=tokenizer, pad_token=pad_token, system_prompt_end=system_prompt_end,
        max_samples_per_step=max_samples_per_step, steps=steps, cache_dir=cache_dir, progress=progress,
        mismatch_rule=mismatch_rule))


def _selective(reader, options: OpenOptions) -> SelectiveReader | None:
    """The reader that skips what a cap and a step range leave out, if any is set and the format allows it."""
    cap = options.cap()
    if (cap is None and options.steps == (None, None)) or reader.step_key() is None:
        return None
    return SelectiveReader(reader, cap, *options.whole_steps())


class Run(Frames):
    """A training run's rollout logs as lazy log frames (pandas out, DuckDB inside)."""

    def __init__(self, source, *, format: str = "auto", columns: dict[str, str] | None = None, tokenizer=None,
                 pad_token: str | None = DEFAULT_PAD_TOKEN,
                 system_prompt_end: str | None = None, max_samples_per_step: int | None = None,
                 steps: tuple[int | None, int | None] | None = None, cache_dir=None, progress: bool = True,
                 mismatch_rule: MismatchRule | str | None = None):
        self._start(source, OpenOptions(format=format, columns=columns, tokenizer=tokenizer, pad_token=pad_token,
                                        system_prompt_end=system_prompt_end,
                                        max_samples_per_step=max_samples_per_step, steps=steps,
                                        cache_dir=cache_dir, progress=progress, mismatch_rule=mismatch_rule))

    @classmethod
    def with_options(cls, source, options: OpenOptions) -> Run:
        """``Run(source, ...)`` with its options given as one ``OpenOptions``."""
        run = cls.__new__(cls)
        cls._start(run, source, options)  # (cls: the private method of this class, on the new instance)
        return run

    def _start(self, source, options: OpenOptions) -> None:
        self.options = options
        self.source = source = absolute(source)
        self.format = detect(source, options.columns) if options.format == "auto" else options.format
        self.pad_token = options.pad_token or None
        self.system_prompt_end = options.system_prompt_end or None
        self.max_samples_per_step = options.max_samples_per_step
        self.step_range = options.steps
        self.cache_root = options.cache_root()
        reader = READERS[self.format](columns=options.columns, tokenizer=options.tokenizer)
        # custom field key -> its samples column: kept for the next open of the same logs
        names_file = self.cache_root / "column_names" / (hashlib.sha1(
            f"{reader.name}\n{source_key(source)}".encode()).hexdigest()[:20] + ".json")
        files = FileParts()
        self._views = self._rel = RunViews(files, options, reader, self.cache_root, names_file, owner=self)
        try:
            # a cap or a range: files never read before are read through a reader that skips the lines left out
            self._files = FileSync(files, source, self.format, reader, _selective(reader, options), self.cache_root,
                                   self._views.cursors.future, options.progress)
            self._forget()
            self.generation = 0  # bumped whenever the data changes (new lines, new files)
            self._refresh(True)
        except BaseException:
            self._views.cursors.settle()
            raise

    @property
    def relations(self) -> RunViews:
        """What a ``RunSet`` reads this run through: its SQL, parts and token files (not a user API)."""
        return self._views

    @property
    def mismatch_rule(self) -> MismatchRule:
        """The rule the mismatch columns mask by (``masked_tokens``, ``rule_masked_tokens``, the tokens' ``masked``...).
        Set it to another (a ``MismatchRule`` or a kind's name) to have every figure worked out under it."""
        return self._views.rule

    @mismatch_rule.setter
    def mismatch_rule(self, rule: MismatchRule | str | None) -> None:
        rule = mismatch_rule_option(rule) or MismatchRule()
        if rule != self._views.rule:
            self._views.set_rule(rule)
            self.generation += 1

    @property
    def steps_in_progress(self) -> list[int]:
        """The steps whose files the format says are still being written (prime-rl: a step folder without its
        ``STABLE`` marker), as of now; their samples so far are in every frame."""
        check = getattr(self._views.reader, "being_written", None)
        if check is None:
            return []
        nos = [self._views.files.file_no[p] for p in self._views.files.states if check(p)]
        if not nos:
            return []
        return [s for (s,) in self._rel.execute(f"SELECT DISTINCT step FROM _nums WHERE file_no IN "
                                                 f"({', '.join(map(str, nos))}) ORDER BY step").fetchall()]

    @property
    def steps(self) -> pd.DataFrame:
        """One row per step (``Frames.steps``); for a format whose steps can be unfinished, ``in_progress``."""
        df = Frames.steps.fget(self)
        if getattr(self._views.reader, "being_written", None) is not None:
            df["in_progress"] = df["step"].isin(self.steps_in_progress)
        return df

    # -- reading ---------------------------------------------------------------------------
    def refresh(self) -> bool:
        """Read what was appended or added since the last read; True if anything changed (samples or problems)."""
        return self._refresh(False)

    def _refresh(self, first: bool) -> bool:
        views = self._views
        with contextlib.ExitStack() as held:
            renamed, old_pending = set(views.renamed()), self._views.files.pending
            out = self._files.sync(first, held)
            new_problems = out.new_problems + [p for p in views.renamed() if p not in renamed]
            if out.changed:  # before the views: a refresh that brings a field's numbers says where its lists were
                listed, views.listed = set(views.listed), views.listed_in()
                new_problems += [p for p in views.listed if p not in listed]
            pending = self._views.files.pending
            # an unfinished last line that appeared or went is news too (not its byte count growing: no rebuild)
            moved = {(p.file, p.line) for p in pending} != {(p.file, p.line) for p in old_pending}
            if out.changed or out.merged:
                with views.tokens.lock:  # new token files and the generation saying so: seen together (RunSet)
                    views.build()
                    self.generation += 1
            elif moved or new_problems:  # problems only (a new empty file): no rebuild, but news to a view
                self.generation += 1
            shown = views.problems() if first else new_problems + [p for p in pending if p not in old_pending]
            problemsmod.warn(shown)
            if first:
                warn_unused(self.options, self, views, views.problems())
            return out.changed or moved or bool(new_problems)

    def summary(self) -> str:
        """A few lines saying what the run holds."""
        steps = self.steps
        n = int(steps["samples"].sum()) if len(steps) else 0
        lines = [f"Run: {len(self._views.files.states)} file(s), {n} samples over {len(steps)} steps"
                 + (f" ({steps['step'].iloc[0]}..{steps['step'].iloc[-1]})" if len(steps) else "")]
        if len(steps):
            first, last = steps.iloc[0], steps.iloc[-1]
            def at(row, out: str) -> str:  # a step without the metric says so (it printed <NA>)
                if pd.isna(row[f"{out}_mean"]):
                    return f"{'none':>9} at step {int(row['step'])}"
                return f"{row[f'{out}_mean']:>9.4g} (std {row[f'{out}_std']:.3g}) at step {int(row['step'])}"

            for out in ("reward", "ref_reward", "kl", "length", "chars"):
                if pd.notna(first[f"{out}_mean"]) or pd.notna(last[f"{out}_mean"]):
                    lines.append(f"  {out:<10} mean {at(first, out)} -> {at(last, out)}")
        fields = self._views.token_fields()
        lines.append("  token arrays: " + (", ".join(fields) + f" (token metrics: {', '.join(self.token_metrics)})"
                                           if fields else "none (sample-level log)" if n else "none (no samples)"))
        probs = self._rel.problems()
        lines.append("  problems: " + (problemsmod.summarize(probs) if probs else "none"))
        if self.skipped_lines:
            lines.append(f"  lines skipped unread (past the per-step cap or out of the step range): "
                         f"{self.skipped_lines} (not checked for problems)")
        return "\n".join(lines)

"""Demo data: the bundled real logs, and a generated token-level run written once to the cache dir."""

from __future__ import annotations

from pathlib import Path

from rlviz_widgets._store.cache import default_cache_root
from rlviz_widgets._synth import write_log

DATA = Path(__file__).resolve().parent / "data"


def demo_log(folder: str | Path | None = None) -> Path:
    """A token-level PPO-like run (40 steps x 64 samples, 2 ranks), generated once."""
    folder = Path(folder) if folder else default_cache_root() / "demo-logs" / "ppo-run"
    if not any(folder.glob("*.jsonl")):
        write_log(folder, steps=40, samples_per_step=64, tokens=96, ranks=2, seed=7)
    return folder


def demo_grpo_log(folder: str | Path | None = None) -> Path:
    """A GRPO-like run (30 steps, 16 prompts x 8 responses each, 2 ranks), generated once."""
    folder = Path(folder) if folder else default_cache_root() / "demo-logs" / "grpo-run-2"  # -2: with solved groups
    if not any(folder.glob("*.jsonl")):
        write_log(folder, steps=30, samples_per_step=128, tokens=64, ranks=2, seed=11, group_size=8,
                  solved_every=5)
    return folder


def demo_sources(cache_dir: str | Path | None = None) -> list[Path]:
    """The bundled real sample-level log and the generated token-level one (written under ``cache_dir``, if
    given, else the default cache dir)."""
    folder = Path(cache_dir).expanduser() / "demo-logs" / "ppo-run" if cache_dir else None
    return [DATA / "rlb_eval_poem_task.jsonl", demo_log(folder)]

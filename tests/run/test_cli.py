"""``python -m rlviz_widgets``: a summary of each log given, or of the demo runs."""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import ROOT


def test_the_demo_run_goes_under_the_cache_dir_given(tmp_path):
    """With no logs and ``--cache-dir DIR``, the generated demo run is written under DIR: it went to the user cache
    dir whatever was given."""
    home, cache = tmp_path / "home", tmp_path / "cache"
    env = {k: v for k, v in os.environ.items() if k not in ("RLVIZ_CACHE_DIR", "XDG_CACHE_HOME")}
    env.update(HOME=str(home), XDG_CACHE_HOME=str(home / ".cache"))
    out = subprocess.run([sys.executable, "-m", "rlviz_widgets", "--cache-dir", str(cache)], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "3000 samples over 24 steps" in out.stdout and "2560 samples over 40 steps" in out.stdout
    assert sorted(p.name for p in (cache / "demo-logs" / "ppo-run").glob("*.jsonl")) == \
        ["rollout_rank0.jsonl", "rollout_rank1.jsonl"]
    assert not home.exists()  # nothing written to the user cache dir


def test_a_cap_and_a_step_range_from_the_shell(tmp_path):
    """``--max-samples-per-step`` and ``--steps`` reach ``open_run``: the summary says what was kept and skipped."""
    cmd = [sys.executable, "-m", "rlviz_widgets", str(ROOT / "rlviz_widgets" / "data" / "rlb_eval_poem_task.jsonl"),
           "--cache-dir", str(tmp_path / "cache"), "--max-samples-per-step", "5", "--steps", "100:300"]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "15 samples over 3 steps (100..300)" in out.stdout
    assert "lines skipped unread (past the per-step cap or out of the step range): 2985" in out.stdout
    bad = subprocess.run(cmd[:-1] + ["100-300"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and "steps as LO:HI" in bad.stderr


def test_a_missing_path_or_a_bad_option_is_one_line_not_a_traceback(tmp_path):
    base = [sys.executable, "-m", "rlviz_widgets", "--cache-dir", str(tmp_path / "cache")]
    poem = str(ROOT / "rlviz_widgets" / "data" / "rlb_eval_poem_task.jsonl")
    for args, said in (([str(tmp_path / "nope")], f"log path does not exist: {tmp_path / 'nope'}"),
                       ([poem, "--max-samples-per-step", "0"], "max_samples_per_step must be at least 1")):
        out = subprocess.run(base + args, cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert out.returncode == 2 and said in out.stderr and "Traceback" not in out.stderr, out.stderr


def test_problems_are_said_once_in_the_summary_not_again_as_a_warning(tmp_path):
    """The summary's problems line says what a LogWarning would: the warning is not printed on top of it."""
    log = tmp_path / "logs" / "r.jsonl"
    log.parent.mkdir()
    good = (ROOT / "rlviz_widgets" / "data" / "rlb_eval_poem_task.jsonl").read_bytes().splitlines(keepends=True)
    log.write_bytes(b"".join(good[:3]) + b"not json\n" + b"".join(good[3:6]))
    out = subprocess.run([sys.executable, "-m", "rlviz_widgets", str(log), "--cache-dir", str(tmp_path / "cache")],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "6 samples" in out.stdout and "malformed json" in out.stdout.lower() and ":4" in out.stdout
    assert "LogWarning" not in out.stderr and "problem(s)" not in out.stderr, out.stderr


def test_no_samples_is_exit_1_and_odd_flags_are_said(tmp_path):
    """A file that is no JSON lines (a README) gave "0 samples" and exit 0; --dry-run without --prune-cache was
    ignored and the summary printed; there was no way to give the format or the pad token."""
    base = [sys.executable, "-m", "rlviz_widgets", "--cache-dir", str(tmp_path / "cache")]
    notes = tmp_path / "notes" / "README.md"
    notes.parent.mkdir()
    notes.write_text("# Notes\n\nnot a log\n")
    out = subprocess.run(base + [str(notes)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 1 and "0 samples" in out.stdout and "malformed json" in out.stdout
    assert f"no samples read from {notes}" in out.stderr
    poem = str(ROOT / "rlviz_widgets" / "data" / "rlb_eval_poem_task.jsonl")
    out = subprocess.run(base + [poem, "--steps", "5000:6000"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 1 and out.stderr.splitlines()[0] == (  # in our words, not at <frozen runpy>'s line
        "python -m rlviz_widgets: warning: steps=(5000, 6000) keeps no sample of these logs (3000 samples of other "
        "steps)")
    out = subprocess.run(base + ["--dry-run"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 2 and "--dry-run goes with --prune-cache" in out.stderr and "==" not in out.stdout
    log = tmp_path / "logs" / "r.jsonl"
    log.parent.mkdir()
    log.write_text('{"step": 0, "prompt": "p", "response": "a[pad][pad]", "reward": 1.0}\n')
    out = subprocess.run(base + [str(log), "--format", "rlb", "--pad-token", "[pad]"], cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0 and "1 samples over 1 steps" in out.stdout and "chars      mean         1" in out.stdout
    out = subprocess.run(base + [str(log), "--format", "verl"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and "no input: left empty" in out.stdout  # read as verl's dump (input, output...)


def test_output_piped_into_head_is_no_error(tmp_path):
    """``python -m rlviz_widgets LOGS | head`` ended in a BrokenPipeError traceback."""
    poem = str(ROOT / "rlviz_widgets" / "data" / "rlb_eval_poem_task.jsonl")
    proc = subprocess.Popen([sys.executable, "-m", "rlviz_widgets", "--cache-dir", str(tmp_path / "cache")]
                            + [poem] * 60, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout.readline().startswith(b"== ")
    proc.stdout.close()  # as head does once it has its lines
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=300) == 0 and "Traceback" not in err and "BrokenPipe" not in err, err


def test_the_problems_flag_lists_every_problem_and_the_summary_points_to_it(tmp_path):
    """The CLI said "See run.problems for every one": a terminal has no ``run``. It points to ``--problems``, which
    prints the table (file, line, kind, message)."""
    log = tmp_path / "logs" / "r.jsonl"
    log.parent.mkdir()
    good = (ROOT / "rlviz_widgets" / "data" / "rlb_eval_poem_task.jsonl").read_bytes().splitlines(keepends=True)
    log.write_bytes(b"".join(good[:3]) + b"not json\n" + b"".join(good[3:6]) + b"\n")
    base = [sys.executable, "-m", "rlviz_widgets", str(log), "--cache-dir", str(tmp_path / "cache")]
    out = subprocess.run(base, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "run.problems" not in out.stdout and "python -m rlviz_widgets --problems" in out.stdout
    out = subprocess.run(base + ["--problems"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    table = out.stdout.split("problems of ")[1].splitlines()
    assert table[1].split() == ["file", "line", "kind", "message"], table
    assert [ln.split()[1:3] for ln in table[2:4]] == [["4", "malformed_json"], ["8", "empty_line"]], table


def test_problems_as_text_cut_long_messages():
    from rlviz_widgets._problems import Problem, problems_frame, problems_text

    frame = problems_frame([Problem("/logs/a.jsonl", 3, "wrong_type", "x" * 500), Problem("/logs/b.jsonl", 0,
                                                                                         "empty_file", "empty")])
    text = problems_text(frame, width=60)
    assert max(map(len, text.splitlines())) < 120 and "x" * 61 not in text and "x" * 60 + "…" in text
    assert "/logs/b.jsonl" in text and "empty_file" in text
    assert problems_text(problems_frame([])) == "no problems"

"""A first open that takes more than a moment shows files and bytes done; a fast one shows nothing."""

from __future__ import annotations

import rlviz_widgets as rw
from rlviz_widgets import _progress as progress
from rlviz_widgets._synth import write_log


def test_a_slow_open_shows_files_and_bytes(tmp_path, capsys, monkeypatch):
    write_log(tmp_path / "logs", steps=3, samples_per_step=8, tokens=16, ranks=2)
    real = progress.Progress.__init__

    def immediate(self, total_bytes, files, enabled=True, delay=0.5):  # as if reading were slow
        real(self, total_bytes, files, enabled, delay=0)
        self.bar.mininterval = 0  # and print every update

    monkeypatch.setattr(progress.Progress, "__init__", immediate)
    rw.open_run(tmp_path / "logs", cache_dir=tmp_path / "cache")
    err = capsys.readouterr().err
    assert "reading logs" in err and "files 0/2" in err and "/40.9k" in err  # bytes of 2 files, files done
    assert "files 2/2" in err  # the last file shown done too (it said 1/2 to the end)


def test_a_fast_open_prints_nothing(tmp_path, capsys):
    write_log(tmp_path / "logs", steps=2, samples_per_step=4, tokens=8, ranks=1)
    rw.open_run(tmp_path / "logs", cache_dir=tmp_path / "cache")
    assert "reading logs" not in capsys.readouterr().err

"""Progress of a first (slow) open: a bar in the notebook, a plain one in a terminal."""

from __future__ import annotations


class Progress:
    """Bytes and files done; appears only if reading takes more than ``delay`` seconds."""

    def __init__(self, total_bytes: int, files: int, enabled: bool = True, delay: float = 0.5):
        self.bar = None
        self.files, self.done_files = files, 0
        if enabled and total_bytes > 0:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total_bytes, unit="B", unit_scale=True, unit_divisor=1024,
                            desc="reading logs", delay=delay, leave=False)
            self.bar.set_postfix_str(f"files 0/{files}", refresh=False)

    def bytes(self, n: int) -> None:
        if self.bar is not None:
            self.bar.update(n)

    def file_done(self) -> None:
        self.done_files += 1
        if self.bar is not None:
            # redrawn with the bytes (not per file: many small files), and once all are done if the bar is up
            # (a forced redraw would show a bar its delay keeps hidden)
            shown = getattr(self.bar, "last_print_t", 0) >= getattr(self.bar, "start_t", 0) + self.bar.delay
            self.bar.set_postfix_str(f"files {self.done_files}/{self.files}",
                                     refresh=shown and self.done_files == self.files)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


class Discovery:
    """Folders walked and log files found while a source is searched; appears only if that takes more than
    ``delay`` seconds (a link to a big tree: the user sees the walk and can stop it)."""

    def __init__(self, enabled: bool = True, delay: float = 0.5):
        self.bar = None
        self.folders = self.files = 0
        if enabled:
            from tqdm.auto import tqdm

            self.bar = tqdm(unit=" folders", desc="finding logs", delay=delay, leave=False)

    def folder(self) -> None:
        self.folders += 1
        if self.bar is not None:
            self.bar.set_postfix_str(f"{self.files} files found", refresh=False)
            self.bar.update(1)

    def file(self) -> None:
        self.files += 1

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()

"""Build hook: compiles ``rlviz_widgets/_ingest/native/*.c`` (the cold open's array reader and byte finder) into
the wheel.

Without a C compiler, or when it fails, the wheel is built without it (with a warning): the package then reads
those arrays through DuckDB, only slower. ``CC`` names the compiler; ``RLVIZ_NO_NATIVE=1`` skips it.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

SOURCES = "rlviz_widgets/_ingest/native"  # every .c file in it, into one library
LIBRARY = "rlviz_widgets/_ingest/native/_arrays.so"  # the name rlviz_widgets._ingest.native loads (on every platform)


class NativeBuildHook(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict) -> None:
        if self.target_name != "wheel":
            return
        root = Path(self.root)
        # an editable install imports the package from this folder: the library goes next to its source; a wheel
        # gets one built apart (the checkout's own stays as it is)
        editable = version == "editable"
        self._tmp = None if editable else tempfile.mkdtemp(prefix="rlviz-native-")
        out = root / LIBRARY if editable else Path(self._tmp) / "_arrays.so"
        if editable:
            out.unlink(missing_ok=True)  # never one built from an older source
        cc = os.environ.get("CC") or next((c for c in ("cc", "gcc", "clang") if shutil.which(c)), None)
        if os.environ.get("RLVIZ_NO_NATIVE") or cc is None:
            print("rlviz_widgets: no C compiler (or RLVIZ_NO_NATIVE set): built without the native array reader; "
                  "cold opens are slower", file=sys.stderr)
            return
        sources = sorted(str(p) for p in (root / SOURCES).glob("*.c"))
        cmd = [*shlex.split(cc), "-O2", "-fPIC", "-shared", "-o", str(out), *sources]  # CC="gcc -m64"
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True)
            failed = proc.stderr if proc.returncode != 0 else None
        except OSError as e:  # a CC that is not there
            failed = str(e)
        if failed is not None:
            print(f"rlviz_widgets: {' '.join(cmd)} failed, built without the native array reader:\n{failed}",
                  file=sys.stderr)
            out.unlink(missing_ok=True)
            return
        if editable:
            build_data["artifacts"].append(LIBRARY)
        else:
            build_data["force_include"][str(out)] = LIBRARY
        build_data["pure_python"] = False  # a platform wheel: the library is machine code
        build_data["infer_tag"] = True

    def finalize(self, version: str, build_data: dict, artifact_path: str) -> None:
        if getattr(self, "_tmp", None):
            shutil.rmtree(self._tmp, ignore_errors=True)

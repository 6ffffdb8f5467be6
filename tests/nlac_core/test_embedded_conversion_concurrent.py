"""Processes that start at once on a fresh machine convert the embedded model once, and none breaks another.

Before the lock, a web server, a worker and a bench starting together each converted the GGUF file and
replaced the directory the others had just written (one crashed in ``rmtree`` on a file another removed).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = """
import json, os, sys
from pathlib import Path
from nlac_core.backends.embedded import ensure_embedded_model
path = ensure_embedded_model(Path(sys.argv[1]))
print(json.dumps({"path": str(path), "inode": os.stat(path).st_ino}))
"""


def test_it_converts_once_when_two_processes_start_together(tmp_path):
    root = tmp_path / "models"
    procs = [
        subprocess.Popen([sys.executable, "-c", SCRIPT, str(root)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, cwd=Path(__file__).resolve().parents[2])
        for _ in range(2)
    ]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-2000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    # Both got the same directory, and the second did not replace what the first returned.
    assert results[0] == results[1]
    target = Path(results[0]["path"])
    assert (target / "config.json").is_file() and (target / "model.safetensors").is_file()
    assert json.loads((target / "nlac_manifest.json").read_text())["name"] == "smollm2-135m-instruct"
    # No half-written temporary directory is left beside it.
    assert sorted(p.name for p in root.iterdir() if p.is_dir()) == ["smollm2-135m-instruct"]

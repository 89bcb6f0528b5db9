"""A worker of a sharded ingest that really dies (SIGKILL) holding its claims."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

_ROOT = str(Path(__file__).resolve().parents[2])
_DIE_HOLDING = """
import os, signal, sys
from pathlib import Path
from hylo_analytics.ingest._claims import Claims
claims = Claims(Path(sys.argv[1]), sys.argv[2], lease=60)
worker = claims.join()
print(" ".join(claims.claim(worker, files=int(sys.argv[3]), size=1 << 30)), flush=True)
os.kill(os.getpid(), signal.SIGKILL)  # dies holding them, as a worker whose parser crashed
"""


def die_holding(root: Path, job: str, files: int = 3) -> list[str]:
    """A real worker process that claims up to ``files`` files and is killed holding them."""
    done = subprocess.run(
        [sys.executable, "-c", _DIE_HOLDING, str(root), job, str(files)],
        env={**os.environ, "PYTHONPATH": _ROOT},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == -9, done.stderr
    return done.stdout.split()

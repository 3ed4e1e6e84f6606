"""What the benchmark scripts share: the model builders of fiamma-nn's tests."""

import sys
from pathlib import Path


def nn_models():
    """The model builders shared with fiamma-nn's tests (one source for both frameworks)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "packages" / "nn" / "tests"))
    try:
        import nn_models
    finally:
        sys.path.pop(0)
    return nn_models

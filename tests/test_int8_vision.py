"""torchvision's int8 quantizable models (random weights, converted by torch) load into
fiamma.vision's ``quantize=True`` models and give the same int8 outputs."""
import io
import warnings

import numpy as np
import pytest

import fiamma


@pytest.mark.parity
@pytest.mark.slow
@pytest.mark.parametrize("name,size", [("resnet18", 64), ("mobilenet_v2", 64),
                                       ("shufflenet_v2_x0_5", 64), ("googlenet", 64),
                                       ("inception_v3", 96)])
def test_quantized_model_loads_torch_int8_checkpoint(tmp_path, name, size):
    torch = pytest.importorskip("torch")
    tvq = pytest.importorskip("torchvision.models.quantization")
    import fiamma.vision.models.quantization as fvq
    warnings.filterwarnings("ignore")
    old = torch.backends.quantized.engine
    try:
        torch.manual_seed(0)
        tm = getattr(tvq, name)(quantize=True).eval()
        buf = io.BytesIO()
        torch.save(tm.state_dict(), buf)
        path = tmp_path / f"{name}_int8.pth"
        path.write_bytes(buf.getvalue())
        fm = getattr(fvq, name)(quantize=True, weights=str(path))
        assert sorted(fm.state_dict()) == sorted(tm.state_dict())
        x = torch.rand(2, 3, size, size)
        to = tm(x).numpy()
        fo = fm(fiamma.tensor(x.numpy())).numpy()
        fc = [m for m in tm.modules() if type(m).__name__ == "Linear"][-1]
        quanta = np.abs(to - fo) / float(fc.scale)
        assert quanta.max() <= 1.01 and (quanta < 0.5).mean() > 0.99
    finally:
        torch.backends.quantized.engine = old

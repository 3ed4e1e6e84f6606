"""torchvision's int8 ResNet-18 (random weights, converted by torch) loads into
fiamma.vision's ``quantize=True`` model and gives the same int8 outputs."""
import io
import warnings

import numpy as np
import pytest

import fiamma


@pytest.mark.parity
def test_quantized_resnet18_loads_torch_int8_checkpoint(tmp_path):
    torch = pytest.importorskip("torch")
    tvq = pytest.importorskip("torchvision.models.quantization")
    import fiamma.vision.models.quantization as fvq
    warnings.filterwarnings("ignore")
    torch.manual_seed(0)
    tm = tvq.resnet18(quantize=True)
    buf = io.BytesIO()
    torch.save(tm.state_dict(), buf)
    path = tmp_path / "resnet18_int8.pth"
    path.write_bytes(buf.getvalue())
    fm = fvq.resnet18(quantize=True, weights=str(path))
    assert type(fm.layer1[0].conv1).__name__ == "ConvReLU2d"
    x = torch.rand(2, 3, 64, 64)
    to = tm(x).numpy()
    fo = fm(fiamma.tensor(x.numpy())).numpy()
    quanta = np.abs(to - fo) / float(tm.fc.scale)
    assert quanta.max() <= 1.01 and (quanta < 0.5).mean() > 0.99

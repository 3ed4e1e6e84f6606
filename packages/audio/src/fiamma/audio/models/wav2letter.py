"""Wav2Letter (Collobert et al., 2016): a fully convolutional acoustic model giving per-frame
class log-probabilities. Module and parameter names follow torchaudio.models.Wav2Letter."""

from fiamma import nn
from fiamma.audio.models._checks import check_input

__all__ = ["Wav2Letter"]

# (in, out, kernel, stride, padding) of the acoustic stack after its first layer
_HIDDEN = [(250, 250, 7, 1, 3)] * 7 + [(250, 2000, 32, 1, 16), (2000, 2000, 1, 1, 0)]


def _conv_relu_stack(specs):
    layers = []
    for cin, cout, k, s, p in specs:
        layers += [nn.Conv1d(cin, cout, kernel_size=k, stride=s, padding=p), nn.ReLU(inplace=True)]
    return nn.Sequential(*layers)


class Wav2Letter(nn.Module):
    """Wav2Letter acoustic model.

    Args:
        num_classes: output classes (default 40).
        input_type: ``"waveform"``, ``"power_spectrum"`` or ``"mfcc"``. A waveform goes first
            through a (kernel 250, stride 160) convolution to 250 channels.
        num_features: input channels (default 1).

    ``forward(x)``: (batch, num_features, time) -> (batch, num_classes, frames) log-probabilities
    over dim 1.
    """

    def __init__(self, num_classes: int = 40, input_type: str = "waveform",
                 num_features: int = 1) -> None:
        super().__init__()
        if input_type not in ("waveform", "power_spectrum", "mfcc"):
            raise ValueError("Wav2Letter: input_type must be 'waveform', 'power_spectrum' or "
                             f"'mfcc', got {input_type!r}")
        self.num_features = num_features
        first_in = 250 if input_type == "waveform" else num_features
        acoustic = _conv_relu_stack([(first_in, 250, 48, 2, 23)] + _HIDDEN
                                    + [(2000, num_classes, 1, 1, 0)])
        if input_type == "waveform":
            front = _conv_relu_stack([(num_features, 250, 250, 160, 45)])
            self.acoustic_model = nn.Sequential(front, acoustic)
        else:
            self.acoustic_model = acoustic

    def forward(self, x):
        check_input("Wav2Letter", x, 3, "(batch, num_features, time)", {1: self.num_features})
        return nn.functional.log_softmax(self.acoustic_model(x), dim=1)

"""Speech recognition with a pretrained wav2vec 2.0 model, written for PyTorch/torchaudio in the
style of torchaudio's "Speech Recognition with Wav2Vec2" tutorial: bundle -> model -> acoustic
features and label emissions -> greedy CTC transcript.

Run it on fiamma unmodified:

    python -m fiamma.run examples/speech_recognition_wav2vec2.py speech.wav

The weights are torchaudio's WAV2VEC2_ASR_BASE_960H checkpoint
(wav2vec2_fairseq_base_ls960_asr_ls960.pth, 360 MB): it is downloaded on first use into
$FIAMMA_HOME/hub/checkpoints (~/.cache/fiamma by default); without a network, put the file
there by hand.
"""

import sys

import torch
import torchaudio


class GreedyCTCDecoder(torch.nn.Module):
    """Best path decoding: the most likely label per frame, repeats merged, blanks dropped."""

    def __init__(self, labels, blank=0):
        super().__init__()
        self.labels = labels
        self.blank = blank

    def forward(self, emission: torch.Tensor) -> str:
        indices = torch.argmax(emission, dim=-1)          # (frame,)
        indices = torch.unique_consecutive(indices, dim=-1)
        return "".join(self.labels[i] for i in indices if i != self.blank)


def main(path):
    torch.random.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    bundle = torchaudio.pipelines.WAV2VEC2_ASR_BASE_960H
    print("Sample Rate:", bundle.sample_rate)
    print("Labels:", bundle.get_labels())
    model = bundle.get_model().to(device)

    waveform, sample_rate = torchaudio.load(path)
    waveform = waveform[:1].to(device)                    # first channel, as a batch of one
    if sample_rate != bundle.sample_rate:
        waveform = torchaudio.functional.resample(waveform, sample_rate, bundle.sample_rate)

    with torch.inference_mode():
        features, _ = model.extract_features(waveform)
    print(f"Features: {len(features)} layers of {tuple(features[0].shape)}")

    with torch.inference_mode():
        emission, _ = model(waveform)
    print("Emission:", tuple(emission.shape))

    transcript = GreedyCTCDecoder(labels=bundle.get_labels())(emission[0])
    print("Transcript:", transcript.replace("|", " ").strip())


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: speech_recognition_wav2vec2.py AUDIO_FILE")
    main(sys.argv[1])

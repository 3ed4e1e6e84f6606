"""SQUIM subjective: a MOS estimator that compares speech with any clean (non-matching)
reference (torchaudio.models.SquimSubjective, after NORESQA-MOS; Manocha & Kumar, 2022).

Both signals go through a wav2vec 2.0 model (its last transformer layer's features), a shared
linear projection, then attention pooling over time of the concatenated pair predicts a
distribution over 0..4 "points below the reference"; the score is 5 minus its mean.
"""

import fiamma
from fiamma import nn
from fiamma.nn import functional as F

__all__ = ["SquimSubjective", "squim_subjective_model", "squim_subjective_base"]


class AttPool(nn.Module):
    """(batch, time, input_dim) -> (batch, att_dim): a softmax over time of a learnt score
    weights the frames; the pooled vector goes through a linear layer."""

    def __init__(self, input_dim, att_dim):
        super().__init__()
        self.linear1 = nn.Linear(input_dim, 1)
        self.linear2 = nn.Linear(input_dim, att_dim)

    def forward(self, x):
        weights = F.softmax(self.linear1(x).transpose(1, 2), dim=2)    # (batch, 1, time)
        return self.linear2(fiamma.matmul(weights, x).squeeze(1))


class Predictor(nn.Module):
    """(batch, time, input_dim) -> (batch,): the expected value of a softmax over ``att_dim``
    evenly spaced levels from 0 to 4."""

    def __init__(self, input_dim, att_dim):
        super().__init__()
        self.att_pool_layer = AttPool(input_dim, att_dim)
        self.att_dim = att_dim

    def forward(self, x):
        probs = F.softmax(self.att_pool_layer(x), dim=1)
        levels = fiamma.linspace(0, 4, steps=self.att_dim, device=probs.device,
                                 dtype=probs.dtype)
        return (probs * levels).sum(dim=1)


class SquimSubjective(nn.Module):
    """SQUIM subjective model: ``forward(waveform, reference)``, both (batch, time) 16 kHz
    speech (the reference is any clean speech, repeated or cut to the waveform's length),
    returns (batch,) MOS estimates."""

    def __init__(self, ssl_model, projector, predictor):
        super().__init__()
        self.ssl_model = ssl_model
        self.projector = projector
        self.predictor = predictor

    def _align_shapes(self, waveform, reference):
        """Tile the reference until it is at least as long as the waveform, then cut it."""
        length = waveform.shape[-1]
        if reference.shape[-1] < length:
            repeats = length // reference.shape[-1] + 1
            reference = fiamma.cat([reference] * repeats, dim=1)
        return waveform, reference[:, :length]

    def _features(self, x):
        return self.projector(self.ssl_model.extract_features(x)[0][-1])

    def forward(self, waveform, reference):
        for name, t in (("waveform", waveform), ("reference", reference)):
            if t.ndim != 2:
                raise ValueError(f"SquimSubjective: expected a 2-D {name} (batch, time), got "
                                 f"shape {list(t.shape)}")
        if reference.shape[0] != waveform.shape[0]:
            raise ValueError("SquimSubjective: waveform and reference must have the same batch "
                             f"size, got {waveform.shape[0]} and {reference.shape[0]}")
        if reference.shape[1] == 0:
            raise ValueError("SquimSubjective: the reference is empty (shape "
                             f"{list(reference.shape)})")
        waveform, reference = self._align_shapes(waveform, reference)
        pair = fiamma.cat((self._features(reference), self._features(waveform)), dim=2)
        return 5 - self.predictor(pair)


def squim_subjective_model(ssl_type, feat_dim, proj_dim, att_dim):
    """A :class:`SquimSubjective` on ``fiamma.audio.models.<ssl_type>()`` (e.g.
    ``"wav2vec2_base"``, ``"wav2vec2_large"``) whose features have ``feat_dim`` channels."""
    from fiamma.audio.models import wav2vec2

    factory = getattr(wav2vec2, ssl_type, None) if isinstance(ssl_type, str) else None
    if factory is None or not callable(factory) or ssl_type.startswith("_"):
        raise ValueError("squim_subjective_model: ssl_type must name a wav2vec 2.0 family "
                         f"builder such as 'wav2vec2_base', got {ssl_type!r}")
    ssl_model = factory()
    projector = nn.Linear(feat_dim, proj_dim)
    predictor = Predictor(2 * proj_dim, att_dim)
    return SquimSubjective(ssl_model, projector, predictor)


def squim_subjective_base():
    """The published size: wav2vec2_base features (768) projected to 32, 5 levels."""
    return squim_subjective_model(ssl_type="wav2vec2_base", feat_dim=768, proj_dim=32,
                                  att_dim=5)

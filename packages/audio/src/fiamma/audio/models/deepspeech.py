"""DeepSpeech (Hannun et al., 2014): three clipped-ReLU dense layers, a bidirectional ReLU RNN
whose two directions are summed, a dense layer and a classifier. Names follow
torchaudio.models.DeepSpeech."""

from fiamma import nn
from fiamma.audio.models._checks import check_input

__all__ = ["DeepSpeech"]


class FullyConnected(nn.Module):
    """Linear, then ReLU clipped at ``relu_max_clip``, then dropout."""

    def __init__(self, n_feature: int, n_hidden: int, dropout: float,
                 relu_max_clip: int = 20) -> None:
        super().__init__()
        self.fc = nn.Linear(n_feature, n_hidden, bias=True)
        self.relu_max_clip = relu_max_clip
        self.dropout = dropout

    def forward(self, x):
        F = nn.functional
        x = F.hardtanh(F.relu(self.fc(x)), 0, self.relu_max_clip)
        if self.dropout:
            x = F.dropout(x, self.dropout, self.training)
        return x


class DeepSpeech(nn.Module):
    """DeepSpeech.

    Args:
        n_feature: input features per frame.
        n_hidden: hidden size (default 2048).
        n_class: output classes (default 40).
        dropout: dropout after each dense layer (default 0).

    ``forward(x)``: (batch, 1, time, n_feature) -> (batch, time, n_class) log-probabilities.
    """

    def __init__(self, n_feature: int, n_hidden: int = 2048, n_class: int = 40,
                 dropout: float = 0.0) -> None:
        super().__init__()
        self.n_hidden = n_hidden
        self.fc1 = FullyConnected(n_feature, n_hidden, dropout)
        self.fc2 = FullyConnected(n_hidden, n_hidden, dropout)
        self.fc3 = FullyConnected(n_hidden, n_hidden, dropout)
        self.bi_rnn = nn.RNN(n_hidden, n_hidden, num_layers=1, nonlinearity="relu",
                             bidirectional=True)
        self.fc4 = FullyConnected(n_hidden, n_hidden, dropout)
        self.out = nn.Linear(n_hidden, n_class)

    def forward(self, x):
        check_input("DeepSpeech", x, 4, "(batch, channel=1, time, n_feature)",
                    {1: 1, 3: self.fc1.fc.in_features})
        h = self.fc3(self.fc2(self.fc1(x)))
        h = h.squeeze(1).transpose(0, 1)           # (time, batch, hidden)
        h, _ = self.bi_rnn(h)
        h = h[..., :self.n_hidden] + h[..., self.n_hidden:]
        h = self.out(self.fc4(h)).permute(1, 0, 2)
        return nn.functional.log_softmax(h, dim=2)

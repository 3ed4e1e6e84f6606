"""Small models shared by the tests."""

import fiamma
import fiamma.nn as nn
import fiamma.nn.functional as F


class SmallCNN(nn.Module):
    """The digits CNN shape: conv-relu-pool twice, flatten, two linears."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(1, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.c2 = nn.Conv2d(8, 16, 3, padding=1)
        self.fc1 = nn.Linear(16 * 2 * 2, 32)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn(self.c1(x))), 2)
        x = F.max_pool2d(F.relu(self.c2(x)), 2)
        x = x.view(x.size(0), -1)
        return F.log_softmax(self.fc2(F.relu(self.fc1(x))), dim=1)


class MLP(nn.Module):
    def __init__(self, d=64):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d, 128), nn.GELU(), nn.Linear(128, 128), nn.Tanh(),
                                 nn.Linear(128, 10))

    def forward(self, x):
        return self.net(x)


class RNNLM(nn.Module):
    """word_language_model's shape: embedding, a recurrent stack, a decoder."""

    def __init__(self, kind, ntoken=50, ninp=16, nhid=24, nlayers=2):
        super().__init__()
        self.emb = nn.Embedding(ntoken, ninp)
        self.rnn = getattr(nn, kind)(ninp, nhid, nlayers)
        self.dec = nn.Linear(nhid, ntoken)

    def forward(self, ids):
        out, _ = self.rnn(self.emb(ids))
        return F.log_softmax(self.dec(out), dim=-1)


class BiLSTM(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(8, 6, 1, batch_first=True, bidirectional=True)

    def forward(self, x, h, c):
        out, (hn, cn) = self.rnn(x, (h, c))
        return out, hn, cn


class CausalSelfAttention(nn.Module):
    """nanoGPT's attention block with scaled_dot_product_attention."""

    def __init__(self, n_embd=16, n_head=2):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.ln = nn.LayerNorm(n_embd)
        self.n_head = n_head

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(self.ln(x)).split(C, dim=2)
        h = self.n_head
        q = q.view(B, T, h, C // h).transpose(1, 2)
        k = k.view(B, T, h, C // h).transpose(1, 2)
        v = v.view(B, T, h, C // h).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return x + self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


def transformer_encoder():
    layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
    return nn.TransformerEncoder(layer, 2)


def randn(*shape, seed=0):
    fiamma.manual_seed(seed)
    return fiamma.randn(*shape)

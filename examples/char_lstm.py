"""A character-level LSTM language model: learn to spell like Shakespeare, then write some.

    python examples/char_lstm.py                  # 200 steps (~2 min on 2 cores)
    python examples/char_lstm.py --steps 20       # a quick look
    python examples/char_lstm.py --text my.txt --temperature 0.5

The model reads the text one character at a time (embedding -> LSTM -> linear over the
vocabulary) and learns to predict the next character with cross-entropy, on random windows of
``--seq-len`` characters. Sampling feeds the model its own output, one character at a time,
carrying the LSTM state (h, c) forward; ``--temperature`` divides the logits before the softmax
(below 1: safer, more repetitive text; above 1: more surprising text).

The bundled text (examples/data/coriolanus.txt) is the opening of Shakespeare's Coriolanus, in
the public domain; see examples/data/README.md.
"""

import argparse
import math
import time
from pathlib import Path

import fiamma
from fiamma import nn
from fiamma.nn import functional as F

DEFAULT_TEXT = Path(__file__).resolve().parent / "data" / "coriolanus.txt"


class CharLSTM(nn.Module):
    """Embedding -> LSTM -> Linear: next-character logits for every position."""

    def __init__(self, vocab_size, embed_dim=32, hidden_size=128, num_layers=1):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, embed_dim)
        self.lstm = nn.LSTM(embed_dim, hidden_size, num_layers=num_layers, batch_first=True)
        self.head = nn.Linear(hidden_size, vocab_size)

    def forward(self, idx, state=None):
        out, state = self.lstm(self.embed(idx), state)
        return self.head(out), state


def batches(data, batch_size, seq_len, gen):
    """Random windows: inputs data[i:i+T] and targets data[i+1:i+T+1], shape (B, T)."""
    starts = fiamma.randint(0, len(data) - seq_len - 1, (batch_size,), generator=gen)
    offsets = fiamma.arange(seq_len)
    idx = starts[:, None] + offsets[None, :]
    return data[idx], data[idx + 1]


@fiamma.no_grad()
def sample(model, stoi, itos, prompt="\n", length=200, temperature=0.8, gen=None):
    """Continue ``prompt`` by ``length`` characters drawn from softmax(logits / temperature)."""
    if temperature <= 0:
        raise ValueError(f"sample: temperature must be > 0, got {temperature}")
    model.eval()
    idx = fiamma.tensor([[stoi[c] for c in prompt if c in stoi] or [0]])
    logits, state = model(idx)           # warm the state up on the whole prompt
    out = []
    for _ in range(length):
        probs = F.softmax(logits[0, -1] / temperature, dim=-1)
        nxt = int(fiamma.multinomial(probs, 1, generator=gen).item())
        out.append(itos[nxt])
        logits, state = model(fiamma.tensor([[nxt]]), state)
    model.train()
    return prompt + "".join(out)


def train(text, steps=200, batch_size=32, seq_len=64, hidden_size=128, lr=3e-3, seed=0,
          log_every=50):
    """Train a CharLSTM on ``text``; return (model, stoi, itos, [loss per step])."""
    fiamma.manual_seed(seed)
    gen = fiamma.Generator().manual_seed(seed)
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    itos = dict(enumerate(chars))
    data = fiamma.tensor([stoi[c] for c in text], dtype=fiamma.int64)
    if len(data) <= seq_len + 1:
        raise ValueError(f"train: the text has {len(data)} characters, need more than "
                         f"seq_len + 1 = {seq_len + 1}")
    model = CharLSTM(len(chars), hidden_size=hidden_size)
    opt = fiamma.optim.Adam(model.parameters(), lr=lr)
    losses = []
    t0 = time.perf_counter()
    for step in range(1, steps + 1):
        x, y = batches(data, batch_size, seq_len, gen)
        logits, _ = model(x)
        loss = F.cross_entropy(logits.reshape(-1, len(chars)), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)   # LSTMs like clipped gradients
        opt.step()
        losses.append(loss.item())
        if step % log_every == 0 or step in (1, steps):
            print(f"step {step:4d}  loss {losses[-1]:.3f}  "
                  f"({(time.perf_counter() - t0) / step * 1e3:.0f} ms/step)", flush=True)
    return model, stoi, itos, losses


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--text", type=Path, default=DEFAULT_TEXT, help="a UTF-8 text file")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--seq-len", type=int, default=64)
    p.add_argument("--hidden-size", type=int, default=128)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--temperature", type=float, default=0.8)
    p.add_argument("--sample-length", type=int, default=300)
    p.add_argument("--prompt", default="MENENIUS:\n")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    text = args.text.read_text(encoding="utf-8")
    print(f"{args.text.name}: {len(text)} characters, {len(set(text))} distinct; "
          f"uniform guessing costs {math.log(len(set(text))):.3f} nats/char")
    model, stoi, itos, losses = train(text, args.steps, args.batch_size, args.seq_len,
                                      args.hidden_size, args.lr, args.seed)
    k = max(1, min(10, len(losses) // 4))
    first, last = sum(losses[:k]) / k, sum(losses[-k:]) / k
    print(f"loss: first {k} steps {first:.3f} -> last {k} steps {last:.3f}")
    gen = fiamma.Generator().manual_seed(args.seed)
    print(f"--- sample (temperature {args.temperature}) ---")
    print(sample(model, stoi, itos, args.prompt, args.sample_length, args.temperature, gen))
    return first, last


if __name__ == "__main__":
    main()

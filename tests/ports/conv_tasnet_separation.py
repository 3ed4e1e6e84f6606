"""Source separation in the style of torchaudio's Conv-TasNet recipe, on a real recording: a
small torchaudio.models.ConvTasNet learns to split a plucked-string recording from a copy of
itself shifted up a fifth (torchaudio.functional.resample) and delayed, trained on random
segments with permutation-invariant SI-SNR and Adam; evaluation on fixed held-out segments.

    python conv_tasnet_separation.py AUDIO [--steps 60] [--save separated.wav]

Any mono or stereo file torchaudio.load reads works; the tests use CPython's
Lib/test/audiodata/pluck-pcm32.wav (11025 Hz). Prints a final line
``RESULT mixture_si_snr=.. initial_si_snr=.. final_si_snr=.. improvement=..`` (dB)."""

import argparse
import itertools

import torch
import torchaudio
import torchaudio.functional as AF
from torchaudio.models import ConvTasNet


def si_snr(est, ref, eps=1e-8):
    est = est - est.mean(-1, keepdim=True)
    ref = ref - ref.mean(-1, keepdim=True)
    proj = (est * ref).sum(-1, keepdim=True) * ref / (ref.pow(2).sum(-1, keepdim=True) + eps)
    noise = est - proj
    return 10 * torch.log10(proj.pow(2).sum(-1) / (noise.pow(2).sum(-1) + eps) + eps)


def pit_si_snr(est, ref):
    """Best mean SI-SNR over the source permutations, per batch item: (batch,)."""
    n = ref.shape[1]
    scores = [si_snr(est[:, list(p)], ref).mean(1) for p in itertools.permutations(range(n))]
    return torch.stack(scores, 1).max(1).values


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("audio")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--segment", type=int, default=2000)
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--save", default="")
    args = ap.parse_args()
    torch.manual_seed(args.seed)

    wave, sr = torchaudio.load(args.audio)
    wave = wave.mean(0, keepdim=True)                    # mono
    wave = wave / wave.abs().max()
    higher = AF.resample(wave, 3, 2)                       # up a fifth (and shorter)
    n = min(wave.shape[-1], higher.shape[-1])
    sources = torch.cat([wave[:, :n], 0.7 * torch.roll(higher[:, :n], n // 3, -1)])  # (2, n)
    print(f"audio: {args.audio} ({sr} Hz, {n} samples per source)")

    model = ConvTasNet(num_sources=2, enc_kernel_size=16, enc_num_feats=64, msk_kernel_size=3,
                       msk_num_feats=32, msk_num_hidden_feats=64, msk_num_layers=4,
                       msk_num_stacks=1, msk_activate="relu")
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    seg = min(args.segment, n)

    def batch(gen):
        starts = torch.randint(0, n - seg + 1, (args.batch_size,), generator=gen)
        refs = torch.stack([sources[:, s:s + seg] for s in starts.tolist()])   # (B, 2, seg)
        return refs.sum(1, keepdim=True), refs

    eval_mix, eval_refs = batch(torch.Generator().manual_seed(123))
    base = pit_si_snr(eval_mix.expand_as(eval_refs), eval_refs).mean().item()

    def evaluate():
        model.eval()
        with torch.no_grad():
            score = pit_si_snr(model(eval_mix), eval_refs).mean().item()
        model.train()
        return score

    first = evaluate()
    gen = torch.Generator().manual_seed(args.seed)
    for step in range(1, args.steps + 1):
        mix, refs = batch(gen)
        loss = -pit_si_snr(model(mix), refs).mean()
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        opt.step()
        if step % 20 == 0 or step == args.steps:
            print(f"step {step}: loss {loss.item():.3f}")
    last = evaluate()
    if args.save:
        with torch.no_grad():
            model.eval()
            est = model(sources.sum(0, keepdim=True)[None])[0]
        torchaudio.save(args.save, est / est.abs().max(), sr)
        print(f"saved {args.save}")
    print(f"RESULT mixture_si_snr={base:.3f} initial_si_snr={first:.3f} "
          f"final_si_snr={last:.3f} improvement={last - first:.3f}")


if __name__ == "__main__":
    main()

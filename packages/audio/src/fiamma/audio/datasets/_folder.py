"""An audio-folder dataset (root/<label>/*.wav, as Speech Commands) and a padding collate."""

import os

import fiamma
from fiamma.data import Dataset

__all__ = ["AudioFolder", "pad_collate"]

AUDIO_EXTENSIONS = (".wav", ".flac", ".ogg", ".opus", ".mp3", ".aiff", ".aif", ".au", ".w64")


class AudioFolder(Dataset):
    """Labelled audio clips stored as ``root/<label>/<file>``; labels are the sorted folder names.

    Item ``i`` is ``(waveform, sample_rate, label_index)`` with ``waveform`` float32
    ``(channels, frames)``. ``sample_rate`` resamples every clip to that rate (windowed sinc);
    ``num_frames`` crops or zero-pads every clip to that length: a random crop drawn from
    ``generator`` (fiamma's default generator if None) when ``training``, a centred crop otherwise;
    padding goes at the end. ``extensions`` selects the files; ``transform`` (applied to the
    waveform) and ``target_transform`` (to the label index) run last.

    >>> ds = AudioFolder("speech_commands", sample_rate=16000, num_frames=16000)  # doctest: +SKIP
    >>> wav, sr, label = ds[0]                                                   # doctest: +SKIP
    >>> ds.classes[label]                                                        # doctest: +SKIP
    'yes'
    """

    def __init__(self, root, sample_rate=None, num_frames=None, training=False,
                 extensions=AUDIO_EXTENSIONS, transform=None, target_transform=None,
                 generator=None):
        root = os.fspath(root)
        if not os.path.isdir(root):
            raise FileNotFoundError(f"AudioFolder: no such directory: '{root}'")
        if num_frames is not None and int(num_frames) <= 0:
            raise ValueError(f"AudioFolder: num_frames must be positive, got {num_frames}")
        if isinstance(extensions, str):
            extensions = (extensions,)
        exts = tuple(e.lower() if e.startswith(".") else "." + e.lower() for e in extensions)
        self.root, self.sample_rate = root, sample_rate
        self.num_frames = None if num_frames is None else int(num_frames)
        self.training, self.generator = training, generator
        self.extensions, self.transform, self.target_transform = exts, transform, target_transform
        self.classes = sorted(d.name for d in os.scandir(root) if d.is_dir())
        self.class_to_idx = {c: i for i, c in enumerate(self.classes)}
        self.samples = []
        for c in self.classes:
            for dirpath, dirnames, files in sorted(os.walk(os.path.join(root, c))):
                dirnames.sort()
                for fn in sorted(files):
                    if fn.lower().endswith(exts):
                        self.samples.append((os.path.join(dirpath, fn), self.class_to_idx[c]))
        if not self.samples:
            raise FileNotFoundError(f"AudioFolder: no files with extensions {exts} under "
                                    f"'{root}'/<label>/")
        self._resamplers = {}

    def __len__(self):
        return len(self.samples)

    def _resample(self, wav, sr):
        if self.sample_rate is None or sr == self.sample_rate:
            return wav, sr
        r = self._resamplers.get(sr)
        if r is None:
            from fiamma.audio.transforms import Resample
            r = self._resamplers[sr] = Resample(sr, self.sample_rate)
        return r(wav), self.sample_rate

    def _crop_or_pad(self, wav):
        n, T = self.num_frames, wav.shape[-1]
        if T > n:
            if self.training:
                start = int(fiamma.randint(0, T - n + 1, (1,), generator=self.generator).item())
            else:
                start = (T - n) // 2
            return wav[..., start:start + n].contiguous()
        if T < n:
            return fiamma.nn.functional.pad(wav, (0, n - T))
        return wav

    def __getitem__(self, index):
        from fiamma.audio._io import load
        path, label = self.samples[index]
        wav, sr = load(path)
        wav, sr = self._resample(wav.contiguous(), sr)
        if self.num_frames is not None:
            wav = self._crop_or_pad(wav)
        if self.transform is not None:
            wav = self.transform(wav)
        if self.target_transform is not None:
            label = self.target_transform(label)
        return wav, sr, label


def pad_collate(batch):
    """Collate ``(waveform, sample_rate, label, ...)`` items of different lengths for a DataLoader:
    waveforms ``(channels, frames)`` are zero-padded at the end to the longest and stacked into
    ``(batch, channels, max_frames)``; returns ``(waveforms, sample_rates, labels, lengths)``
    (int64 tensors for the last three).

    >>> loader = fiamma.data.DataLoader(ds, batch_size=8, collate_fn=pad_collate)  # doctest: +SKIP
    """
    if not batch:
        raise ValueError("pad_collate: empty batch")
    wavs = [item[0] for item in batch]
    chans = {tuple(w.shape[:-1]) for w in wavs}
    if len(chans) != 1:
        raise ValueError(f"pad_collate: waveforms must share their leading shape (channels), got "
                         f"{sorted(chans)}")
    lengths = [w.shape[-1] for w in wavs]
    T = max(lengths)
    out = fiamma.zeros((len(wavs),) + tuple(wavs[0].shape[:-1]) + (T,), dtype=wavs[0].dtype)
    for i, w in enumerate(wavs):
        out[i, ..., :w.shape[-1]] = w
    srs = fiamma.tensor([int(item[1]) for item in batch], dtype=fiamma.int64)
    labels = fiamma.tensor([int(item[2]) for item in batch], dtype=fiamma.int64)
    return out, srs, labels, fiamma.tensor(lengths, dtype=fiamma.int64)

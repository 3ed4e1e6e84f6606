"""AudioFolder and pad_collate on wav files written by the tests."""

import numpy as np
import pytest
import soundfile as sf

import fiamma
import fiamma.audio.functional as AF
from fiamma.audio.datasets import AudioFolder, pad_collate
from fiamma.data import DataLoader


@pytest.fixture
def root(tmp_path):
    rng = np.random.default_rng(0)
    lengths = {"yes": [800, 1200, 1000], "no": [600, 1600], "up": [1000]}
    for label, ns in lengths.items():
        d = tmp_path / label
        d.mkdir()
        for i, n in enumerate(ns):
            sf.write(str(d / f"{i}.wav"), rng.uniform(-0.5, 0.5, n).astype(np.float32), 8000,
                     subtype="FLOAT")
        (d / "README.txt").write_text("not audio")
    (tmp_path / "stray.wav").write_bytes(b"")  # files at the top level are not samples
    return tmp_path


def test_items_and_labels(root):
    ds = AudioFolder(root)
    assert ds.classes == ["no", "up", "yes"]
    assert len(ds) == 6
    wav, sr, label = ds[0]
    path, lab = ds.samples[0]
    ref, _ = sf.read(path, dtype="float32")
    assert sr == 8000 and label == lab == ds.class_to_idx["no"]
    assert tuple(wav.shape) == (1, len(ref)) and wav.dtype == fiamma.float32
    np.testing.assert_array_equal(wav.numpy()[0], ref)
    assert [ds.classes[lab] for _, lab in ds.samples] == ["no", "no", "up", "yes", "yes", "yes"]


def test_resampling_and_center_crop_pad(root):
    ds = AudioFolder(root, sample_rate=16000, num_frames=2000)
    for i in range(len(ds)):
        wav, sr, _ = ds[i]
        assert sr == 16000 and tuple(wav.shape) == (1, 2000)
    # sample 1 of "no" has 1600 frames at 8 kHz = 3200 at 16 kHz: centre crop
    path, _ = ds.samples[1]
    x, _ = sf.read(path, dtype="float32")
    full = AF.resample(fiamma.from_numpy(x)[None], 8000, 16000).numpy()
    wav, _, _ = ds[1]
    np.testing.assert_allclose(wav.numpy(), full[:, 600:2600], atol=1e-6)
    # sample 0 (600 frames -> 1200): zero padding at the end
    wav, _, _ = ds[0]
    assert np.all(wav.numpy()[:, 1200:] == 0) and np.any(wav.numpy()[:, 1100:1200] != 0)


def test_random_crop_uses_generator(root):
    def crops(seed):
        g = fiamma.Generator().manual_seed(seed)
        ds = AudioFolder(root, num_frames=500, training=True, generator=g)
        return [ds[4][0].numpy().copy() for _ in range(5)]
    a, b, c = crops(1), crops(1), crops(2)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert not all(np.array_equal(x, y) for x, y in zip(a, c))
    path, _ = AudioFolder(root).samples[4]
    full, _ = sf.read(path, dtype="float32")
    for x in a:  # every crop is a contiguous window of the clip
        starts = [s for s in range(len(full) - 499) if np.array_equal(full[s:s + 500], x[0])]
        assert len(starts) == 1
    assert len({int(np.flatnonzero(full == x[0, 0])[0]) for x in a}) > 1


def test_extensions_filter_and_errors(root, tmp_path_factory):
    sf.write(str(root / "up" / "extra.flac"), np.zeros(100, np.float32), 8000)
    assert len(AudioFolder(root)) == 7
    assert len(AudioFolder(root, extensions=("flac",))) == 1
    assert len(AudioFolder(root, extensions=".wav")) == 6
    with pytest.raises(FileNotFoundError, match="no files"):
        AudioFolder(root, extensions=(".mp3",))
    with pytest.raises(FileNotFoundError):
        AudioFolder(tmp_path_factory.mktemp("x") / "missing")


def test_transforms_are_applied(root):
    ds = AudioFolder(root, transform=lambda w: w * 2, target_transform=lambda y: y + 10)
    w, _, y = ds[0]
    w0, _, y0 = AudioFolder(root)[0]
    np.testing.assert_array_equal(w.numpy(), w0.numpy() * 2)
    assert y == y0 + 10


def test_pad_collate_with_dataloader(root):
    ds = AudioFolder(root)
    loader = DataLoader(ds, batch_size=4, collate_fn=pad_collate)
    batches = list(loader)
    assert [tuple(b[0].shape) for b in batches] == [(4, 1, 1600), (2, 1, 1200)]
    wavs, srs, labels, lengths = batches[0]
    assert lengths.tolist() == [600, 1600, 1000, 800]
    assert srs.tolist() == [8000] * 4 and labels.tolist() == [0, 0, 1, 2]
    for i in range(4):
        w, _, _ = ds[i]
        n = lengths[i].item()
        np.testing.assert_array_equal(wavs.numpy()[i, :, :n], w.numpy())
        assert np.all(wavs.numpy()[i, :, n:] == 0)
    with pytest.raises(ValueError, match="channels"):
        pad_collate([(fiamma.zeros(1, 5), 8000, 0), (fiamma.zeros(2, 5), 8000, 0)])

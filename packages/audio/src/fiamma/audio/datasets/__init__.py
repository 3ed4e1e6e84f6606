"""fiamma.audio.datasets: an audio-folder dataset and a collate that pads variable lengths.

>>> from fiamma.audio.datasets import AudioFolder, pad_collate  # doctest: +SKIP
>>> ds = AudioFolder("speech_commands", sample_rate=16000)      # doctest: +SKIP
>>> loader = fiamma.data.DataLoader(ds, batch_size=32, collate_fn=pad_collate)  # doctest: +SKIP
"""

from fiamma.audio.datasets._folder import AUDIO_EXTENSIONS, AudioFolder, pad_collate  # noqa: F401

__all__ = ["AudioFolder", "pad_collate", "AUDIO_EXTENSIONS"]

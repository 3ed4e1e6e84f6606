"""Imported in the child processes of a program run by ``fiamma.run`` (spawn and forkserver
start methods): installs the ``torch`` -> ``fiamma`` aliasing there before the child imports
the program. See fiamma._torch_alias."""

from fiamma._torch_alias import install

install()

"""``torch.export.exported_program``: :class:`ExportedProgram` and the module call graph's
entries."""

from ._program import CallSpec, ExportedProgram, ModuleCallEntry, ModuleCallSignature

__all__ = ["CallSpec", "ExportedProgram", "ModuleCallEntry", "ModuleCallSignature"]

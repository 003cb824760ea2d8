"""The one table of scan kinds: name -> :class:`~lab.scans.kinds.ScanKind`, built here and nowhere else.

``KINDS`` holds the built-in kinds (:func:`lab.scans.builtin.builtin_kinds`); a
:class:`~lab.scans.manager.ScanManager` uses it unless it is given its own table, e.g.
``ScanManager(results, kinds=make_kinds(*builtin_kinds(), squat_kind))``. Nothing registers itself
on import: a new kind is one more entry in the tuple a table is made from.
"""

from lab.errors import LabError
from lab.scans.builtin import builtin_kinds
from lab.scans.kinds import ScanKind, shown


def make_kinds(*kinds: ScanKind) -> dict[str, ScanKind]:
    """A name -> kind table from ``kinds`` (in their order); two kinds of one name are a mistake."""
    table: dict[str, ScanKind] = {}
    for k in kinds:
        if not isinstance(k, ScanKind):
            raise TypeError(f"expected a ScanKind, got {type(k).__name__}")
        if k.name in table:
            raise ValueError(f"two scan kinds are named {k.name!r}")
        table[k.name] = k
    return table


KINDS: dict[str, ScanKind] = make_kinds(*builtin_kinds())


def get_kind(name, kinds: dict[str, ScanKind] | None = None) -> ScanKind:
    """The kind ``name`` in ``kinds`` (default: :data:`KINDS`); an unknown name raises and lists what exists."""
    table = KINDS if kinds is None else kinds
    if not isinstance(name, str) or name not in table:
        text = name[:60] if isinstance(name, str) else shown(name)
        raise LabError(f"unknown scan kind '{text}'", f"available: {', '.join(table)}")
    return table[name]

"""Basic indexing lowered to the IR's `slice`: `x[a:b]`, `x[:, i]`, `x[..., ::2, None]` (slices
with a step of at least 1, ints, None and one Ellipsis), whose bounds are known at capture
(numbers, or sizes read from shapes). The slice keeps the source's rank, an int index a dim of
length 1; where ints drop dims or None adds them, a reshape to the indexed shape follows. Indexing
by a tensor or a list (advanced indexing) stays unsupported.
"""

from __future__ import annotations

from torch import fx

from gpu_workers.harness.capture.norms import tensor_shape
from gpu_workers.harness.capture.ops import UNSUPPORTED, Unsupported


class SliceLowering:
    """Mixed into lowering.Lowering: uses its _tensor, _value, _emit, _step and static."""

    def _lower_indexing(self, node: fx.Node, source, index) -> None:
        shape = tensor_shape(source)
        starts, steps, lengths = [], [], []
        for size, item in zip(shape, _per_dim(index, len(shape)), strict=True):
            start, step, length = self._bounds(item, size)
            starts.append(start)
            steps.append(step)
            lengths.append(length)
        x = self._tensor(source)
        final = [int(d) for d in node.meta["tensor_meta"].shape]
        if lengths == shape:  # every dim whole: at most a reshape
            return self._emit(node, "reshape", [x], {"shape": final})
        if lengths == final:
            return self._emit(node, "slice", [x], {"starts": starts, "steps": steps})
        sliced = self._step(node, "slice", "slice", [x], lengths, starts=starts, steps=steps)
        self._emit(node, "reshape", [sliced], {"shape": final})

    def _bounds(self, item, size: int) -> tuple[int, int, int]:
        """(start, step, length) along a dim of `size` for one index item."""
        if isinstance(item, slice):
            parts = [self._value(v) for v in (item.start, item.stop, item.step)]
            if not all(v is None or _is_int(v) for v in parts):
                raise Unsupported(f"a slice of {parts}: its bounds must be ints")
            start, stop, step = slice(*parts).indices(size)
            if step < 1:
                raise Unsupported(f"a slice step of {step}: a step must be at least 1")
            return start, step, max(0, (stop - start + step - 1) // step)
        if isinstance(item, fx.Node) and item not in self.static:  # a tensor, not a size
            raise Unsupported(f"indexing by a tensor (advanced indexing) is {UNSUPPORTED}")
        item = self._value(item)
        if _is_int(item):
            if not -size <= item < size:
                raise Unsupported(f"index {item} is out of a dim of {size}")
            return item % size, 1, 1
        raise Unsupported(f"indexing by {type(item).__name__} (advanced indexing) is {UNSUPPORTED}")


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _per_dim(index, rank: int) -> list:
    """The index's items for each of the source's dims (None items dropped: they add dims,
    which the reshape after the slice makes; an Ellipsis stands for the dims no item names)."""
    items = list(index) if isinstance(index, tuple) else [index]
    if sum(item is Ellipsis for item in items) > 1:
        raise Unsupported("an index with more than one Ellipsis")
    named = sum(item is not None and item is not Ellipsis for item in items)
    if named > rank:
        raise Unsupported(f"{named} indices for a tensor of {rank} dims")
    if Ellipsis in items:
        at = items.index(Ellipsis)
        items[at : at + 1] = [slice(None)] * (rank - named)
    items = [item for item in items if item is not None]
    return items + [slice(None)] * (rank - len(items))

"""Basic indexing lowered to the IR's `slice`: `x[a:b]`, `x[:, i]`, `x[..., ::2, None]` (slices
with a step of at least 1, ints, None and one Ellipsis), whose bounds are known at capture
(numbers, or sizes read from shapes). The slice keeps the source's rank, an int index a dim of
length 1; where ints drop dims or None adds them, a reshape to the indexed shape follows. Indexing
by a tensor or a list (advanced indexing) stays unsupported. `split` and `chunk` lower nothing
themselves: each piece taken from them (`q, k, v = x.split(n, 2)`) is a slice. `stack` is a cat of
its parts, each viewed with a dim of 1 where they stack.
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

    def _lower_split(self, node: fx.Node, bound: dict) -> None:
        """x.split(n or [n0, n1, ...], dim): nothing of its own; each piece a slice (getitem)."""
        size = bound.get("split_size_or_sections", bound.get("split_size"))
        self._hold_pieces(node, bound, lambda length: _lengths(self._value(size), length))

    def _lower_chunk(self, node: fx.Node, bound: dict) -> None:
        """x.chunk(k, dim): pieces of ceil(length / k), as torch cuts them (perhaps fewer)."""
        chunks = self._value(bound["chunks"])
        if not _is_int(chunks) or chunks < 1:
            raise Unsupported(f"chunks={chunks!r} is not a positive int")
        self._hold_pieces(node, bound, lambda length: _lengths(-(-length // chunks), length))

    def _hold_pieces(self, node: fx.Node, bound: dict, lengths_of) -> None:
        x = bound["input"]
        shape = tensor_shape(x)
        dim = self._value(bound.get("dim", 0))
        if not _is_int(dim) or not -len(shape) <= dim < len(shape):
            raise Unsupported(f"dim={dim!r} is not a dim of {shape}")
        dim %= len(shape)
        self.splits[node] = (x, dim, lengths_of(shape[dim]))

    def _lower_piece(self, node: fx.Node, split: fx.Node, index) -> None:
        x, dim, lengths = self.splits[split]
        if not _is_int(index) or not -len(lengths) <= index < len(lengths):
            raise Unsupported(f"piece {index!r} of {len(lengths)}")
        index %= len(lengths)
        starts = [0] * len(tensor_shape(x))
        starts[dim] = sum(lengths[:index])
        attrs = {"starts": starts, "steps": [1] * len(starts)}
        self._emit(node, "slice", [self._tensor(x)], attrs)

    def _lower_stack(self, node: fx.Node, bound: dict) -> None:
        """stack(parts, dim): each part viewed with a dim of 1 at `dim` (a reshape), then their
        cat along it."""
        parts = parts_of(bound["input"])
        shape = [int(d) for d in node.meta["tensor_meta"].shape]
        dim = self._value(bound.get("dim", 0))
        if not _is_int(dim) or not -len(shape) <= dim < len(shape):
            raise Unsupported(f"dim={dim!r} is not a dim of {shape}")
        dim %= len(shape)
        viewed = shape[:dim] + [1] + shape[dim + 1 :]
        refs = [
            self._step(node, f"part{n}", "reshape", [self._tensor(p)], viewed, shape=viewed)
            for n, p in enumerate(parts)
        ]
        self._emit(node, "cat", refs, {"dim": dim})


def parts_of(value) -> list:
    """A cat's or stack's parts, as the call lists them (a split's tuple itself is no list)."""
    if not isinstance(value, list | tuple):
        name = getattr(value, "name", type(value).__name__)
        raise Unsupported(f"parts given as {name}, not a list: unpack a split's pieces first")
    return list(value)


def _lengths(size, length: int) -> list[int]:
    """The pieces' lengths along a dim of `length`: pieces of `size` (the last shorter), or the
    sections listed, which must add up to it."""
    if _is_int(size) and size > 0:
        return [min(size, length - start) for start in range(0, length, size)] or [0]
    if isinstance(size, list | tuple) and all(_is_int(s) and s >= 0 for s in size):
        if sum(size) != length:
            raise Unsupported(f"sections {list(size)} do not add up to {length}")
        return list(size)
    raise Unsupported(f"split size {size!r}: give a positive int or a list of lengths")


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

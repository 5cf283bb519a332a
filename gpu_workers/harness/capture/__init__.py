"""Graph capture and lowering: a problem's computation traced and lowered to the Graph IR's core
ops (docs/fusion.md)."""

"""Confinement of untrusted code: the bubblewrap launcher, the program a one-shot sandboxed step
runs, stopping and counting what a sandbox holds, and the bounded output a confined child
writes."""

"""The trusted side that measures and decides: the judge and its handle on runners, the socket
and the lent buffers, timing, verify, profile, validation, the protocol, the static source gate,
the speed-of-light floor, failure blame, the per-GPU lock and the measurement environment. It
never imports or runs user code."""

"""The leaderboard: per suite and GPU type, ranks agent configurations, people and compilers by
correct rate, fast_p and geometric-mean speedup, reading only re-graded results."""

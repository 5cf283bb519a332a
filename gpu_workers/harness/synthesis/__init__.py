"""Problem synthesis (issue 17): seed operators, a rule-based composer that chains them into
KernelBench-format sources, and the signatures that keep a synthesized set apart from a reference
suite. Standard library only: it writes and reads source text and never runs it (generated
problems run only in the sandbox, through the validation uploads get)."""

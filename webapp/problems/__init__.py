"""Problems: uploaded ops in KernelBench format, their identity, visibility and validation."""

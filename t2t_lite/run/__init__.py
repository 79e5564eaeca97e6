"""The run directory: its layout (layout.py), what it records (run_info.py), its checkpoints
(checkpoints.py, averaging.py), and the one way back to a model (run.py: `Run.restore`)."""

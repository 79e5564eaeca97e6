"""What every run shares: atomic files, the run directory and its checkpoints, progress lines and
distribution strategies. It imports nothing else of t2t_lite but `hparams`."""

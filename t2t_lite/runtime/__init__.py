"""What every command shares: atomic files, progress lines, precision and distribution
strategies. It imports nothing else of t2t_lite but `hparams`."""

"""Training: the loop, the step, the learning-rate schedules and the dev evaluation."""

"""Serving: the SavedModel export and the TF Serving client."""

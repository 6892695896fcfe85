"""SavedModel export for TF Serving: see export/export_saved_model.py and docs/serving.md."""

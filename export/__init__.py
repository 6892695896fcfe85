"""What a user runs to export and query, from a clone (`python -m export.export_saved_model`,
`python -m export.client`). Not installed: the commands live in electra_tf (export_saved_model,
query), and the library in electra_tf/serving. See docs/serving.md."""

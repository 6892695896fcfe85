"""Research studies built on electra_tf, kept outside the installed package.

Run them from the repository root (`python -m studies.efficiency.run ...`):
setup.py installs electra_tf and export only. Their extra dependencies are
the `studies` extra: pip install -e ".[studies]".
"""

"""The paper's efficiency analysis (Table 5): run.py is the entry point.

Its recorded results and their reading are in studies/efficiency/README.md.
"""

"""Shared set-up for the client tests: where readers run the chapters (Colab, Notebook 6.5, JupyterLab 4)."""

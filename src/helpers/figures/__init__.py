"""Figures and live widgets of the book; imports the library, never imported by it.

Importing it passes matplotlib's text through :func:`helpers.figures.language.translate`,
which leaves it English unless ``BOOK_LANG`` asks for Chinese (the 中文版's notebooks).
"""

from helpers.figures.language import install

install()

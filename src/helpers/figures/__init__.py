"""Figures and live widgets of the book; imports the library, never imported by it."""

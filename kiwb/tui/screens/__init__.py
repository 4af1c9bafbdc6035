"""Screens of the workbench: the main one, help, forms and the conflict detail."""

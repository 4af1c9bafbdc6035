"""The workbench panes, one per tab."""

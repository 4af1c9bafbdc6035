"""Pure tensor math for kiwb: uncertainty, label alignment, integration targets and losses."""
